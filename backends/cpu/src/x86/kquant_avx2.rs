//! Registry and `#[target_feature]` entry points of the AVX2 Q2_K, Q3_K and Q5_K kernels
//! (against Q8_K activations). The bodies live in [`super::q2k_avx2`] (Q2_K) and
//! [`super::kquant`] (Q3_K, Q5_K, in the lane order of its Q4_K and Q6_K); the length checks
//! are [`super::ext::check`]'s. Every kernel is bit-identical to the core's reference.
//!
//! What must not live here: kernel arithmetic, the AVX2 Q4_K and Q6_K entries (`super::ext`).

use std::ops::Range;

use lowbit_core::{Error, FormatId};

use super::ext::{check, Shape, W_Q2K, W_Q3K, W_Q5K};
use super::{kquant, q2k_avx2};
use crate::act::Acts;
use crate::kernels::Kernel;

/// The AVX2 kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Q2K => Some(Kernel { name: "avx2-q2_k", f: run::<W_Q2K> }),
        FormatId::Q3K => Some(Kernel { name: "avx2-q3_k", f: run::<W_Q3K> }),
        FormatId::Q5K => Some(Kernel { name: "avx2-q5_k", f: run::<W_Q5K> }),
        _ => None,
    }
}

fn run<const F: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let s = check::<F>(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` reaches only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; the lengths the
    // bodies rely on were checked by `check`.
    unsafe { entry::<F>(w, rb, s, cols, out) };
    Ok(())
}

/// Dispatch on format and tile size (1, 2..=4, wider columns).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `check` invariants hold for `F`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry<const F: u8>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match (F, cols.len()) {
            (W_Q2K, 1) => q2k_avx2::q2k::<1>(w, rb, s, cols, out),
            (W_Q2K, 2..=4) => q2k_avx2::q2k::<4>(w, rb, s, cols, out),
            (W_Q2K, _) => q2k_avx2::q2k::<16>(w, rb, s, cols, out),
            (W_Q3K, 1) => kquant::lanes::<W_Q3K, 1>(w, rb, s, cols, out),
            (W_Q3K, 2..=4) => kquant::lanes::<W_Q3K, 4>(w, rb, s, cols, out),
            (W_Q3K, _) => kquant::lanes::<W_Q3K, 16>(w, rb, s, cols, out),
            (_, 1) => kquant::lanes::<W_Q5K, 1>(w, rb, s, cols, out),
            (_, 2..=4) => kquant::lanes::<W_Q5K, 4>(w, rb, s, cols, out),
            (_, _) => kquant::lanes::<W_Q5K, 16>(w, rb, s, cols, out),
        }
    }
}
