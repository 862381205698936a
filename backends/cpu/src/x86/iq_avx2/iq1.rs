//! The AVX2 decodes of IQ1_S and IQ1_M (layouts from ggml `block_iq1_s`, `block_iq1_m` and
//! `dequantize_row_iq1_*` in ggml-quants.c, as in the core's `format::ggml::iq`): per group of
//! 8 elements an 11-bit index into ggml's `iq1s_grid` (bytes -1, 0, 1: the core's
//! `IQ1S_GRID`), a delta `-+1/8` per sub-block of 32 (IQ1_S) or per group (IQ1_M), and 3-bit
//! scales `ls` used as `2 ls + 1` per 32 (IQ1_S) or 16 (IQ1_M) elements. The weights enter the
//! parent module's arithmetic as `8 grid + delta_sign` (-9..=9, never 0: magnitudes by
//! `vpabsb`, the signed value as the sign register), with `INNER = 1/8` (the parent module
//! explains why that is the reference's value bit for bit).

use std::arch::x86_64::*;

use lowbit_core::format::ggml::iq::tables::IQ1S_GRID;

use super::{f16_bits, grid64x4, scale_reg, IqGrid};

/// What an IQ1 sub-block's registers are made from: the 32 grid indices, the delta-sign
/// source bytes and the scale bytes, each in both lanes.
pub(crate) struct Iq1Ctx {
    idx: [u16; 32],
    delta: __m256i,
    scales: __m256i,
}

/// `8 g + s` for the grid bytes `g` (-1, 0, 1) and the nonzero signs `s` (-1, 1): as
/// magnitude and sign registers.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn fold(g: __m256i, s: __m256i) -> (__m256i, __m256i) {
    // SAFETY: register-only operations.
    unsafe {
        let w = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), s);
        (_mm256_abs_epi8(w), w)
    }
}

/// IQ1_S (50 bytes: `d` f16, 32 low index bytes, then per sub-block of 32 a u16: three index
/// high bits per group at bits `3 (g % 4)`, `ls` at bits 12..15, the delta sign at bit 15).
pub(crate) struct Iq1S;

impl IqGrid for Iq1S {
    const BB: usize = 50;
    const INNER: f32 = 0.125;
    const FINAL: f32 = 1.0;

    type Ctx = Iq1Ctx;

    #[inline(always)]
    unsafe fn prep(p: *const u8) -> Self::Ctx {
        // SAFETY: reads bytes 2..50 at `p` (caller); the stores fill the local index array.
        unsafe {
            let qhx = _mm_loadu_si128(p.add(34).cast());
            let qh = _mm256_broadcastsi128_si256(qhx);
            // Group g's high bits: its qh word times 2^(11 - 3 (g % 4)), masked to bits
            // 11..14, shifted down to 8..11.
            let mul = _mm256_setr_epi16(
                2048, 256, 32, 4, 2048, 256, 32, 4, 2048, 256, 32, 4, 2048, 256, 32, 4,
            );
            let mut idx = [0u16; 32];
            for h in 0..2 {
                let x = 8 * h as i8;
                #[rustfmt::skip]
                let pick = _mm256_setr_epi8(
                    x, x + 1, x, x + 1, x, x + 1, x, x + 1,
                    x + 2, x + 3, x + 2, x + 3, x + 2, x + 3, x + 2, x + 3,
                    x + 4, x + 5, x + 4, x + 5, x + 4, x + 5, x + 4, x + 5,
                    x + 6, x + 7, x + 6, x + 7, x + 6, x + 7, x + 6, x + 7,
                );
                let hb = _mm256_mullo_epi16(_mm256_shuffle_epi8(qh, pick), mul);
                let hb = _mm256_srli_epi16::<3>(_mm256_and_si256(hb, _mm256_set1_epi16(0x3800)));
                let lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(p.add(2 + 16 * h).cast()));
                _mm256_storeu_si256(idx.as_mut_ptr().add(16 * h).cast(), _mm256_or_si256(lo, hb));
            }
            let ls = _mm_and_si128(_mm_srli_epi16::<12>(qhx), _mm_set1_epi16(7));
            let ls = _mm_add_epi16(_mm_add_epi16(ls, ls), _mm_set1_epi16(1));
            // Byte k: -1 if sub-block k's delta is negative (bit 15), else 1.
            let sgn = _mm_or_si128(_mm_srai_epi16::<15>(qhx), _mm_set1_epi16(1));
            Iq1Ctx {
                idx,
                delta: _mm256_broadcastsi128_si256(_mm_packs_epi16(sgn, sgn)),
                scales: _mm256_broadcastsi128_si256(_mm_packus_epi16(ls, ls)),
            }
        }
    }

    #[inline(always)]
    unsafe fn part(_p: *const u8, c: &Self::Ctx, k: usize) -> [__m256i; 3] {
        // SAFETY: grid indices are a byte plus 3 bits at bits 8..11 (< 2048 =
        // `IQ1S_GRID.len()`); register-only operations otherwise.
        unsafe {
            let i = |l: usize| usize::from(c.idx[4 * k + l]);
            let g = grid64x4(&IQ1S_GRID, [i(0), i(1), i(2), i(3)]);
            let sk = _mm256_shuffle_epi8(c.delta, _mm256_set1_epi8(k as i8));
            let (m, s) = fold(g, sk);
            [m, s, scale_reg::<false>(c.scales, k)]
        }
    }

    #[inline(always)]
    unsafe fn d(p: *const u8) -> u16 {
        // SAFETY: reads bytes 0..2 at `p` (caller).
        unsafe { f16_bits(p) }
    }
}

