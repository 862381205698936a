//! ROCmFP3 in the AVX2 kernel's layout ([`Fp3Avx2`]): the upload-time repack and its AVX2
//! decoder, for [`super::body::body256`].
//!
//! Why. [`super::fp3::Fp3`]'s layout keeps each vector's 64 sign bits as one little-endian
//! plane, which AVX-512 loads straight into a mask register. AVX2 has no mask registers:
//! `Fp3::decode256` spreads each 32-bit plane half to byte masks with a broadcast load, a
//! `vpshufb`, a `vpand` and a `vpcmpeqb` before the `vpsubb` + `vpblendvb`, 5 operations per
//! vector and 20 per half group. `vpblendvb` reads only bit 7 of each mask byte, so a layout
//! that puts the sign of byte `k` of vector `t` at the same bit position of byte `k` of one
//! 16-byte word needs only a shift per vector: 2 operations per half group to place the two
//! 128-bit lanes, then `vpsllw` (none for `t = 3`), `vpsubb` and `vpblendvb`, 13 instead of 20.
//!
//! Layout ([`Fp3Avx2::repack_group`]). A full group of 8 blocks (112 bytes) of a row is stored
//! as: bytes `0..64`, the magnitude indices exactly as `Fp3`'s (block `b` in qword `b`, the
//! index of element `4j + t` in bits `2t+1..2t` of byte `j`); bytes `64 + 16h .. 80 + 16h`
//! (half `h` = blocks `4h .. 4h + 4`), the signs: byte `k` (0..16) holds in bit `4 + t` the sign
//! of element `4j + t` of the magnitude byte `32h + k` (block `4h + k / 8`, `j = k % 8`), and in
//! bit `t` that of magnitude byte `32h + 16 + k`; bytes `96..112`, the scale bytes as `Fp3`'s
//! (`e[h]` of block `b` at `96 + 2b + h`). A row's last, partial group stays canonical; the
//! canonical bytes (FORMATS.md section 3, from github ciru-ai/ROCmFPX
//! `ggml/rocmfpx/rocmfpx.{h,c}`) are validated before the repack.
//!
//! Decode (half `h`). The magnitudes and scales as `Fp3::decode256`, giving `4 + m`. The 16 sign
//! bytes `x` go to the low 128-bit lane as they are and to the high lane shifted left by 4 in
//! each 16-bit word (`vpsllw`: the low nibble of every byte moves to its high nibble; bits
//! crossing into the next byte land below bit 4 and are never read): in both lanes bit `4 + t`
//! of byte `k` is now the sign of byte `k` of vector `t`. `vpsllw` by `3 - t` moves it to bit 7
//! (again only bits below it receive another byte's bits), and `vpblendvb` picks
//! `8 - (4 + m) = 4 - m` where it is set. The offset levels `w + 4` are `Fp3::decode256`'s byte
//! for byte (code 4, "-0", gives 4 either way), so the AVX2 body gives the same bits on either
//! layout (tested below against `Fp3`'s) and its bound (c = 1) is [`super::body`]'s.
//!
//! Memory safety: a full group's decode of half `h` reads bytes `32h .. 32h + 32`,
//! `64 + 16h .. 80 + 16h` and `96 + 8h .. 104 + 8h` of its 112.

use std::arch::x86_64::*;

use super::body::{Codec, Codec256};
use super::fp3::{codes, magnitudes256, scales256};

/// The ROCmFP3 codec of the AVX2 kernel.
pub(crate) struct Fp3Avx2;

impl Codec for Fp3Avx2 {
    const BLOCK: usize = 14;
    const GB: usize = 112;

