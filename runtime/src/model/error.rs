//! The error type of model loading and the forward pass ([`ModelError`]).
//!
//! Every variant names what failed: the metadata key, the tensor, the token index, the cache
//! position. What must not live here: the checks themselves (`config.rs`, `llama.rs`, `kv.rs`).

use std::fmt;

use lowbit_core::FormatId;

/// Why a model could not be loaded or run.
#[derive(Debug)]
pub enum ModelError {
    /// A required metadata key is absent.
    MissingKey {
        /// The key.
        key: String,
    },
    /// A metadata key holds a value of the wrong type or an impossible value.
    BadKey {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `general.architecture` names an architecture lowbit cannot run.
    UnknownArchitecture {
        /// The architecture named by the file.
        name: String,
    },
    /// A feature of the file that lowbit does not run yet (MoE layers, RoPE scaling, ...).
    Unsupported {
        /// What it is.
        what: String,
    },
    /// A required tensor is absent.
    MissingTensor {
        /// The tensor's name.
        name: String,
    },
    /// A tensor's dimensions (ggml order) are not the ones the hyperparameters imply.
    TensorShape {
        /// The tensor's name.
        name: String,
        /// The dimensions expected.
        expected: Vec<u64>,
        /// The dimensions in the file.
        got: Vec<u64>,
    },
    /// The backend cannot hold or multiply a tensor in its stored format.
    TensorFormat {
        /// The tensor's name.
        name: String,
        /// Its format.
        format: FormatId,
        /// The backend's name.
        backend: String,
    },
    /// The backend failed on a tensor (upload or matmul).
    Backend {
        /// The tensor.
        tensor: String,
        /// The backend's error, rendered.
        message: String,
    },
    /// The core codec failed to decode a tensor's bytes (norm weights, embedding rows).
    Decode {
        /// The tensor.
        tensor: String,
        /// The core's error (its offset is relative to the decoded range).
        source: lowbit_core::Error,
    },
    /// The MoE router refused a token (NaN or +inf router logits, too few finite ones).
    Router {
        /// The layer.
        layer: usize,
        /// Index of the token in the batch.
        token: usize,
        /// The router's error, rendered.
        message: String,
    },
    /// A token id is not below the vocabulary size.
    Token {
        /// Index of the token in the batch.
        index: usize,
        /// The id.
        token: u32,
        /// The vocabulary size.
        n_vocab: usize,
    },
    /// The batch would run past the KV cache's capacity.
    Context {
        /// Tokens already in the cache.
        pos: usize,
        /// Tokens in the batch.
        n: usize,
        /// The cache's capacity.
        limit: usize,
    },
    /// The KV cache was made for another model shape.
    CacheShape {
        /// What differs.
        reason: String,
    },
    /// A forward pass on no tokens.
    EmptyBatch,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::MissingKey { key } => write!(f, "metadata key {key} is missing"),
            ModelError::BadKey { key, reason } => write!(f, "metadata key {key}: {reason}"),
            ModelError::UnknownArchitecture { name } => {
                write!(f, "general.architecture = {name:?} is not supported (lowbit runs: llama)")
            }
            ModelError::Unsupported { what } => write!(f, "not supported yet: {what}"),
            ModelError::MissingTensor { name } => write!(f, "tensor {name} is missing"),
            ModelError::TensorShape { name, expected, got } => {
                write!(f, "tensor {name}: dims {got:?}, expected {expected:?} (ggml order)")
            }
            ModelError::TensorFormat { name, format, backend } => {
                write!(f, "tensor {name}: backend {backend} has no matmul for {format}")
            }
            ModelError::Backend { tensor, message } => write!(f, "tensor {tensor}: {message}"),
            ModelError::Decode { tensor, source } => write!(f, "tensor {tensor}: {source}"),
            ModelError::Router { layer, token, message } => {
                write!(f, "layer {layer}, token {token} of the batch: {message}")
            }
            ModelError::Token { index, token, n_vocab } => write!(
                f,
                "token {index} of the batch: id {token} is not below the vocabulary size {n_vocab}"
            ),
            ModelError::Context { pos, n, limit } => write!(
                f,
                "{n} tokens at position {pos} exceed the KV cache's capacity of {limit} tokens"
            ),
            ModelError::CacheShape { reason } => {
                write!(f, "KV cache does not fit the model: {reason}")
            }
            ModelError::EmptyBatch => write!(f, "forward pass on an empty batch of tokens"),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelError::Decode { source, .. } => Some(source),
            _ => None,
        }
    }
}
