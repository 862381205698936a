//! PQ2_0 in **lane order**, the AVX-512 kernels' private layout: the upload-time repack
//! ([`repack_row`]) and the [`Lanes`] type that reads it ([`Pq2Pk`]: `super::pq2x4::Pq2x4`'s
//! records and arithmetic, its decode without the gathers).
//!
//! Why. `super::pq2x4::Pq2x4` builds its two code vectors per group of 4 blocks from
//! canonical rows with four 256-bit loads, two inserts and two `vpermt2d`, and its four f16
//! scales with four scalar loads, three shifts and three ORs before one `vcvtph2ps`. Stored in
//! the order the registers need, a group decodes with two 64-byte loads, the six shifts and
//! eight ANDs of the 2-bit fields, one 8-byte load, one `vcvtph2ps` and one `vpermps`
//! (docs/BENCHMARKS.md "Session 12 (pq2)" counts the operations per pipe).
//!
//! Layout. A row's whole groups of 4 blocks (136 bytes; PQ2_0 block: `d` f16, then 32 code
//! bytes, element `j` in bits `2 * (j % 4)` of byte `j / 4`; PrismML-Eng/llama.cpp
//! `block_pq2_0`, as in the core's `format::prism`) are each rewritten as bytes `0..64`: vector
//! `P_0`, whose i32 lane `l` is code bytes `8 (l % 4) .. 8 (l % 4) + 4` of block `l / 4`; bytes
//! `64..128`: `P_1`, lane `l` = code bytes `8 (l % 4) + 4 .. 8 (l % 4) + 8` of block `l / 4`
//! (exactly the registers `Pq2x4`'s `vpermt2d` made); bytes `128..136`: the four scales in
//! block order. A partial last group (`nb % 4` blocks) stays canonical and is decoded from a
//! zero-padded copy by `Pq2x4`'s canonical decode ([`Lanes::decode_tail`]), as before. The
//! decoded registers equal `Pq2x4`'s, so every result (one column and 2..=16, plain AVX-512
//! and VNNI) is the same bits (tested below).
//!
//! What must not live here: the drivers (`super::z512`, `super::zseg`), the canonical-layout
//! type (`super::pq2x4`), other formats.

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::ext::ActSlice;
use super::pq2x4::Pq2x4;
use super::z512::{Lanes, V64};

/// Blocks per group.
pub(crate) const GROUP_BLOCKS: usize = 4;
/// Bytes per group (canonical and lane order alike).
pub(crate) const GROUP_BYTES: usize = GROUP_BLOCKS * 34;

/// Rewrites one validated canonical PQ2_0 row in place into lane order (see the module doc):
/// every whole group of 4 blocks; a partial last group stays canonical.
pub(crate) fn repack_row(row: &mut [u8]) {
    for g in row.chunks_exact_mut(GROUP_BYTES) {
        let mut packed = [0u8; GROUP_BYTES];
        for l in 0..16 {
            let codes = &g[34 * (l / 4) + 2 + 8 * (l % 4)..][..8];
            packed[4 * l..4 * l + 4].copy_from_slice(&codes[..4]);
            packed[64 + 4 * l..64 + 4 * l + 4].copy_from_slice(&codes[4..]);
        }
        for b in 0..GROUP_BLOCKS {
            packed[128 + 2 * b..130 + 2 * b].copy_from_slice(&g[34 * b..34 * b + 2]);
        }
        g.copy_from_slice(&packed);
    }
}

/// PQ2_0 in lane order, one activation block per lane (`Pq2x4`'s records and dot products),
/// for every column count.
pub(crate) struct Pq2Pk;

