//! Block types and codecs, a folder per format family.
//!
//! Each family module owns, for its formats: the `#[repr(C)]` block types (with a compile-time
//! size assert against the registry), decode, encode, and the reference dot product, and
//! exposes three crate-internal functions that [`crate::codec`] dispatches to:
//! `decode_row`, `encode_row` and `dot_row`. They are called with every length already
//! checked against the registry, inputs already validated, and the activation kind matched.

pub mod float;
pub mod ggml;
pub mod hipfire;
pub mod onebit;
pub mod prism;
pub mod rocmfpx;