    /// Rewrites 8 canonical blocks into the layout of the module doc.
    fn repack_group(src: &[u8], dst: &mut [u8]) {
        dst[..Self::GB].iter_mut().for_each(|b| *b = 0);
        for (b, blk) in src.chunks_exact(14).enumerate() {
            for (i, &c) in codes(blk).iter().enumerate() {
                let (j, t) = (i / 4, i % 4);
                dst[8 * b + j] |= (c & 3) << (2 * t);
                // Magnitude byte `8b + j` = byte `k` of half `h`'s 32.
                let (h, k) = ((8 * b + j) / 32, (8 * b + j) % 32);
                let bit = if k < 16 { 4 + t } else { t };
                dst[64 + 16 * h + k % 16] |= (c >> 2) << bit;
            }
            dst[96 + 2 * b..98 + 2 * b].copy_from_slice(&blk[12..14]);
        }
    }
}

impl Codec256 for Fp3Avx2 {
    #[inline(always)]
    unsafe fn decode256(p: *const u8, h: usize) -> ([__m256i; 4], __m256) {
        // SAFETY: the loads read p + 32h .. + 32, p + 64 + 16h .. + 16 and p + 96 + 8h .. + 8,
        // inside the 112 bytes the caller guarantees (h < 2); the rest is register-only.
        unsafe {
            let eight = _mm256_set1_epi8(8);
            let w = magnitudes256(p, h);
            let x = _mm_loadu_si128(p.add(64 + 16 * h).cast());
            // Bit 4 + t of byte k, both lanes: the sign of byte k of vector t.
            let y = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x), _mm_slli_epi16::<4>(x));
            let s = [
                _mm256_slli_epi16::<3>(y),
                _mm256_slli_epi16::<2>(y),
                _mm256_slli_epi16::<1>(y),
                y,
            ];
            let w = [
                _mm256_blendv_epi8(w[0], _mm256_sub_epi8(eight, w[0]), s[0]),
                _mm256_blendv_epi8(w[1], _mm256_sub_epi8(eight, w[1]), s[1]),
                _mm256_blendv_epi8(w[2], _mm256_sub_epi8(eight, w[2]), s[2]),
                _mm256_blendv_epi8(w[3], _mm256_sub_epi8(eight, w[3]), s[3]),
            ];
            (w, scales256(p, h))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::test_rng::Rng;
    use super::*;
    use crate::act::Acts;
    use crate::isa::Isa;
    use lowbit_core::FormatId;

    use super::super::body::{repack_row, Codec256};
    use super::super::fp3::Fp3;

    /// A canonical ROCmFP3 matrix of random codes (every 3-bit code, "-0" included) and random
    /// legal scale bytes (0x00..=0x7E).
    fn matrix(rng: &mut Rng, rows: usize, k: usize) -> Vec<u8> {
        let mut w = vec![0u8; rows * k / 32 * 14];
        for b in w.chunks_exact_mut(14) {
            b[..12].iter_mut().for_each(|q| *q = rng.next() as u8);
            b[12] = (rng.next() % 0x7F) as u8;
            b[13] = (rng.next() % 0x7F) as u8;
        }
        w
    }

    /// The repack permutes the bits of a group: flipping any one canonical bit flips exactly
    /// one repacked bit, a different one for each (so it is a bijection, no bit is lost).
    #[test]
    fn repack_is_a_bit_permutation() {
        let mut rng = Rng(5);
        let src: Vec<u8> = (0..112).map(|_| rng.next() as u8).collect();
        let mut base = [0u8; 112];
        Fp3Avx2::repack_group(&src, &mut base);
        let mut seen = vec![false; 112 * 8];
        for bit in 0..112 * 8 {
            let mut s = src.clone();
            s[bit / 8] ^= 1 << (bit % 8);
            let mut d = [0u8; 112];
            Fp3Avx2::repack_group(&s, &mut d);
            let diff: Vec<usize> =
                (0..112 * 8).filter(|&i| (d[i / 8] ^ base[i / 8]) >> (i % 8) & 1 == 1).collect();
            assert_eq!(diff.len(), 1, "canonical bit {bit}");
            assert!(!seen[diff[0]], "canonical bit {bit} -> {} twice", diff[0]);
            seen[diff[0]] = true;
        }
    }

