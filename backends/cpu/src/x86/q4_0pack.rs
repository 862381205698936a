//! Q4_0 in **lane order**, the AVX-512 kernels' private layout: the upload-time repack
//! ([`repack_row`]), its inverse for one group ([`canonical_group`], used by the prefill GEMM's
//! unpack), and the two [`Lanes`] types that read it: [`Q4_0Pk16`] (2..=16 columns, one block
//! per lane, the decode of `super::q4_0x16::Q4_0x16` without its transpose) and [`Q4_0Pk4`]
//! (one column: `super::z512::Q4_0`'s four-lanes-per-block arithmetic, same bits).
//!
//! Why. `super::q4_0x16` built its registers from canonical rows with 16 128-bit loads, 12
//! inserts and 8 unpacks per group of 16 blocks, plus about 30 instructions for the 16 scattered
//! f16 scales. On this Zen 4 core the decode and the `vpdpbusd` work add up instead of
//! overlapping (docs/BENCHMARKS.md, "Session 10 (n4)"), so n = 4 pays for every decode
//! instruction. Stored in the order the registers need, a group decodes with four 64-byte
//! loads, 12 ands and shifts, one 32-byte load and one `vcvtph2ps`.
//!
//! Layout. A row's whole groups of 16 blocks (288 bytes, `d` f16 then 16 nibble bytes per
//! block; ggml `block_q4_0`, ggml/src/ggml-common.h, as in the core) are each rewritten as
//! bytes `0..32`: the 16 scales, lane `l` holding block [`lane_block`]`(l)`'s `d`; bytes
//! `32 + 64k .. 96 + 64k` (`k` = 0..4): vector `Y_k`, whose i32 lane `l` is dword `k` (nibble
//! bytes `4k..4k + 4`) of block `lane_block(l)`: exactly the registers `Q4_0x16`'s transpose
//! made. A partial last group (`nb % 16` blocks) stays canonical: [`Q4_0Pk16`] decodes it from
//! a zero-padded copy with `Q4_0x16`'s canonical decode ([`Lanes::decode_tail`]), [`Q4_0Pk4`]
//! runs it in `super::z512::Q4_0`'s 4-block groups ([`Lanes::dot_tail1`]). Whole groups of a
//! row of whole groups lie at multiples of 32 bytes from a 64-byte-aligned matrix, so no 256-bit
//! half of a load crosses a cache line.
//!
//! One column ([`Q4_0Pk4`]). `super::z512::Q4_0` gives lane `4t + u` of group `g` (4 blocks)
//! the exact integer of dword `u` of block `4g + t` (low and high nibbles, minus `8 * asum`),
//! scaled by `fl(d_w * d_a)` of that block, one FMA per group of 4 blocks. In lane order, dword
//! `u` of block `4i + t` of a 16-block group sits in lane `4t + i` of `Y_u`, so two `vpdpbusd`
//! per `u` (activation vectors in the same order, `-8 * asum` per dword lane as the chain's
//! start) give those integers for all four sub-groups `i`, and a dword transpose within 128-bit
//! lanes (`super::q4_0x16::transpose4`) puts sub-group `i`'s into lane `4t + u` of vector `i`.
//! The scale products are computed once per group in lane order and moved to sub-group `i`'s
//! lanes by a `vpermps`. Each accumulator lane then receives the same FMAs in the same order
//! as in `super::z512::Q4_0` (the partial last group is `Q4_0`'s own code), so results are the
//! same bits, as are [`Q4_0Pk16`]'s and `Q4_0x16`'s (whose partial last group gets zero codes
//! and scales from the padding and zero records, as before).
//!
//! What must not live here: the drivers (`super::z512`, `super::zseg`), the canonical-layout
//! kernels (`super::q4_0x16`, `super::z512::Q4_0`), other formats.

#![allow(clippy::incompatible_msrv)]
// Dword, lane and sub-group indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ptr;

use super::ext::ActSlice;
use super::q4_0x16::{lane_block, lane_records, lane_records_fast, transpose4, Q4_0x16};
use super::z512::{dot_v, ld, ldps, Lanes, Q4_0, V64};

