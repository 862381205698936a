//! # lowbit
//!
//! An engine for sub-4-bit LLM weights. This facade re-exports the crates that the enabled
//! Cargo features select; today that is [`lowbit_core`] (codecs, quantizers, reference dot
//! products, format registry). Backends (CPU SIMD, Vulkan, HIP) and the runtime arrive as
//! features of their own.
//!
//! ```
//! use lowbit::{codec, EncodeOptions, FormatId};
//!
//! let x: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
//! let bytes = codec::encode_to_vec(FormatId::Q8_0, 64, &x, &EncodeOptions::default()).unwrap();
//! let y = codec::decode_to_vec(FormatId::Q8_0, 64, &bytes).unwrap();
//! assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() < 0.01));
//! ```
#![no_std]
#![forbid(unsafe_code)]

pub use lowbit_core::*;
