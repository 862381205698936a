//! The 8-bit ggml block types that also serve as activation formats: Q8_0 and Q8_1 (block
//! types, decode, reference encode, reference dot), the [`BlockQ8K`] type (its codec lives in
//! [`super::q8_k`]), and the small scalar helpers every basic ggml block module shares
//! (checked f16 scales, C's float-to-int conversion, `roundf`, `nearest_int`).
//!
//! What must not live here: the 4- and 5-bit formats (one module each) and anything that
//! allocates.
//!
//! Facts carried over, with their sources:
//! * Layouts: ggml `ggml/src/ggml-common.h` (`block_q8_0`, `block_q8_1`, `block_q8_K`).
//! * Encoders: ggml `ggml/src/ggml-quants.c` `quantize_row_q8_0_ref` / `quantize_row_q8_1_ref`:
//!   `amax` = largest |x|; `d = amax / 127` (f32); `id = d != 0 ? 1/d : 0`; `q = roundf(x*id)`
//!   (ties away from zero); Q8_1 additionally `s = f16((float)sum(q) * d)` with the f32 `d`
//!   (not the f16-rounded one). gguf-py `gguf/quants.py` `Q8_0` agrees for Q8_0.
//! * Dot products: ggml `ggml/src/ggml-cpu/quants.c` `ggml_vec_dot_q8_0_q8_0_generic`.

use half::f16;

use crate::assert_block_size;
use crate::block::{check_block_out, decode_blocks, read_block, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::FormatId;

/// ggml `block_q8_0`: `d` f16, 32 × i8. w = q * d.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Quants.
    pub qs: [i8; 32],
}
assert_block_size!(BlockQ8_0, FormatId::Q8_0);

/// ggml `block_q8_1`: `d` f16, `s` f16 (= d * sum(qs)), 32 × i8.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ8_1 {
    /// Scale.
    pub d: f16,
    /// d * sum(qs).
    pub s: f16,
    /// Quants.
    pub qs: [i8; 32],
}
assert_block_size!(BlockQ8_1, FormatId::Q8_1);

/// ggml `block_q8_K`: `d` f32, 256 × i8, `bsums: [i16; 16]` (sums of each 16 quants).
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ8K {
    /// Scale.
    pub d: f32,
    /// Quants.
    pub qs: [i8; 256],
    /// Sum of each group of 16 quants.
    pub bsums: [i16; 16],
}
assert_block_size!(BlockQ8K, FormatId::Q8K);

// ---------------------------------------------------------------------------------------------
// Shared scalar helpers (crate-internal, used by q4_0, q4_1, q5_0, q5_1, q8_k).

/// Reads a stored f16 scale, rejecting NaN and ±inf with [`Error::NonFiniteScale`] at the
/// field's byte offset within the block.
#[inline]
pub(crate) fn finite_f16(
    v: f16,
    format: FormatId,
    field: &'static str,
    offset: usize,
) -> Result<f32> {
    if v.is_finite() {
        Ok(v.to_f32())
    } else {
        Err(Error::NonFiniteScale { format, field, offset })
    }
}

/// Rounds an encoder's f32 scale to the stored f16 (round to nearest, ties to even, as ggml's
/// `GGML_FP32_TO_FP16`), or [`Error::OutOfRange`] (naming element `index` of the block) when
/// the f16 would be ±inf: such a block would decode to non-finite values and is rejected by
/// every decoder, so lowbit never writes one.
#[inline]
pub(crate) fn store_f16(v: f32, format: FormatId, index: usize) -> Result<f16> {
    let h = f16::from_f32(v);
    if h.is_finite() {
        Ok(h)
    } else {
        Err(Error::OutOfRange { format, index })
    }
}

/// C's `(int)x` for a float as x86-64 executes it (`cvttss2si`): truncation toward zero for
/// values inside the `i32` range; NaN and values outside it give `i32::MIN` (the "integer
/// indefinite" value). ggml's reference encoders cast `float` to `int8_t`/`uint8_t` this way
/// (the narrowing keeps the low byte: take `as i8` / `as u8` of the result). The out-of-range
/// case happens only for blocks whose f32 scale is so small that `1/d` overflows; those blocks
/// store a zero f16 scale, so the resulting nibbles do not change the decoded values, but
/// they are reproduced so the bytes match gguf-py and ggml on x86-64.
#[inline]
pub(crate) fn c_f32_to_i32(x: f32) -> i32 {
    if x.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32 // truncates toward zero; in range, so no saturation happens
    }
}

