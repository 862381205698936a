//! ggml Q8_K: 256 × i8 with an f32 scale and 16 partial sums; the activation format of the
//! K-quants, IQ and ternary types. The block type [`BlockQ8K`] lives in `q8.rs` next to the
//! other activation blocks; this module holds its decode, reference encode and dot product.
//!
//! What must not live here: the K-quant weight formats (they consume Q8_K in `kquant/`).
//!
//! Facts carried over, with their sources:
//! * Layout: ggml `ggml/src/ggml-common.h` `block_q8_K` (`d` f32, `qs[256]`, `bsums[16]`).
//! * Encoder: ggml `ggml/src/ggml-quants.c` `quantize_row_q8_K_ref`: `max` = the signed value
//!   of the first element with the largest |x|; all-zero block: `d = 0`, `qs = 0`;
//!   otherwise `iscale = -127/max`, `q = MIN(127, nearest_int(iscale*x))` narrowed to int8,
//!   `bsums[j]` = sum of quants `16j..16j+15`, `d = 1/iscale` (so `d` has the opposite sign of
//!   `max`). `nearest_int` is the 1.5·2^23 trick: round to nearest, ties to even.
//! * Decode: `dequantize_row_q8_K`: `w = d * q` in f32.
//!
//! gguf-py has no Q8_K quantizer; `tools/oracle_ggml_basic.py` holds an independent numpy port
//! of the C rule that produced the fixtures.

use crate::block::{check_block_out, decode_blocks, read_block, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::FormatId;

use super::q8::{check_block_in, dot_i8, encode_blocks, nearest_int};
use super::BlockQ8K;

const FORMAT: FormatId = FormatId::Q8K;

impl BlockQ8K {
    /// The scale `d`, or [`Error::NonFiniteScale`] (offset 0) when it is NaN or ±inf.
    /// `bsums` are not checked against `qs` (decode does not use them; the K-quant dot products
    /// use them as stored, like ggml).
    pub fn scale(&self) -> Result<f32> {
        if self.d.is_finite() {
            Ok(self.d)
        } else {
            Err(Error::NonFiniteScale { format: FORMAT, field: "d", offset: 0 })
        }
    }

    /// ggml's `quantize_row_q8_K_ref` on one block of 256 finite values (see the module doc).
    ///
    /// Rounding: ties to even (`nearest_int`), then clamped above at 127 (never below: the
    /// extreme element maps to −127). `d = 1/iscale` in f32 is stored without rounding.
    /// Differences from the C code, all where C leaves the bytes undefined: an all-zero block
    /// gets `bsums = 0` (ggml leaves them unwritten). When |max| is so small that
    /// `iscale = -127/max` overflows to ±inf (|max| < ~3.7e-37), every product is ±inf or NaN
    /// and ggml's `nearest_int` and int8 narrowing turn them into 0, with `d = ∓0`; lowbit
    /// reproduces exactly that. `x.len() != 256` gives [`Error::Length`].
    pub fn encode(x: &[f32]) -> Result<Self> {
        check_block_in::<Self>(x)?;
        let mut b = BlockQ8K { d: 0.0, qs: [0; 256], bsums: [0; 16] };
        let mut amax = 0f32;
        let mut max = 0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            return Ok(b);
        }
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, qs) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = qs.iter().map(|&q| i16::from(q)).sum();
        }
        b.d = 1.0 / iscale;
        Ok(b)
    }
}

impl Block for BlockQ8K {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 256;

    /// `w = d * (float)q` in f32 (one rounding). A finite `d` above `f32::MAX / 127` can make
    /// the product overflow to ±inf; that is returned as is (ggml does the same), since the
    /// stored scale itself is legal.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = self.scale()?;
        for (o, q) in out.iter_mut().zip(&self.qs) {
            *o = d * f32::from(*q);
        }
        Ok(())
    }
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    decode_blocks::<BlockQ8K>(src, dst)
}

/// Reference encoder only ([`BlockQ8K::encode`]).
pub(crate) fn encode_row(src: &[f32], _opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_blocks(src, dst, BlockQ8K::encode)
}

/// Reference dot product of Q8_K weights with Q8_K activations.
///
/// ggml has no Q8_K·Q8_K kernel (Q8_K is an activation type). lowbit follows the shape of
/// ggml's `ggml_vec_dot_q8_0_q8_0_generic`: per block the exact `i32` sum `sumi = Σ qw·qa`
/// (|sumi| <= 256·127·128 < 2^24, so `(float)sumi` is exact), then
/// `sumf += (float)sumi * (dw * da)` in f32, blocks in order from 0, no FMA. `bsums` are not
/// used. Bound against an f64 `Σ decode(w)·decode(a)`: `c = 2`.
///
/// Weight blocks with a non-finite `d` give [`Error::NonFiniteScale`] with the offset in `w`.
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let a = act.q8k(FORMAT)?;
    let mut sumf = 0f32;
    for (i, ab) in a.iter().enumerate() {
        let wb: BlockQ8K = read_block(w, i);
        let dw = wb.scale().map_err(|e| e.at(i * BlockQ8K::BYTES))?;
        let sumi = dot_i8(&wb.qs, &ab.qs);
        sumf += sumi as f32 * (dw * ab.d);
    }
    Ok(sumf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extreme_maps_to_minus_127_and_d_is_negative() {
        let mut x = [0.25f32; 256];
        x[7] = 2.0;
        let b = BlockQ8K::encode(&x).unwrap();
        assert_eq!(b.qs[7], -127);
        assert!(b.d < 0.0);
        assert_eq!(b.d, 1.0 / (-127.0f32 / 2.0));
        // 0.25 * -63.5 = -15.875 -> -16.
        assert_eq!(b.qs[0], -16);
        assert_eq!(b.bsums[0], 15 * -16 + -127);
        assert_eq!(b.bsums[1], 16 * -16);
    }

    #[test]
    fn ties_to_even() {
        let mut x = [0f32; 256];
        x[0] = -127.0; // iscale = 1
        x[1] = 2.5;
        x[2] = 3.5;
        x[3] = -0.5;
        let b = BlockQ8K::encode(&x).unwrap();
        assert_eq!(&b.qs[..4], &[-127, 2, 4, 0]);
        assert_eq!(b.d, 1.0);
    }

    #[test]
    fn tiny_block_gives_zero_quants() {
        let mut x = [0f32; 256];
        x[3] = 1e-40;
        x[4] = -5e-41;
        let b = BlockQ8K::encode(&x).unwrap();
        assert!(b.qs.iter().all(|&q| q == 0));
        assert_eq!(b.d.to_bits(), 0x8000_0000);
    }

    #[test]
    fn rejects_nan_scale() {
        let b = BlockQ8K { d: f32::NAN, qs: [1; 256], bsums: [16; 16] };
        let mut out = [0f32; 256];
        assert_eq!(
            b.decode(&mut out),
            Err(Error::NonFiniteScale { format: FORMAT, field: "d", offset: 0 })
        );
    }
}
