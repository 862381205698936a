//! ggml K-quants (Q2_K..Q6_K): decode and dot against Q8_K. (Being implemented.)

use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::FormatId;

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
