//! ggml IQ2_XS: 256 weights in 74 bytes (2.3125 bpw).
//!
//! Layout (ggml `ggml-common.h` `block_iq2_xs`): `d` f16, `qs` `u16[32]`, `scales` `u8[8]`. Each
//! `qs` entry covers 8 weights: bits 0..9 index `iq2xs_grid`, bits 9..16 index `ksigns_iq2xs`.
//! `scales[ib]` holds two 4-bit scales for sub-block `ib` (32 weights): the low nibble for its
//! first 16 weights, the high nibble for the last 16.
//!
//! Decode (gguf-py `IQ2_XS.dequantize_blocks`, ggml `dequantize_row_iq2_xs`):
//! `db = d * (0.5 + ls) * 0.25` in f32, left to right; `y = db * grid[j] * sign_j`.

use half::f16;

use super::tables::{IQ2XS_GRID, KSIGNS_IQ2XS};
use super::{dot_grid, le16, put_grid, scale_d, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// ggml `block_iq2_xs`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq2Xs {
    /// Super-block scale.
    pub d: f16,
    /// Per 8 weights: 9-bit grid index, 7-bit sign index.
    pub qs: [u16; 32],
    /// Two 4-bit scales per 32 weights.
    pub scales: [u8; 8],
}
assert_block_size!(BlockIq2Xs, FormatId::Iq2Xs);

/// The per-format parts of IQ2_XS and IQ2_S, which share their scales, decode and dot product:
/// an f16 `d`, sixteen 4-bit scales in `scales[8]` (low nibble first) and 32 groups of 8
/// weights, each a grid entry and a sign byte.
pub(crate) trait Iq2Groups: Block {
    /// The stored super-block scale.
    fn d(&self) -> f16;
    /// The packed 4-bit scales.
    fn scale_bytes(&self) -> &[u8; 8];
    /// Grid entry and sign byte of the `g`-th group of 8 weights (0..32).
    fn group_at(&self, g: usize) -> (u64, u8);

    /// The 4-bit scale of the `h`-th group of 16 weights (0..16).
    #[inline]
    fn ls(&self, h: usize) -> u32 {
        u32::from((self.scale_bytes()[(h / 2) & 7] >> (4 * (h % 2))) & 0xf)
    }
}

impl Iq2Groups for BlockIq2Xs {
    fn d(&self) -> f16 {
        self.d
    }
    fn scale_bytes(&self) -> &[u8; 8] {
        &self.scales
    }
    #[inline]
    fn group_at(&self, g: usize) -> (u64, u8) {
        let q = le16(self.qs[g & 31]);
        (IQ2XS_GRID[usize::from(q & 511)], KSIGNS_IQ2XS[usize::from(q >> 9)])
    }
}

/// IQ2_XS / IQ2_S decode: `db = d * (0.5 + ls) * 0.25` in f32, left to right, per group of 16;
/// `y = db * grid[j] * sign_j`. NaN/inf `d` -> [`Error::NonFiniteScale`] at offset 0.
pub(crate) fn decode_groups<B: Iq2Groups>(b: &B, out: &mut [f32]) -> Result<()> {
    check_block_out::<B>(out)?;
    let d = scale_d(b.d(), B::FORMAT)?;
    for (h, o16) in out.chunks_exact_mut(16).enumerate() {
        let db = d * (0.5 + b.ls(h) as f32) * 0.25;
        for (k, o8) in o16.chunks_exact_mut(8).enumerate() {
            let (grid, signs) = b.group_at(2 * h + k);
            put_grid(o8, db, grid, signs, 0);
        }
    }
    Ok(())
}

/// IQ2_XS / IQ2_S reference dot product with Q8_K activations (ggml
/// `ggml_vec_dot_iq2_xs_q8_K_generic`, `ggml_vec_dot_iq2_s_q8_K_generic`).
///
/// Per block: `bsum = sum_h (2*ls_h + 1) * sum_j grid_j * sign_j * q8_j` over the 16 groups of
/// 16 in exact i32; `sumf += (f32(d) * d8) * (bsum as f32)` in block order; the result is
/// `0.125 * sumf`. Error bound: `c = 4`, `n` = number of blocks. NaN/inf `d` ->
/// [`Error::NonFiniteScale`] with its offset in `w`.
pub(crate) fn dot_groups<B: Iq2Groups>(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<B>(w).zip(a) {
        let d = scale_d(x.d(), B::FORMAT).map_err(|e: Error| e.at(off))? * y.d;
        let mut bsum = 0i32;
        for (h, q16) in y.qs.chunks_exact(16).enumerate() {
            let ls = (2 * x.ls(h) + 1) as i32;
            let mut sumi = 0i32;
            for (k, q8) in q16.chunks_exact(8).enumerate() {
                let (grid, signs) = x.group_at(2 * h + k);
                sumi += dot_grid(grid, signs, 0, q8);
            }
            bsum += ls * sumi;
        }
        sumf += d * bsum as f32;
    }
    Ok(0.125 * sumf)
}

impl Block for BlockIq2Xs {
    const FORMAT: FormatId = FormatId::Iq2Xs;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py (`decode_groups`); NaN/inf `d` -> [`Error::NonFiniteScale`] at
    /// offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        decode_groups(self, out)
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq2_xs_q8_K_generic`):
/// [`dot_groups`].
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    dot_groups::<BlockIq2Xs>(w, a)
}
