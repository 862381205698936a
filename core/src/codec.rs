//! Row-level entry points that dispatch on a [`FormatId`] at run time: decode, encode and the
//! reference dot product. Every function checks every length before touching data, validates
//! inputs (NaN, infinities, negative importance) and reports errors with offsets into the
//! caller's buffers.
//!
//! A *row* is `k` consecutive elements of one weight row (K = the reduction dimension). Formats
//! with a row header (hipfire) need row boundaries; block formats accept any whole number of
//! blocks as one "row".

use crate::error::{Buffer, Error, Result};
use crate::format::{
    self,
    ggml::{BlockQ8K, BlockQ8_0, BlockQ8_1},
};
use crate::registry::{ActFormat, Family, FormatId};

/// Which encoder to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Byte-exact with the format's public reference encoder (FORMATS.md names each rule),
    /// using lowbit's fastest implementation that returns those bytes.
    #[default]
    Reference,
    /// The same rule as [`Rule::Reference`], computed by exhaustive search (ROCmFP2/ROCmFP3
    /// scale search). Slow; exists to check the fast search.
    Exhaustive,
    /// lowbit's lower-error encoder: valid blocks of the same format, different choices (for
    /// example HFP4 with a rounded row scale and an MSE search of block exponents).
    Improved,
}

/// Options for [`encode_row`].
#[derive(Clone, Copy, Debug, Default)]
pub struct EncodeOptions<'a> {
    /// Which encoder.
    pub rule: Rule,
    /// Importance weights (one per element of the row, finite and >= 0), for the encoders that
    /// take them; `None` means uniform.
    pub importance: Option<&'a [f32]>,
}

/// An activation row in the format a weight format's dot product consumes.
#[derive(Clone, Copy, Debug)]
pub enum ActRow<'a> {
    /// Plain f32 (already rotated, for formats with a rotation).
    F32(&'a [f32]),
    /// Q8_0 blocks.
    Q8_0(&'a [BlockQ8_0]),
    /// Q8_1 blocks.
    Q8_1(&'a [BlockQ8_1]),
    /// Q8_K blocks.
    Q8K(&'a [BlockQ8K]),
}

impl<'a> ActRow<'a> {
    fn wrong(&self, format: FormatId, expected: ActFormat) -> Error {
        Error::WrongActivation { format, expected, got: self.format() }
    }

    /// The f32 values, or [`Error::WrongActivation`] naming the weight `format`.
    pub fn f32(self, format: FormatId) -> Result<&'a [f32]> {
        match self {
            ActRow::F32(x) => Ok(x),
            _ => Err(self.wrong(format, ActFormat::F32)),
        }
    }

    /// The Q8_0 blocks, or [`Error::WrongActivation`] naming the weight `format`.
    pub fn q8_0(self, format: FormatId) -> Result<&'a [BlockQ8_0]> {
        match self {
            ActRow::Q8_0(a) => Ok(a),
            _ => Err(self.wrong(format, ActFormat::Q8_0)),
        }
    }

    /// The Q8_1 blocks, or [`Error::WrongActivation`] naming the weight `format`.
    pub fn q8_1(self, format: FormatId) -> Result<&'a [BlockQ8_1]> {
        match self {
            ActRow::Q8_1(a) => Ok(a),
            _ => Err(self.wrong(format, ActFormat::Q8_1)),
        }
    }

    /// The Q8_K blocks, or [`Error::WrongActivation`] naming the weight `format`.
    pub fn q8k(self, format: FormatId) -> Result<&'a [BlockQ8K]> {
        match self {
            ActRow::Q8K(a) => Ok(a),
            _ => Err(self.wrong(format, ActFormat::Q8K)),
        }
    }
}

