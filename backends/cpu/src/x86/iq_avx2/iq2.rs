//! The AVX2 decodes of IQ2_XXS, IQ2_XS and IQ2_S (layouts from ggml `block_iq2_xxs`,
//! `block_iq2_xs`, `block_iq2_s` and `dequantize_row_iq2_*` in ggml-quants.c, as in the core's
//! `format::ggml::iq`): per group of 8 elements an index into a grid of 8 magnitudes (ggml
//! `iq2xxs_grid`, `iq2xs_grid`, `iq2s_grid`: the core's tables), 8 sign bits (IQ2_XXS, IQ2_XS:
//! 7 stored, the eighth the parity, ggml `ksigns_iq2xs`), 4-bit scales `ls` used as `2 ls + 1`
//! and the reference's final factor 1/8. The arithmetic is the parent module's.

use std::arch::x86_64::*;

use lowbit_core::format::ggml::iq::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};

use super::{
    expand_signs, f16_bits, fields7, grid64x4, nibble_scales, spread_scales, top_nibble_scales,
    with_parity, Dec, IqGrid,
};

/// IQ2_XXS (66 bytes: `d` f16, then per sub-block of 32 a u32 of four 8-bit grid indices and
/// a u32 of four 7-bit sign fields and the 4-bit scale in bits 28..32).
pub(crate) struct Iq2Xxs;

impl IqGrid for Iq2Xxs {
    const BB: usize = 66;
    const INNER: f32 = 1.0;
    const FINAL: f32 = 0.125;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Dec {
        // SAFETY: reads bytes 0..66 at `p` (caller); grid indices are bytes (< 256 =
        // `IQ2XXS_GRID.len()`); register-only operations otherwise.
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
            let m = core::array::from_fn(|k| {
                let b = |l: usize| usize::from(*q.add(8 * k + l));
                grid64x4(&IQ2XXS_GRID, [b(0), b(1), b(2), b(3)])
            });
            Dec {
                m,
                s: expand_signs(with_parity(fields7(aux))),
                sc: spread_scales::<false>(top_nibble_scales(aux)),
                d: f16_bits(p),
            }
        }
    }
}

/// IQ2_XS (74 bytes: `d` f16, 32 u16 of a 9-bit grid index and a 7-bit sign field per group
/// of 8, 8 bytes of 4-bit scales per 16 elements).
pub(crate) struct Iq2Xs;

impl IqGrid for Iq2Xs {
    const BB: usize = 74;
    const INNER: f32 = 1.0;
    const FINAL: f32 = 0.125;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Dec {
        // SAFETY: reads bytes 0..74 at `p` (caller); grid indices are masked to 9 bits
        // (< 512 = `IQ2XS_GRID.len()`); the stores fill the local index array.
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
            let m = core::array::from_fn(|k| {
                let i = |l: usize| usize::from(idx[4 * k + l]);
                grid64x4(&IQ2XS_GRID, [i(0), i(1), i(2), i(3)])
            });
            Dec {
                m,
                s: expand_signs(with_parity(s7)),
                sc: spread_scales::<true>(nibble_scales(_mm_loadl_epi64(p.add(66).cast()))),
                d: f16_bits(p),
            }
        }
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

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Dec {
        // SAFETY: reads bytes 0..82 at `p` (caller); grid indices are a byte plus 2 bits at
        // bits 8..10 (< 1024 = `IQ2S_GRID.len()`); the stores fill the local index array.
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
            let m = core::array::from_fn(|k| {
                let i = |l: usize| usize::from(idx[4 * k + l]);
                grid64x4(&IQ2S_GRID, [i(0), i(1), i(2), i(3)])
            });
            Dec {
                m,
                s: expand_signs(_mm256_loadu_si256(p.add(34).cast())),
                sc: spread_scales::<true>(nibble_scales(_mm_loadl_epi64(p.add(74).cast()))),
                d: f16_bits(p),
            }
        }
    }
}
