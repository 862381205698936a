//! lowbit-runtime: the pieces behind the `lowbit` command that applications can also call.
//!
//! Today: the format table ([`formats`]), raw-file codec conversion ([`rawcodec`]), the
//! built-in demo ([`demo`]) and the CPU benchmark ([`bench`](mod@bench)). GGUF, quantization
//! recipes and inference arrive with their issues.
//! What must not live here: format layouts and codecs (those are `lowbit-core`'s).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod demo;
pub mod formats;
pub mod quant;
pub mod rawcodec;
