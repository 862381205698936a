//! ggml IQ1_S: 256 weights in 50 bytes (1.5625 bpw).
//!
//! Layout (ggml `ggml-common.h` `block_iq1_s`): `d` f16, `qs` `u8[32]`, `qh` `u16[8]`. Group `g`
//! of 8 weights (sub-block `ib = g / 4`, `l = g % 4`) uses `iq1s_grid` entry
//! `qs[g] | ((qh[ib] >> 3l) & 7) << 8` (int8 values in {-1, 0, 1}). `qh[ib]` bits 12..15 hold
//! the 3-bit scale `ls` of the 32-weight sub-block, bit 15 the sign of its shift `delta`
//! (`IQ1S_DELTA` = 0.125; bit set = -0.125).
//!
//! Decode (gguf-py `IQ1_S.dequantize_blocks`, ggml `dequantize_row_iq1_s`):
//! `dl = d * (2*ls + 1)` (integer factor, exact conversion); `y = dl * (grid[j] + delta)` in f32.

use half::f16;

use super::tables::{IQ1S_DELTA, IQ1S_GRID};
use super::{byte_of, le16, scale_d, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// ggml `block_iq1_s`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq1S {
    /// Super-block scale.
    pub d: f16,
    /// Grid index low bytes, one per 8 weights.
    pub qs: [u8; 32],
    /// Per 32 weights: 4 × 3 grid index high bits, 3-bit scale, delta sign bit.
    pub qh: [u16; 8],
}
assert_block_size!(BlockIq1S, FormatId::Iq1S);

impl BlockIq1S {
    /// Grid entry of group `l` (0..4) of sub-block `ib` (0..8), given `qh[ib]`.
    #[inline]
    fn grid(&self, ib: usize, l: usize, qh: u16) -> u64 {
        let hi = usize::from((qh >> (3 * l)) & 7);
        IQ1S_GRID[usize::from(self.qs[(4 * ib + l) & 31]) | hi << 8]
    }
}

impl Block for BlockIq1S {
    const FORMAT: FormatId = FormatId::Iq1S;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py; NaN/inf `d` -> [`Error::NonFiniteScale`] at offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = scale_d(self.d, Self::FORMAT)?;
        for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
            let qh = le16(self.qh[ib & 7]);
            let dl = d * f32::from(2 * ((qh >> 12) & 7) + 1);
            let delta = if qh & 0x8000 != 0 { -IQ1S_DELTA } else { IQ1S_DELTA };
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let grid = self.grid(ib, l, qh);
                for (j, o) in o8.iter_mut().enumerate() {
                    *o = dl * (f32::from(byte_of(grid, j) as i8) + delta);
                }
            }
        }
        Ok(())
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq1_s_q8_K_generic`).
///
/// Per block, in exact i32: `sumi = sum_ib ls_ib * sum_j grid_j * q8_j` and
/// `sumi1 = sum_ib ls_ib * sign(delta_ib) * (bsums[2ib] + bsums[2ib+1])`, with
/// `ls = 2*scale + 1`. Like ggml, the delta term uses the activation block's `bsums` (which must
/// be the sums of each 16 quants, as Q8_K defines them). Then
/// `sumf += (f32(d) * d8) * (sumi as f32 + 0.125 * sumi1 as f32)` in block order.
/// Error bound: `c = 4`, `n` = number of blocks.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<BlockIq1S>(w).zip(a) {
        let d = scale_d(x.d, FormatId::Iq1S).map_err(|e: Error| e.at(off))?;
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for (ib, q32) in y.qs.chunks_exact(32).enumerate() {
            let qh = le16(x.qh[ib & 7]);
            let ls = i32::from(2 * ((qh >> 12) & 7) + 1);
            let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
            let mut lsum = 0i32;
            for (l, q8) in q32.chunks_exact(8).enumerate() {
                let grid = x.grid(ib, l, qh);
                for (j, &q) in q8.iter().enumerate() {
                    lsum += i32::from(q) * i32::from(byte_of(grid, j) as i8);
                }
            }
            sumi += ls * lsum;
            let bs = i32::from(y.bsums[(2 * ib) & 15]) + i32::from(y.bsums[(2 * ib + 1) & 15]);
            sumi1 += ls * delta * bs;
        }
        sumf += d * y.d * (sumi as f32 + IQ1S_DELTA * sumi1 as f32);
    }
    Ok(sumf)
}