impl ActRow<'_> {
    /// The activation format.
    pub fn format(&self) -> ActFormat {
        match self {
            ActRow::F32(_) => ActFormat::F32,
            ActRow::Q8_0(_) => ActFormat::Q8_0,
            ActRow::Q8_1(_) => ActFormat::Q8_1,
            ActRow::Q8K(_) => ActFormat::Q8K,
        }
    }

    /// Number of activation elements.
    pub fn len(&self) -> usize {
        match self {
            ActRow::F32(x) => x.len(),
            ActRow::Q8_0(b) => b.len() * 32,
            ActRow::Q8_1(b) => b.len() * 32,
            ActRow::Q8K(b) => b.len() * 256,
        }
    }

    /// Whether the row is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn check_len(format: FormatId, buffer: Buffer, got: usize, expected: usize) -> Result<()> {
    if got != expected {
        return Err(Error::Length { format, buffer, got, expected });
    }
    Ok(())
}

/// Decodes one row: `src` holds `format.row_bytes(dst.len())` bytes.
pub fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = format.row_bytes(dst.len())?;
    check_len(format, Buffer::Encoded, src.len(), need)?;
    match format.info().family {
        Family::Float => format::float::decode_row(format, src, dst),
        Family::Ggml => format::ggml::decode_row(format, src, dst),
        Family::RocmFpx => format::rocmfpx::decode_row(format, src, dst),
        Family::Hipfire => format::hipfire::decode_row(format, src, dst),
        Family::Prism => format::prism::decode_row(format, src, dst),
        Family::Onebit => format::onebit::decode_row(format, src, dst),
    }
}

/// Decodes `rows` rows of `k` elements each (`dst.len() == rows * k`).
pub fn decode_rows(format: FormatId, k: usize, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let rb = format.row_bytes(k)?;
    if dst.len() % k != 0 {
        return Err(Error::Length {
            format,
            buffer: Buffer::Values,
            got: dst.len(),
            expected: dst.len() / k * k,
        });
    }
    check_len(format, Buffer::Encoded, src.len(), dst.len() / k * rb)?;
    for (r, (s, d)) in src.chunks_exact(rb).zip(dst.chunks_exact_mut(k)).enumerate() {
        decode_row(format, s, d).map_err(|e| e.at(r * rb))?;
    }
    Ok(())
}

/// Encodes one row of `src.len()` elements into `dst` (`format.row_bytes(src.len())` bytes).
///
/// Rejects NaN/infinite inputs and NaN/infinite/negative importance weights with
/// [`Error::BadInput`] naming the element, and rules or importance weights the format's
/// encoders do not take with [`Error::Unsupported`] (never silently ignored).
pub fn encode_row(
    format: FormatId,
    src: &[f32],
    opts: &EncodeOptions<'_>,
    dst: &mut [u8],
) -> Result<()> {
    check_encode(format, src, opts, dst)?;
    match format.info().family {
        Family::Float => format::float::encode_row(format, src, opts, dst),
        Family::Ggml => format::ggml::encode_row(format, src, opts, dst),
        Family::RocmFpx => format::rocmfpx::encode_row(format, src, opts, dst),
        Family::Hipfire => format::hipfire::encode_row(format, src, opts, dst),
        Family::Prism => format::prism::encode_row(format, src, opts, dst),
        Family::Onebit => format::onebit::encode_row(format, src, opts, dst),
    }
}

/// Encodes one ROCmFP2 row (as [`encode_row`] with `Rule::Reference` and no importance
/// weights) from scale bytes a caller's own search chose, two per 32-element block in block
/// order (`e[0]`, `e[1]`): the codes and packing are [`encode_row`]'s own, so the bytes are
/// `Rule::Reference`'s exactly when `scales` are the bytes its search returns (the CPU
/// backend's vector search; its tests compare them). Runs every check of [`encode_row`], and
/// rejects a `scales` slice of the wrong length ([`Error::Length`]) or with a byte above 0x7E
/// ([`Error::BadInput`], [`Buffer::Encoded`], the index into `scales`).
pub fn encode_rocmfp2_row_with_scales(src: &[f32], scales: &[u8], dst: &mut [u8]) -> Result<()> {
    let format = FormatId::RocmFp2;
    let opts = EncodeOptions { rule: Rule::Reference, importance: None };
    check_encode(format, src, &opts, dst)?;
    check_len(format, Buffer::Encoded, scales.len(), src.len() / 16)?;
    if let Some(i) = scales.iter().position(|&b| b > 0x7e) {
        return Err(Error::BadInput { format, buffer: Buffer::Encoded, index: i });
    }
    format::rocmfpx::encode_row_scales(format, src, &opts, Some(scales), dst)
}

