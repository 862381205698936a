//! ggml IQ4_NL: 32 weights in 18 bytes (4.5 bpw), 16 non-linear levels.
//!
//! Layout (ggml `ggml-common.h` `block_iq4_nl`): `d` f16, `qs` `u8[16]`; weight `j < 16` is the
//! low nibble of `qs[j]`, weight `j + 16` the high nibble (Q4_0 order). Each nibble indexes
//! `kvalues_iq4nl`.
//!
//! Decode (gguf-py `IQ4_NL.dequantize_blocks`, ggml `dequantize_row_iq4_nl`):
//! `y = d * kvalues[q]` in f32.

use half::f16;

use super::tables::KVALUES_IQ4NL;
use super::{scale_d, weight_blocks};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8_0;
use crate::registry::FormatId;

/// ggml `block_iq4_nl`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq4Nl {
    /// Block scale.
    pub d: f16,
    /// Level indices, two per byte (weights `j` and `j + 16`).
    pub qs: [u8; 16],
}
assert_block_size!(BlockIq4Nl, FormatId::Iq4Nl);

/// The level of a nibble.
#[inline]
fn kv(n: u8) -> i8 {
    KVALUES_IQ4NL[usize::from(n & 0xf)]
}

impl Block for BlockIq4Nl {
    const FORMAT: FormatId = FormatId::Iq4Nl;
    const ELEMS: usize = 32;

    /// Bit-exact with gguf-py; NaN/inf `d` -> [`Error::NonFiniteScale`] at offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = scale_d(self.d, Self::FORMAT)?;
        let (lo, hi) = out.split_at_mut(16);
        for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(&self.qs) {
            *l = d * f32::from(kv(q));
            *h = d * f32::from(kv(q >> 4));
        }
        Ok(())
    }
}

/// Reference dot product with Q8_0 activations (ggml `ggml_vec_dot_iq4_nl_q8_0_generic`).
///
/// Per block: `sumi = sum_j kvalues[q_j] * q8_j` in exact i32;
/// `sumf += (f32(d8) * f32(d)) * (sumi as f32)` in block order.
/// Error bound: `c = 3`, `n` = number of blocks.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8_0]) -> Result<f32> {
    let mut sumf = 0f32;
    for ((off, x), y) in weight_blocks::<BlockIq4Nl>(w).zip(a) {
        let d = y.d.to_f32() * scale_d(x.d, FormatId::Iq4Nl).map_err(|e: Error| e.at(off))?;
        let (y_lo, y_hi) = y.qs.split_at(16);
        let mut sumi = 0i32;
        for ((&q, &a_lo), &a_hi) in x.qs.iter().zip(y_lo).zip(y_hi) {
            sumi += i32::from(a_lo) * i32::from(kv(q)) + i32::from(a_hi) * i32::from(kv(q >> 4));
        }
        sumf += d * sumi as f32;
    }
    Ok(sumf)
}
