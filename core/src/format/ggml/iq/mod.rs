//! ggml IQ types: the grid-codebook formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S) and the non-linear 16-level formats (IQ4_NL, IQ4_XS).
//!
//! One file per format holds its `#[repr(C)]` block type (layout of ggml `ggml-common.h`), its
//! decode (bit-exact with gguf-py `gguf/quants.py` `dequantize_blocks`, which follows ggml
//! `ggml-quants.c` `dequantize_row_iq*`) and its reference dot product (ggml
//! `ggml-cpu/quants.c` `ggml_vec_dot_iq*_generic`). [`tables`] holds the generated codebooks.
//! This file holds the dispatch and the small helpers the formats share.
//!
//! There are no encoders: ggml's IQ quantizers need an importance-matrix driven grid search,
//! and the registry offers none ([`Error::Unsupported`]).
//!
//! Byte order: multi-byte fields are little-endian in the file; they are read with
//! `from_le`, so decoding does not depend on the host's byte order.

pub mod iq1_m;
pub mod iq1_s;
pub mod iq2_s;
pub mod iq2_xs;
pub mod iq2_xxs;
pub mod iq3_s;
pub mod iq3_xxs;
pub mod iq4_nl;
pub mod iq4_xs;
pub mod tables;

pub use iq1_m::BlockIq1M;
pub use iq1_s::BlockIq1S;
pub use iq2_s::BlockIq2S;
pub use iq2_xs::BlockIq2Xs;
pub use iq2_xxs::BlockIq2Xxs;
pub use iq3_s::BlockIq3S;
pub use iq3_xxs::BlockIq3Xxs;
pub use iq4_nl::BlockIq4Nl;
pub use iq4_xs::BlockIq4Xs;

use half::f16;

use crate::block::{decode_blocks, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::{ActFormat, FormatId};

use tables::KMASK_IQ2XS;

pub(crate) fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    use FormatId as F;
    match format {
        F::Iq2Xxs => decode_blocks::<BlockIq2Xxs>(src, dst),
        F::Iq2Xs => decode_blocks::<BlockIq2Xs>(src, dst),
        F::Iq2S => decode_blocks::<BlockIq2S>(src, dst),
        F::Iq3Xxs => decode_blocks::<BlockIq3Xxs>(src, dst),
        F::Iq3S => decode_blocks::<BlockIq3S>(src, dst),
        F::Iq1S => decode_blocks::<BlockIq1S>(src, dst),
        F::Iq1M => decode_blocks::<BlockIq1M>(src, dst),
        F::Iq4Nl => decode_blocks::<BlockIq4Nl>(src, dst),
        F::Iq4Xs => decode_blocks::<BlockIq4Xs>(src, dst),
        _ => Err(Error::Unsupported { format, op: "decode as an IQ type" }),
    }
}

/// No IQ encoder exists in lowbit (ggml's need an importance-matrix grid search): always
/// [`Error::Unsupported`].
pub(crate) fn encode_row(
    format: FormatId,
    _src: &[f32],
    _opts: &EncodeOptions<'_>,
    _dst: &mut [u8],
) -> Result<()> {
    Err(Error::Unsupported { format, op: "encode" })
}

pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    use FormatId as F;
    match (format, act) {
        (F::Iq4Nl, ActRow::Q8_0(a)) => iq4_nl::dot_row(w, a),
        (F::Iq2Xxs, ActRow::Q8K(a)) => iq2_xxs::dot_row(w, a),
        (F::Iq2Xs, ActRow::Q8K(a)) => iq2_xs::dot_row(w, a),
        (F::Iq2S, ActRow::Q8K(a)) => iq2_s::dot_row(w, a),
        (F::Iq3Xxs, ActRow::Q8K(a)) => iq3_xxs::dot_row(w, a),
        (F::Iq3S, ActRow::Q8K(a)) => iq3_s::dot_row(w, a),
        (F::Iq1S, ActRow::Q8K(a)) => iq1_s::dot_row(w, a),
        (F::Iq1M, ActRow::Q8K(a)) => iq1_m::dot_row(w, a),
        (F::Iq4Xs, ActRow::Q8K(a)) => iq4_xs::dot_row(w, a),
        (F::Iq4Nl, other) => {
            Err(Error::WrongActivation { format, expected: ActFormat::Q8_0, got: other.format() })
        }
        (
            F::Iq2Xxs | F::Iq2Xs | F::Iq2S | F::Iq3Xxs | F::Iq3S | F::Iq1S | F::Iq1M | F::Iq4Xs,
            other,
        ) => Err(Error::WrongActivation { format, expected: ActFormat::Q8K, got: other.format() }),
        _ => Err(Error::Unsupported { format, op: "dot as an IQ type" }),
    }
}