    /// Each half group decodes to `Fp3::decode256`'s registers on `Fp3`'s layout, byte for
    /// byte (levels) and bit for bit (scales), on random groups with every code and legal
    /// scale byte.
    #[test]
    fn decode_is_fp3s_on_its_layout() {
        if !Isa::Avx2.available() {
            return;
        }
        let mut rng = Rng(11);
        for _ in 0..2000 {
            let src = matrix(&mut rng, 1, 256);
            let (mut a, mut b) = ([0u8; 112], [0u8; 112]);
            Fp3::repack_group(&src, &mut a);
            Fp3Avx2::repack_group(&src, &mut b);
            for h in 0..2 {
                // SAFETY: AVX2 and F16C were detected (`Isa::Avx2`); both buffers hold 112
                // bytes; h < 2.
                let (wa, sa, wb, sb) = unsafe {
                    let (wa, sa) = Fp3::decode256(a.as_ptr(), h);
                    let (wb, sb) = Fp3Avx2::decode256(b.as_ptr(), h);
                    (wa, sa, wb, sb)
                };
                for t in 0..4 {
                    let (x, y): ([u8; 32], [u8; 32]) =
                        (bytemuck::cast(wa[t]), bytemuck::cast(wb[t]));
                    assert_eq!(x, y, "half {h} vector {t}");
                }
                let (x, y): ([u32; 8], [u32; 8]) = (bytemuck::cast(sa), bytemuck::cast(sb));
                assert_eq!(x, y, "half {h} scales");
            }
        }
    }

    /// The AVX2 kernel on this layout gives bit for bit what it gave on `Fp3`'s (the layout it
    /// replaced): n = 1..=16 (the 1-, 2- and 1-row bodies, tiles of up to 8 columns and two
    /// sub-tiles past 8), with the once-per-call activation layout and the tile's own, on rows
    /// of whole groups, rows with a partial last group (451, 129, 35, 5 blocks), rows shorter
    /// than one group (3 blocks) and of the smallest K (one block), with row counts that leave
    /// partial row groups.
    #[test]
    fn avx2_kernel_is_the_fp3_layouts_bit_for_bit() {
        if !Isa::Avx2.available() {
            return;
        }
        let mut rng = Rng(77);
        for (rows, k) in [
            (37, 14336 + 96),
            (21, 4096 + 32),
            (9, 14336),
            (6, 512),
            (7, 1120),
            (5, 160),
            (3, 96),
            (4, 32),
        ] {
            let w = matrix(&mut rng, rows, k);
            let rb = k / 32 * 14;
            let (mut old, mut new) = (w.clone(), w.clone());
            old.chunks_exact_mut(rb).for_each(repack_row::<Fp3>);
            new.chunks_exact_mut(rb).for_each(repack_row::<Fp3Avx2>);
            if k >= 256 {
                assert_ne!(old, new);
            }
            for n in 1..=16 {
                let x: Vec<f32> = (0..n * k).map(|_| rng.value()).collect();
                let mut acts = Acts::prepare(FormatId::RocmFp3, &x, n, k).unwrap();
                for shared in [false, true] {
                    if shared {
                        acts.layout = super::super::prep_acts(&acts);
                        assert!(acts.layout.is_some());
                    }
                    let (mut y0, mut y1) = (vec![0f32; rows * n], vec![1f32; rows * n]);
                    let f = FormatId::RocmFp3;
                    super::super::run_avx2::<Fp3>(f, &old, rb, &acts, 0..n, &mut y0).unwrap();
                    super::super::run_avx2::<Fp3Avx2>(f, &new, rb, &acts, 0..n, &mut y1).unwrap();
                    for (i, (a, b)) in y0.iter().zip(&y1).enumerate() {
                        assert_eq!(
                            a.to_bits(),
                            b.to_bits(),
                            "{rows}x{k} n={n} shared={shared}: y[{i}] {a} vs {b}"
                        );
                    }
                }
            }
        }
    }
}