impl Lanes for Pq2Pk {
    const BB: usize = Pq2x4::BB;
    const GB: usize = Pq2x4::GB;
    const REC: usize = Pq2x4::REC;
    const PAIRS: bool = Pq2x4::PAIRS;
    type W = ([__m512i; 8], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        Pq2x4::prep(act, nb, j, g, rec);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { Pq2x4::prep_fast(act, nb, j, g, rec) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..136 of the lane-order group at `p` (caller); register-only
        // otherwise.
        unsafe {
            let m = _mm512_set1_epi8(3);
            let mut c = [_mm512_setzero_si512(); 8];
            for h in 0..2 {
                let v = _mm512_loadu_si512(p.add(64 * h).cast());
                c[4 * h] = _mm512_and_si512(v, m);
                c[4 * h + 1] = _mm512_and_si512(_mm512_srli_epi16::<2>(v), m);
                c[4 * h + 2] = _mm512_and_si512(_mm512_srli_epi16::<4>(v), m);
                c[4 * h + 3] = _mm512_and_si512(_mm512_srli_epi16::<6>(v), m);
            }
            let dv = _mm_cvtph_ps(_mm_loadl_epi64(p.add(128).cast()));
            let idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
            (c, _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(dv)))
        }
    }

    #[inline(always)]
    unsafe fn decode_tail(p: *const u8) -> Self::W {
        // SAFETY: forwarded from the caller (the zero-padded canonical copy).
        unsafe { Pq2x4::decode(p) }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { Pq2x4::dot(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { Pq2x4::dot_vnni(w, a, acc) }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rng::Rng;
    use super::*;
    use crate::act::Acts;
    use crate::isa::Isa;
    use lowbit_core::FormatId;

    /// A valid canonical PQ2_0 matrix: random codes 0..=3 (3 included: the core decodes it as
    /// +2), finite full-mantissa f16 scales of mixed magnitudes.
    fn matrix(rng: &mut Rng, rows: usize, k: usize) -> Vec<u8> {
        rng.f16_scaled_blocks(rows * k / 128, 34)
    }

    /// The lane-order kernel (as the AVX-512 tables run it, on rows repacked by
    /// [`repack_row`]) gives bit for bit what `Pq2x4` gives on the canonical rows, plain AVX-512
    /// and VNNI alike, for n = 1..=16 (one column: `drive1`; 2..=16: row pairs, and on the
    /// 14336-long rows the segmented driver), with and without the once-per-call records, on
    /// rows of whole groups, rows with a partial last group of each size (nb % 4 = 1, 2, 3),
    /// rows shorter than one group (K = 128, the smallest, 256, 384) and row counts that
    /// leave partial row groups.
    #[test]
    fn lane_order_kernel_is_the_canonical_one_bit_for_bit() {
        if !Isa::Avx512.available() {
            return;
        }
        let vnni = Isa::Avx512Vnni.available();
        let mut rng = Rng(142);
        for (rows, k) in [
            (9, 14336),
            (13, 4096 + 128),
            (6, 4096 + 256),
            (7, 4096 + 384),
            (5, 512),
            (3, 128),
            (4, 256),
            (6, 384),
            (11, 1280),
        ] {
            let w = matrix(&mut rng, rows, k);
            let rb = k / 128 * 34;
            let mut packed = w.clone();
            packed.chunks_exact_mut(rb).for_each(repack_row);
            if k >= 512 {
                assert_ne!(packed, w);
            }
            for n in 1..=16 {
                if rows * k > 100_000 && ![1, 2, 3, 4, 5, 8, 13, 16].contains(&n) {
                    continue;
                }
                let x: Vec<f32> = (0..n * k).map(|_| rng.value()).collect();
                let mut acts = Acts::prepare(FormatId::Pq2_0, &x, n, k).unwrap();
                for shared in [false, true] {
                    if shared {
                        let prep = super::super::z512::extras(FormatId::Pq2_0).prep.unwrap();
                        acts.layout = prep(&acts);
                        assert!(acts.layout.is_some());
                    }
                    for v in [false, true] {
                        if v && !vnni {
                            continue;
                        }
                        let (mut y0, mut y1) = (vec![0f32; rows * n], vec![1f32; rows * n]);
                        let f = FormatId::Pq2_0;
                        use super::super::ext::W_PQ2;
                        use super::super::z512::run_ext_v;
                        // AVX-512 F/BW/VL, AVX2, FMA and F16C (and VNNI for `v`) were detected
                        // above, as the kernel table requires before handing these out.
                        if v {
                            run_ext_v::<Pq2x4, W_PQ2, true>(f, &w, rb, &acts, 0..n, &mut y0)
                                .unwrap();
                            run_ext_v::<Pq2Pk, W_PQ2, true>(f, &packed, rb, &acts, 0..n, &mut y1)
                                .unwrap();
                        } else {
                            run_ext_v::<Pq2x4, W_PQ2, false>(f, &w, rb, &acts, 0..n, &mut y0)
                                .unwrap();
                            run_ext_v::<Pq2Pk, W_PQ2, false>(f, &packed, rb, &acts, 0..n, &mut y1)
                                .unwrap();
                        }
                        for (i, (a, b)) in y0.iter().zip(&y1).enumerate() {
                            assert_eq!(
                                a.to_bits(),
                                b.to_bits(),
                                "{rows}x{k} n={n} shared={shared} vnni={v}: y[{i}] {a} vs {b}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Without AVX-512 hardware: the lane-order bytes are the registers `Pq2x4::decode` builds
    /// from the canonical group, written out in scalar code (`vpermt2d` with the even / odd
    /// dword indices over the 128 concatenated code bytes; scale lane `l` = block `l / 4`).
    #[test]
    fn packed_bytes_are_the_canonical_decode_registers() {
        let mut rng = Rng(7);
        let row: Vec<u8> = (0..34 * 9).map(|_| rng.next() as u8).collect();
        let mut packed = row.clone();
        repack_row(&mut packed);
        for g in 0..row.len() / GROUP_BYTES {
            let c = &row[g * GROUP_BYTES..][..GROUP_BYTES];
            let codes: Vec<u8> = (0..4).flat_map(|b| c[34 * b + 2..34 * b + 34].to_vec()).collect();
            let p = &packed[g * GROUP_BYTES..][..GROUP_BYTES];
            for h in 0..2 {
                for l in 0..16 {
                    let dword = 2 * l + h;
                    assert_eq!(p[64 * h + 4 * l..][..4], codes[4 * dword..][..4], "g{g} h{h} l{l}");
                }
            }
            let scales: Vec<u8> = (0..4).flat_map(|b| c[34 * b..34 * b + 2].to_vec()).collect();
            assert_eq!(p[128..136], scales[..]);
        }
    }

    /// The repack moves every byte of a whole group once (so it is a bijection) and leaves a
    /// partial last group as it was.
    #[test]
    fn repack_moves_bytes_and_leaves_partial_groups_canonical() {
        for nb in [4, 8, 5, 1, 7, 112] {
            let row: Vec<u8> = (0..34 * nb).map(|i| (i * 37 + i / 7) as u8).collect();
            let mut packed = row.clone();
            repack_row(&mut packed);
            let full = nb / GROUP_BLOCKS;
            assert_eq!(packed[full * GROUP_BYTES..], row[full * GROUP_BYTES..], "nb = {nb}");
            for g in 0..full {
                let (p, c) = (&packed[g * GROUP_BYTES..][..GROUP_BYTES], &row[g * GROUP_BYTES..]);
                let (mut ps, mut cs) = (p.to_vec(), c[..GROUP_BYTES].to_vec());
                ps.sort_unstable();
                cs.sort_unstable();
                assert_eq!(ps, cs);
                // Lane 5 = block 1, code bytes 8..12 and 12..16; block 2's scale at 132..134.
                assert_eq!(p[20..24], c[34 + 2 + 8..][..4]);
                assert_eq!(p[64 + 20..64 + 24], c[34 + 2 + 12..][..4]);
                assert_eq!(p[132..134], c[68..70]);
            }
        }
    }
}
