//! aarch64 NEON kernels: the integer-activation formats ([`int`]: Q8_0, Q4_0, ROCmFP2 and
//! PQ2_0, PTQ1_0 against Q8_0; TQ2_0, TQ1_0 against Q8_K) and the HFP4 family with f32
//! activations ([`hfp4`]). Every other format falls back to the scalar kernel. [`Isa::Neon`]
//! and [`Isa::NeonDot`] share them; the latter's integer kernels use `sdot` (the HFP4 family
//! has nothing for it to do and runs the same code under both names).
//!
//! Each kernel is a safe `fn` matching [`RowsKernel`](crate::kernels::RowsKernel) that checks
//! every length the unsafe body relies on and then calls a `#[target_feature(enable = "neon")]`
//! entry point. The safe wrappers are private and reachable only through [`kernel`], which
//! `KernelTable::new` calls only after the ISA's `available()` detected NEON (and dotprod for
//! `NeonDot`) at run time (NEON is baseline on aarch64, but every ISA goes through the same
//! check): that is what makes the calls sound.
//!
//! Results are not bit-identical to the core's reference dot products (f32 sums in vector lanes,
//! FMA); each family states its bound constant `c` of the DESIGN.md bound
//! `|y - y_exact| <= c * K * 2^-24 * sum|terms|` in its module doc.
//!
//! What must not live here: x86 kernels, threading, activation preparation.

mod hfp4;
mod int;
mod q8;
mod ternary;

use lowbit_core::FormatId;

use crate::isa::Isa;
use crate::kernels::Kernel;

/// The NEON kernel for `(isa, format)`, if one exists.
pub(crate) fn kernel(isa: Isa, format: FormatId) -> Option<Kernel> {
    match isa {
        Isa::Neon => int::kernel::<false>(format).or_else(|| hfp4::kernel::<false>(format)),
        Isa::NeonDot => int::kernel::<true>(format).or_else(|| hfp4::kernel::<true>(format)),
        _ => None,
    }
}
