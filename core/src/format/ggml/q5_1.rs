//! ggml Q5_1: 32 weights as 5-bit codes with an f16 scale and an f16 minimum (24 bytes), its
//! decode, reference encoder and reference dot product against Q8_1 activations.
//!
//! What must not live here: other formats, improved (non-reference) encoders.
//!
//! Facts carried over, with their sources:
//! * Layout: ggml `ggml/src/ggml-common.h` `block_q5_1`: `d` f16, `m` f16, `qh[4]` (LE u32,
//!   bit `j` = 5th bit of element `j`), `qs[16]` low nibbles in Q4_0's order; `w = q*d + m`.
//! * Encoder: ggml `ggml/src/ggml-quants.c` `quantize_row_q5_1_ref` (gguf-py
//!   `gguf/quants.py` `Q5_1` agrees): `min`/`max`; `d = (max - min) / 31`;
//!   `id = d != 0 ? 1/d : 0`; `q = (uint8)((x - min)*id + 0.5)` (no clamp in C: the value
//!   cannot exceed 31.5 for finite input); `m = f16(min)`.
//! * Dot: ggml `ggml/src/ggml-cpu/quants.c` `ggml_vec_dot_q5_1_q8_1_generic`.

use half::f16;

use crate::assert_block_size;
use crate::block::{decode_blocks, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::Result;
use crate::registry::FormatId;

use super::legacy::{affine_scales, code5, decode_affine, dot_q8_1, pack5, Legacy32};
use super::q8::{c_f32_to_i32, check_block_in, encode_blocks, finite_f16};

const FORMAT: FormatId = FormatId::Q5_1;

/// ggml `block_q5_1`: `d` f16, `m` f16, `qh` (5th bits, LE u32), 16 bytes of low nibbles.
/// `w = q * d + m`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (offset).
    pub m: f16,
    /// Bit `j` of this little-endian u32 is bit 4 of element `j`'s code.
    pub qh: [u8; 4],
    /// Low 4 bits: element `j` in the low nibble of `qs[j]`, element `j + 16` in the high one.
    pub qs: [u8; 16],
}
assert_block_size!(BlockQ5_1, FORMAT);

impl BlockQ5_1 {
    /// `(d, m)`, or [`Error::NonFiniteScale`](crate::Error::NonFiniteScale) at the first that is NaN or ±inf (`d` at offset 0,
    /// `m` at offset 2).
    pub fn scales(&self) -> Result<(f32, f32)> {
        Ok((finite_f16(self.d, FORMAT, "d", 0)?, finite_f16(self.m, FORMAT, "m", 2)?))
    }

    /// The 5-bit code of element `j` (0..32), 0..=31.
    #[inline]
    pub fn code(&self, j: usize) -> u8 {
        code5(self.qh, &self.qs, j)
    }

    /// ggml's `quantize_row_q5_1_ref` on one block of 32 finite values.
    ///
    /// `min`, `max`; `d = (max - min) / 31` and `m = min`, stored as f16 rounded to nearest
    /// even; `id = 1/d` (0 if `d == 0`); `q = trunc((x - min)*id + 0.5)` (round half up), no
    /// FMA, narrowed to a byte as C on x86-64 (the out-of-range case only when `1/d`
    /// overflows), and packed keeping its low 5 bits. A `d` or `m` beyond f16's range gives
    /// [`Error::OutOfRange`](crate::Error::OutOfRange); `x.len() != 32` gives [`Error::Length`](crate::Error::Length).
    pub fn encode(x: &[f32]) -> Result<Self> {
        check_block_in::<Self>(x)?;
        let (d, m, min, id) = affine_scales(x, FORMAT, 31.0)?;
        let codes: [u8; 32] = core::array::from_fn(|j| c_f32_to_i32((x[j] - min) * id + 0.5) as u8);
        let (qh, qs) = pack5(&codes);
        Ok(BlockQ5_1 { d, m, qh, qs })
    }
}

impl Legacy32 for BlockQ5_1 {
    const OFFSET: i32 = 0;
    fn code_at(&self, j: usize) -> u8 {
        self.code(j)
    }
    fn checked_scales(&self) -> Result<(f32, f32)> {
        self.scales()
    }
}

impl Block for BlockQ5_1 {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 32;

    /// `w = (float)q * d + m` in f32 (the product is exact: one rounding).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        decode_affine(self, out)
    }
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    decode_blocks::<BlockQ5_1>(src, dst)
}

/// Reference encoder only ([`BlockQ5_1::encode`]).
pub(crate) fn encode_row(src: &[f32], _opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_blocks(src, dst, BlockQ5_1::encode)
}

/// Reference dot product of Q5_1 weights with Q8_1 activations.
///
/// Per block: the exact `i32` sum `sumi = Σ qw·qa`, then
/// `sumf += ((dw * da) * (float)sumi) + (mw * sa)` in f32 (this association, no FMA), blocks
/// in order from `sumf = 0`: ggml's `ggml_vec_dot_q5_1_q8_1_generic`. The minimum term uses
/// the activation's stored `s`, as ggml does; the bound (`c = 2`) is against the f64
/// `Σ_blocks dw·da·sumi + mw·sa` (see the Q4_1 dot for the difference to
/// `Σ decode(w)·decode(a)`).
///
/// Weight blocks with a non-finite `d` or `m` give [`Error::NonFiniteScale`](crate::Error::NonFiniteScale) with the offset in
/// `w`; activation scales are used as stored.
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    dot_q8_1::<BlockQ5_1>(w, act)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn encode_decode_exact_grid() {
        // min = 0, max = 31 -> d = 1: integers are reproduced exactly.
        let x: [f32; 32] = core::array::from_fn(|i| ((i * 7) % 32) as f32);
        let b = BlockQ5_1::encode(&x).unwrap();
        assert_eq!((b.d, b.m), (f16::ONE, f16::ZERO));
        let mut out = [0f32; 32];
        b.decode(&mut out).unwrap();
        assert_eq!(out, x);
    }

    #[test]
    fn rejects_nan_min() {
        let b = BlockQ5_1 { d: f16::ONE, m: f16::NAN, qh: [0; 4], qs: [0; 16] };
        assert_eq!(
            b.decode(&mut [0f32; 32]),
            Err(Error::NonFiniteScale { format: FORMAT, field: "m", offset: 2 })
        );
    }
}
