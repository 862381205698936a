//! ggml IQ1_M: 256 weights in 56 bytes (1.75 bpw). The only IQ block without a plain `d`
//! field: its f16 super-block scale is spread over the top nibbles of the four u16 `scales`.
//!
//! Layout (ggml `ggml-common.h` `block_iq1_m`): `qs` `u8[32]`, `qh` `u8[16]`, `scales` `u8[8]`.
//! Group `g` of 8 weights uses `iq1s_grid` entry `qs[g] | (n & 7) << 8` where `n` is nibble
//! `g % 2` of `qh[g / 2]`; bit 3 of that nibble is the sign of the group's shift `delta`
//! (`IQ1M_DELTA` = 0.125; set = -0.125). With `sc[k]` the little-endian u16 `scales[2k..2k+2]`,
//! group of 16 weights `h` (sub-block `ib = h / 2`) has 3-bit scale
//! `(sc[ib / 2] >> (6*(ib % 2) + 3*(h % 2))) & 7`, and the scale's f16 bits are
//! `sc[0] >> 12 | (sc[1] >> 8) & 0xf0 | (sc[2] >> 4) & 0xf00 | sc[3] & 0xf000`
//! (ggml `iq1m_scale_t`).
//!
//! Decode (gguf-py `IQ1_M.dequantize_blocks`, ggml `dequantize_row_iq1_m`):
//! `dl = d * (2*ls + 1)` (integer factor, exact conversion); `y = dl * (grid[j] + delta)` in f32.
//! A NaN/inf assembled scale -> [`Error::NonFiniteScale`] naming `scales` at offset 48.

use super::tables::{IQ1M_DELTA, IQ1S_GRID};
use super::{byte_of, scale_f32, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// Byte offset of `scales` in the block (the field that holds the f16 scale).
const SCALES_OFFSET: usize = 48;

/// ggml `block_iq1_m`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq1M {
    /// Grid index low bytes, one per 8 weights.
    pub qs: [u8; 32],
    /// One nibble per 8 weights: 3 grid index high bits, delta sign bit.
    pub qh: [u8; 16],
    /// Four little-endian u16: 3-bit scales (4 per u16, low 12 bits) and the f16 scale's nibbles.
    pub scales: [u8; 8],
}
assert_block_size!(BlockIq1M, FormatId::Iq1M);

impl BlockIq1M {
    /// The four scale words.
    #[inline]
    fn sc(&self) -> [u16; 4] {
        let s = &self.scales;
        [
            u16::from_le_bytes([s[0], s[1]]),
            u16::from_le_bytes([s[2], s[3]]),
            u16::from_le_bytes([s[4], s[5]]),
            u16::from_le_bytes([s[6], s[7]]),
        ]
    }

    /// The super-block scale as f32, checked finite.
    #[inline]
    fn d(&self, sc: &[u16; 4]) -> Result<f32> {
        let bits =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        scale_f32(bits, FormatId::Iq1M, "scales", SCALES_OFFSET)
    }

    /// `2*ls + 1` for group of 16 weights `h` (0..16).
    #[inline]
    fn ls(sc: &[u16; 4], h: usize) -> u16 {
        let ib = (h / 2) & 7;
        2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * (h % 2))) & 7) + 1
    }

    /// Grid entry and "delta negative" flag of group `g` of 8 weights (0..32).
    #[inline]
    fn group(&self, g: usize) -> (u64, bool) {
        let g = g & 31;
        let n = (self.qh[g / 2] >> (4 * (g % 2))) & 0xf;
        (IQ1S_GRID[usize::from(self.qs[g]) | usize::from(n & 7) << 8], n & 8 != 0)
    }
}

impl Block for BlockIq1M {
    const FORMAT: FormatId = FormatId::Iq1M;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py; a NaN/inf scale -> [`Error::NonFiniteScale`] at offset 48.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let sc = self.sc();
        let d = self.d(&sc)?;
        for (h, o16) in out.chunks_exact_mut(16).enumerate() {
            let dl = d * f32::from(Self::ls(&sc, h));
            for (k, o8) in o16.chunks_exact_mut(8).enumerate() {
                let (grid, neg) = self.group(2 * h + k);
                let delta = if neg { -IQ1M_DELTA } else { IQ1M_DELTA };
                for (j, o) in o8.iter_mut().enumerate() {
                    *o = dl * (f32::from(byte_of(grid, j) as i8) + delta);
                }
            }
        }
        Ok(())
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq1_m_q8_K_generic`).
///
/// Per block, in exact i32: `sumi1 = sum_h ls_h * sum_j grid_j * q8_j` and
/// `sumi2 = sum_h ls_h * sum_g sign(delta_g) * sum_j q8_j` (the quants themselves, not
/// `bsums`), with `ls = 2*scale + 1` per 16 weights. Then
/// `sumf += (f32(d) * d8) * (sumi1 as f32 + 0.125 * sumi2 as f32)` in block order.
/// Error bound: `c = 4`, `n` = number of blocks.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<BlockIq1M>(w).zip(a) {
        let sc = x.sc();
        let d = x.d(&sc).map_err(|e: Error| e.at(off))?;
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for (h, q16) in y.qs.chunks_exact(16).enumerate() {
            let ls = i32::from(BlockIq1M::ls(&sc, h));
            let (mut s1, mut s2) = (0i32, 0i32);
            for (k, q8) in q16.chunks_exact(8).enumerate() {
                let (grid, neg) = x.group(2 * h + k);
                let mut lsum1 = 0i32;
                let mut lsum2 = 0i32;
                for (j, &q) in q8.iter().enumerate() {
                    lsum1 += i32::from(q) * i32::from(byte_of(grid, j) as i8);
                    lsum2 += i32::from(q);
                }
                s1 += lsum1;
                s2 += if neg { -lsum2 } else { lsum2 };
            }
            sumi1 += s1 * ls;
            sumi2 += s2 * ls;
        }
        sumf += d * y.d * (sumi1 as f32 + IQ1M_DELTA * sumi2 as f32);
    }
    Ok(sumf)
}
