//! AVX-512 (F/BW/VL) Q3_K kernel against Q8_K activations, in [`super::z512`]'s
//! one-row-per-register layout (its driver, records and column reuse).
//!
//! Q3_K (110-byte blocks of 256: `hmask[32]`, `qs[64]`, 12 bytes of 6-bit scales, `d` f16 at
//! 108; element `e` has low bits `(qs[32 (e / 128) + e % 32] >> 2 ((e % 128) / 32)) & 3`, high
//! bit `(hmask[e % 32] >> (e / 32)) & 1`, value `low + 4 high - 4`, times the signed scale
//! (-32..=31) of its 16 elements; layout from ggml `block_q3_K` / `dequantize_row_q3_K`, as
//! in the core's `format::ggml::kquant::q3_k`). The low bits are [`super::z512::Q2k`]'s
//! planes; the high bit of plane `s` is bit `s` (low 256 bits) or `4 + s` (high) of the
//! broadcast `hmask`, moved to bit 2 (`vpsrlvw`, shift, `vpternlogd`): unsigned codes
//! `u = q + 4` in 0..=7. The scales are unpacked with vector operations (the core's
//! `q3k_scales` bit layout), sign-extended to words and spread per plane (`vpermw`, Q2_K's
//! lane-to-sub-block map). Per column: Q2_K's record and arithmetic ([`super::z512::dot_k_mins16`]),
//! with the "min" term `4 * sc` against `bsums` and `dmin = d`: exact
//! `sum(sc * u * a) - 4 sum(sc * bsum)` per lane (pairs <= 2 * 7 * 127, times |sc| <= 32;
//! every lane below 2^20), so the bound of [`super::z512`] holds with **c = 1**.
//!
//! What must not live here: the driver and the other K-quants (`super::z512`).

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::ext::ActSlice;
use super::z512::{f16_bcast, Lanes, Q2k, V64};

/// `vpermw` indices: word `w` of plane `j` takes the scale of sub-block
/// `8 (L / 2) + 2 j + L % 2`, `L = w / 8` its 128-bit lane.
static PERM_Q3K: [[i16; 32]; 4] = {
    let mut t = [[0i16; 32]; 4];
    let mut j = 0;
    while j < 4 {
        let mut w = 0;
        while w < 32 {
            let l = w / 8;
            t[j][w] = (8 * (l / 2) + 2 * j + l % 2) as i16;
            w += 1;
        }
        j += 1;
    }
    t
};

/// The sixteen signed scales of the 12 scale bytes at `q`, as words (the core's
/// `q3k_scales`: scale `j` has its low nibble in byte `j % 8` (low half for `j < 8`) and its
/// two high bits in byte `8 + j % 4` at bit `2 (j / 4)`; stored value minus 32).
///
/// # Safety
/// `q .. q + 12` is readable; AVX2 is available.
#[inline(always)]
pub(crate) unsafe fn scales(q: *const u8) -> __m256i {
    // SAFETY: reads 12 bytes at `q` (caller); register-only operations.
    unsafe {
        let b = _mm_loadl_epi64(q.cast());
        let h = std::ptr::read_unaligned(q.add(8).cast::<i32>());
        let m4 = _mm_set1_epi8(0x0F);
        let low =
            _mm_unpacklo_epi64(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16::<4>(b), m4));
        let hv = _mm_srlv_epi32(_mm_set1_epi32(h), _mm_setr_epi32(0, 2, 4, 6));
        let high = _mm_slli_epi16::<4>(_mm_and_si128(hv, _mm_set1_epi8(3)));
        let s = _mm_sub_epi8(_mm_or_si128(low, high), _mm_set1_epi8(32));
        _mm256_cvtepi8_epi16(s)
    }
}

/// Q3_K (module doc).
pub(crate) struct Q3k;

impl Lanes for Q3k {
    const BB: usize = 110;
    const GB: usize = 1;
    const WIDE: bool = true;
    const REC: usize = 6;
    type W = <Q2k as Lanes>::W;

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        Q2k::prep(act, nb, j, g, rec);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { Q2k::prep_fast(act, nb, j, g, rec) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..110 at `p` (caller); register-only operations otherwise.
        unsafe {
            let x = _mm512_loadu_si512(p.add(32).cast());
            let hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(p.cast()));
            let m3 = _mm512_set1_epi8(3);
            let m4 = _mm512_set1_epi8(4);
            let sh = |a: i16, b: i16| {
                _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_set1_epi16(a)),
                    _mm256_set1_epi16(b),
                )
            };
            let lo = [
                x,
                _mm512_srli_epi16::<2>(x),
                _mm512_srli_epi16::<4>(x),
                _mm512_srli_epi16::<6>(x),
            ];
            let mut u = [_mm512_setzero_si512(); 4];
            for (s, (u, lo)) in u.iter_mut().zip(lo).enumerate() {
                let t = _mm512_srlv_epi16(hm, sh(s as i16, 4 + s as i16));
                let hb = _mm512_and_si512(_mm512_slli_epi16::<2>(t), m4);
                // (lo & 3) | hb: ternary-logic table 0xEA = (A & B) | C.
                *u = _mm512_ternarylogic_epi32::<0xEA>(lo, m3, hb);
            }
            let sw = scales(p.add(96));
            let swz = _mm512_castsi256_si512(sw);
            let pl = |j: usize| {
                _mm512_permutexvar_epi16(_mm512_loadu_si512(PERM_Q3K[j].as_ptr().cast()), swz)
            };
            let d = f16_bcast(p.add(108));
            (u, [pl(0), pl(1), pl(2), pl(3)], _mm256_slli_epi16::<2>(sw), d, d)
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller; Q2_K's arithmetic (module doc).
        unsafe { super::z512::dot_k_mins16(w, a, acc) }
    }
}

#[cfg(test)]
mod tests {
    use lowbit_core::format::ggml::kquant::scales::q3k_scales;

    use super::*;

    #[test]
    fn vector_scales_match_core() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        let mut s = 0x1234_5678_9abc_def0u64;
        for _ in 0..2000 {
            let mut q = [0u8; 12];
            for b in q.iter_mut() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *b = (s >> 56) as u8;
            }
            let mut got = [0i16; 16];
            // SAFETY: AVX2 was detected; reads the 12 bytes of `q`, stores 32 bytes into `got`.
            unsafe { _mm256_storeu_si256(got.as_mut_ptr().cast(), scales(q.as_ptr())) };
            let want = q3k_scales(&q).map(i16::from);
            assert_eq!(got, want, "{q:?}");
        }
    }
}