/// ROCmFP2's fast scale search (`Rule::Reference`, no importance weights) of one half of 16
/// values: the scale byte [`encode_row`] gives it. Values must be finite (for others it
/// returns some byte, which [`encode_rocmfp2_row_with_scales`] then rejects with the row).
pub fn rocmfp2_search_half(x: &[f32; 16]) -> u8 {
    format::rocmfpx::search_fp2_half(x)
}

/// The constants of [`rocmfp2_search_half`] (reciprocals of `C_k`, error bounds and slacks), for
/// vectorized searches that must run the same IEEE operations on the same values.
pub mod rocmfp2_search_consts {
    pub use crate::format::rocmfpx::quad_fp2::{EPS_M, EPS_Q, GROW46, GROW47, RC, VHI, VLO};
}

/// [`encode_row`]'s checks: lengths, rule and importance weights offered, finite values and
/// valid importance weights.
fn check_encode(format: FormatId, src: &[f32], opts: &EncodeOptions<'_>, dst: &[u8]) -> Result<()> {
    let need = format.row_bytes(src.len())?;
    check_len(format, Buffer::Encoded, dst.len(), need)?;
    let enc = format.info().encoders;
    let offered = match opts.rule {
        Rule::Reference => enc.reference,
        Rule::Exhaustive => enc.exhaustive,
        Rule::Improved => enc.improved,
    };
    if !offered {
        return Err(Error::Unsupported {
            format,
            op: match opts.rule {
                Rule::Reference => "encode",
                Rule::Exhaustive => "encode by exhaustive search",
                Rule::Improved => "encode with the improved rule",
            },
        });
    }
    if !all_finite(src) {
        let i = src.iter().position(|x| !x.is_finite()).unwrap_or(0);
        return Err(Error::BadInput { format, buffer: Buffer::Values, index: i });
    }
    if let Some(w) = opts.importance {
        if !enc.importance {
            return Err(Error::Unsupported { format, op: "encode with importance weights" });
        }
        check_len(format, Buffer::Importance, w.len(), src.len())?;
        if let Some(i) = w.iter().position(|x| !x.is_finite() || *x < 0.0) {
            return Err(Error::BadInput { format, buffer: Buffer::Importance, index: i });
        }
    }
    Ok(())
}

/// True when every value is finite: a branch-free scan (exponent bits all ones means inf or
/// NaN) that the compiler vectorizes; the caller locates the first bad value only on failure.
fn all_finite(src: &[f32]) -> bool {
    const EXP: u32 = 0x7f80_0000;
    let mut bad = 0u32;
    for &x in src {
        bad |= u32::from(x.to_bits() & EXP == EXP);
    }
    bad == 0
}

/// The reference dot product of one weight row with one activation row in the format's
/// activation format (rotated first, for rotated formats: see [`crate::registry::Rotation`]).
///
/// Integer block sums are exact; the f32 accumulation order is documented by each format.
pub fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let info = format.info();
    if act.format() != info.activation {
        return Err(Error::WrongActivation {
            format,
            expected: info.activation,
            got: act.format(),
        });
    }
    let k = act.len();
    let need = format.row_bytes(k)?;
    check_len(format, Buffer::Encoded, w.len(), need)?;
    match info.family {
        Family::Float => format::float::dot_row(format, w, act),
        Family::Ggml => format::ggml::dot_row(format, w, act),
        Family::RocmFpx => format::rocmfpx::dot_row(format, w, act),
        Family::Hipfire => format::hipfire::dot_row(format, w, act),
        Family::Prism => format::prism::dot_row(format, w, act),
        Family::Onebit => format::onebit::dot_row(format, w, act),
    }
}

