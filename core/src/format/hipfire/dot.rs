//! The reference dot product of one HFP4-family weight row with an f32 activation row (for
//! MFP4G32 / MFP4G32P the caller passes activations already rotated by
//! [`crate::rotate::fwht256`] per 256-segment, as `codec::dot_row_f32` does).
//!
//! Accumulation order (fixed, every step an f32 operation):
//!
//! ```text
//! acc = 0
//! for each block b (in order):
//!     s = 0; for i in 0..32: s += E2M1[code_i] * x[32 b + i]     (element order)
//!     acc += s * block_factor_b        (2^(e - 127), or the E4M3 value for MFP4G32P)
//! y = acc * row_scale
//! ```
//!
//! hipfire's GEMV (`kernels/src/gemv_hfp4g32.hip`) instead multiplies `row_scale * 2^(e-127)`
//! into every element and reduces over 32 lanes and four accumulators; that order is a GPU
//! artefact, so the reference keeps the simple sequential order above and states its bound:
//! against an f64 sum of `decode(w)_i * x_i` the result satisfies
//! `|y - y_ref| <= c * K * 2^-24 * sum |decode(w)_i * x_i|` with **c = 2** (one rounding per
//! product, 31 per block sum, one per block add and scale multiply, one for the row scale:
//! at most K + K/32 + 3 relative roundings of u = 2^-24 per term), as long as no intermediate
//! underflows into f32 subnormals or overflows: a legal row whose block exponents reach 254
//! under a small row scale has finite weights, but `acc` (scaled by the row scale only at the
//! end) can overflow to ±inf, or to NaN when blocks of both signs overflow, where the f64 sum
//! is finite. The CPU kernels keep this order and so behave the same there.

use crate::error::Result;
use crate::registry::FormatId;
use crate::scalar::E2M1_VALUES;

use super::block::{block_factor, block_scale, nibble, QK};
use super::header::{RowHeader, HEADER_BYTES};
use super::reference::BLOCK_BYTES;

/// The dot product (see the module doc). `w` holds one row of `x.len()` elements (lengths
/// checked by the caller); the header and every block scale are validated as by decode.
pub fn dot_row(format: FormatId, w: &[u8], x: &[f32]) -> Result<f32> {
    let nb = x.len() / QK;
    let rs = RowHeader::read(w).validate(format, nb)?;
    let mut acc = 0f32;
    for (b, xb) in x.chunks_exact(QK).enumerate() {
        let off = HEADER_BYTES + b * BLOCK_BYTES;
        let byte = w[off];
        // Validates the byte (and the combined scale) exactly as decode does.
        block_scale(format, rs, byte).map_err(|e| e.at(off))?;
        let factor = block_factor(format, byte).map_err(|e| e.at(off))?;
        let mut qs = [0u8; 16];
        qs.copy_from_slice(&w[off + 1..off + BLOCK_BYTES]);
        let mut s = 0f32;
        for (i, xi) in xb.iter().enumerate() {
            s += E2M1_VALUES[nibble(&qs, i) as usize] * *xi;
        }
        acc += s * factor;
    }
    Ok(acc * rs)
}
