//! The AVX2 decodes of IQ2_XXS, IQ2_XS and IQ2_S (layouts from ggml `block_iq2_xxs`,
//! `block_iq2_xs`, `block_iq2_s` and `dequantize_row_iq2_*` in ggml-quants.c, as in the core's
//! `format::ggml::iq`): per group of 8 elements an index into a grid of 8 magnitudes (ggml
//! `iq2xxs_grid`, `iq2xs_grid`, `iq2s_grid`: the core's tables), 8 sign bits (IQ2_XXS, IQ2_XS:
//! 7 stored, the eighth the parity, ggml `ksigns_iq2xs`), 4-bit scales `ls` used as `2 ls + 1`
//! and the reference's final factor 1/8. The arithmetic is the parent module's.

use std::arch::x86_64::*;

use lowbit_core::format::ggml::iq::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};

use super::{
    f16_bits, fields7, grid64x4, nibble_scales, scale_reg, sign_halves, sign_reg,
    top_nibble_scales, with_parity, IqGrid,
};

/// What an IQ2 sub-block's registers are made from: the sign halves, the scale bytes in both
/// lanes and (IQ2_XS, IQ2_S) the 32 grid indices.
pub(crate) struct Iq2Ctx<const N: usize> {
    signs: [__m256i; 2],
    scales: __m256i,
    idx: [u16; N],
}

/// IQ2_XXS (66 bytes: `d` f16, then per sub-block of 32 a u32 of four 8-bit grid indices and
/// a u32 of four 7-bit sign fields and the 4-bit scale in bits 28..32).
pub(crate) struct Iq2Xxs;

impl IqGrid for Iq2Xxs {
    const BB: usize = 66;
    const INNER: f32 = 1.0;
    const FINAL: f32 = 0.125;

    type Ctx = Iq2Ctx<0>;

    #[inline(always)]
    unsafe fn prep(p: *const u8) -> Self::Ctx {
        // SAFETY: reads bytes 2..66 at `p` (caller); register-only operations otherwise.
        unsafe {
            let q = p.add(2);
            let lo = _mm256_loadu_si256(q.cast());
            let hi = _mm256_loadu_si256(q.add(32).cast());
            // The odd dwords: sub-block k's signs and scale.
            let odd = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
            let aux = _mm256_blend_epi32::<0xF0>(
                _mm256_permutevar8x32_epi32(lo, odd),
                _mm256_permutevar8x32_epi32(hi, odd),
            );
            Iq2Ctx {
                signs: sign_halves(with_parity(fields7(aux))),
                scales: _mm256_broadcastsi128_si256(top_nibble_scales(aux)),
                idx: [],
            }
        }
    }

    #[inline(always)]
    unsafe fn part(p: *const u8, c: &Self::Ctx, k: usize) -> [__m256i; 3] {
        // SAFETY: reads bytes 2 + 8k .. 2 + 8k + 4 at `p` (caller, k < 8); grid indices are
        // bytes (< 256 = `IQ2XXS_GRID.len()`); register-only operations otherwise.
        unsafe {
            let b = |l: usize| usize::from(*p.add(2 + 8 * k + l));
            let m = grid64x4(&IQ2XXS_GRID, [b(0), b(1), b(2), b(3)]);
            [m, sign_reg(&c.signs, k), scale_reg::<false>(c.scales, k)]
        }
    }

    #[inline(always)]
    unsafe fn d(p: *const u8) -> u16 {
        // SAFETY: reads bytes 0..2 at `p` (caller).
        unsafe { f16_bits(p) }
    }
}

/// IQ2_XS (74 bytes: `d` f16, 32 u16 of a 9-bit grid index and a 7-bit sign field per group
/// of 8, 8 bytes of 4-bit scales per 16 elements).
pub(crate) struct Iq2Xs;

impl IqGrid for Iq2Xs {
    const BB: usize = 74;
    const INNER: f32 = 1.0;
    const FINAL: f32 = 0.125;

    type Ctx = Iq2Ctx<32>;

