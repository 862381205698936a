//! AVX-512 (F/BW/VL) kernels. These compile the AVX2 kernel body (`super::avx2::body`) with
//! the AVX-512 features enabled, so the 256-bit operations get EVEX encodings and 32 vector
//! registers, which lets a 16-column tile keep its 16 accumulators and 4-row groups serve up to
//! 4 columns without spilling. Same arithmetic and bound (c = 1) as the AVX2 body.

use std::ops::Range;

use lowbit_core::format::ggml::BlockQ8_0;
use lowbit_core::{Error, FormatId};

use super::avx2::body;
use super::{block_bytes, check_q8_0, W_FP2, W_Q4_0, W_Q8_0};
use crate::act::Acts;
use crate::kernels::Kernel;

/// The AVX-512 kernel for `format`, if one exists.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Q8_0 => Some(Kernel { name: "avx512-q8_0", f: q8_0 }),
        FormatId::Q4_0 => Some(Kernel { name: "avx512-q4_0", f: q4_0 }),
        FormatId::RocmFp2 => Some(Kernel { name: "avx512-rocmfp2", f: fp2 }),
        _ => None,
    }
}

fn q8_0(
    f: FormatId,
    w: &[u8],
    rb: usize,
    a: &Acts,
    c: Range<usize>,
    o: &mut [f32],
) -> Result<(), Error> {
    run::<W_Q8_0>(f, w, rb, a, c, o)
}

fn q4_0(
    f: FormatId,
    w: &[u8],
    rb: usize,
    a: &Acts,
    c: Range<usize>,
    o: &mut [f32],
) -> Result<(), Error> {
    run::<W_Q4_0>(f, w, rb, a, c, o)
}

fn fp2(
    f: FormatId,
    w: &[u8],
    rb: usize,
    a: &Acts,
    c: Range<usize>,
    o: &mut [f32],
) -> Result<(), Error> {
    run::<W_FP2>(f, w, rb, a, c, o)
}

fn run<const F: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let ck = check_q8_0(format, w, rb, acts, &cols, out, block_bytes(F))?;
    // SAFETY: this wrapper is reachable only through `kernel`, which `KernelTable::new` calls
    // only for `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2,
    // FMA and F16C; the lengths the body relies on were checked by `check_q8_0`.
    unsafe { entry::<F>(w, rb, ck.nb, ck.a, ck.ad, cols, out) };
    Ok(())
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn entry<const F: u8>(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8_0],
    ad: &[f32],
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees the features and the `check_q8_0` invariants.
    unsafe {
        match cols.len() {
            1 => body::<F, 1, 4>(w, rb, nb, a, ad, cols, out),
            2 => body::<F, 2, 4>(w, rb, nb, a, ad, cols, out),
            3 => body::<F, 3, 4>(w, rb, nb, a, ad, cols, out),
            4 => body::<F, 4, 4>(w, rb, nb, a, ad, cols, out),
            5..=8 => body::<F, 8, 2>(w, rb, nb, a, ad, cols, out),
            _ => body::<F, 16, 1>(w, rb, nb, a, ad, cols, out),
        }
    }
}
