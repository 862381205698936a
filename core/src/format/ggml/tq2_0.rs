//! ggml TQ2_0 (GGUF type 35): 256 ternary weights at 2 bits each and an f16 scale, 66 bytes.
//! Also the ternary encoder pieces TQ1_0 shares (amax scale, ggml's rounding, the improved
//! fit), which live here and nowhere else.
//!
//! Layout (ggml `ggml/src/ggml-common.h` `block_tq2_0`): `qs[64]`, then `d` (f16) LAST.
//! Element `128h + 32l + m` (h < 2, l < 4, m < 32) is bits `2l + 1 .. 2l` of `qs[32h + m]`;
//! its value is `(code - 1) * d` (ggml `dequantize_row_tq2_0`, gguf-py `TQ2_0`). Codes 0, 1, 2
//! mean -1, 0, +1; code 3 never comes out of an encoder but decodes as +2, as in ggml and
//! gguf-py (its dot product reads it the same way), so it is accepted. A NaN or infinite `d` is
//! [`Error::NonFiniteScale`].

use half::f16;

use crate::assert_block_size;
use crate::block::{read_block, Block};
use crate::codec::{ActRow, EncodeOptions, Rule};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Tq2_0;

/// ggml `block_tq2_0`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockTq2_0 {
    /// 2-bit codes, four per byte (see the module docs for the order).
    pub qs: [u8; 64],
    /// Scale.
    pub d: f16,
}
assert_block_size!(BlockTq2_0, FormatId::Tq2_0);

/// The block scale as f32, or [`Error::NonFiniteScale`] at `offset` for NaN / ±inf.
pub(crate) fn finite_scale(format: FormatId, d: f16, offset: usize) -> Result<f32> {
    let v = d.to_f32();
    if v.is_finite() {
        Ok(v)
    } else {
        Err(Error::NonFiniteScale { format, field: "d", offset })
    }
}

impl BlockTq2_0 {
    /// Byte offset of `d` in the block.
    pub const D_OFFSET: usize = 64;

    /// The 2-bit code (0..=3) of element `i` (< 256).
    #[inline]
    pub fn code(&self, i: usize) -> u8 {
        let (h, l, m) = (i / 128, (i / 32) % 4, i % 32);
        (self.qs[(32 * h + m) & 63] >> (2 * l)) & 3
    }
}

impl Block for BlockTq2_0 {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 256;

    /// `out[i] = (code_i - 1) as f32 * d`, bit-exact with gguf-py (`decode_ternary`).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        decode_ternary(self, out)
    }
}

/// The per-format parts of the ternary 256-element blocks (TQ1_0, TQ2_0), which share their
/// decode and dot product.
pub(crate) trait Ternary: Block {
    /// Byte offset of the f16 scale in the block.
    const SCALE_OFFSET: usize;
    /// The stored scale.
    fn stored_d(&self) -> f16;
    /// The code (0..=2; TQ2_0's 3 reads as 2) of element `i` (< 256).
    fn code_at(&self, i: usize) -> u8;
}

impl Ternary for BlockTq2_0 {
    const SCALE_OFFSET: usize = Self::D_OFFSET;
    fn stored_d(&self) -> f16 {
        self.d
    }
    fn code_at(&self, i: usize) -> u8 {
        self.code(i)
    }
}

/// Ternary decode: `out[i] = (code_i - 1) as f32 * d` (exact); NaN / inf `d` ->
/// [`Error::NonFiniteScale`] at its offset in the block.
pub(crate) fn decode_ternary<B: Ternary>(b: &B, out: &mut [f32]) -> Result<()> {
    crate::block::check_block_out::<B>(out)?;
    let d = finite_scale(B::FORMAT, b.stored_d(), B::SCALE_OFFSET)?;
    for (i, o) in out.iter_mut().enumerate() {
        *o = f32::from(b.code_at(i) as i8 - 1) * d;
    }
    Ok(())
}