/// Blocks per lane-order group.
pub(crate) const GROUP_BLOCKS: usize = 16;
/// Bytes per group (canonical and lane order alike).
pub(crate) const GROUP_BYTES: usize = GROUP_BLOCKS * 18;

/// Rewrites one validated canonical Q4_0 row in place into lane order (see the module doc):
/// every whole group of 16 blocks; a partial last group stays canonical.
pub(crate) fn repack_row(row: &mut [u8]) {
    for g in row.chunks_exact_mut(GROUP_BYTES) {
        let mut packed = [0u8; GROUP_BYTES];
        for l in 0..GROUP_BLOCKS {
            let b = &g[18 * lane_block(l)..][..18];
            packed[2 * l..2 * l + 2].copy_from_slice(&b[..2]);
            for k in 0..4 {
                packed[32 + 64 * k + 4 * l..][..4].copy_from_slice(&b[2 + 4 * k..][..4]);
            }
        }
        g.copy_from_slice(&packed);
    }
}

/// The canonical 16 blocks of one lane-order group (the inverse of [`repack_row`] on it).
pub(crate) fn canonical_group(packed: &[u8; GROUP_BYTES]) -> [u8; GROUP_BYTES] {
    let mut g = [0u8; GROUP_BYTES];
    for l in 0..GROUP_BLOCKS {
        let b = &mut g[18 * lane_block(l)..][..18];
        b[..2].copy_from_slice(&packed[2 * l..2 * l + 2]);
        for k in 0..4 {
            b[2 + 4 * k..][..4].copy_from_slice(&packed[32 + 64 * k + 4 * l..][..4]);
        }
    }
    g
}

/// Decodes one lane-order group at `p` into `Q4_0x16`'s registers: eight code vectors
/// (`Y_k & 15`, then `(Y_k >> 4) & 15`) and the 16 scales as f32, lane `l` = block
/// [`lane_block`]`(l)`.
///
/// # Safety
/// `p .. p + 288` is readable; AVX-512 F/BW and F16C are available.
#[inline(always)]
unsafe fn decode_lanes(p: *const u8) -> ([__m512i; 8], __m512) {
    // SAFETY: reads bytes 0..288 at `p` (caller); register-only otherwise.
    unsafe {
        let m = _mm512_set1_epi8(0x0F);
        let mut c = [_mm512_setzero_si512(); 8];
        for k in 0..4 {
            let y = _mm512_loadu_si512(p.add(32 + 64 * k).cast());
            c[k] = _mm512_and_si512(y, m);
            c[4 + k] = _mm512_and_si512(_mm512_srli_epi16::<4>(y), m);
        }
        (c, _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())))
    }
}

/// Q4_0 in lane order, one block per lane, for 2..=16 columns: `Q4_0x16` (its records, dot
/// products and tile) with the lane-order decode.
pub(crate) struct Q4_0Pk16;

