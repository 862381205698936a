//! ggml IQ2_XXS: 256 weights in 66 bytes (2.0625 bpw).
//!
//! Layout (ggml `ggml-common.h` `block_iq2_xxs`): `d` f16, `qs` `u16[32]`. Each 32-weight
//! sub-block `ib` owns 8 bytes `qs[4ib..4ib+4]`, read as two u32: `a0` = four `iq2xxs_grid`
//! indices (one per 8 weights, byte `l`), `a1` = four 7-bit sign indices into `ksigns_iq2xs`
//! (bits `7l..7l+7`) and a 4-bit scale `ls = a1 >> 28`.
//!
//! Decode (gguf-py `IQ2_XXS.dequantize_blocks`, ggml `dequantize_row_iq2_xxs`):
//! `db = d * (0.5 + ls) * 0.25` in f32, left to right; `y = db * grid[j] * sign_j`.

use half::f16;

use super::tables::{IQ2XXS_GRID, KSIGNS_IQ2XS};
use super::{dot_grid, le16, put_grid, scale_d, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// ggml `block_iq2_xxs`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq2Xxs {
    /// Super-block scale.
    pub d: f16,
    /// Per 32 weights: 4 grid index bytes, then 4 × 7 sign bits and a 4-bit scale.
    pub qs: [u16; 32],
}
assert_block_size!(BlockIq2Xxs, FormatId::Iq2Xxs);

impl BlockIq2Xxs {
    /// The two u32 words of sub-block `ib` (0..8): grid indices, signs + scale.
    #[inline]
    fn aux(&self, ib: usize) -> (u32, u32) {
        let q = |k: usize| u32::from(le16(self.qs[(4 * ib + k) & 31]));
        (q(0) | q(1) << 16, q(2) | q(3) << 16)
    }
}

impl Block for BlockIq2Xxs {
    const FORMAT: FormatId = FormatId::Iq2Xxs;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py; NaN/inf `d` -> [`Error::NonFiniteScale`] at offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = scale_d(self.d, Self::FORMAT)?;
        for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
            let (a0, a1) = self.aux(ib);
            let db = d * (0.5 + (a1 >> 28) as f32) * 0.25;
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let grid = IQ2XXS_GRID[((a0 >> (8 * l)) & 0xff) as usize];
                let signs = KSIGNS_IQ2XS[((a1 >> (7 * l)) & 127) as usize];
                put_grid(o8, db, grid, signs, 0);
            }
        }
        Ok(())
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq2_xxs_q8_K_generic`).
///
/// Per block: `bsum = sum_ib (2*ls + 1) * sum_j grid_j * sign_j * q8_j` in exact i32;
/// `sumf += (f32(d) * d8) * (bsum as f32)` in block order; the result is `0.125 * sumf`.
/// Error bound against the exact sum of the decoded products: `c = 4` with `n` = number of
/// blocks (one rounding each for `d * d8`, `bsum as f32`, the product and the running sum).
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<BlockIq2Xxs>(w).zip(a) {
        let d = scale_d(x.d, FormatId::Iq2Xxs).map_err(|e: Error| e.at(off))? * y.d;
        let mut bsum = 0i32;
        for (ib, q32) in y.qs.chunks_exact(32).enumerate() {
            let (a0, a1) = x.aux(ib);
            let ls = (2 * (a1 >> 28) + 1) as i32;
            let mut sumi = 0i32;
            for (l, q8) in q32.chunks_exact(8).enumerate() {
                let grid = IQ2XXS_GRID[((a0 >> (8 * l)) & 0xff) as usize];
                let signs = KSIGNS_IQ2XS[((a1 >> (7 * l)) & 127) as usize];
                sumi += dot_grid(grid, signs, 0, q8);
            }
            bsum += sumi * ls;
        }
        sumf += d * bsum as f32;
    }
    Ok(0.125 * sumf)
}
