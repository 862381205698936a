//! ggml IQ4_XS: 256 weights in 136 bytes (4.25 bpw), 16 non-linear levels, 6-bit sub-scales.
//!
//! Layout (ggml `ggml-common.h` `block_iq4_xs`): `d` f16, `scales_h` u16, `scales_l` `u8[4]`,
//! `qs` `u8[128]`. Sub-block `ib` (32 weights) has scale
//! `ls = ((scales_l[ib / 2] >> 4*(ib % 2)) & 0xf) | ((scales_h >> 2ib) & 3) << 4` (0..63), used
//! as `ls - 32`; its weights are the nibbles of `qs[16ib..16ib+16]` in Q4_0 order (low nibbles
//! first), each indexing `kvalues_iq4nl`.
//!
//! Decode (gguf-py `IQ4_XS.dequantize_blocks`, ggml `dequantize_row_iq4_xs`):
//! `dl = d * (ls - 32)` (integer factor, exact conversion); `y = dl * kvalues[q]` in f32.

use half::f16;

use super::tables::KVALUES_IQ4NL;
use super::{le16, scale_d, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// ggml `block_iq4_xs`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq4Xs {
    /// Super-block scale.
    pub d: f16,
    /// High 2 bits of each of the 8 sub-block scales.
    pub scales_h: u16,
    /// Low 4 bits of each sub-block scale, two per byte.
    pub scales_l: [u8; 4],
    /// Level indices, two per byte.
    pub qs: [u8; 128],
}
assert_block_size!(BlockIq4Xs, FormatId::Iq4Xs);

impl BlockIq4Xs {
    /// The 6-bit scale `ls` (0..=63) of sub-block `ib` (0..8); it is used as `ls - 32`.
    #[inline]
    fn ls(&self, ib: usize) -> i32 {
        let ib = ib & 7;
        let lo = (self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
        let hi = (le16(self.scales_h) >> (2 * ib)) & 3;
        i32::from(lo) | i32::from(hi) << 4
    }
}

/// The level of a nibble.
#[inline]
fn kv(n: u8) -> i8 {
    KVALUES_IQ4NL[usize::from(n & 0xf)]
}

impl Block for BlockIq4Xs {
    const FORMAT: FormatId = FormatId::Iq4Xs;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py; NaN/inf `d` -> [`Error::NonFiniteScale`] at offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = scale_d(self.d, Self::FORMAT)?;
        for ((ib, o32), q16) in out.chunks_exact_mut(32).enumerate().zip(self.qs.chunks_exact(16)) {
            let dl = d * (self.ls(ib) - 32) as f32;
            let (lo, hi) = o32.split_at_mut(16);
            for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(q16) {
                *l = dl * f32::from(kv(q));
                *h = dl * f32::from(kv(q >> 4));
            }
        }
        Ok(())
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq4_xs_q8_K_generic`).
///
/// Per sub-block of 32: `sumi = sum_j kvalues[q_j] * q8_j` in exact i32;
/// `sumf += ((f32(d) * d8) * (ls - 32) as f32) * (sumi as f32)`, one running f32 sum over the
/// sub-blocks of every block in order. Error bound: `c = 4`, `n` = number of sub-blocks.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<BlockIq4Xs>(w).zip(a) {
        let d4d8 = scale_d(x.d, FormatId::Iq4Xs).map_err(|e: Error| e.at(off))? * y.d;
        for ((ib, q8), q16) in y.qs.chunks_exact(32).enumerate().zip(x.qs.chunks_exact(16)) {
            let dl = d4d8 * (x.ls(ib) - 32) as f32;
            let (a_lo, a_hi) = q8.split_at(16);
            let mut sumi = 0i32;
            for ((&q, &l), &h) in q16.iter().zip(a_lo).zip(a_hi) {
                sumi += i32::from(l) * i32::from(kv(q)) + i32::from(h) * i32::from(kv(q >> 4));
            }
            sumf += dl * sumi as f32;
        }
    }
    Ok(sumf)
}
