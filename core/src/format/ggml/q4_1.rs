//! ggml Q4_1: 32 weights as 4-bit codes with an f16 scale and an f16 minimum (20 bytes), its
//! decode, reference encoder and reference dot product against Q8_1 activations.
//!
//! What must not live here: other formats, improved (non-reference) encoders.
//!
//! Facts carried over, with their sources:
//! * Layout: ggml `ggml/src/ggml-common.h` `block_q4_1`: `d` f16, `m` f16, `qs[16]` in Q4_0's
//!   nibble order; `w = q * d + m`.
//! * Encoder: ggml `ggml/src/ggml-quants.c` `quantize_row_q4_1_ref` (gguf-py
//!   `gguf/quants.py` `Q4_1` agrees): `min`/`max` over the block; `d = (max - min) / 15`;
//!   `id = d != 0 ? 1/d : 0`; `q = MIN(15, (int8)((x - min)*id + 0.5))`; `m = f16(min)`.
//! * Dot: ggml `ggml/src/ggml-cpu/quants.c` `ggml_vec_dot_q4_1_q8_1_generic`.

use half::f16;

use crate::assert_block_size;
use crate::block::{decode_blocks, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::Result;
use crate::registry::FormatId;

use super::legacy::{affine_scales, code4, decode_affine, dot_q8_1, pack4, Legacy32};
use super::q8::{c_f32_to_i32, check_block_in, encode_blocks, finite_f16};

const FORMAT: FormatId = FormatId::Q4_1;

/// ggml `block_q4_1`: `d` f16, `m` f16, 16 bytes of nibbles. `w = q * d + m`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (offset).
    pub m: f16,
    /// Codes: element `j` in the low nibble of `qs[j]`, element `j + 16` in the high nibble.
    pub qs: [u8; 16],
}
assert_block_size!(BlockQ4_1, FORMAT);

impl BlockQ4_1 {
    /// `(d, m)`, or [`Error::NonFiniteScale`](crate::Error::NonFiniteScale) at the first that is NaN or ±inf (`d` at offset 0,
    /// `m` at offset 2).
    pub fn scales(&self) -> Result<(f32, f32)> {
        Ok((finite_f16(self.d, FORMAT, "d", 0)?, finite_f16(self.m, FORMAT, "m", 2)?))
    }

    /// The 4-bit code of element `j` (0..32), 0..=15.
    #[inline]
    pub fn code(&self, j: usize) -> u8 {
        code4(&self.qs, j)
    }

    /// ggml's `quantize_row_q4_1_ref` on one block of 32 finite values.
    ///
    /// `min`, `max` over the block; `d = (max - min) / 15` (f32) and `m = min`, each stored as
    /// f16 rounded to nearest even; `id = 1/d` (0 if `d == 0`); `q = min(15, trunc((x - min)*id
    /// + 0.5))` (round half up), three separate f32 operations, no FMA. Float-to-int8 as C on
    /// x86-64 (matters only when `1/d` overflows). A `d` or `m` beyond f16's range gives
    /// [`Error::OutOfRange`](crate::Error::OutOfRange) naming the largest element; `x.len() != 32` gives
    /// [`Error::Length`](crate::Error::Length).
    pub fn encode(x: &[f32]) -> Result<Self> {
        check_block_in::<Self>(x)?;
        let (d, m, min, id) = affine_scales(x, FORMAT, 15.0)?;
        let codes: [u8; 32] =
            core::array::from_fn(|j| (c_f32_to_i32((x[j] - min) * id + 0.5) as i8).min(15) as u8);
        Ok(BlockQ4_1 { d, m, qs: pack4(&codes) })
    }
}

impl Legacy32 for BlockQ4_1 {
    const OFFSET: i32 = 0;
    fn code_at(&self, j: usize) -> u8 {
        self.code(j)
    }
    fn checked_scales(&self) -> Result<(f32, f32)> {
        self.scales()
    }
}

impl Block for BlockQ4_1 {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 32;

    /// `w = (float)q * d + m` in f32 (the product is exact, so FMA or not, one rounding).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        decode_affine(self, out)
    }
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    decode_blocks::<BlockQ4_1>(src, dst)
}

/// Reference encoder only ([`BlockQ4_1::encode`]).
pub(crate) fn encode_row(src: &[f32], _opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_blocks(src, dst, BlockQ4_1::encode)
}

/// Reference dot product of Q4_1 weights with Q8_1 activations.
///
/// Per block: the exact `i32` sum `sumi = Σ qw·qa`, then
/// `sumf += ((dw * da) * (float)sumi) + (mw * sa)` in f32 (this association, no FMA), blocks
/// in order from `sumf = 0`: ggml's `ggml_vec_dot_q4_1_q8_1_generic`. The minimum term uses
/// the activation's stored `s` (≈ `da · Σ qa`, rounded to f16 by the encoder), as ggml does,
/// so the result is within `c = 2` (`|y − y_ref| <= 2·k·2^-24·Σ|terms|`) of the f64
/// `Σ_blocks dw·da·sumi + mw·sa`, where the terms are the products `dw·qw·da·qa` and each
/// block's `mw·sa`; against `Σ decode(w)·decode(a)` it differs further by up to
/// `Σ |mw| · |sa − da·Σqa|`.
///
/// Weight blocks with a non-finite `d` or `m` give [`Error::NonFiniteScale`](crate::Error::NonFiniteScale) with the offset in
/// `w`; activation scales are used as stored.
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    dot_q8_1::<BlockQ4_1>(w, act)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn encode_min_max() {
        // min = -1, max = 14 -> d = 1: codes x + 1 rounded half up.
        let mut x = [0f32; 32];
        x[0] = -1.0;
        x[1] = 14.0;
        x[2] = 0.5; // 1.5 + 0.5 = 2.0 -> 2
        x[20] = 2.49; // 3.49 + 0.5 -> 3
        let b = BlockQ4_1::encode(&x).unwrap();
        assert_eq!((b.d, b.m), (f16::ONE, f16::from_f32(-1.0)));
        assert_eq!([b.code(0), b.code(1), b.code(2), b.code(3), b.code(20)], [0, 15, 2, 1, 3]);
        let mut out = [0f32; 32];
        b.decode(&mut out).unwrap();
        assert_eq!((out[0], out[1], out[2]), (-1.0, 14.0, 1.0));
    }

    #[test]
    fn constant_block() {
        let b = BlockQ4_1::encode(&[3.0; 32]).unwrap();
        assert_eq!((b.d, b.m, b.qs), (f16::ZERO, f16::from_f32(3.0), [0; 16]));
    }

    #[test]
    fn rejects_nan_min() {
        let b = BlockQ4_1 { d: f16::ONE, m: f16::NAN, qs: [0; 16] };
        assert_eq!(
            b.decode(&mut [0f32; 32]),
            Err(Error::NonFiniteScale { format: FORMAT, field: "m", offset: 2 })
        );
    }
}
