//! The tokenizer error type: every failure names the metadata key it is about and, for arrays,
//! the element index.
//! What must not live here: detection logic (the loaders raise these).

use std::fmt;

use crate::gguf::ValueType;

/// Why a tokenizer or chat template could not be built from GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenizerError {
    /// A required key is absent.
    MissingKey {
        /// The key.
        key: &'static str,
    },
    /// A key (or an array's elements) has the wrong type.
    WrongType {
        /// The key.
        key: &'static str,
        /// What was expected (e.g. "array of STRING").
        expected: &'static str,
        /// The type found.
        found: ValueType,
    },
    /// Element `index` of the array at `key` is unusable.
    BadElement {
        /// The key.
        key: &'static str,
        /// The element's index.
        index: usize,
        /// Why.
        reason: String,
    },
    /// An array's length disagrees with the token count.
    LengthMismatch {
        /// The key.
        key: &'static str,
        /// Its length.
        len: usize,
        /// The token count (`tokenizer.ggml.tokens`).
        expected: usize,
    },
    /// A token id key names no token.
    BadId {
        /// The key.
        key: &'static str,
        /// Its value.
        id: u64,
        /// The token count.
        n_tokens: usize,
    },
    /// `tokenizer.ggml.model` names a tokenizer lowbit does not implement.
    UnsupportedModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer lowbit does not implement.
    UnsupportedPre(String),
    /// `tokenizer.chat_template` is not one lowbit can render; the reason says which part.
    UnsupportedTemplate(String),
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerError::MissingKey { key } => write!(f, "metadata key {key} is missing"),
            TokenizerError::WrongType { key, expected, found } => {
                write!(f, "metadata key {key}: expected {expected}, found {found}")
            }
            TokenizerError::BadElement { key, index, reason } => {
                write!(f, "metadata key {key}[{index}]: {reason}")
            }
            TokenizerError::LengthMismatch { key, len, expected } => {
                write!(f, "metadata key {key}: {len} elements, but there are {expected} tokens")
            }
            TokenizerError::BadId { key, id, n_tokens } => {
                write!(f, "metadata key {key}: token id {id} out of range ({n_tokens} tokens)")
            }
            TokenizerError::UnsupportedModel(m) => write!(
                f,
                "tokenizer.ggml.model = {m:?} is not supported (supported: \"gpt2\", \"llama\")"
            ),
            TokenizerError::UnsupportedPre(p) => write!(
                f,
                "tokenizer.ggml.pre = {p:?} is not supported (supported: \"smollm\", \"gpt2\", \
                 \"default\")"
            ),
            TokenizerError::UnsupportedTemplate(r) => {
                write!(f, "tokenizer.chat_template is not supported: {r}")
            }
        }
    }
}

impl std::error::Error for TokenizerError {}
