//! ggml IQ3_XXS: 256 weights in 98 bytes (3.0625 bpw).
//!
//! Layout (ggml `ggml-common.h` `block_iq3_xxs`): `d` f16, `qs` `u8[96]`. `qs[0..64]` index
//! `iq3xxs_grid` (4 weights each). `qs[64..96]` are 8 little-endian u32, one per sub-block `ib`
//! of 32 weights: bits `7l..7l+7` index `ksigns_iq2xs` for its `l`-th group of 8 weights (grid
//! entries `qs[8ib + 2l]` and `qs[8ib + 2l + 1]`), bits 28..32 are the 4-bit scale `ls`.
//!
//! Decode (gguf-py `IQ3_XXS.dequantize_blocks`, ggml `dequantize_row_iq3_xxs`):
//! `db = d * (0.5 + ls) * 0.5` in f32, left to right; `y = db * grid[j] * sign_j`.

use half::f16;

use super::tables::{IQ3XXS_GRID, KSIGNS_IQ2XS};
use super::{dot_grid, put_grid, scale_d, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// ggml `block_iq3_xxs`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq3Xxs {
    /// Super-block scale.
    pub d: f16,
    /// 64 grid indices, then 8 u32 (4 × 7 sign bits and a 4-bit scale each).
    pub qs: [u8; 96],
}
assert_block_size!(BlockIq3Xxs, FormatId::Iq3Xxs);

impl BlockIq3Xxs {
    /// The signs-and-scale word of sub-block `ib` (0..8).
    #[inline]
    fn aux(&self, ib: usize) -> u32 {
        let o = 64 + 4 * (ib & 7);
        u32::from_le_bytes([self.qs[o], self.qs[o + 1], self.qs[o + 2], self.qs[o + 3]])
    }

    /// The two grid entries (as u64, 4 bytes used) of group `l` (0..4) of sub-block `ib`.
    #[inline]
    fn grids(&self, ib: usize, l: usize) -> (u64, u64) {
        let o = (8 * ib + 2 * l) & 63;
        (
            u64::from(IQ3XXS_GRID[usize::from(self.qs[o])]),
            u64::from(IQ3XXS_GRID[usize::from(self.qs[o + 1])]),
        )
    }
}

impl Block for BlockIq3Xxs {
    const FORMAT: FormatId = FormatId::Iq3Xxs;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py; NaN/inf `d` -> [`Error::NonFiniteScale`] at offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = scale_d(self.d, Self::FORMAT)?;
        for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
            let aux = self.aux(ib);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                let (g1, g2) = self.grids(ib, l);
                let (lo, hi) = o8.split_at_mut(4);
                put_grid(lo, db, g1, signs, 0);
                put_grid(hi, db, g2, signs, 4);
            }
        }
        Ok(())
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq3_xxs_q8_K_generic`).
///
/// Per block: `bsum = sum_ib (2*ls + 1) * sum_j grid_j * sign_j * q8_j` in exact i32;
/// `sumf += (f32(d) * d8) * (bsum as f32)` in block order; the result is `0.25 * sumf`.
/// Error bound: `c = 4`, `n` = number of blocks.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<BlockIq3Xxs>(w).zip(a) {
        let d = scale_d(x.d, FormatId::Iq3Xxs).map_err(|e: Error| e.at(off))? * y.d;
        let mut bsum = 0i32;
        for (ib, q32) in y.qs.chunks_exact(32).enumerate() {
            let aux = x.aux(ib);
            let ls = (2 * (aux >> 28) + 1) as i32;
            let mut sumi = 0i32;
            for (l, q8) in q32.chunks_exact(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                let (g1, g2) = x.grids(ib, l);
                let (lo, hi) = q8.split_at(4);
                sumi += dot_grid(g1, signs, 0, lo) + dot_grid(g2, signs, 4, hi);
            }
            bsum += sumi * ls;
        }
        sumf += d * bsum as f32;
    }
    Ok(0.25 * sumf)
}
