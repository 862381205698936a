//! [`QuantError`]: the one error type of [`crate::quant`]. Every variant names what was wrong
//! and where (recipe rule, imatrix entry and byte offset, tensor name and element).
//! What must not live here: recovery logic.

use std::fmt;

use lowbit_core::Error as CoreError;

/// Everything that can go wrong while planning, reading importance matrices or quantizing.
#[derive(Debug)]
#[non_exhaustive]
pub enum QuantError {
    /// A recipe that cannot be used (TOML syntax, an unknown format or key, a format without
    /// an encoder, an unknown built-in name).
    Recipe {
        /// The recipe's name or source.
        recipe: String,
        /// What is wrong (with the TOML line and column where the parser gives them).
        what: String,
    },
    /// A tensor that no format of its rule's chain (format, then fallbacks) can hold.
    NoFormatFits {
        /// Tensor name.
        tensor: String,
        /// Its dims (ggml order).
        dims: Vec<u64>,
        /// Why each format was refused.
        tried: String,
    },
    /// A malformed importance matrix.
    Imatrix {
        /// The entry (weight tensor name), or `"<header>"` / `"<trailer>"`.
        entry: String,
        /// Byte offset into the legacy file, or into the tensor's data for the GGUF layout.
        offset: usize,
        /// What is wrong.
        what: String,
    },
    /// A source tensor that cannot be quantized (bad dims, wrong byte length, an importance
    /// vector of the wrong length).
    Tensor {
        /// Tensor name.
        tensor: String,
        /// What is wrong.
        what: String,
    },
    /// A codec error while decoding the source or encoding a row.
    Codec {
        /// Tensor name.
        tensor: String,
        /// `"decoding the source"` or `"encoding"`.
        stage: &'static str,
        /// The row (of the whole tensor, experts stacked) it happened in.
        row: usize,
        /// The core's error (its offsets are relative to that row).
        source: CoreError,
    },
    /// The sink refused a tensor (for example a write error).
    Sink {
        /// Tensor name.
        tensor: String,
        /// The sink's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl fmt::Display for QuantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantError::Recipe { recipe, what } => write!(f, "recipe {recipe}: {what}"),
            QuantError::NoFormatFits { tensor, dims, tried } => {
                write!(f, "tensor {tensor} {dims:?}: no format of its rule fits ({tried})")
            }
            QuantError::Imatrix { entry, offset, what } => {
                write!(f, "imatrix entry {entry} at byte offset {offset}: {what}")
            }
            QuantError::Tensor { tensor, what } => write!(f, "tensor {tensor}: {what}"),
            QuantError::Codec { tensor, stage, row, source } => {
                write!(f, "tensor {tensor}: {stage} row {row}: {source}")
            }
            QuantError::Sink { tensor, source } => write!(f, "tensor {tensor}: output: {source}"),
        }
    }
}

impl std::error::Error for QuantError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QuantError::Sink { source, .. } => Some(source.as_ref()),
            QuantError::Codec { source, .. } => Some(source),
            _ => None,
        }
    }
}