/// Reads a stored (little-endian) u16 field.
#[inline]
fn le16(x: u16) -> u16 {
    u16::from_le(x)
}

/// Converts a stored f16 scale to f32 (exact), rejecting NaN and infinities with
/// [`Error::NonFiniteScale`] at the field's block-relative `offset`.
#[inline]
fn scale_f32(bits: u16, format: FormatId, field: &'static str, offset: usize) -> Result<f32> {
    let d = f16::from_bits(bits);
    if !d.is_finite() {
        return Err(Error::NonFiniteScale { format, field, offset });
    }
    Ok(d.to_f32())
}

/// The stored f16 `d` of a block (little-endian) as f32, checked finite.
#[inline]
fn scale_d(d: f16, format: FormatId) -> Result<f32> {
    scale_f32(le16(d.to_bits()), format, "d", 0)
}

/// +1.0 or -1.0 for element `j` of a sign byte (`kmask_iq2xs[j]` set = negative).
#[inline]
fn sign_f32(signs: u8, j: usize) -> f32 {
    if signs & KMASK_IQ2XS[j & 7] != 0 {
        -1.0
    } else {
        1.0
    }
}

/// +1 or -1 for element `j` of a sign byte.
#[inline]
fn sign_i32(signs: u8, j: usize) -> i32 {
    if signs & KMASK_IQ2XS[j & 7] != 0 {
        -1
    } else {
        1
    }
}

/// Byte `j` of a little-endian packed grid entry.
#[inline]
fn byte_of(grid: u64, j: usize) -> u8 {
    (grid >> (8 * (j & 7))) as u8
}

/// Writes `out[j] = (db * grid[j]) * sign_j` for the `out.len()` (<= 8) bytes of `grid`,
/// signs taken from `signs` starting at bit `first_sign`. gguf-py's order: `db * grid * signs`.
#[inline]
fn put_grid(out: &mut [f32], db: f32, grid: u64, signs: u8, first_sign: usize) {
    for (j, o) in out.iter_mut().enumerate() {
        *o = db * f32::from(byte_of(grid, j)) * sign_f32(signs, first_sign + j);
    }
}

/// `sum_j grid[j] * q8[j] * sign_j` over `q8.len()` (<= 8) elements, exact in i32.
#[inline]
fn dot_grid(grid: u64, signs: u8, first_sign: usize, q8: &[i8]) -> i32 {
    q8.iter()
        .enumerate()
        .map(|(j, &q)| i32::from(byte_of(grid, j)) * i32::from(q) * sign_i32(signs, first_sign + j))
        .sum()
}

/// The blocks of a weight row, each copied out (no alignment needed) with its byte offset in
/// the row. The codec has checked the row length; a short row would just end the iteration.
#[inline]
fn weight_blocks<B: Block>(w: &[u8]) -> impl Iterator<Item = (usize, B)> + '_ {
    w.chunks_exact(B::BYTES)
        .enumerate()
        .map(|(i, c)| (i * B::BYTES, bytemuck::pod_read_unaligned(c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Block;

    #[test]
    fn sizes_match_ggml() {
        assert_eq!(BlockIq2Xxs::BYTES, 66);
        assert_eq!(BlockIq2Xs::BYTES, 74);
        assert_eq!(BlockIq2S::BYTES, 82);
        assert_eq!(BlockIq3Xxs::BYTES, 98);
        assert_eq!(BlockIq3S::BYTES, 110);
        assert_eq!(BlockIq1S::BYTES, 50);
        assert_eq!(BlockIq1M::BYTES, 56);
        assert_eq!(BlockIq4Nl::BYTES, 18);
        assert_eq!(BlockIq4Xs::BYTES, 136);
    }

    #[test]
    fn signs_and_bytes() {
        assert_eq!(sign_f32(0b1000_0001, 0), -1.0);
        assert_eq!(sign_f32(0b1000_0001, 1), 1.0);
        assert_eq!(sign_i32(0b1000_0001, 7), -1);
        assert_eq!(byte_of(0x2b19_0808_0808_0808, 7), 0x2b);
        assert_eq!(byte_of(0x2b19_0808_0808_0808, 6), 0x19);
    }

    #[test]
    fn encode_is_unsupported() {
        let mut dst = [0u8; 18];
        let e = encode_row(FormatId::Iq4Nl, &[0.0; 32], &EncodeOptions::default(), &mut dst);
        assert!(matches!(e, Err(Error::Unsupported { .. })));
    }
}
