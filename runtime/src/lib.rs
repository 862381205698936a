//! lowbit-runtime: the pieces behind the `lowbit` command that applications can also call.
//!
//! Today: the format table ([`formats`]), raw-file codec conversion ([`rawcodec`]), the
//! built-in demo ([`demo`]), the CPU benchmark ([`bench`](mod@bench)), GGUF files
//! ([`gguf`]: read, write, dialects), safetensors input ([`safetensors`]) and `lowbit inspect`
//! ([`inspect`]), whole-model quantization ([`quant`]) and the model-file commands behind
//! `lowbit quantize`, `dequantize` and `eval-tensors` ([`cmd`]). Inference arrives with its
//! issue.
//! `unsafe` is denied everywhere except the one memory-map call in `gguf::mmap`.
//! What must not live here: format layouts and codecs (those are `lowbit-core`'s).
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod bench;
#[cfg(feature = "hip")]
pub mod bench_hip;
#[cfg(feature = "vulkan")]
pub mod bench_vulkan;
pub mod cmd;
pub mod demo;
pub mod engine;
pub mod formats;
pub mod gguf;
pub mod inspect;
pub mod model;
pub mod moe_router;
pub mod prompt_cache;
pub mod quant;
pub mod rawcodec;
pub mod safetensors;
pub mod sample;
pub mod score;
pub mod tokenizer;
