//! AVX-512 (F/BW/VL, and VNNI where present) Q8_0 weights against Q8_0 activations in
//! [`super::z512`]'s one-row-per-register layout, for tiles of up to 4 columns (decode and
//! short speculative tiles; wider tiles keep `super::avx512`'s paired-row body).
//!
//! Q8_0 (34-byte blocks: `d` f16, then 32 signed codes; layout from ggml `block_q8_0`
//! (ggml/src/ggml-common.h), as in the core). Groups of two blocks: the two blocks' 32 codes
//! side by side in one register (block `t` in the 256-bit half `t`), so i32 lane `l` sums codes
//! `4l..4l+4` of one block. The weight scales as f32 lanes (lanes 0..8: block 0, 8..16:
//! block 1). Record: the two activation blocks' 64 codes in the same order, `-128 * asum` per
//! lane (the sum of the lane's 4 activations), `d_a` per lane.
//!
//! Per column, without VNNI: the activations' signs are flipped where the weight is negative
//! (one masked `vpsubb` under the weights' sign mask), then `vpmaddubsw(|w|, ±a)` and
//! `vpmaddwd` by ones (exact: `|w| <= 128` and the core's activations lie in -127..=127, so
//! i16 pairs <= 2 * 128 * 127 < 2^15). With VNNI: the
//! codes offset to unsigned (`w ^ 0x80 = w + 128`) and one `vpdpbusd` accumulating onto
//! `-128 * asum` (no saturation in `vpdpbusd`), which is `sum(w * a)` exactly. Both paths give
//! the same exact i32 lane sums, then one `vcvtdq2ps` and one FMA by `d_w * d_a` per lane:
//! [`super::z512`]'s bound holds with **c = 1**.
//!
//! What must not live here: the driver and the other formats (`super::z512`).

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::ptr;

use super::ext::ActSlice;
use super::z512::{ld, ldps, q8_0_block, Lanes, V64};

/// Q8_0 in groups of two blocks (see the module doc).
pub(crate) struct Q8;

impl Lanes for Q8 {
    const BB: usize = 34;
    const GB: usize = 2;
    const REC: usize = 3;
    type W = (__m512i, __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let [a, corr, da] = rec else { return };
        for t in 0..2 {
            let Some((q, d)) = q8_0_block(act, nb, j, 2 * g + t) else { continue };
            for (e, &v) in q.iter().enumerate() {
                a.put_i8(32 * t + e, v);
            }
            for l in 0..8 {
                let s: i32 = q[4 * l..4 * l + 4].iter().map(|&v| i32::from(v)).sum();
                corr.put_i32(8 * t + l, -128 * s);
                da.put_f32(8 * t + l, d);
            }
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let ActSlice::Q8_0(a, ad) = act else { return };
        let i0 = j * nb + 2 * g;
        let (Some(b), Some(d), [r0, r1, r2]) = (a.get(i0..i0 + 2), ad.get(i0..i0 + 2), rec) else {
            return;
        };
        // SAFETY: reads the 2 blocks' quants and scales (bounds-checked slices); writes the 3
        // record vectors (64-byte aligned `V64`s).
        unsafe {
            let lo = _mm256_loadu_si256(b[0].qs.as_ptr().cast());
            let hi = _mm256_loadu_si256(b[1].qs.as_ptr().cast());
            let q = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
            let pairs = _mm512_maddubs_epi16(_mm512_set1_epi8(1), q);
            let sums = _mm512_madd_epi16(pairs, _mm512_set1_epi16(1));
            let corr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<7>(sums));
            let (d0, d1) = (_mm256_set1_ps(d[0]), _mm256_set1_ps(d[1]));
            let dv = _mm512_castpd_ps(_mm512_insertf64x4::<1>(
                _mm512_castpd256_pd512(_mm256_castps_pd(d0)),
                _mm256_castps_pd(d1),
            ));
            _mm512_store_si512((r0 as *mut V64).cast(), q);
            _mm512_store_si512((r1 as *mut V64).cast(), corr);
            _mm512_store_ps((r2 as *mut V64).cast(), dv);
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..68 at `p` (caller); register-only operations.
        unsafe {
            let lo = _mm256_loadu_si256(p.add(2).cast());
            let hi = _mm256_loadu_si256(p.add(36).cast());
            let w = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
            let h = |o: usize| u32::from(ptr::read_unaligned(p.add(o).cast::<u16>()));
            let d2 = h(0) | h(34) << 16;
            let dv = _mm_cvtph_ps(_mm_cvtsi32_si128(d2 as i32));
            let idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
            (w, _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(dv)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 3 record vectors (caller); register-only operations.
        unsafe {
            let av = ld(a, 0);
            let neg = _mm512_movepi8_mask(w.0);
            let sa = _mm512_mask_sub_epi8(av, neg, _mm512_setzero_si512(), av);
            let p = _mm512_maddubs_epi16(_mm512_abs_epi8(w.0), sa);
            let s = _mm512_madd_epi16(p, _mm512_set1_epi16(1));
            let da = ldps(a, 2);
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.1, da), acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 3 record vectors (caller); register-only operations; VNNI is
        // available (caller).
        unsafe {
            let u = _mm512_xor_si512(w.0, _mm512_set1_epi8(-128));
            let s = _mm512_dpbusd_epi32(ld(a, 1), u, ld(a, 0));
            let da = ldps(a, 2);
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.1, da), acc)
        }
    }
}
