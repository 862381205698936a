//! GGUF files: a checked reader over a memory map or a byte slice ([`GgufFile`], [`parse`]),
//! an atomic streaming writer ([`GgufWriter`]), and the dialect rules that turn fork-specific
//! type ids into [`FormatId`]s ([`dialect`]).
//!
//! Metadata keys of lowbit's own, in files lowbit writes:
//! * `lowbit.dialect` (string): the numbering of the tensors' type ids (`ggml`, `rocmfpx`,
//!   `prism`, `hipfire`); a reader uses it unless the caller states a dialect.
//! * `lowbit.formats` (array of strings): the formats the tensors use, by lowbit name
//!   (`Q4_0`, `ROCMFP2`, ...), in registry order; a reader checks every tensor against it.
//!
//! What must not live here: format layouts and codecs (lowbit-core), quantization decisions.

pub mod dialect;
mod error;
mod mmap;
mod reader;
mod value;
mod writer;

use lowbit_core::FormatId;

pub use dialect::{DialectChoice, KEY_DIALECT, KEY_FORMATS};
pub use error::{Context, GgufError};
pub(crate) use mmap::Map;
pub use reader::{parse, GgufFile, GgufHeader, TensorInfo};
pub use value::{Array, Value, ValueType};
pub use writer::{GgufWriter, TensorSpec};

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The metadata key of the data alignment (a `u32` power of two).
pub const KEY_ALIGNMENT: &str = "general.alignment";
/// The data alignment when `general.alignment` is absent (ggml `GGUF_DEFAULT_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a tensor may have (ggml `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// Deepest nesting of metadata arrays accepted (bounds the reader's recursion).
pub const MAX_NESTING: u32 = 8;

/// Bytes of a tensor of `format` with `dims` (ggml order), checked: the row length must suit
/// the format and the total must fit in `u64` and `usize`. The error says why not.
pub fn tensor_bytes(format: FormatId, dims: &[u64]) -> Result<u64, String> {
    let k = dims.first().copied().unwrap_or(1);
    let rows = dims
        .iter()
        .skip(1)
        .try_fold(1u64, |acc, d| acc.checked_mul(*d))
        .ok_or_else(|| format!("dims {dims:?}: element count overflows"))?;
    let k_usize =
        usize::try_from(k).map_err(|_| format!("row length {k} does not fit in memory"))?;
    // FormatId::row_bytes does not guard its own arithmetic: check that it cannot overflow.
    let g = format.geometry();
    (k_usize / g.block_elems)
        .checked_mul(g.block_bytes)
        .and_then(|b| b.checked_add(g.row_header_bytes))
        .ok_or_else(|| format!("dims {dims:?}: row length {k} overflows"))?;
    let row = format.row_bytes(k_usize).map_err(|e| format!("dims {dims:?}: {e}"))?;
    let total = (row as u64)
        .checked_mul(rows)
        .filter(|t| usize::try_from(*t).is_ok())
        .ok_or_else(|| format!("dims {dims:?}: {format} data size overflows"))?;
    // The element count fits too (it is at most 8 x bytes for every format).
    k.checked_mul(rows).ok_or_else(|| format!("dims {dims:?}: element count overflows"))?;
    Ok(total)
}
