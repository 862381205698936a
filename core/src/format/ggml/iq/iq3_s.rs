//! ggml IQ3_S: 256 weights in 110 bytes (3.4375 bpw).
//!
//! Layout (ggml `ggml-common.h` `block_iq3_s`): `d` f16, `qs` `u8[64]`, `qh` `u8[8]`, `signs`
//! `u8[32]`, `scales` `u8[4]`. Grid entry `i` (0..64, 4 weights) has index
//! `qs[i] | ((qh[i / 8] >> (i % 8)) & 1) << 8` into `iq3s_grid`. `signs[g]` is the sign byte of
//! group `g` of 8 weights (bit `j` = weight `j` negative). `scales[s]` holds the 4-bit scales of
//! sub-blocks `2s` (low nibble) and `2s + 1` (high nibble), 32 weights each.
//!
//! Decode (gguf-py `IQ3_S.dequantize_blocks`, ggml `dequantize_row_iq3_s`):
//! `db = d * (1 + 2*ls)` in f32 (the integer factor is exact); `y = db * grid[j] * sign_j`.

use half::f16;

use super::tables::IQ3S_GRID;
use super::{dot_grid, put_grid, scale_d, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// ggml `block_iq3_s`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq3S {
    /// Super-block scale.
    pub d: f16,
    /// Grid index low bytes.
    pub qs: [u8; 64],
    /// Grid index bit 8, one bit per grid entry.
    pub qh: [u8; 8],
    /// One sign byte per 8 weights.
    pub signs: [u8; 32],
    /// Two 4-bit scales per 64 weights.
    pub scales: [u8; 4],
}
assert_block_size!(BlockIq3S, FormatId::Iq3S);

impl BlockIq3S {
    /// Grid entry `i` (0..64) as u64 (4 bytes used).
    #[inline]
    fn grid(&self, i: usize) -> u64 {
        let i = i & 63;
        let hi = (usize::from(self.qh[i / 8]) >> (i % 8)) & 1;
        u64::from(IQ3S_GRID[usize::from(self.qs[i]) | hi << 8])
    }

    /// The 4-bit scale of sub-block `ib` (0..8).
    #[inline]
    fn ls(&self, ib: usize) -> u32 {
        u32::from((self.scales[(ib / 2) & 3] >> (4 * (ib % 2))) & 0xf)
    }
}

impl Block for BlockIq3S {
    const FORMAT: FormatId = FormatId::Iq3S;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py; NaN/inf `d` -> [`Error::NonFiniteScale`] at offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = scale_d(self.d, Self::FORMAT)?;
        for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
            let db = d * (1 + 2 * self.ls(ib)) as f32;
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let g = 4 * ib + l;
                let signs = self.signs[g & 31];
                let (lo, hi) = o8.split_at_mut(4);
                put_grid(lo, db, self.grid(2 * g), signs, 0);
                put_grid(hi, db, self.grid(2 * g + 1), signs, 4);
            }
        }
        Ok(())
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq3_s_q8_K_generic`).
///
/// Per block: `bsum = sum_ib (2*ls + 1) * sum_j grid_j * sign_j * q8_j` in exact i32;
/// `sumf += (f32(d) * d8) * (bsum as f32)` in block order; no final factor.
/// Error bound: `c = 4`, `n` = number of blocks.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<BlockIq3S>(w).zip(a) {
        let d = scale_d(x.d, FormatId::Iq3S).map_err(|e: Error| e.at(off))? * y.d;
        let mut bsum = 0i32;
        for (ib, q32) in y.qs.chunks_exact(32).enumerate() {
            let ls = (2 * x.ls(ib) + 1) as i32;
            let mut sumi = 0i32;
            for (l, q8) in q32.chunks_exact(8).enumerate() {
                let g = 4 * ib + l;
                let signs = x.signs[g & 31];
                let (lo, hi) = q8.split_at(4);
                sumi += dot_grid(x.grid(2 * g), signs, 0, lo)
                    + dot_grid(x.grid(2 * g + 1), signs, 4, hi);
            }
            bsum += sumi * ls;
        }
        sumf += d * bsum as f32;
    }
    Ok(sumf)
}
