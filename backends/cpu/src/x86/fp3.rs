//! AVX2 kernel body for ROCmFP3 weights against Q8_0 activations.
//!
//! Decode per block and row (once, reused by every column of the tile): the 12 code bytes are
//! four 3-byte groups of eight 3-bit codes (least significant first). A `pshufb` puts, for each
//! element `e`, the two bytes holding its bits into a 16-bit lane; multiplying by
//! `2^(13 - (3e mod 8))` and shifting right by 13 isolates the code (a per-lane variable shift
//! AVX2 lacks for 16-bit lanes); `packus` + `permute4x64` restore element order and a second
//! `pshufb` maps codes to the levels `{0, 1, 2, 4, 0, -1, -2, -4}`. Then, as for ROCmFP2,
//! `maddubs(|w|, sign(a, w))` (no saturation: |w| <= 4) and `madd` give exact i32 sums of each
//! 16-weight half, and each lane (= row) evaluates the reference's
//! `acc += d_act * (s_0 * sum_0 + s_1 * sum_1)` in block order: bit-identical to the core's
//! `dot_fp3_q8_0`, so its bound constant applies: **c = 1**.
//!
//! What must not live here: length checks and entry points (`ext.rs`), other formats.

use std::arch::x86_64::*;
use std::ops::Range;
use std::ptr;

use super::ext::{hsum8, row_ptrs, store_rows, ActSlice, Shape};

/// The 32 levels of the ROCmFP3 block at `p` as signed bytes in element order.
///
/// # Safety
/// AVX2 is available; `p .. p + 12` is readable.
#[inline(always)]
unsafe fn fp3_levels(p: *const u8) -> __m256i {
    // SAFETY: reads bytes 0..12 at `p` (caller); register-only AVX2 operations.
    unsafe {
        let lo = ptr::read_unaligned(p.cast::<i64>());
        let hi = ptr::read_unaligned(p.add(8).cast::<u32>());
        let v = _mm256_broadcastsi128_si256(_mm_set_epi64x(i64::from(hi), lo));
        #[rustfmt::skip]
        let sa = _mm256_setr_epi8(
            0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 1, 2, 2, 3, 2, 3,
            3, 4, 3, 4, 3, 4, 4, 5, 4, 5, 4, 5, 5, 6, 5, 6,
        );
        #[rustfmt::skip]
        let sb = _mm256_setr_epi8(
            6, 7, 6, 7, 6, 7, 7, 8, 7, 8, 7, 8, 8, 9, 8, 9,
            9, 10, 9, 10, 9, 10, 10, 11, 10, 11, 10, 11, 11, 12, 11, 12,
        );
        #[rustfmt::skip]
        let mul = _mm256_setr_epi16(
            8192, 1024, 128, 4096, 512, 64, 2048, 256,
            8192, 1024, 128, 4096, 512, 64, 2048, 256,
        );
        let ca = _mm256_srli_epi16::<13>(_mm256_mullo_epi16(_mm256_shuffle_epi8(v, sa), mul));
        let cb = _mm256_srli_epi16::<13>(_mm256_mullo_epi16(_mm256_shuffle_epi8(v, sb), mul));
        // [0..8, 16..24 | 8..16, 24..32] -> element order.
        let codes = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(ca, cb));
        #[rustfmt::skip]
        let lut = _mm256_setr_epi8(
            0, 1, 2, 4, 0, -1, -2, -4, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 1, 2, 4, 0, -1, -2, -4, 0, 0, 0, 0, 0, 0, 0, 0,
        );
        _mm256_shuffle_epi8(lut, codes)
    }
}

/// UE4M3-b8 bytes (legal: 0..=0x7E, one per i32 lane) to f32, exactly:
/// `m * 2^(max(E, 1) - 11)`, `m = M + 8` for E > 0 and `m = M` for E = 0 (format rule from the
/// core's `scalar::try_ue4m3_b8_to_f32`; no denormal operand reaches the multiplier).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
pub(crate) unsafe fn ue4m3_b8_x8(b: __m256i) -> __m256 {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        let one = _mm256_set1_epi32(1);
        let e = _mm256_srli_epi32::<3>(b);
        let m = _mm256_or_si256(
            _mm256_and_si256(b, _mm256_set1_epi32(7)),
            _mm256_slli_epi32::<3>(_mm256_min_epu32(e, one)),
        );
        let pow = _mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_max_epu32(e, one),
            _mm256_set1_epi32(127 - 11),
        ));
        _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_castsi256_ps(pow))
    }
}

/// ROCmFP3 rows against Q8_0 columns (see the module doc).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold for ROCmFP3
/// (`s.act` is Q8_0 with `nb` blocks per column, `1 <= cols.len() <= MAXC`).
#[inline(always)]
pub(crate) unsafe fn body<const MAXC: usize>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let ActSlice::Q8_0(a, ad) = s.act else { return };
    let nb = s.nb;
    let nrows = w.len() / rb;
    let nc = cols.len().min(MAXC);
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (block `b < nb`, bytes
    // `b * 14 .. b * 14 + 14`); activation blocks are indexed safely and their 32 quants read
    // whole; AVX2/FMA/F16C are available.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs(w, rb, nrows, r0);
            let mut acc = [_mm256_setzero_ps(); MAXC];
            for b in 0..nb {
                let mut wv = [_mm256_setzero_si256(); 8];
                let mut wa = [_mm256_setzero_si256(); 8];
                let mut eb = [0u16; 8];
                for i in 0..8 {
                    let p = rp[i].add(b * 14);
                    wv[i] = fp3_levels(p);
                    wa[i] = _mm256_abs_epi8(wv[i]);
                    eb[i] = ptr::read_unaligned(p.add(12).cast::<u16>());
                }
                let e = _mm256_cvtepu16_epi32(_mm_loadu_si128(eb.as_ptr().cast()));
                let s0 = ue4m3_b8_x8(_mm256_and_si256(e, _mm256_set1_epi32(0xFF)));
                let s1 = ue4m3_b8_x8(_mm256_srli_epi32::<8>(e));
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let ai = (cols.start + jj) * nb + b;
                    let av = _mm256_loadu_si256(a[ai].qs.as_ptr().cast());
                    let mut p = [_mm256_setzero_si256(); 8];
                    for i in 0..8 {
                        let prod = _mm256_maddubs_epi16(wa[i], _mm256_sign_epi8(av, wv[i]));
                        p[i] = _mm256_madd_epi16(prod, ones);
                    }
                    let (lo, hi) = hsum8(&p);
                    let v = _mm256_add_ps(
                        _mm256_mul_ps(s0, _mm256_cvtepi32_ps(lo)),
                        _mm256_mul_ps(s1, _mm256_cvtepi32_ps(hi)),
                    );
                    *accj = _mm256_add_ps(*accj, _mm256_mul_ps(_mm256_set1_ps(ad[ai]), v));
                }
            }
            store_rows(&acc, nc, r0, here, out);
            r0 += 8;
        }
    }
}
