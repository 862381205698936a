//! The 8-bit ggml block types that also serve as activation formats: Q8_0, Q8_1, Q8_K.
//!
//! Layouts: ggml `ggml-common.h` (`block_q8_0`, `block_q8_1`, `block_q8_K`).

use half::f16;

use crate::assert_block_size;
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

/// ggml `block_q8_K`: `d` f32, 256 × i8, `bsums` i16[16] (sums of each 16 quants).
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

use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};

pub(crate) fn decode_row(format: FormatId, _src: &[u8], _dst: &mut [f32]) -> Result<()> {
    Err(Error::Unsupported { format, op: "decode" })
}

pub(crate) fn encode_row(
    format: FormatId,
    _src: &[f32],
    _opts: &EncodeOptions<'_>,
    _dst: &mut [u8],
) -> Result<()> {
    Err(Error::Unsupported { format, op: "encode" })
}

pub(crate) fn dot_row(format: FormatId, _w: &[u8], _act: ActRow<'_>) -> Result<f32> {
    Err(Error::Unsupported { format, op: "dot" })
}
