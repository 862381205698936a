//! ggml Q5_0: 32 weights as 5-bit codes with one f16 scale (22 bytes), its decode, reference
//! encoder and reference dot product against Q8_0 activations.
//!
//! What must not live here: other formats, improved (non-reference) encoders.
//!
//! Facts carried over, with their sources:
//! * Layout: ggml `ggml/src/ggml-common.h` `block_q5_0`: `d` f16, `qh[4]` (a little-endian u32
//!   whose bit `j` is the 5th bit of element `j`), `qs[16]` holding the low 4 bits in Q4_0's
//!   nibble order; `w = (q - 16) * d`. `qh` is kept as bytes so the block has alignment 2.
//! * Encoder: ggml `ggml/src/ggml-quants.c` `quantize_row_q5_0_ref` (gguf-py
//!   `gguf/quants.py` `Q5_0` agrees): `max` = signed value of the first element with the
//!   largest |x|; `d = max / -16`; `id = d != 0 ? 1/d : 0`; `q = MIN(31, (int8)(x*id + 16.5))`.
//! * Dot: ggml `ggml/src/ggml-cpu/quants.c` `ggml_vec_dot_q5_0_q8_0_generic`.

use half::f16;

use crate::assert_block_size;
use crate::block::{decode_blocks, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::Result;
use crate::registry::FormatId;

use super::legacy::{code5, decode_symmetric, dot_q8_0, encode_symmetric, pack5, Legacy32};
use super::q8::{check_block_in, encode_blocks, finite_f16};

const FORMAT: FormatId = FormatId::Q5_0;

/// ggml `block_q5_0`: `d` f16, `qh` (5th bits, LE u32), 16 bytes of low nibbles.
/// `w = (q - 16) * d`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// Bit `j` of this little-endian u32 is bit 4 of element `j`'s code.
    pub qh: [u8; 4],
    /// Low 4 bits: element `j` in the low nibble of `qs[j]`, element `j + 16` in the high one.
    pub qs: [u8; 16],
}
assert_block_size!(BlockQ5_0, FORMAT);

impl BlockQ5_0 {
    /// The scale `d`, or [`Error::NonFiniteScale`](crate::Error::NonFiniteScale) (offset 0) when it is NaN or ±inf.
    pub fn scale(&self) -> Result<f32> {
        finite_f16(self.d, FORMAT, "d", 0)
    }

    /// The 5-bit code of element `j` (0..32), 0..=31.
    #[inline]
    pub fn code(&self, j: usize) -> u8 {
        code5(self.qh, &self.qs, j)
    }

    /// ggml's `quantize_row_q5_0_ref` on one block of 32 finite values.
    ///
    /// `d = max / -16` (f32; `max` the signed largest-magnitude value, first on ties), stored as
    /// f16 rounded to nearest even (all-zero block: `-0`); `id = 1/d` (0 if `d == 0`);
    /// `q = min(31, trunc(x*id + 16.5))` (round half up), no FMA. Float-to-int8 as C on
    /// x86-64 (matters only when `1/d` overflows). A `d` beyond f16's range gives
    /// [`Error::OutOfRange`](crate::Error::OutOfRange); `x.len() != 32` gives [`Error::Length`](crate::Error::Length).
    pub fn encode(x: &[f32]) -> Result<Self> {
        check_block_in::<Self>(x)?;
        let (d, codes) = encode_symmetric(x, FORMAT, 16)?;
        let (qh, qs) = pack5(&codes);
        Ok(BlockQ5_0 { d, qh, qs })
    }
}

impl Legacy32 for BlockQ5_0 {
    const OFFSET: i32 = 16;
    fn code_at(&self, j: usize) -> u8 {
        self.code(j)
    }
    fn checked_scales(&self) -> Result<(f32, f32)> {
        Ok((self.scale()?, 0.0))
    }
}

impl Block for BlockQ5_0 {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 32;

    /// `w = (float)(q - 16) * d` in f32 (exact).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        decode_symmetric(self, out)
    }
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    decode_blocks::<BlockQ5_0>(src, dst)
}

/// Reference encoder only ([`BlockQ5_0::encode`]).
pub(crate) fn encode_row(src: &[f32], _opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_blocks(src, dst, BlockQ5_0::encode)
}

/// Reference dot product of Q5_0 weights with Q8_0 activations.
///
/// Per block: the exact `i32` sum `sumi = Σ (qw - 16)·qa`, then
/// `sumf += (dw * da) * (float)sumi` in f32 (this association, no FMA), blocks in order from
/// `sumf = 0`: ggml's `ggml_vec_dot_q5_0_q8_0_generic`. Bound against an f64
/// `Σ decode(w)·decode(a)`: `c = 2` (`|y − y_ref| <= 2·k·2^-24·Σ|terms|`).
///
/// Weight blocks with a non-finite `d` give [`Error::NonFiniteScale`](crate::Error::NonFiniteScale) with the offset in `w`;
/// activation scales are used as stored.
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    dot_q8_0::<BlockQ5_0>(w, act, |sumi, dw, da| (dw * da) * sumi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn qh_bit_order() {
        // Element 0 and element 31 have the 5th bit; everything else code 16 (qh bit set).
        let mut b = BlockQ5_0 { d: f16::ONE, qh: [0xFF; 4], qs: [0; 16] };
        b.qh = (0x8000_0001u32 | 0x0001_0000).to_le_bytes();
        b.qs[15] = 0xF0; // element 31 low bits 15
        let mut out = [0f32; 32];
        b.decode(&mut out).unwrap();
        assert_eq!(out[0], 0.0); // 16 - 16
        assert_eq!(out[1], -16.0); // 0 - 16
        assert_eq!(out[16], 0.0);
        assert_eq!(out[31], 15.0); // 31 - 16
    }

    #[test]
    fn encode_round_trips_codes() {
        // max = -16 -> d = 1: x + 16.5 truncated.
        let x: [f32; 32] = core::array::from_fn(|i| i as f32 - 16.0);
        let mut x = x;
        x[0] = -16.0;
        let b = BlockQ5_0::encode(&x).unwrap();
        assert_eq!(b.d, f16::ONE);
        for (j, v) in x.iter().enumerate() {
            assert_eq!(i32::from(b.code(j)) - 16, *v as i32);
        }
    }

    #[test]
    fn rejects_inf_scale() {
        let b = BlockQ5_0 { d: f16::NEG_INFINITY, qh: [0; 4], qs: [0; 16] };
        assert_eq!(
            b.decode(&mut [0f32; 32]),
            Err(Error::NonFiniteScale { format: FORMAT, field: "d", offset: 0 })
        );
    }
}
