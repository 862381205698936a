//! The AVX2 decodes of IQ3_XXS and IQ3_S (layouts from ggml `block_iq3_xxs`, `block_iq3_s`
//! and `dequantize_row_iq3_*` in ggml-quants.c, as in the core's `format::ggml::iq`): per
//! group of 4 elements an index into a grid of 4 magnitudes (ggml `iq3xxs_grid`, `iq3s_grid`:
//! the core's tables), 8 sign bits per 8 elements (IQ3_XXS: 7 stored, the eighth the parity,
//! ggml `ksigns_iq2xs`), 4-bit scales per 32 elements used as `2 ls + 1`, and the reference's
//! final factor (IQ3_XXS 1/4, IQ3_S 1). The arithmetic is the parent module's.

use std::arch::x86_64::*;

use lowbit_core::format::ggml::iq::tables::{IQ3S_GRID, IQ3XXS_GRID};

use super::{
    f16_bits, fields7, grid32x8, nibble_scales, scale_reg, sign_halves, sign_reg,
    top_nibble_scales, with_parity, IqGrid,
};

/// What an IQ3 sub-block's registers are made from: the sign halves, the scale bytes in both
/// lanes and (IQ3_S) the 64 grid indices.
pub(crate) struct Iq3Ctx<const N: usize> {
    signs: [__m256i; 2],
    scales: __m256i,
    idx: [u16; N],
}

/// IQ3_XXS (98 bytes: `d` f16, 64 grid index bytes, then per sub-block of 32 a u32 of four
/// 7-bit sign fields and the 4-bit scale in bits 28..32).
pub(crate) struct Iq3Xxs;

impl IqGrid for Iq3Xxs {
    const BB: usize = 98;
    const INNER: f32 = 1.0;
    const FINAL: f32 = 0.25;

    type Ctx = Iq3Ctx<0>;

    #[inline(always)]
    unsafe fn prep(p: *const u8) -> Self::Ctx {
        // SAFETY: reads bytes 66..98 at `p` (caller); register-only operations otherwise.
        unsafe {
            let aux = _mm256_loadu_si256(p.add(66).cast());
            Iq3Ctx {
                signs: sign_halves(with_parity(fields7(aux))),
                scales: _mm256_broadcastsi128_si256(top_nibble_scales(aux)),
                idx: [],
            }
        }
    }

    #[inline(always)]
    unsafe fn part(p: *const u8, c: &Self::Ctx, k: usize) -> [__m256i; 3] {
        // SAFETY: reads bytes 2 + 8k .. 2 + 8k + 8 at `p` (caller, k < 8); grid indices are
        // bytes (< 256 = `IQ3XXS_GRID.len()`); register-only operations otherwise.
        unsafe {
            let m = grid32x8(&IQ3XXS_GRID, |l| usize::from(*p.add(2 + 8 * k + l)));
            [m, sign_reg(&c.signs, k), scale_reg::<false>(c.scales, k)]
        }
    }

    #[inline(always)]
    unsafe fn d(p: *const u8) -> u16 {
        // SAFETY: reads bytes 0..2 at `p` (caller).
        unsafe { f16_bits(p) }
    }
}

/// IQ3_S (110 bytes: `d` f16, 64 low index bytes, 8 bytes of index bit 8 (index `i`: bit
/// `i % 8` of byte `i / 8`), 32 sign bytes, 4 bytes of 4-bit scales per 32 elements).
pub(crate) struct Iq3S;

impl IqGrid for Iq3S {
    const BB: usize = 110;
    const INNER: f32 = 1.0;
    const FINAL: f32 = 1.0;

    type Ctx = Iq3Ctx<64>;

    #[inline(always)]
    unsafe fn prep(p: *const u8) -> Self::Ctx {
        // SAFETY: reads bytes 2..110 at `p` (caller); the stores fill the local index array.
        unsafe {
            let qh = _mm256_broadcastq_epi64(_mm_loadl_epi64(p.add(66).cast()));
            // Index i's bit 8: its qh byte times 2^(8 - i % 8), masked to bit 8.
            let mul =
                _mm256_setr_epi16(256, 128, 64, 32, 16, 8, 4, 2, 256, 128, 64, 32, 16, 8, 4, 2);
            let mut idx = [0u16; 64];
            for h in 0..4 {
                let x = 2 * h as i8;
                #[rustfmt::skip]
                let pick = _mm256_setr_epi8(
                    x, -1, x, -1, x, -1, x, -1, x, -1, x, -1, x, -1, x, -1,
                    x + 1, -1, x + 1, -1, x + 1, -1, x + 1, -1, x + 1, -1, x + 1, -1, x + 1, -1, x + 1, -1,
                );
                let hb = _mm256_mullo_epi16(_mm256_shuffle_epi8(qh, pick), mul);
                let lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(p.add(2 + 16 * h).cast()));
                let v = _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi16(0x100)));
                _mm256_storeu_si256(idx.as_mut_ptr().add(16 * h).cast(), v);
            }
            let sc = _mm_cvtsi32_si128(std::ptr::read_unaligned(p.add(106).cast::<i32>()));
            Iq3Ctx {
                signs: sign_halves(_mm256_loadu_si256(p.add(74).cast())),
                scales: _mm256_broadcastsi128_si256(nibble_scales(sc)),
                idx,
            }
        }
    }

    #[inline(always)]
    unsafe fn part(_p: *const u8, c: &Self::Ctx, k: usize) -> [__m256i; 3] {
        // SAFETY: grid indices are a byte plus bit 8 (< 512 = `IQ3S_GRID.len()`);
        // register-only operations otherwise.
        unsafe {
            let m = grid32x8(&IQ3S_GRID, |l| usize::from(c.idx[8 * k + l]));
            [m, sign_reg(&c.signs, k), scale_reg::<false>(c.scales, k)]
        }
    }

    #[inline(always)]
    unsafe fn d(p: *const u8) -> u16 {
        // SAFETY: reads bytes 0..2 at `p` (caller).
        unsafe { f16_bits(p) }
    }
}
