//! The scalar fallback: every format through the core's reference dot product
//! ([`codec::dot_row`]), one call per row and column. Correct by construction (it *is* the
//! reference, so results are bit-identical to `ReferenceBackend`); no SIMD, no `unsafe`.

use std::ops::Range;

use lowbit_core::codec;
use lowbit_core::{Error, FormatId};

use crate::act::Acts;
use crate::kernels::Kernel;

/// The generic kernel (any format the core decodes).
pub(crate) const GENERIC: Kernel = Kernel { name: "scalar-reference", f: generic };

fn generic(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let nc = cols.len();
    for (r, (row, o)) in w.chunks_exact(rb).zip(out.chunks_exact_mut(nc)).enumerate() {
        for (j, y) in cols.clone().zip(o.iter_mut()) {
            *y = codec::dot_row(format, row, acts.row(j)).map_err(|e| e.at(r * rb))?;
        }
    }
    Ok(())
}