/// Ternary dot with Q8_K activations (ggml `ggml_vec_dot_tq1_0_q8_K_generic`,
/// `ggml_vec_dot_tq2_0_q8_K_generic`): per block (in order) `sumi = Σ_i (code_i - 1) * q8_i` as
/// an exact i32 (|sumi| <= 256 * 2 * 128, exact in f32), `d = f32(d_w) * act.d` (one f32
/// product; ggml's TQ2_0 writes `act.d * d_w`, the same value), `sum += sumi as f32 * d` into
/// one running f32 sum from +0. A NaN / inf weight scale is [`Error::NonFiniteScale`] with its
/// offset in `w`.
pub(crate) fn dot_ternary<B: Ternary>(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let a = q8k(B::FORMAT, act)?;
    let mut sum = 0f32;
    for (i, y) in a.iter().enumerate() {
        let x: B = read_block(w, i);
        let dx = finite_scale(B::FORMAT, x.stored_d(), i * B::BYTES + B::SCALE_OFFSET)?;
        let mut sumi = 0i32;
        for (k, q) in y.qs.iter().enumerate() {
            sumi += (i32::from(x.code_at(k)) - 1) * i32::from(*q);
        }
        sum += sumi as f32 * (dx * y.d);
    }
    Ok(sum)
}

/// ggml's ternary reference scale and codes for one 256-block (`quantize_row_tq{1,2}_0_ref`):
/// `d = amax` (largest |x|), stored as `f16` by round-to-nearest-even; codes
/// `lroundf(x * (1/d)) + 1` with the f32 reciprocal and product, `lroundf` rounding half away
/// from zero; an all-zero block gives d = 0 and code 1 everywhere.
///
/// Two corner cases where ggml's C is undefined or produces an unreadable block, and lowbit's
/// choice (`docs/FORMAT-NOTES.md`):
/// * `1/d` overflows f32 (amax below about 2^-128): ggml multiplies by inf (NaN for zeros,
///   then an undefined `lroundf`); lowbit uses `x / d` instead. `d` rounds to f16 zero there,
///   so the block decodes to zeros either way.
/// * amax >= 65520 rounds `d` to f16 infinity: [`Error::OutOfRange`] naming the element.
pub(crate) fn reference_codes(
    format: FormatId,
    x: &[f32],
    base: usize,
    codes: &mut [u8; 256],
) -> Result<f16> {
    let mut amax = 0f32;
    let mut imax = 0;
    for (i, v) in x.iter().enumerate() {
        if v.abs() > amax {
            amax = v.abs();
            imax = i;
        }
    }
    let dh = f16::from_f32(amax);
    if dh.is_infinite() {
        return Err(Error::OutOfRange { format, index: base + imax });
    }
    let id = if amax != 0.0 { 1.0 / amax } else { 0.0 };
    for (c, v) in codes.iter_mut().zip(x) {
        let r = if id.is_finite() { *v * id } else { *v / amax };
        *c = (libm::roundf(r) as i32 + 1).clamp(0, 2) as u8;
    }
    Ok(dh)
}

/// lowbit's improved ternary codes for one 256-block: the least-squares fit
/// [`crate::quantize::ternary::fit_ternary`] (optionally importance-weighted), codes + 1.
/// [`Error::OutOfRange`] if the fitted scale is not a finite f16.
pub(crate) fn improved_codes(
    format: FormatId,
    x: &[f32],
    importance: Option<&[f32]>,
    base: usize,
    codes: &mut [u8; 256],
) -> Result<f16> {
    let mut t = [0i8; 256];
    let d = crate::quantize::ternary::fit_ternary(x, importance, &mut t);
    if !d.is_finite() {
        let imax = x
            .iter()
            .enumerate()
            .fold((0, 0f32), |(bi, bv), (i, v)| if v.abs() > bv { (i, v.abs()) } else { (bi, bv) })
            .0;
        return Err(Error::OutOfRange { format, index: base + imax });
    }
    for (c, q) in codes.iter_mut().zip(t) {
        *c = (q.clamp(-1, 1) + 1) as u8;
    }
    Ok(d)
}