    #[inline(always)]
    unsafe fn prep(p: *const u8) -> Self::Ctx {
        // SAFETY: reads bytes 2..74 at `p` (caller); the stores fill the local index array.
        unsafe {
            let q = p.add(2);
            let x0 = _mm256_loadu_si256(q.cast());
            let x1 = _mm256_loadu_si256(q.add(32).cast());
            let s7 = _mm256_permute4x64_epi64::<0xD8>(_mm256_packus_epi16(
                _mm256_srli_epi16::<9>(x0),
                _mm256_srli_epi16::<9>(x1),
            ));
            let mask = _mm256_set1_epi16(511);
            let mut idx = [0u16; 32];
            _mm256_storeu_si256(idx.as_mut_ptr().cast(), _mm256_and_si256(x0, mask));
            _mm256_storeu_si256(idx.as_mut_ptr().add(16).cast(), _mm256_and_si256(x1, mask));
            let sc = nibble_scales(_mm_loadl_epi64(p.add(66).cast()));
            Iq2Ctx {
                signs: sign_halves(with_parity(s7)),
                scales: _mm256_broadcastsi128_si256(sc),
                idx,
            }
        }
    }

    #[inline(always)]
    unsafe fn part(_p: *const u8, c: &Self::Ctx, k: usize) -> [__m256i; 3] {
        // SAFETY: grid indices are masked to 9 bits (< 512 = `IQ2XS_GRID.len()`);
        // register-only operations otherwise.
        unsafe {
            let i = |l: usize| usize::from(c.idx[4 * k + l]);
            let m = grid64x4(&IQ2XS_GRID, [i(0), i(1), i(2), i(3)]);
            [m, sign_reg(&c.signs, k), scale_reg::<true>(c.scales, k)]
        }
    }

    #[inline(always)]
    unsafe fn d(p: *const u8) -> u16 {
        // SAFETY: reads bytes 0..2 at `p` (caller).
        unsafe { f16_bits(p) }
    }
}

/// IQ2_S (82 bytes: `d` f16, 32 low index bytes, 32 sign bytes, 8 bytes of 2-bit index high
/// parts (group `g`: bits `2 (g % 4)` of byte `g / 4`), 8 bytes of 4-bit scales per 16
/// elements).
pub(crate) struct Iq2S;

impl IqGrid for Iq2S {
    const BB: usize = 82;
    const INNER: f32 = 1.0;
    const FINAL: f32 = 0.125;

    type Ctx = Iq2Ctx<32>;

    #[inline(always)]
    unsafe fn prep(p: *const u8) -> Self::Ctx {
        // SAFETY: reads bytes 2..82 at `p` (caller); the stores fill the local index array.
        unsafe {
            let qh = _mm256_broadcastq_epi64(_mm_loadl_epi64(p.add(66).cast()));
            // Group g's high bits moved to bits 8..10 of word g: its qh byte times
            // 2^(8 - 2 (g % 4)), masked.
            let mul =
                _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
            let mut idx = [0u16; 32];
            for h in 0..2 {
                let x = 4 * h as i8;
                #[rustfmt::skip]
                let pick = _mm256_setr_epi8(
                    x, -1, x, -1, x, -1, x, -1, x + 1, -1, x + 1, -1, x + 1, -1, x + 1, -1,
                    x + 2, -1, x + 2, -1, x + 2, -1, x + 2, -1, x + 3, -1, x + 3, -1, x + 3, -1, x + 3, -1,
                );
                let hb = _mm256_mullo_epi16(_mm256_shuffle_epi8(qh, pick), mul);
                let lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(p.add(2 + 16 * h).cast()));
                let v = _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi16(0x300)));
                _mm256_storeu_si256(idx.as_mut_ptr().add(16 * h).cast(), v);
            }
            let sc = nibble_scales(_mm_loadl_epi64(p.add(74).cast()));
            Iq2Ctx {
                signs: sign_halves(_mm256_loadu_si256(p.add(34).cast())),
                scales: _mm256_broadcastsi128_si256(sc),
                idx,
            }
        }
    }

    #[inline(always)]
    unsafe fn part(_p: *const u8, c: &Self::Ctx, k: usize) -> [__m256i; 3] {
        // SAFETY: grid indices are a byte plus 2 bits at bits 8..10 (< 1024 =
        // `IQ2S_GRID.len()`); register-only operations otherwise.
        unsafe {
            let i = |l: usize| usize::from(c.idx[4 * k + l]);
            let m = grid64x4(&IQ2S_GRID, [i(0), i(1), i(2), i(3)]);
            [m, sign_reg(&c.signs, k), scale_reg::<true>(c.scales, k)]
        }
    }

    #[inline(always)]
    unsafe fn d(p: *const u8) -> u16 {
        // SAFETY: reads bytes 0..2 at `p` (caller).
        unsafe { f16_bits(p) }
    }
}