#[cfg(feature = "alloc")]
mod vec_api {
    use alloc::vec;
    use alloc::vec::Vec;

    use super::*;

    /// Decodes `rows * k` elements into a new `Vec` (see [`decode_rows`]).
    pub fn decode_to_vec(format: FormatId, k: usize, src: &[u8]) -> Result<Vec<f32>> {
        let rb = format.row_bytes(k)?;
        if src.len() % rb != 0 {
            return Err(Error::Length {
                format,
                buffer: Buffer::Encoded,
                got: src.len(),
                expected: src.len() / rb * rb,
            });
        }
        let mut out = vec![0f32; src.len() / rb * k];
        decode_rows(format, k, src, &mut out)?;
        Ok(out)
    }

    /// Encodes rows of `k` elements (`src.len()` a multiple of `k`) into a new `Vec`. The
    /// importance weights, if any, have `k` entries and apply to every row.
    pub fn encode_to_vec(
        format: FormatId,
        k: usize,
        src: &[f32],
        opts: &EncodeOptions<'_>,
    ) -> Result<Vec<u8>> {
        let rb = format.row_bytes(k)?;
        if src.len() % k != 0 {
            return Err(Error::Length {
                format,
                buffer: Buffer::Values,
                got: src.len(),
                expected: src.len() / k * k,
            });
        }
        let mut out = vec![0u8; src.len() / k * rb];
        for (r, (s, d)) in src.chunks_exact(k).zip(out.chunks_exact_mut(rb)).enumerate() {
            encode_row(format, s, opts, d).map_err(|e| e.at_element(r * k))?;
        }
        Ok(out)
    }

    /// Prepares `x` for [`dot_row`] with `format` (rotation, then quantization to the format's
    /// activation format) and returns the dot product of one weight row with it.
    pub fn dot_row_f32(format: FormatId, w: &[u8], x: &[f32]) -> Result<f32> {
        let info = format.info();
        let mut xr = x.to_vec();
        if info.rotation == crate::registry::Rotation::Fwht256 {
            if x.len() % 256 != 0 {
                return Err(Error::RowLength { format, k: x.len(), multiple_of: 256 });
            }
            for seg in xr.chunks_exact_mut(256) {
                crate::rotate::fwht256(seg.try_into().expect("256-element chunk"));
            }
        }
        let opts = EncodeOptions::default();
        match info.activation {
            ActFormat::F32 => dot_row(format, w, ActRow::F32(&xr)),
            ActFormat::Q8_0 => {
                let mut a = vec![BlockQ8_0::zeroed(); xr.len() / 32];
                encode_row(FormatId::Q8_0, &xr, &opts, bytemuck::cast_slice_mut(&mut a))?;
                dot_row(format, w, ActRow::Q8_0(&a))
            }
            ActFormat::Q8_1 => {
                let mut a = vec![BlockQ8_1::zeroed(); xr.len() / 32];
                encode_row(FormatId::Q8_1, &xr, &opts, bytemuck::cast_slice_mut(&mut a))?;
                dot_row(format, w, ActRow::Q8_1(&a))
            }
            ActFormat::Q8K => {
                let mut a = vec![BlockQ8K::zeroed(); xr.len() / 256];
                encode_row(FormatId::Q8K, &xr, &opts, bytemuck::cast_slice_mut(&mut a))?;
                dot_row(format, w, ActRow::Q8K(&a))
            }
        }
    }

    use bytemuck::Zeroable;
}

#[cfg(feature = "alloc")]
pub use vec_api::*;
