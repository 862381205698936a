//! # lowbit-core
//!
//! Bit-exact codecs, quantizers and reference dot products for sub-4-bit LLM weight formats,
//! in a `#![no_std]` crate that needs neither `std` nor an allocator.
//!
//! What lives here:
//!
//! * [`scalar`]: the small floating-point types the formats store (E2M1, E4M3, UE4M3, UE4M3-b8,
//!   UE8M0, f16/bf16), each conversion documenting its rounding, ties, NaN and saturation.
//! * [`registry`]: [`FormatId`], every format's name, block geometry, bits per weight, activation
//!   format, and its type id in each dialect (ggml, ROCmFPX, Prism, hipfire).
//! * [`format`]: one `#[repr(C)]` block type per format, in a folder per family, with decode,
//!   encode and the reference dot product against the format's activation format.
//! * [`codec`]: the row-level entry points that dispatch on a [`FormatId`] at run time.
//! * [`rotate`]: the FWHT-256 with seeded signs (MFP4) and the normalised Walsh-Hadamard (Prism).
//! * [`backend`]: the trait every compute backend implements, and the reference backend.
//!
//! What must not live here: I/O, threads, allocation in the codecs, `unsafe` (other than what
//! `bytemuck` derives), and anything that needs `std`.
//!
//! ## Features
//!
//! * `alloc`: `Vec`-returning conveniences ([`codec::decode_to_vec`], ...).
//! * `std` (default): implies `alloc`.
//!
//! Build for a firmware-style host with `default-features = false`: every codec, the registry and
//! the reference dot products are still there, writing into caller-provided buffers.
//!
//! ```
//! use lowbit_core::{codec, FormatId};
//!
//! // One ROCmFP2 block (FORMATS.md worked example): codes 0,1,2,3 repeated, scales 0x12 and 0x7E.
//! let mut block = [0xE4u8; 10];
//! block[8] = 0x12;
//! block[9] = 0x7E;
//! let mut out = [0f32; 32];
//! codec::decode_row(FormatId::RocmFp2, &block, &mut out).unwrap();
//! assert_eq!(out[0], -4.0 * 0.019_531_25);
//! assert_eq!(out[31], 4.0 * 224.0);
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod backend;
pub mod block;
pub mod codec;
pub mod error;
pub mod format;
pub mod quantize;
pub mod registry;
pub mod rotate;
pub mod scalar;

pub use block::Block;
pub use codec::{ActRow, EncodeOptions, Rule};
pub use error::{Error, Result};
pub use registry::{ActFormat, Dialect, Family, FormatId, FormatInfo, Geometry};