/// Checks that an encoder got exactly one block of values ([`Error::Length`] otherwise).
#[inline]
pub(crate) fn check_block_in<B: Block>(x: &[f32]) -> Result<()> {
    if x.len() != B::ELEMS {
        return Err(Error::Length {
            format: B::FORMAT,
            buffer: crate::error::Buffer::Values,
            got: x.len(),
            expected: B::ELEMS,
        });
    }
    Ok(())
}

/// Index of the first element with the largest magnitude (for [`Error::OutOfRange`]).
#[inline]
pub(crate) fn argmax_abs(x: &[f32]) -> usize {
    let mut best = 0;
    let mut amax = 0f32;
    for (i, v) in x.iter().enumerate() {
        if v.abs() > amax {
            amax = v.abs();
            best = i;
        }
    }
    best
}

/// ggml's `nearest_int` (`ggml-quants.c`): adds 1.5·2^23 in f32 and reads the low mantissa
/// bits. For |x| <= 4194303 this is round to nearest, ties to even (`rintf`). Outside that
/// range it is ggml's bit trick, reproduced exactly: ±inf give −4194304 and NaN (quiet, zero
/// payload, as IEEE hardware produces) gives 0.
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// Writes blocks produced by `enc` (one per `ELEMS` inputs) into `dst`, shifting element
/// indices in errors to positions in the row.
#[inline]
pub(crate) fn encode_blocks<B: Block>(
    src: &[f32],
    dst: &mut [u8],
    enc: impl Fn(&[f32]) -> Result<B>,
) -> Result<()> {
    for (i, (x, out)) in src.chunks_exact(B::ELEMS).zip(dst.chunks_exact_mut(B::BYTES)).enumerate()
    {
        let b = enc(x).map_err(|e| e.at_element(i * B::ELEMS))?;
        out.copy_from_slice(bytemuck::bytes_of(&b));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Q8_0

impl BlockQ8_0 {
    /// The scale `d`, or [`Error::NonFiniteScale`] (offset 0) when it is NaN or ±inf.
    pub fn scale(&self) -> Result<f32> {
        finite_f16(self.d, FormatId::Q8_0, "d", 0)
    }

    /// ggml's `quantize_row_q8_0_ref` on one block of 32 finite values: `d = amax/127`,
    /// `q = roundf(x * (1/d))` (ties away from zero; `1/d` is 0 when `d == 0`, so an all-zero
    /// block stores `d = +0`). The f16 `d` rounds to nearest even; a `d` beyond f16's range
    /// gives [`Error::OutOfRange`] naming the largest element; `x.len() != 32` gives
    /// [`Error::Length`]. Inputs must be finite (the row codec checks).
    pub fn encode(x: &[f32]) -> Result<Self> {
        check_block_in::<Self>(x)?;
        let (d, id) = q8_scale(x);
        let d = store_f16(d, FormatId::Q8_0, argmax_abs(x))?;
        let mut qs = [0i8; 32];
        for (q, v) in qs.iter_mut().zip(x) {
            *q = c_f32_to_i32(libm::roundf(v * id)) as i8;
        }
        Ok(BlockQ8_0 { d, qs })
    }
}

/// `amax / 127` and its inverse (0 when the scale is 0), as `quantize_row_q8_{0,1}_ref`.
fn q8_scale(x: &[f32]) -> (f32, f32) {
    let amax = x.iter().fold(0f32, |a, v| if a > v.abs() { a } else { v.abs() });
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, id)
}

impl Block for BlockQ8_0 {
    const FORMAT: FormatId = FormatId::Q8_0;
    const ELEMS: usize = 32;

    /// `w = (float)q * d` in f32 (exact: 8-bit times an f16 fits in 24 bits).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = self.scale()?;
        for (o, q) in out.iter_mut().zip(&self.qs) {
            *o = f32::from(*q) * d;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Q8_1

impl BlockQ8_1 {
    /// The scale `d` (offset 0) and the stored `s` (offset 2), or [`Error::NonFiniteScale`] at
    /// the first that is NaN or ±inf. `s` does not enter decode, but ggml's Q4_1/Q5_1 dot
    /// products use it, so a non-finite `s` makes the block unusable: lowbit rejects it.
    pub fn scales(&self) -> Result<(f32, f32)> {
        let d = finite_f16(self.d, FormatId::Q8_1, "d", 0)?;
        let s = finite_f16(self.s, FormatId::Q8_1, "s", 2)?;
        Ok((d, s))
    }

    /// ggml's `quantize_row_q8_1_ref` on one block of 32 finite values: as
    /// [`BlockQ8_0::encode`], plus `s = f16((float)sum(q) * d)` where the integer sum is exact
    /// and `d` is the f32 scale before rounding to f16 (so `s` may differ from
    /// `f16(d) * sum(q)`). A `d` or `s` beyond f16's range gives [`Error::OutOfRange`].
    /// `x.len() != 32` gives [`Error::Length`].
    pub fn encode(x: &[f32]) -> Result<Self> {
        check_block_in::<Self>(x)?;
        let (d, id) = q8_scale(x);
        let big = argmax_abs(x);
        let d16 = store_f16(d, FormatId::Q8_1, big)?;
        let mut qs = [0i8; 32];
        let mut sum = 0i32;
        for (q, v) in qs.iter_mut().zip(x) {
            *q = c_f32_to_i32(libm::roundf(v * id)) as i8;
            sum += i32::from(*q);
        }
        let s = store_f16(sum as f32 * d, FormatId::Q8_1, big)?;
        Ok(BlockQ8_1 { d: d16, s, qs })
    }
}

impl Block for BlockQ8_1 {
    const FORMAT: FormatId = FormatId::Q8_1;
    const ELEMS: usize = 32;

    /// `w = (float)q * d` in f32 (exact). `s` is checked (see [`BlockQ8_1::scales`]) but not
    /// used.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let (d, _) = self.scales()?;
        for (o, q) in out.iter_mut().zip(&self.qs) {
            *o = f32::from(*q) * d;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Row entry points

pub(crate) fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match format {
        FormatId::Q8_0 => decode_blocks::<BlockQ8_0>(src, dst),
        FormatId::Q8_1 => decode_blocks::<BlockQ8_1>(src, dst),
        _ => Err(Error::Unsupported { format, op: "decode as Q8_0/Q8_1" }),
    }
}

/// Reference encoders only ([`BlockQ8_0::encode`], [`BlockQ8_1::encode`]); the codec has
/// already checked that the rule is offered and that no importance weights were passed.
pub(crate) fn encode_row(
    format: FormatId,
    src: &[f32],
    _opts: &EncodeOptions<'_>,
    dst: &mut [u8],
) -> Result<()> {
    match format {
        FormatId::Q8_0 => encode_blocks(src, dst, BlockQ8_0::encode),
        FormatId::Q8_1 => encode_blocks(src, dst, BlockQ8_1::encode),
        _ => Err(Error::Unsupported { format, op: "encode as Q8_0/Q8_1" }),
    }
}

/// Reference dot products of Q8_0 weights with Q8_0 activations and Q8_1 weights with Q8_1
/// activations.
///
/// Per block: the exact `i32` sum `sumi = Σ qw·qa`, then `sumf += (float)sumi * (dw * da)`
/// (f32, this association, no FMA), blocks in order from `sumf = 0`: the order of ggml's
/// `ggml_vec_dot_q8_0_q8_0_generic`. ggml has no Q8_1·Q8_1 kernel (Q8_1 is an activation
/// type); lowbit uses the same rule and ignores both `s` fields. Bound against an f64
/// `Σ decode(w)·decode(a)`: `c = 2` (`|y − y_ref| <= 2·k·2^-24·Σ|terms|`).
///
/// Weight blocks with a non-finite `d` (or, for Q8_1, `s`) give [`Error::NonFiniteScale`] with
/// the offset in `w`. Activation scales are used as stored (NaN/inf propagate, as in ggml).
pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let mut sumf = 0f32;
    match (format, act) {
        (FormatId::Q8_0, ActRow::Q8_0(a)) => {
            for (i, ab) in a.iter().enumerate() {
                let wb: BlockQ8_0 = read_block(w, i);
                let dw = wb.scale().map_err(|e| e.at(i * BlockQ8_0::BYTES))?;
                let sumi = dot_i8(&wb.qs, &ab.qs);
                sumf += sumi as f32 * (dw * ab.d.to_f32());
            }
        }
        (FormatId::Q8_1, ActRow::Q8_1(a)) => {
            for (i, ab) in a.iter().enumerate() {
                let wb: BlockQ8_1 = read_block(w, i);
                let (dw, _) = wb.scales().map_err(|e| e.at(i * BlockQ8_1::BYTES))?;
                let sumi = dot_i8(&wb.qs, &ab.qs);
                sumf += sumi as f32 * (dw * ab.d.to_f32());
            }
        }
        _ => {
            return Err(Error::WrongActivation {
                format,
                expected: format.info().activation,
                got: act.format(),
            })
        }
    }
    Ok(sumf)
}

/// Exact integer dot product of two i8 slices (|sum| <= 256·127·128, far inside i32).
#[inline]
pub(crate) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_is_ties_to_even_in_range() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-126.5), -126);
        assert_eq!(nearest_int(127.4), 127);
        assert_eq!(nearest_int(f32::INFINITY), -4_194_304);
        assert_eq!(nearest_int(f32::NEG_INFINITY), -4_194_304);
        assert_eq!(nearest_int(f32::NAN), 0);
    }

    #[test]
    fn c_conversion_matches_x86() {
        assert_eq!(c_f32_to_i32(8.9), 8);
        assert_eq!(c_f32_to_i32(-8.9), -8);
        assert_eq!(c_f32_to_i32(f32::NAN), i32::MIN);
        assert_eq!(c_f32_to_i32(f32::INFINITY), i32::MIN);
        assert_eq!(c_f32_to_i32(-3e9), i32::MIN);
        assert_eq!(c_f32_to_i32(2_147_483_520.0), 2_147_483_520);
    }

    #[test]
    fn q8_0_roundf_ties_away_from_zero() {
        // amax = 127 gives d = 1, id = 1: x = ±0.5, ±2.5 round away from zero.
        let mut x = [0f32; 32];
        x[0] = 127.0;
        x[1] = 0.5;
        x[2] = -0.5;
        x[3] = 2.5;
        x[4] = -2.5;
        let b = BlockQ8_0::encode(&x).unwrap();
        assert_eq!(b.d, f16::ONE);
        assert_eq!(&b.qs[..5], &[127, 1, -1, 3, -3]);
    }

    #[test]
    fn q8_1_sum_uses_f32_d() {
        let x: [f32; 32] = core::array::from_fn(|i| (i as f32 - 10.3) * 0.011);
        let b = BlockQ8_1::encode(&x).unwrap();
        let sum: i32 = b.qs.iter().map(|&q| i32::from(q)).sum();
        let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        assert_eq!(b.s, f16::from_f32(sum as f32 * d));
    }

    #[test]
    fn rejects_non_finite_scales() {
        let mut b = BlockQ8_1::encode(&[1.0; 32]).unwrap();
        let mut out = [0f32; 32];
        b.s = f16::NAN;
        assert_eq!(
            b.decode(&mut out),
            Err(Error::NonFiniteScale { format: FormatId::Q8_1, field: "s", offset: 2 })
        );
        b.d = f16::INFINITY;
        assert_eq!(
            b.decode(&mut out),
            Err(Error::NonFiniteScale { format: FormatId::Q8_1, field: "d", offset: 0 })
        );
    }

    #[test]
    fn out_of_range_scale_is_an_error() {
        let mut x = [0f32; 32];
        x[5] = 1e7; // d = 78740 > 65504
        assert_eq!(
            BlockQ8_0::encode(&x),
            Err(Error::OutOfRange { format: FormatId::Q8_0, index: 5 })
        );
        // Q8_1: d fits, s = 32 * 127 * d does not.
        let x = [2100.0f32; 32];
        assert!(BlockQ8_0::encode(&x).is_ok());
        assert_eq!(
            BlockQ8_1::encode(&x),
            Err(Error::OutOfRange { format: FormatId::Q8_1, index: 0 })
        );
    }
}
