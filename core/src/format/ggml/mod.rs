//! ggml / llama.cpp types: one module per format (or per family of super-block formats).
//!
//! Layouts and reference rules: ggml `ggml-common.h`, `ggml-quants.c`; gguf-py
//! `gguf/quants.py` is the independent oracle (FORMATS.md section 2).

pub mod iq;
pub mod kquant;
mod legacy;
pub mod mxfp4;
pub mod nvfp4;
pub mod q4_0;
pub mod q4_1;
pub mod q5_0;
pub mod q5_1;
mod q8;
pub mod q8_k;
pub mod tq1_0;
pub mod tq2_0;

pub use q8::{BlockQ8K, BlockQ8_0, BlockQ8_1};

use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::FormatId;

pub(crate) fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    use FormatId as F;
    match format {
        F::Q4_0 => q4_0::decode_row(src, dst),
        F::Q4_1 => q4_1::decode_row(src, dst),
        F::Q5_0 => q5_0::decode_row(src, dst),
        F::Q5_1 => q5_1::decode_row(src, dst),
        F::Q8_0 | F::Q8_1 => q8::decode_row(format, src, dst),
        F::Q8K => q8_k::decode_row(src, dst),
        F::Q2K | F::Q3K | F::Q4K | F::Q5K | F::Q6K => kquant::decode_row(format, src, dst),
        F::Iq2Xxs
        | F::Iq2Xs
        | F::Iq3Xxs
        | F::Iq1S
        | F::Iq4Nl
        | F::Iq3S
        | F::Iq2S
        | F::Iq4Xs
        | F::Iq1M => iq::decode_row(format, src, dst),
        F::Tq1_0 => tq1_0::decode_row(src, dst),
        F::Tq2_0 => tq2_0::decode_row(src, dst),
        F::Mxfp4 => mxfp4::decode_row(src, dst),
        F::Nvfp4 => nvfp4::decode_row(src, dst),
        _ => Err(Error::Unsupported { format, op: "decode as a ggml type" }),
    }
}

pub(crate) fn encode_row(
    format: FormatId,
    src: &[f32],
    opts: &EncodeOptions<'_>,
    dst: &mut [u8],
) -> Result<()> {
    use FormatId as F;
    match format {
        F::Q4_0 => q4_0::encode_row(src, opts, dst),
        F::Q4_1 => q4_1::encode_row(src, opts, dst),
        F::Q5_0 => q5_0::encode_row(src, opts, dst),
        F::Q5_1 => q5_1::encode_row(src, opts, dst),
        F::Q8_0 | F::Q8_1 => q8::encode_row(format, src, opts, dst),
        F::Q8K => q8_k::encode_row(src, opts, dst),
        F::Tq1_0 => tq1_0::encode_row(src, opts, dst),
        F::Tq2_0 => tq2_0::encode_row(src, opts, dst),
        F::Mxfp4 => mxfp4::encode_row(src, opts, dst),
        F::Nvfp4 => nvfp4::encode_row(src, opts, dst),
        F::Q2K | F::Q3K | F::Q4K | F::Q5K | F::Q6K => kquant::encode_row(format, src, opts, dst),
        F::Iq2Xxs
        | F::Iq2Xs
        | F::Iq3Xxs
        | F::Iq1S
        | F::Iq4Nl
        | F::Iq3S
        | F::Iq2S
        | F::Iq4Xs
        | F::Iq1M => iq::encode_row(format, src, opts, dst),
        _ => Err(Error::Unsupported { format, op: "encode as a ggml type" }),
    }
}

pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    use FormatId as F;
    match format {
        F::Q4_0 => q4_0::dot_row(w, act),
        F::Q4_1 => q4_1::dot_row(w, act),
        F::Q5_0 => q5_0::dot_row(w, act),
        F::Q5_1 => q5_1::dot_row(w, act),
        F::Q8_0 | F::Q8_1 => q8::dot_row(format, w, act),
        F::Q8K => q8_k::dot_row(w, act),
        F::Q2K | F::Q3K | F::Q4K | F::Q5K | F::Q6K => kquant::dot_row(format, w, act),
        F::Iq2Xxs
        | F::Iq2Xs
        | F::Iq3Xxs
        | F::Iq1S
        | F::Iq4Nl
        | F::Iq3S
        | F::Iq2S
        | F::Iq4Xs
        | F::Iq1M => iq::dot_row(format, w, act),
        F::Tq1_0 => tq1_0::dot_row(w, act),
        F::Tq2_0 => tq2_0::dot_row(w, act),
        F::Mxfp4 => mxfp4::dot_row(w, act),
        F::Nvfp4 => nvfp4::dot_row(w, act),
        _ => Err(Error::Unsupported { format, op: "dot as a ggml type" }),
    }
}
