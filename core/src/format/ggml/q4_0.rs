//! ggml Q4_0: 32 weights as 4-bit codes with one f16 scale (18 bytes), its decode, reference
//! encoder and reference dot product against Q8_0 activations.
//!
//! What must not live here: other formats, improved (non-reference) encoders.
//!
//! Facts carried over, with their sources:
//! * Layout: ggml `ggml/src/ggml-common.h` `block_q4_0`: `d` f16, `qs[16]`; element `j` is the
//!   low nibble of `qs[j]`, element `j + 16` the high nibble; `w = (q - 8) * d`.
//! * Encoder: ggml `ggml/src/ggml-quants.c` `quantize_row_q4_0_ref` (gguf-py
//!   `gguf/quants.py` `Q4_0` agrees): `max` = signed value of the first element with the
//!   largest |x|; `d = max / -8`; `id = d != 0 ? 1/d : 0`; `q = MIN(15, (int8)(x*id + 8.5))`.
//! * Dot: ggml `ggml/src/ggml-cpu/quants.c` `ggml_vec_dot_q4_0_q8_0_generic`.

use half::f16;

use crate::assert_block_size;
use crate::block::{decode_blocks, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::Result;
use crate::registry::FormatId;

use super::legacy::{code4, decode_symmetric, dot_q8_0, encode_symmetric, pack4, Legacy32};
use super::q8::{check_block_in, encode_blocks, finite_f16};

const FORMAT: FormatId = FormatId::Q4_0;

/// ggml `block_q4_0`: `d` f16, 16 bytes of nibbles. `w = (q - 8) * d`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Codes: element `j` in the low nibble of `qs[j]`, element `j + 16` in the high nibble.
    pub qs: [u8; 16],
}
assert_block_size!(BlockQ4_0, FORMAT);

impl BlockQ4_0 {
    /// The scale `d`, or [`Error::NonFiniteScale`](crate::Error::NonFiniteScale) (offset 0) when it is NaN or ±inf.
    pub fn scale(&self) -> Result<f32> {
        finite_f16(self.d, FORMAT, "d", 0)
    }

    /// The 4-bit code of element `j` (0..32), 0..=15.
    #[inline]
    pub fn code(&self, j: usize) -> u8 {
        code4(&self.qs, j)
    }

    /// ggml's `quantize_row_q4_0_ref` on one block of 32 finite values.
    ///
    /// `d = max / -8` (f32; `max` the signed largest-magnitude value, first one on ties), stored
    /// as f16 rounded to nearest even (an all-zero block stores `-0`); `id = 1/d` (0 if
    /// `d == 0`); `q = min(15, trunc(x*id + 8.5))`, i.e. round half up on `x*id + 8`, computed
    /// as two separate f32 operations (no FMA: ggml builds that contract `x*id + 8.5` into an
    /// FMA flip about 3 nibbles in 6.4 M; gguf-py and lowbit do not). The float-to-int8
    /// conversion follows C on x86-64 (`cvttss2si`: NaN or out of range gives 0), which
    /// only matters when `1/d` overflows (then `d` stores as zero). A `d` beyond f16's range
    /// gives [`Error::OutOfRange`](crate::Error::OutOfRange); `x.len() != 32` gives [`Error::Length`](crate::Error::Length).
    pub fn encode(x: &[f32]) -> Result<Self> {
        check_block_in::<Self>(x)?;
        let (d, codes) = encode_symmetric(x, FORMAT, 8)?;
        Ok(BlockQ4_0 { d, qs: pack4(&codes) })
    }
}

impl Legacy32 for BlockQ4_0 {
    const OFFSET: i32 = 8;
    fn code_at(&self, j: usize) -> u8 {
        self.code(j)
    }
    fn checked_scales(&self) -> Result<(f32, f32)> {
        Ok((self.scale()?, 0.0))
    }
}

impl Block for BlockQ4_0 {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 32;

    /// `w = (float)(q - 8) * d` in f32 (exact).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        decode_symmetric(self, out)
    }
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    decode_blocks::<BlockQ4_0>(src, dst)
}

/// Reference encoder only ([`BlockQ4_0::encode`]).
pub(crate) fn encode_row(src: &[f32], _opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_blocks(src, dst, BlockQ4_0::encode)
}

/// Reference dot product of Q4_0 weights with Q8_0 activations.
///
/// Per block: the exact `i32` sum `sumi = Σ (qw - 8)·qa`, then
/// `sumf += ((float)sumi * dw) * da` in f32 (this association, no FMA), blocks in order from
/// `sumf = 0`: the order of ggml's `ggml_vec_dot_q4_0_q8_0_generic`. Bound against an f64
/// `Σ decode(w)·decode(a)`: `c = 2` (`|y − y_ref| <= 2·k·2^-24·Σ|terms|`).
///
/// Weight blocks with a non-finite `d` give [`Error::NonFiniteScale`](crate::Error::NonFiniteScale) with the offset in `w`;
/// activation scales are used as stored.
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    dot_q8_0::<BlockQ4_0>(w, act, |sumi, dw, da| sumi * dw * da)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn worked_nibble_order() {
        let mut b = BlockQ4_0 { d: f16::from_f32(0.5), qs: [0x88; 16] };
        b.qs[0] = 0xF0; // element 0 -> 0 - 8, element 16 -> 15 - 8
        let mut out = [0f32; 32];
        b.decode(&mut out).unwrap();
        assert_eq!(out[0], -4.0);
        assert_eq!(out[16], 3.5);
        assert_eq!(out[1], 0.0);
    }

    #[test]
    fn encode_ties_round_up() {
        // max = -8 -> d = 1, id = 1: x + 8.5 truncated, so x = 0.5 -> 9, x = -0.5 -> 8.
        let mut x = [0f32; 32];
        x[0] = -8.0;
        x[1] = 0.5;
        x[2] = -0.5;
        x[3] = 7.0;
        x[17] = 7.5; // would be 16, clamps to 15
        let b = BlockQ4_0::encode(&x).unwrap();
        assert_eq!(b.d, f16::ONE);
        assert_eq!([b.code(0), b.code(1), b.code(2), b.code(3), b.code(17)], [0, 9, 8, 15, 15]);
    }

    #[test]
    fn all_zero_stores_negative_zero() {
        let b = BlockQ4_0::encode(&[0.0; 32]).unwrap();
        assert_eq!(b.d.to_bits(), 0x8000);
        assert_eq!(b.qs, [0x88; 16]);
    }

    #[test]
    fn rejects_nan_scale() {
        let b = BlockQ4_0 { d: f16::NAN, qs: [0; 16] };
        assert_eq!(
            b.decode(&mut [0f32; 32]),
            Err(Error::NonFiniteScale { format: FORMAT, field: "d", offset: 0 })
        );
    }
}