/// Runs the rule `opts` names on each 256-block of `src`, handing the codes and scale to `pack`.
pub(crate) fn encode_blocks(
    format: FormatId,
    src: &[f32],
    opts: &EncodeOptions<'_>,
    dst: &mut [u8],
    block_bytes: usize,
    pack: impl Fn(&[u8; 256], f16, &mut [u8]),
) -> Result<()> {
    let mut codes = [1u8; 256];
    for (b, (x, out)) in src.chunks_exact(256).zip(dst.chunks_exact_mut(block_bytes)).enumerate() {
        let base = 256 * b;
        let d = match opts.rule {
            Rule::Reference => reference_codes(format, x, base, &mut codes)?,
            Rule::Improved => {
                let w = opts.importance.and_then(|w| w.get(base..base + 256));
                improved_codes(format, x, w, base, &mut codes)?
            }
            Rule::Exhaustive => {
                return Err(Error::Unsupported { format, op: "encode by exhaustive search" })
            }
        };
        pack(&codes, d, out);
    }
    Ok(())
}

/// Packs codes (0..=2) and the scale into a TQ2_0 block.
pub fn pack(codes: &[u8; 256], d: f16) -> BlockTq2_0 {
    let mut qs = [0u8; 64];
    for (i, c) in codes.iter().enumerate() {
        let (h, l, m) = (i / 128, (i / 32) % 4, i % 32);
        qs[32 * h + m] |= (c & 3) << (2 * l);
    }
    BlockTq2_0 { qs, d }
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    crate::block::decode_blocks::<BlockTq2_0>(src, dst)
}

/// Encodes with [`Rule::Reference`] (ggml's `quantize_row_tq2_0_ref`, byte-exact with it and
/// gguf-py: see [`reference_codes`]) or [`Rule::Improved`] (see [`improved_codes`]).
pub(crate) fn encode_row(src: &[f32], opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_blocks(FORMAT, src, opts, dst, BlockTq2_0::BYTES, |c, d, out| {
        out.copy_from_slice(bytemuck::bytes_of(&pack(c, d)))
    })
}

/// Reference dot product with Q8_K activations (ggml's `vec_dot_type` for TQ2_0), following
/// ggml's `ggml_vec_dot_tq2_0_q8_K_generic` (`ggml/src/ggml-cpu/quants.c`):
///
/// per block (in order): `sumi = Σ_i q8_i * (code_i - 1)` as an exact i32 (|sumi| <= 256 * 2 *
/// 128), `d = act.d * f32(d_w)` (one f32 product), `sum += sumi as f32 * d` into one running
/// f32 sum from +0. `sumi` is exact in f32 (< 2^24).
///
/// Accuracy against an f64 sum of decoded products: at most three roundings per block, so
/// `|y - y_ref| <= 3 * n_blocks * 2^-24 * Σ|terms|` (c = 3 per 256 elements). A NaN / inf
/// weight scale is [`Error::NonFiniteScale`].
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    dot_ternary::<BlockTq2_0>(w, act)
}

/// The Q8_K blocks of an activation row, or [`Error::WrongActivation`].
pub(crate) fn q8k<'a>(format: FormatId, act: ActRow<'a>) -> Result<&'a [BlockQ8K]> {
    match act {
        ActRow::Q8K(a) => Ok(a),
        other => Err(Error::WrongActivation {
            format,
            expected: crate::registry::ActFormat::Q8K,
            got: other.format(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_and_code_agree() {
        let mut codes = [0u8; 256];
        for (i, c) in codes.iter_mut().enumerate() {
            *c = ((i * 7) % 3) as u8;
        }
        let b = pack(&codes, f16::ONE);
        for (i, c) in codes.iter().enumerate() {
            assert_eq!(b.code(i), *c, "element {i}");
        }
    }

    #[test]
    fn code_three_decodes_as_two() {
        let b = BlockTq2_0 { qs: [0xff; 64], d: f16::from_f32(0.5) };
        let mut out = [0f32; 256];
        b.decode(&mut out).unwrap();
        assert!(out.iter().all(|v| *v == 1.0));
    }

    #[test]
    fn non_finite_scale() {
        let b = BlockTq2_0 { qs: [0; 64], d: f16::NAN };
        let mut out = [0f32; 256];
        assert_eq!(
            b.decode(&mut out),
            Err(Error::NonFiniteScale { format: FORMAT, field: "d", offset: 64 })
        );
    }
}
