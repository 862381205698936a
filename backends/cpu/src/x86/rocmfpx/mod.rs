//! ROCmFP2 kernels for AVX2 and AVX-512 against Q8_0 activations: registry, checks and
//! `#[target_feature]` entry points. The activation layout and its builder live in [`prep`],
//! the kernel bodies (and their accumulation bound, c = 1) in [`fp2`].
//!
//! Each call first lays out the tile's activation columns in the kernel order ([`prep::build`],
//! K/32 blocks per column: small next to the rows of the chunk), then runs the body. Tiles of
//! n = 2..16 columns decode each group of 8 weight blocks once per row and reuse it for every
//! column.
//!
//! What must not live here: kernel arithmetic, other formats.

#![allow(clippy::incompatible_msrv)]

mod fp2;
mod prep;

use std::ops::Range;

use lowbit_core::format::ggml::BlockQ8_0;
use lowbit_core::{Error, FormatId};

use super::check_q8_0;
use crate::act::Acts;
use crate::isa::Isa;
use crate::kernels::Kernel;
use prep::{Group, GROUP};

/// The kernel of this module for `(isa, format)`, if one exists.
pub(crate) fn kernel(isa: Isa, format: FormatId) -> Option<Kernel> {
    match (isa, format) {
        (Isa::Avx2, FormatId::RocmFp2) => Some(Kernel { name: "avx2-rocmfp2-g8", f: run_avx2 }),
        (Isa::Avx512, FormatId::RocmFp2) => {
            Some(Kernel { name: "avx512-rocmfp2-g8", f: run_avx512 })
        }
        _ => None,
    }
}

/// The checked inputs of a call and the activation groups of its tile.
fn setup(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<(usize, Vec<Group>), Error> {
    let ck = check_q8_0(format, w, rb, acts, cols, out, 10)?;
    let groups = vec![prep::ZERO; cols.len() * ck.nb.div_ceil(GROUP)];
    Ok((ck.nb, groups))
}

fn run_avx2(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (nb, mut groups) = setup(format, w, rb, acts, &cols, out)?;
    let (a, ad) = blocks(acts);
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` calls only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; `check_q8_0`
    // checked the lengths the bodies rely on and `groups` has `cols.len() * ng` entries.
    unsafe { entry_avx2(w, rb, nb, a, ad, cols, &mut groups, out) };
    Ok(())
}

fn run_avx512(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (nb, mut groups) = setup(format, w, rb, acts, &cols, out)?;
    let (a, ad) = blocks(acts);
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` calls only for
    // `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2, FMA and
    // F16C; `check_q8_0` checked the lengths and `groups` has `cols.len() * ng` entries.
    unsafe { entry_avx512(w, rb, nb, a, ad, cols, &mut groups, out) };
    Ok(())
}

/// The Q8_0 blocks and f32 scales of `acts` (`check_q8_0` has confirmed the variant).
fn blocks(acts: &Acts) -> (&[BlockQ8_0], &[f32]) {
    match &acts.data {
        crate::act::ActData::Q8_0 { blocks, d } => (blocks, d),
        _ => (&[], &[]),
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn entry_avx2(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8_0],
    ad: &[f32],
    cols: Range<usize>,
    g: &mut [Group],
    out: &mut [f32],
) {
    let n = cols.len();
    // SAFETY: the caller guarantees the features and the `check_q8_0` invariants.
    unsafe {
        prep::build(a, ad, nb, cols, g);
        match n {
            1 => fp2::body256::<2, 1>(w, rb, nb, g, n, out),
            2 => fp2::body256::<2, 2>(w, rb, nb, g, n, out),
            3 => fp2::body256::<1, 3>(w, rb, nb, g, n, out),
            4 => fp2::body256::<1, 4>(w, rb, nb, g, n, out),
            5 => fp2::body256::<1, 5>(w, rb, nb, g, n, out),
            6 => fp2::body256::<1, 6>(w, rb, nb, g, n, out),
            7 => fp2::body256::<1, 7>(w, rb, nb, g, n, out),
            _ => fp2::body256::<1, 8>(w, rb, nb, g, n, out),
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn entry_avx512(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8_0],
    ad: &[f32],
    cols: Range<usize>,
    g: &mut [Group],
    out: &mut [f32],
) {
    let n = cols.len();
    // SAFETY: the caller guarantees the features and the `check_q8_0` invariants.
    unsafe {
        prep::build(a, ad, nb, cols, g);
        match n {
            1 => fp2::body512::<2, 1>(w, rb, nb, g, n, out),
            2 => fp2::body512::<2, 2>(w, rb, nb, g, n, out),
            3 => fp2::body512::<2, 3>(w, rb, nb, g, n, out),
            4 => fp2::body512::<2, 4>(w, rb, nb, g, n, out),
            5 => fp2::body512::<1, 5>(w, rb, nb, g, n, out),
            6 => fp2::body512::<1, 6>(w, rb, nb, g, n, out),
            7 => fp2::body512::<1, 7>(w, rb, nb, g, n, out),
            8 => fp2::body512::<1, 8>(w, rb, nb, g, n, out),
            9..=12 => fp2::body512::<1, 12>(w, rb, nb, g, n, out),
            _ => fp2::body512::<1, 16>(w, rb, nb, g, n, out),
        }
    }
}
