//! ggml IQ2_S: 256 weights in 82 bytes (2.5625 bpw). (llama.cpp's IQ2_M file type stores
//! these blocks too.)
//!
//! Layout (ggml `ggml-common.h` `block_iq2_s`): `d` f16, `qs` `u8[64]`, `qh` `u8[8]`, `scales`
//! `u8[8]`. `qs[0..32]` are the low 8 bits of the `iq2s_grid` index of each group of 8 weights,
//! `qs[32..64]` the group's sign byte (bit `j` = weight `j` negative, no parity rule). For
//! sub-block `ib` (32 weights, groups `4ib + l`), bits `2l, 2l+1` of `qh[ib]` are index bits 8
//! and 9; `scales[ib]` holds the 4-bit scale of its first (low nibble) and last 16 weights.
//!
//! Decode (gguf-py `IQ2_S.dequantize_blocks`, ggml `dequantize_row_iq2_s`):
//! `db = d * (0.5 + ls) * 0.25` in f32, left to right; `y = db * grid[j] * sign_j`.

use half::f16;

use super::tables::IQ2S_GRID;
use super::{dot_grid, put_grid, scale_d, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// ggml `block_iq2_s`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq2S {
    /// Super-block scale.
    pub d: f16,
    /// 32 grid index low bytes, then 32 sign bytes.
    pub qs: [u8; 64],
    /// Grid index bits 8-9, 2 bits per group of 8.
    pub qh: [u8; 8],
    /// Two 4-bit scales per 32 weights.
    pub scales: [u8; 8],
}
assert_block_size!(BlockIq2S, FormatId::Iq2S);

impl BlockIq2S {
    /// Grid entry and sign byte of the `g`-th group of 8 weights (0..32).
    #[inline]
    fn group(&self, g: usize) -> (u64, u8) {
        let g = g & 31;
        let hi = (usize::from(self.qh[g / 4]) >> (2 * (g % 4))) & 3;
        (IQ2S_GRID[usize::from(self.qs[g]) | hi << 8], self.qs[32 + g])
    }

    /// The 4-bit scale of the `h`-th group of 16 weights (0..16).
    #[inline]
    fn ls(&self, h: usize) -> u32 {
        u32::from((self.scales[(h / 2) & 7] >> (4 * (h % 2))) & 0xf)
    }
}

impl Block for BlockIq2S {
    const FORMAT: FormatId = FormatId::Iq2S;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py; NaN/inf `d` -> [`Error::NonFiniteScale`] at offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = scale_d(self.d, Self::FORMAT)?;
        for (h, o16) in out.chunks_exact_mut(16).enumerate() {
            let db = d * (0.5 + self.ls(h) as f32) * 0.25;
            for (k, o8) in o16.chunks_exact_mut(8).enumerate() {
                let (grid, signs) = self.group(2 * h + k);
                put_grid(o8, db, grid, signs, 0);
            }
        }
        Ok(())
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq2_s_q8_K_generic`).
///
/// Per block: `bsum = sum_h (2*ls_h + 1) * sum_j grid_j * sign_j * q8_j` over the 16 groups of
/// 16 in exact i32; `sumf += (f32(d) * d8) * (bsum as f32)` in block order; the result is
/// `0.125 * sumf`. Error bound: `c = 4`, `n` = number of blocks.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<BlockIq2S>(w).zip(a) {
        let d = scale_d(x.d, FormatId::Iq2S).map_err(|e: Error| e.at(off))? * y.d;
        let mut bsum = 0i32;
        for (h, q16) in y.qs.chunks_exact(16).enumerate() {
            let ls = (2 * x.ls(h) + 1) as i32;
            let mut sumi = 0i32;
            for (k, q8) in q16.chunks_exact(8).enumerate() {
                let (grid, signs) = x.group(2 * h + k);
                sumi += dot_grid(grid, signs, 0, q8);
            }
            bsum += ls * sumi;
        }
        sumf += d * bsum as f32;
    }
    Ok(0.125 * sumf)
}
