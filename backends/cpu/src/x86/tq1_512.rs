//! AVX-512 (F/BW/VL) TQ1_0 kernel against Q8_K activations, in [`super::z512`]'s
//! one-row-per-register layout (its driver, records and column reuse).
//!
//! TQ1_0 (54-byte blocks of 256: `qs[48]`, `qh[4]`, `d` f16 at 52; five base-3 digits per byte,
//! digit `n` read as `((u8)(byte * 3^n) * 3) >> 8`, value `digit - 1`; element order from ggml
//! `quantize_row_tq1_0_ref` / `dequantize_row_tq1_0`, as in the core's `format::ggml::tq1_0`).
//! The 52 packed bytes are loaded once (masked: nothing past the block is read) and digit
//! plane `n` is computed for all of them at once: `q_n = q_{n-1} * 3` per byte (two wrapping
//! byte adds), digit = `(q_n > 85) + (q_n > 170)`, which is `(q_n * 3) >> 8` (`q * 3 >= 256`
//! iff `q >= 86`, `>= 512` iff `q >= 171`). Five planes of 64 byte slots hold the 256 elements
//! (slot `b` of plane `n`: element `b + 32n` for `b < 32`, `160 + (b - 32) + 16n` for
//! `b < 48`, `240 + (b - 48) + 4n` for `b < 52, n < 4`; every other slot meets a zero
//! activation). Record: the activations in those slots, the exact activation sum of each i32
//! lane, `d_a`. Per column: `madd(sum_n maddubs(u_n, a_n), 1) - asum` = exact
//! `sum((u - 1) a)` per lane (i16 lanes <= 5 * 2 * 2 * 127 < 2^15), one `vcvtdq2ps`, one FMA
//! by `d * d_a`: the bound of [`super::z512`] holds with **c = 1**.
//!
//! What must not live here: the driver and the other formats (`super::z512`).

#![allow(clippy::incompatible_msrv)]
// Plane and slot indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::ext::ActSlice;
use super::z512::{f16_bcast, ld, ldps, q8_k_block, Lanes, V64};

/// The element of TQ1_0 slot `b` (< 64) of digit plane `n` (< 5), if any (module doc).
const fn tq1_slot(n: usize, b: usize) -> Option<usize> {
    if b < 32 {
        Some(b + 32 * n)
    } else if b < 48 {
        Some(160 + (b - 32) + 16 * n)
    } else if b < 52 && n < 4 {
        Some(240 + (b - 48) + 4 * n)
    } else {
        None
    }
}

/// Digit plane `n` (0..=2 per byte) of the packed bytes `q_n = bytes * 3^n`.
///
/// # Safety
/// AVX-512 F/BW are available.
#[inline(always)]
unsafe fn digits(q: __m512i) -> __m512i {
    // SAFETY: register-only operations.
    unsafe {
        let one = _mm512_set1_epi8(1);
        let k1 = _mm512_cmpgt_epu8_mask(q, _mm512_set1_epi8(85));
        let k2 = _mm512_cmpgt_epu8_mask(q, _mm512_set1_epi8(170u8 as i8));
        let u = _mm512_maskz_mov_epi8(k1, one);
        _mm512_mask_add_epi8(u, k2, u, one)
    }
}

/// TQ1_0 (module doc).
pub(crate) struct Tq1;

impl Lanes for Tq1 {
    const BB: usize = 54;
    const GB: usize = 1;
    const REC: usize = 7;
    type W = ([__m512i; 5], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let Some(blk) = q8_k_block(act, nb, j, g) else { return };
        let mut sums = [0i32; 16];
        for n in 0..5 {
            for b in 0..64 {
                let v = tq1_slot(n, b).map_or(0, |e| blk.qs[e]);
                rec[n].put_i8(b, v);
                sums[b / 4] += i32::from(v);
            }
        }
        for (l, s) in sums.iter().enumerate() {
            rec[5].put_i32(l, *s);
            rec[6].put_f32(l, blk.d);
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let (Some(blk), true) = (q8_k_block(act, nb, j, g), rec.len() == 7) else { return };
        let q: &[u8] = bytemuck::cast_slice(&blk.qs[..]);
        for (n, r) in rec.iter_mut().take(5).enumerate() {
            r.0 = [0; 64];
            r.0[..32].copy_from_slice(&q[32 * n..32 * n + 32]);
            r.0[32..48].copy_from_slice(&q[160 + 16 * n..176 + 16 * n]);
            if n < 4 {
                r.0[48..52].copy_from_slice(&q[240 + 4 * n..244 + 4 * n]);
            }
        }
        let r = rec.as_mut_ptr();
        // SAFETY: reads and writes the 7 record vectors.
        unsafe {
            let one = _mm512_set1_epi8(1);
            let mut p = _mm512_setzero_si512();
            for n in 0..5 {
                p = _mm512_add_epi16(p, _mm512_maddubs_epi16(one, ld(r, n)));
            }
            _mm512_store_si512(r.add(5).cast(), _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
            _mm512_store_ps(r.add(6).cast(), _mm512_set1_ps(blk.d));
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: the masked load reads bytes 0..52 at `p` (masked-off bytes are not
        // accessed), the scale bytes 52..54 (caller); register-only operations otherwise.
        unsafe {
            let x = _mm512_maskz_loadu_epi8((1u64 << 52) - 1, p.cast());
            let mut q = x;
            let mut u = [_mm512_setzero_si512(); 5];
            for (n, u) in u.iter_mut().enumerate() {
                if n > 0 {
                    q = _mm512_add_epi8(_mm512_add_epi8(q, q), q);
                }
                *u = digits(q);
            }
            (u, f16_bcast(p.add(52)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 7 record vectors (caller); register-only operations.
        unsafe {
            let m = |n: usize| _mm512_maddubs_epi16(w.0[n], ld(a, n));
            let p = _mm512_add_epi16(_mm512_add_epi16(m(0), m(1)), _mm512_add_epi16(m(2), m(3)));
            let p = _mm512_add_epi16(p, m(4));
            let s = _mm512_sub_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)), ld(a, 5));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.1, ldps(a, 6)), acc)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot map covers every element exactly once.
    #[test]
    fn tq1_slots_are_a_bijection() {
        let mut seen = [0u8; 256];
        for n in 0..5 {
            for b in 0..64 {
                if let Some(e) = tq1_slot(n, b) {
                    seen[e] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
    }

    /// The compare form of the digit equals the core's `trit` for every byte and position.
    #[test]
    fn digit_compare_is_ggml_trit() {
        for b in 0..=255u8 {
            for n in 0..5 {
                let q = b.wrapping_mul([1u8, 3, 9, 27, 81][n]);
                let d = u8::from(q > 85) + u8::from(q > 170);
                assert_eq!(d, lowbit_core::format::ggml::tq1_0::trit(b, n), "byte {b} digit {n}");
            }
        }
    }
}
