//! Whole-model quantization, independent of file formats: recipes that pick a format per tensor
//! ([`recipe`]), llama.cpp importance matrices ([`imatrix`]), the streaming engine that turns
//! source tensors into encoded ones ([`pipeline`]), per-tensor error measurement ([`eval`]) and
//! a deterministic synthetic llama-shaped model ([`synthetic`]).
//!
//! Conventions shared by every module here:
//! * Tensor names are llama.cpp's GGUF names (`token_embd.weight`, `blk.0.attn_q.weight`,
//!   `blk.0.ffn_down_exps.weight`, `output_norm.weight`, ...).
//! * `dims` are in ggml/GGUF order: `dims[0]` is the row length (`ne0`, the reduction
//!   dimension K, fastest-varying), `dims[1]` the number of rows of one matrix, `dims[2]` the
//!   number of experts of a stacked expert tensor. (safetensors lists shapes the other way
//!   round; readers reverse them.)
//!
//! What must not live here: file parsing and writing (GGUF, safetensors: `crate::gguf`,
//! `crate::safetensors`) and codecs (`lowbit-core`). The lead wires files to these pieces.

pub mod eval;
mod glob;
pub mod gptq;
pub mod imatrix;
pub mod imatrix_collect;
pub mod pipeline;
pub mod recipe;
pub mod synthetic;

mod error;
mod value;

pub use error::QuantError;
pub use value::MetaValue;

/// Number of rows (`dims[1..]` multiplied) and row length (`dims[0]`) of a tensor, or `None`
/// when the product overflows `usize`. A tensor without dims is a scalar: one row of one.
pub fn rows_and_k(dims: &[u64]) -> Option<(usize, usize)> {
    let k = match dims.first() {
        Some(&d) => usize::try_from(d).ok()?,
        None => 1,
    };
    let mut rows = 1usize;
    for &d in dims.iter().skip(1) {
        rows = rows.checked_mul(usize::try_from(d).ok()?)?;
    }
    rows.checked_mul(k)?;
    Some((rows, k))
}