/// IQ1_M (56 bytes: 32 low index bytes, 16 `qh` bytes of a nibble per group (three index high
/// bits, bit 3 the delta sign), 8 scale bytes: four u16 of 3-bit scales per 16 elements (`h`:
/// bits `3 (h % 4)` of word `h / 4`) and, in their top nibbles, the f16 `d`).
pub(crate) struct Iq1M;

impl IqGrid for Iq1M {
    const BB: usize = 56;
    const INNER: f32 = 0.125;
    const FINAL: f32 = 1.0;

    type Ctx = Iq1Ctx;

    #[inline(always)]
    unsafe fn prep(p: *const u8) -> Self::Ctx {
        // SAFETY: reads bytes 0..56 at `p` (caller); the stores fill the local index array.
        unsafe {
            let qh = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(32).cast()));
            // Group g's high bits: its qh byte times 2^(8 - 4 (g % 2)), masked to bits 8..11.
            let mul = _mm256_setr_epi16(
                256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16,
            );
            let mut idx = [0u16; 32];
            for h in 0..2 {
                let x = 8 * h as i8;
                #[rustfmt::skip]
                let pick = _mm256_setr_epi8(
                    x, -1, x, -1, x + 1, -1, x + 1, -1, x + 2, -1, x + 2, -1, x + 3, -1, x + 3, -1,
                    x + 4, -1, x + 4, -1, x + 5, -1, x + 5, -1, x + 6, -1, x + 6, -1, x + 7, -1, x + 7, -1,
                );
                let hb = _mm256_mullo_epi16(_mm256_shuffle_epi8(qh, pick), mul);
                let hb = _mm256_and_si256(hb, _mm256_set1_epi16(0x700));
                let lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(p.add(16 * h).cast()));
                _mm256_storeu_si256(idx.as_mut_ptr().add(16 * h).cast(), _mm256_or_si256(lo, hb));
            }
            // Scales: word h / 4 repeated, times 2^(13 - 3 (h % 4)), the top 3 bits.
            let scx = _mm_loadl_epi64(p.add(48).cast());
            let mul = _mm_setr_epi16(8192, 1024, 128, 16, 8192, 1024, 128, 16);
            let part = |pick: __m128i| {
                _mm_srli_epi16::<13>(_mm_mullo_epi16(_mm_shuffle_epi8(scx, pick), mul))
            };
            let a = part(_mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3));
            let b = part(_mm_setr_epi8(4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
            let ls = _mm_packus_epi16(a, b);
            let ls = _mm_add_epi8(_mm_add_epi8(ls, ls), _mm_set1_epi8(1));
            Iq1Ctx { idx, delta: qh, scales: _mm256_broadcastsi128_si256(ls) }
        }
    }

    #[inline(always)]
    unsafe fn part(_p: *const u8, c: &Self::Ctx, k: usize) -> [__m256i; 3] {
        // SAFETY: grid indices are a byte plus 3 bits at bits 8..11 (< 2048 =
        // `IQ1S_GRID.len()`); register-only operations otherwise.
        unsafe {
            let i = |l: usize| usize::from(c.idx[4 * k + l]);
            let g = grid64x4(&IQ1S_GRID, [i(0), i(1), i(2), i(3)]);
            // Delta signs: groups 4k, 4k + 1 test bits 3 and 7 of qh byte 2k (low lane),
            // groups 4k + 2, 4k + 3 those of byte 2k + 1 (high lane).
            #[rustfmt::skip]
            let tb = _mm256_setr_epi8(
                8, 8, 8, 8, 8, 8, 8, 8, -128, -128, -128, -128, -128, -128, -128, -128,
                8, 8, 8, 8, 8, 8, 8, 8, -128, -128, -128, -128, -128, -128, -128, -128,
            );
            let b = _mm256_setr_m128i(_mm_set1_epi8(2 * k as i8), _mm_set1_epi8(2 * k as i8 + 1));
            let x = _mm256_and_si256(_mm256_shuffle_epi8(c.delta, b), tb);
            let sk = _mm256_or_si256(_mm256_cmpeq_epi8(x, tb), _mm256_set1_epi8(1));
            let (m, s) = fold(g, sk);
            [m, s, scale_reg::<true>(c.scales, k)]
        }
    }

    #[inline(always)]
    unsafe fn d(p: *const u8) -> u16 {
        // SAFETY: reads bytes 48..56 at `p` (caller).
        unsafe {
            let w = |k: usize| f16_bits(p.add(48 + 2 * k));
            (w(0) >> 12) | ((w(1) >> 8) & 0x00F0) | ((w(2) >> 4) & 0x0F00) | (w(3) & 0xF000)
        }
    }
}
