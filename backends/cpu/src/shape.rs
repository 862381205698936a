//! Length checks shared by the SIMD kernels of every architecture: what an unsafe kernel
//! body relies on, checked once per call by its safe wrapper. A violation is an internal error
//! reported as [`Error::Length`].
//!
//! What must not live here: kernel bodies, format decoding.

use std::ops::Range;

use lowbit_core::error::Buffer;
use lowbit_core::{Error, FormatId};

use crate::act::{ActData, Acts};
use crate::kernels::MAX_TILE;

/// Bytes of the hipfire row header (f16 row scale at 0) that starts every HFP4-family row
/// (`lowbit_core::format::hipfire::header`).
pub(crate) const HFP4_HEADER: usize = 16;
/// Bytes of one HFP4-family block: a scale byte and 16 bytes of E2M1 nibbles.
pub(crate) const HFP4_BLOCK: usize = 17;

/// Checks `rb == 16 + nb * 17` with `nb * 32 == acts.k`, whole rows, a tile of 1..=16 columns
/// inside `acts`, `out.len() == rows * tile`, f32 activations of `n * k` values; returns the
/// activations and `nb`.
pub(crate) fn check_hfp4<'a>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<(&'a [f32], usize), Error> {
    let ActData::F32(x) = &acts.data else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: acts.row(0).format(),
        });
    };
    let nb = rb.saturating_sub(HFP4_HEADER) / HFP4_BLOCK;
    let nc = cols.len();
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let ok = nb != 0
        && rb == HFP4_HEADER + nb * HFP4_BLOCK
        && nb * 32 == acts.k
        && w.len() == rows * rb
        && (1..=MAX_TILE).contains(&nc)
        && cols.end <= acts.n
        && x.len() == acts.n * acts.k
        && out.len() == rows * nc;
    if !ok {
        return Err(Error::Length {
            format,
            buffer: Buffer::Activations,
            got: x.len(),
            expected: acts.n * acts.k,
        });
    }
    Ok((x, nb))
}
