//! ggml Q5_0. (Being implemented.)

use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Q5_0;

pub(crate) fn decode_row(_src: &[u8], _dst: &mut [f32]) -> Result<()> {
    Err(Error::Unsupported { format: FORMAT, op: "decode" })
}

pub(crate) fn encode_row(_src: &[f32], _opts: &EncodeOptions<'_>, _dst: &mut [u8]) -> Result<()> {
    Err(Error::Unsupported { format: FORMAT, op: "encode" })
}

pub(crate) fn dot_row(_w: &[u8], _act: ActRow<'_>) -> Result<f32> {
    Err(Error::Unsupported { format: FORMAT, op: "dot" })
}
