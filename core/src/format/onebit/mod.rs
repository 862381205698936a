//! 1bit-MONSTER's packed ternary layout (`Ternary68`: 68 bytes per 256 values) and the load-time
//! repack that produces it from exact-ternary Q4_0 files.
//!
//! Sources (facts only, no code carried over): github 1bit-MONSTER/llama.cpp,
//! `ggml/src/ggml-hrx/dispatch/ternary-q4-0.h` (layout name `ternary-q4_0-k128-t2`, 68 bytes per
//! 256, K a multiple of 256), `ggml/src/ggml-hrx/runtime/host-memory-ternary.cpp`
//! (`pack_block`: the repack and its checks) and
//! `ggml/src/ggml-hrx/dispatch_registration/common/dispatch-kquant-decode.cpp` (the layout is only
//! consumed by the K-quant decode kernels with f32 activations: `kquant_q8_format` excludes it).
//!
//! What lives here: the block type, decode, [`repack_q4_0`] and the reference dot product.
//! There is no encoder from f32: files hold Q4_0, and the runtime repacks them.

mod ternary68;

pub use ternary68::{repack_q4_0, BlockTernary68};

use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::FormatId;

pub(crate) fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match format {
        FormatId::Ternary68 => crate::block::decode_blocks::<BlockTernary68>(src, dst),
        _ => Err(Error::Unsupported { format, op: "decode as a onebit format" }),
    }
}

pub(crate) fn encode_row(
    format: FormatId,
    _src: &[f32],
    _opts: &EncodeOptions<'_>,
    _dst: &mut [u8],
) -> Result<()> {
    Err(Error::Unsupported { format, op: "encode (repack Q4_0 with onebit::repack_q4_0)" })
}

pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    match (format, act) {
        (FormatId::Ternary68, ActRow::F32(x)) => ternary68::dot_f32(w, x),
        (FormatId::Ternary68, other) => Err(Error::WrongActivation {
            format,
            expected: crate::registry::ActFormat::F32,
            got: other.format(),
        }),
        _ => Err(Error::Unsupported { format, op: "dot as a onebit format" }),
    }
}