impl Lanes for Q4_0Pk16 {
    const BB: usize = Q4_0x16::BB;
    const GB: usize = Q4_0x16::GB;
    const REC: usize = Q4_0x16::REC;
    const PAIRS: bool = Q4_0x16::PAIRS;
    type W = ([__m512i; 8], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        Q4_0x16::prep(act, nb, j, g, rec);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { Q4_0x16::prep_fast(act, nb, j, g, rec) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: forwarded from the caller (a whole group: 288 readable bytes).
        unsafe { decode_lanes(p) }
    }

    #[inline(always)]
    unsafe fn decode_tail(p: *const u8) -> Self::W {
        // SAFETY: forwarded from the caller (the zero-padded canonical copy).
        unsafe { Q4_0x16::decode(p) }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { Q4_0x16::dot(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { Q4_0x16::dot_vnni(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_tile<const R: usize, const CT: usize, const V: bool>(
        dec: &[Self::W; R],
        a: &[*const V64; CT],
        acc: &mut [[__m512; CT]; R],
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { Q4_0x16::dot_tile::<R, CT, V>(dec, a, acc) }
    }
}

/// Q4_0 in lane order for one column, with `super::z512::Q4_0`'s arithmetic (see the module
/// doc); run by `super::z512`'s single-column driver only (its partial last group goes through
/// [`Lanes::dot_tail1`]). Record (16 vectors per group of 16 blocks) of a whole group: vectors
/// 0..8 as `Q4_0x16`'s, vector `8 + u` the `-8 * asum` of dword `u` of each lane's block (its
/// low and high quads), vector 12 the activation scales (lane `l`: block
/// [`lane_block`]`(l)`), 13..16 unused. Of a row's partial last group (canonical bytes): the
/// records of `super::z512::Q4_0` for its four 4-block sub-groups (4 vectors each), which
/// [`Lanes::dot_tail1`] runs with `Q4_0`'s decode and dot straight from the row, as the
/// canonical kernel did (4-block groups, the last one zero-padded). The tail of a short row
/// (K = 576: 18 blocks, one whole group and 2 blocks) then costs what it did before, not a
/// 16-block transpose and four sub-group FMAs.
pub(crate) struct Q4_0Pk4;

/// Record vectors of [`Q4_0Pk4`] per group.
const PK4_REC: usize = 16;

impl Lanes for Q4_0Pk4 {
    const BB: usize = 18;
    const GB: usize = GROUP_BLOCKS;
    const REC: usize = PK4_REC;
    type W = ([__m512i; 8], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        rec.iter_mut().for_each(|r| *r = V64([0; 64]));
        if rec.len() != PK4_REC {
            return;
        }
        if GROUP_BLOCKS * (g + 1) > nb {
            // The partial last group: `Q4_0`'s records of its 4-block sub-groups.
            for (i, r) in rec.chunks_exact_mut(4).enumerate() {
                Q4_0::prep(act, nb, j, 4 * g + i, r);
            }
            return;
        }
        let mut x = [V64([0; 64]); 10];
        lane_records::<8>(act, nb, j, g, &mut x);
        rec[..8].copy_from_slice(&x[..8]);
        for u in 0..4 {
            for l in 0..16 {
                let s: i32 = (0..4)
                    .map(|e| {
                        i32::from(x[u].0[4 * l + e] as i8) + i32::from(x[4 + u].0[4 * l + e] as i8)
                    })
                    .sum();
                rec[8 + u].put_i32(l, -8 * s);
            }
        }
        rec[12] = x[9];
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        if rec.len() != PK4_REC {
            return;
        }
        let mut x = [V64([0; 64]); 10];
        let r = rec.as_mut_ptr();
        // SAFETY: the features are the caller's; `x` holds the 10 vectors `lane_records_fast`
        // writes, `rec` the 16 (13 written here; length checked above); aligned `V64` stores.
        unsafe {
            lane_records_fast::<3>(act, nb, j, g, &mut x);
            let one = _mm512_set1_epi8(1);
            let xs = x.as_ptr();
            for k in 0..8 {
                _mm512_store_si512(r.add(k).cast(), ld(xs, k));
            }
            for u in 0..4 {
                let p = _mm512_add_epi16(
                    _mm512_maddubs_epi16(one, ld(xs, u)),
                    _mm512_maddubs_epi16(one, ld(xs, 4 + u)),
                );
                let s = _mm512_slli_epi32::<3>(_mm512_madd_epi16(p, _mm512_set1_epi16(1)));
                _mm512_store_si512(
                    r.add(8 + u).cast(),
                    _mm512_sub_epi32(_mm512_setzero_si512(), s),
                );
            }
            _mm512_store_si512(r.add(12).cast(), ld(xs, 9));
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: forwarded from the caller (a whole group: 288 readable bytes).
        unsafe { decode_lanes(p) }
    }

    #[inline(always)]
    unsafe fn dot_tail1<const V: bool>(
        p: *const u8,
        tail: usize,
        a: *const V64,
        mut acc: __m512,
    ) -> __m512 {
        // SAFETY: whole 4-block sub-groups (72 bytes) are read inside the `tail` readable
        // bytes at `p`, a partial one from a zero-padded copy of its bytes; sub-group `i < 4`
        // reads record vectors `4i .. 4i + 4` of the 16 at `a` (caller); features forwarded.
        unsafe {
            let m = tail / 18;
            for i in 0..m.div_ceil(4) {
                let q = p.add(72 * i);
                let w = if 4 * i + 4 <= m {
                    Q4_0::decode(q)
                } else {
                    let mut buf = [0u8; 72];
                    ptr::copy_nonoverlapping(q, buf.as_mut_ptr(), 18 * (m - 4 * i));
                    Q4_0::decode(buf.as_ptr())
                };
                acc = dot_v::<Q4_0, V>(&w, a.add(4 * i), acc);
            }
            acc
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads record vectors 0..13 of the 16 (caller); register-only operations. Per dword
        // lane the exact `sum(c * a) - 8 * asum`: two `vpmaddubsw` (pairs <= 2 * 15 * 128)
        // summed in i16 (< 2^15), one `vpmaddwd` by ones.
        unsafe {
            let mut s = [_mm512_setzero_si512(); 4];
            for u in 0..4 {
                let p = _mm512_add_epi16(
                    _mm512_maddubs_epi16(w.0[u], ld(a, u)),
                    _mm512_maddubs_epi16(w.0[4 + u], ld(a, 4 + u)),
                );
                s[u] = _mm512_add_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)), ld(a, 8 + u));
            }
            scale4(s, w.1, a, acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads record vectors 0..13 of the 16 (caller); register-only operations; VNNI is
        // available (caller).
        unsafe {
            let mut s = [_mm512_setzero_si512(); 4];
            for u in 0..4 {
                let t = _mm512_dpbusd_epi32(ld(a, 8 + u), w.0[u], ld(a, u));
                s[u] = _mm512_dpbusd_epi32(t, w.0[4 + u], ld(a, 4 + u));
            }
            scale4(s, w.1, a, acc)
        }
    }
}

/// The four sub-groups' FMAs of [`Q4_0Pk4`]: `s[u]` lane `4t + i` is the integer of dword `u`
/// of block `4i + t`; after the transpose, vector `i` lane `4t + u` is `super::z512::Q4_0`'s
/// lane `4t + u` of sub-group `i`, scaled by block `4i + t`'s `fl(d_w * d_a)` (lane `4t + i`
/// of the lane-order product).
///
/// # Safety
/// `a` points at [`Q4_0Pk4`]'s 16 record vectors; AVX-512F is available.
#[inline(always)]
unsafe fn scale4(s: [__m512i; 4], dw: __m512, a: *const V64, mut acc: __m512) -> __m512 {
    // SAFETY: reads record vector 12 (caller); register-only operations.
    unsafe {
        let t = transpose4(s);
        let sc = _mm512_mul_ps(dw, ldps(a, 12));
        for (i, ti) in t.into_iter().enumerate() {
            let i = i as i32;
            let idx = _mm512_setr_epi32(
                i,
                i,
                i,
                i,
                4 + i,
                4 + i,
                4 + i,
                4 + i,
                8 + i,
                8 + i,
                8 + i,
                8 + i,
                12 + i,
                12 + i,
                12 + i,
                12 + i,
            );
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ti), _mm512_permutexvar_ps(idx, sc), acc);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rng::Rng;
    use super::*;
    use crate::act::Acts;
    use crate::isa::Isa;
    use lowbit_core::FormatId;

    /// A valid canonical Q4_0 matrix: random nibbles, finite full-mantissa f16 scales of
    /// mixed magnitudes.
    fn matrix(rng: &mut Rng, rows: usize, k: usize) -> Vec<u8> {
        rng.f16_scaled_blocks(rows * k / 32, 18)
    }

    /// The lane-order kernels (`super::z512`'s Q4_0 kernel, as the AVX-512 tables run it, on
    /// rows repacked by [`repack_row`]) give bit for bit what the canonical-layout kernels they
    /// replaced give on the canonical rows, plain AVX-512 and VNNI alike: one column (the
    /// four-lanes-per-block arithmetic) and 2..=16 (one block per lane; on 14432-long rows the
    /// segmented driver), with and without the once-per-call records, on rows of whole
    /// 16-block groups, rows with a partial last group of every sub-group count (451 = 28 * 16 +
    /// 3 blocks, 129, 35, 18 (K = 576), 31, 28, 24), rows shorter than one group (3 blocks) and
    /// row counts that leave partial row groups.
    /// The prefill GEMM's lane-order unpack is checked in `super::gemm512`.
    #[test]
    fn lane_order_kernels_are_the_canonical_ones_bit_for_bit() {
        if !Isa::Avx512.available() {
            return;
        }
        let vnni = Isa::Avx512Vnni.available();
        let mut rng = Rng(77);
        for (rows, k) in
            [(37, 14336 + 96), (21, 4096 + 32), (9, 14336), (6, 512), (7, 1120), (5, 96)]
                .into_iter()
                .chain([(11, 576), (3, 992), (4, 896), (6, 768)])
        {
            let w = matrix(&mut rng, rows, k);
            let rb = k / 32 * 18;
            let mut packed = w.clone();
            packed.chunks_exact_mut(rb).for_each(repack_row);
            if k >= 512 {
                assert_ne!(packed, w);
            }
            for n in [1, 2, 3, 4, 5, 8, 13, 16] {
                let x: Vec<f32> = (0..n * k).map(|_| rng.value()).collect();
                let mut acts = Acts::prepare(FormatId::Q4_0, &x, n, k).unwrap();
                for shared in [false, true] {
                    if shared {
                        let prep = super::super::z512::extras(FormatId::Q4_0).prep.unwrap();
                        acts.layout = prep(&acts);
                        assert!(acts.layout.is_some());
                    }
                    for v in [false, true] {
                        if v && !vnni {
                            continue;
                        }
                        let (mut y0, mut y1) = (vec![0f32; rows * n], vec![1f32; rows * n]);
                        // SAFETY: AVX-512 F/BW/VL, AVX2, FMA and F16C (and VNNI for `v`) were
                        // detected above.
                        unsafe {
                            use super::super::z512::{run_q4_0, run_q4_0_canonical};
                            let f = FormatId::Q4_0;
                            if v {
                                run_q4_0_canonical::<true>(f, &w, rb, &acts, 0..n, &mut y0)
                                    .unwrap();
                                run_q4_0::<true>(f, &packed, rb, &acts, 0..n, &mut y1).unwrap();
                            } else {
                                run_q4_0_canonical::<false>(f, &w, rb, &acts, 0..n, &mut y0)
                                    .unwrap();
                                run_q4_0::<false>(f, &packed, rb, &acts, 0..n, &mut y1).unwrap();
                            }
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

    #[test]
    fn repack_is_a_bijection_and_leaves_partial_groups_canonical() {
        for nb in [16, 32, 35, 5, 47] {
            let row: Vec<u8> = (0..18 * nb).map(|i| (i * 37 + i / 7) as u8).collect();
            let mut packed = row.clone();
            repack_row(&mut packed);
            let full = nb / GROUP_BLOCKS;
            assert_eq!(packed[full * GROUP_BYTES..], row[full * GROUP_BYTES..], "nb = {nb}");
            for g in 0..full {
                let pg: &[u8; GROUP_BYTES] =
                    packed[g * GROUP_BYTES..][..GROUP_BYTES].try_into().unwrap();
                assert_eq!(canonical_group(pg)[..], row[g * GROUP_BYTES..][..GROUP_BYTES]);
                if nb >= 16 {
                    assert_ne!(pg[..], row[g * GROUP_BYTES..][..GROUP_BYTES]);
                }
            }
            // Lane 1 holds block lane_block(1) = 4: its scale at bytes 2..4, its first code
            // dword at 36..40.
            if full > 0 {
                assert_eq!(packed[2..4], row[72..74]);
                assert_eq!(packed[36..40], row[74..78]);
            }
        }
    }
}
