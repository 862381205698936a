//! Models: the llama architecture as GGUF stores it ([`Llama`]), its hyperparameters
//! ([`LlamaConfig`]), the in-memory KV cache ([`KvCache`]) and their errors ([`ModelError`]).
//!
//! The model is generic over [`lowbit_core::backend::Backend`]: every weight matrix stays in
//! its stored format and goes through the backend's upload and matmul; the runtime never names
//! a backend's types. Norm weights and embedding rows are decoded by the core codec.
//! Layout: `config.rs` (metadata), `llama.rs` (weights and forward), `ops.rs` (norm, RoPE,
//! attention), `kv.rs` (cache), `error.rs`.
//! What must not live here: tokenizers, sampling, command-line code, format codecs.

mod config;
mod error;
mod kv;
mod llama;
mod ops;
mod profile;
mod stack;

pub use config::{LlamaConfig, ARCHITECTURES};
pub use error::ModelError;
pub use kv::KvCache;
pub use llama::{Llama, Logits, MatmulObserver};
pub use profile::{Profile, ProfileReport, Stage, StageTime};
