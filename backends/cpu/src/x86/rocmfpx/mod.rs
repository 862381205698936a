//! ROCmFP2 and ROCmFP3 kernels for AVX2 and AVX-512 against Q8_0 activations: registry,
//! upload-time repack, checks and `#[target_feature]` entry points. The activation layout and
//! its builder live in [`prep`], the kernel bodies (and their accumulation bound, c = 1) in
//! [`body`], each format's repacked weight layouts and decoders in [`fp2`], [`fp3`] and
//! [`fp3avx2`].
//!
//! The activation columns are laid out in the kernel order once per matmul call ([`prep_acts`],
//! run by the driver through `kernels::Extras::prep`); a kernel call that finds no such layout
//! (or one of the wrong size) builds the tile's own ([`prep::build`]). The weights are
//! repacked at upload ([`body::repack_row`]): ROCmFP2 into [`fp2`]'s layout, ROCmFP3 into
//! [`fp3`]'s for the AVX-512 kernels and [`fp3avx2`]'s (signs placed for `vpblendvb`) for the
//! AVX2 one. Tiles of n = 2..12 columns decode each group of 8
//! weight blocks once per row and reuse it for every column; 13..16 run as two sub-tiles of 8
//! (one decode each).
//!
//! What must not live here: kernel arithmetic, formats outside the ROCmFPX family.

#![allow(clippy::incompatible_msrv)]

mod body;
mod fp2;
mod fp3;
mod fp3avx2;
mod prep;

use std::ops::Range;

use lowbit_core::format::ggml::BlockQ8_0;
use lowbit_core::{Error, FormatId};

use super::check_q8_0;
use crate::act::{Acts, Layout};
use crate::isa::Isa;
use crate::kernels::{Extras, Kernel};
use body::{Codec, Codec256, Codec512};
use fp2::Fp2;
use fp3::Fp3;
use fp3avx2::Fp3Avx2;
use prep::{Group, GROUP};

/// The kernel of this module for `(isa, format)`, if one exists.
pub(crate) fn kernel(isa: Isa, format: FormatId) -> Option<Kernel> {
    match (isa, format) {
        (Isa::Avx2, FormatId::RocmFp2) => {
            Some(Kernel { name: "avx2-rocmfp2-g8", f: run_avx2::<Fp2> })
        }
        (Isa::Avx512, FormatId::RocmFp2) => {
            Some(Kernel { name: "avx512-rocmfp2-g8", f: run_avx512::<Fp2> })
        }
        (Isa::Avx2, FormatId::RocmFp3) => {
            Some(Kernel { name: "avx2-rocmfp3-g8s", f: run_avx2::<Fp3Avx2> })
        }
        (Isa::Avx512, FormatId::RocmFp3) => {
            Some(Kernel { name: "avx512-rocmfp3-g8", f: run_avx512::<Fp3> })
        }
        (Isa::Avx512Vnni, FormatId::RocmFp2) => {
            Some(Kernel { name: "avx512-vnni-rocmfp2-g8", f: run_avx512_vnni::<Fp2> })
        }
        (Isa::Avx512Vnni, FormatId::RocmFp3) => {
            Some(Kernel { name: "avx512-vnni-rocmfp3-g8", f: run_avx512_vnni::<Fp3> })
        }
        _ => None,
    }
}

/// The repack and activation-layout hooks of this module's kernel for `(isa, format)` (the
/// `Isa::Avx512Vnni` kernels use the `Isa::Avx512` ones: same layouts).
pub(crate) fn extras(isa: Isa, format: FormatId) -> Extras {
    let isa = if isa == Isa::Avx512Vnni { Isa::Avx512 } else { isa };
    match (isa, format) {
        (Isa::Avx2 | Isa::Avx512, FormatId::RocmFp2) => {
            Extras { repack: Some(body::repack_row::<Fp2>), prep: Some(prep_acts), gemm: None }
        }
        (Isa::Avx2, FormatId::RocmFp3) => {
            Extras { repack: Some(body::repack_row::<Fp3Avx2>), prep: Some(prep_acts), gemm: None }
        }
        (Isa::Avx512, FormatId::RocmFp3) => {
            Extras { repack: Some(body::repack_row::<Fp3>), prep: Some(prep_acts), gemm: None }
        }
        _ => Extras::default(),
    }
}

/// The activation groups of every column of `acts` (a `Vec<Group>`, `n * ceil(K / 256)`
/// groups, column after column), or `None` when `acts` is not Q8_0.
///
/// Registered (through [`extras`]) only for `Isa::Avx2` and `Isa::Avx512`, whose availability
/// `KernelTable::new` has checked: that is what makes the AVX2 call sound.
fn prep_acts(acts: &Acts) -> Option<Layout> {
    let crate::act::ActData::Q8_0 { blocks, d } = &acts.data else { return None };
    let nb = acts.k / 32;
    let ng = nb.div_ceil(GROUP);
    if nb == 0 || blocks.len() != acts.n * nb || d.len() != blocks.len() {
        return None;
    }
    let mut g = vec![prep::ZERO; acts.n * ng];
    use rayon::prelude::*;
    g.par_chunks_mut(ng).enumerate().for_each(|(j, out)| {
        // SAFETY: AVX2 is available (see above); column `j < n` has `nb` blocks and scales in
        // `blocks`/`d` (lengths checked above) and `out` holds `ng` groups.
        unsafe { build_avx2(blocks, d, nb, j..j + 1, out) };
    });
    Some(Layout(std::sync::Arc::new(g)))
}

/// [`prep::build`] compiled for AVX2.
///
/// # Safety
/// AVX2 is available; the invariants of [`prep::build`] hold.
#[target_feature(enable = "avx2")]
unsafe fn build_avx2(
    a: &[BlockQ8_0],
    ad: &[f32],
    nb: usize,
    cols: Range<usize>,
    out: &mut [Group],
) {
    // SAFETY: forwarded from the caller.
    unsafe { prep::build(a, ad, nb, cols, out) }
}

/// The activation groups of the call's tile: the columns `cols` of the once-per-call layout
/// where `acts` has one of the right size, otherwise built here.
enum Groups<'a> {
    /// The shared layout (all columns) and the index of the tile's first group.
    Shared(&'a [Group], usize),
    /// Built for this tile only (columns `cols` from 0).
    Own(Vec<Group>),
}

/// The checked inputs of a call and the activation groups of its tile.
fn setup<'a, C: Codec>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<(usize, Groups<'a>), Error> {
    let ck = check_q8_0(format, w, rb, acts, cols, out, C::BLOCK)?;
    let ng = ck.nb.div_ceil(GROUP);
    let shared = acts.layout.as_ref().and_then(|l| l.0.downcast_ref::<Vec<Group>>());
    let groups = match shared {
        Some(g) if g.len() == acts.n * ng => Groups::Shared(g, cols.start * ng),
        _ => Groups::Own(vec![prep::ZERO; cols.len() * ng]),
    };
    Ok((ck.nb, groups))
}

/// The tile's activation groups: the shared layout's, or built into the tile's own.
fn tile_groups<'a>(
    groups: &'a mut Groups<'_>,
    acts: &Acts,
    nb: usize,
    cols: &Range<usize>,
) -> &'a [Group] {
    match groups {
        Groups::Shared(g, first) => &g[*first..],
        Groups::Own(v) => {
            let (a, ad) = blocks(acts);
            // SAFETY: this module's kernels (the only callers) are reachable only through
            // `kernel`, for AVX2/AVX-512 after `KernelTable::new` checked the ISA is available,
            // so AVX2 is; `check_q8_0` checked `a`/`ad` hold `nb` entries for every column of
            // `cols`, and `v` has `cols.len() * ng` groups (`setup`).
            unsafe { build_avx2(a, ad, nb, cols.clone(), v) };
            v
        }
    }
}

/// An entry point of this module: `(w, rb, nb, n, g, out)`, compiled for one instruction set.
type Entry = unsafe fn(&[u8], usize, usize, usize, &[Group], &mut [f32]);

/// A call of `entry` on the checked inputs and the tile's activation groups.
///
/// # Safety
/// The instruction set `entry` is compiled for is available.
unsafe fn run<C: Codec>(
    entry: Entry,
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (nb, mut groups) = setup::<C>(format, w, rb, acts, &cols, out)?;
    let g = tile_groups(&mut groups, acts, nb, &cols);
    // SAFETY: the caller guarantees `entry`'s instruction set; `check_q8_0` checked the lengths
    // the bodies rely on, and `g` holds the tile's `cols.len() * ng` groups from its start
    // (`setup`: an own vector of that size, or the shared layout of `acts.n * ng` groups from
    // the tile's first column); `w` was repacked at upload.
    unsafe { entry(w, rb, nb, cols.len(), g, out) };
    Ok(())
}

fn run_avx2<C: Codec256>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` calls only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C (and from
    // `fp3avx2`'s tests after the same check).
    unsafe { run::<C>(entry_avx2::<C>, format, w, rb, acts, cols, out) }
}

fn run_avx512<C: Codec512>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` calls only for
    // `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2, FMA and
    // F16C.
    unsafe { run::<C>(entry_avx512::<C>, format, w, rb, acts, cols, out) }
}

fn run_avx512_vnni<C: Codec512>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` calls for
    // `Isa::Avx512Vnni` only after `Isa::Avx512Vnni.available()` detected AVX-512 F/BW/VL and
    // VNNI, AVX2, FMA and F16C.
    unsafe { run::<C>(entry_avx512_vnni::<C>, format, w, rb, acts, cols, out) }
}

/// The Q8_0 blocks and f32 scales of `acts` (`check_q8_0` has confirmed the variant).
fn blocks(acts: &Acts) -> (&[BlockQ8_0], &[f32]) {
    match &acts.data {
        crate::act::ActData::Q8_0 { blocks, d } => (blocks, d),
        _ => (&[], &[]),
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry_avx2<C: Codec256>(
    w: &[u8],
    rb: usize,
    nb: usize,
    n: usize,
    g: &[Group],
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees the features and the `check_q8_0` invariants; `g` holds
    // the tile's `n * ng` groups from its start.
    unsafe {
        match n {
            1 => body::body256::<C, 2, 1>(w, rb, nb, g, n, out),
            2 => body::body256::<C, 2, 2>(w, rb, nb, g, n, out),
            3 => body::body256::<C, 1, 3>(w, rb, nb, g, n, out),
            4 => body::body256::<C, 1, 4>(w, rb, nb, g, n, out),
            5 => body::body256::<C, 1, 5>(w, rb, nb, g, n, out),
            6 => body::body256::<C, 1, 6>(w, rb, nb, g, n, out),
            7 => body::body256::<C, 1, 7>(w, rb, nb, g, n, out),
            _ => body::body256::<C, 1, 8>(w, rb, nb, g, n, out),
        }
    }
}

/// [`entry_avx512`] with AVX-512 VNNI: the `vpdpbusd` dot (same results).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn entry_avx512_vnni<C: Codec512>(
    w: &[u8],
    rb: usize,
    nb: usize,
    n: usize,
    g: &[Group],
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller (features and invariants).
    unsafe { bodies512::<C, true>(w, rb, nb, n, g, out) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn entry_avx512<C: Codec512>(
    w: &[u8],
    rb: usize,
    nb: usize,
    n: usize,
    g: &[Group],
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller (features and invariants).
    unsafe { bodies512::<C, false>(w, rb, nb, n, g, out) }
}

/// The AVX-512 bodies by column count (`V`: the `vpdpbusd` dot).
///
/// # Safety
/// The features of [`entry_avx512`] (`V`: of [`entry_avx512_vnni`]) are available; the
/// `check_q8_0` invariants hold and `g` holds the tile's `n * ng` groups from its start.
#[inline(always)]
unsafe fn bodies512<C: Codec512, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    n: usize,
    g: &[Group],
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees the features and the `check_q8_0` invariants; `g` holds
    // the tile's `n * ng` groups from its start.
    unsafe {
        match n {
            1 => body::body512::<C, 4, 1, V>(w, rb, nb, g, n, out),
            2 => body_any::<C, 2, 2, V>(w, rb, nb, g, n, out),
            3 => body_any::<C, 2, 3, V>(w, rb, nb, g, n, out),
            4 => body_any::<C, 2, 4, V>(w, rb, nb, g, n, out),
            5 => body_any::<C, 1, 5, V>(w, rb, nb, g, n, out),
            6 => body_any::<C, 1, 6, V>(w, rb, nb, g, n, out),
            7 => body_any::<C, 1, 7, V>(w, rb, nb, g, n, out),
            8 => body_any::<C, 1, 8, V>(w, rb, nb, g, n, out),
            9..=12 => body_any::<C, 1, 12, V>(w, rb, nb, g, n, out),
            // Two sub-tiles of 8: one of 16 columns leaves `body512_seg` segments of 2 groups
            // (16 x 384-byte groups per weight group in a 16 KiB budget) and ran 1.4-1.7x
            // slower at 4096 x 14336 (docs/BENCHMARKS.md, "Session 9 (n4)").
            _ => body_any::<C, 1, 8, V>(w, rb, nb, g, n, out),
        }
    }
}

/// [`body::body512`], or [`body::body512_seg`] when a row's activation groups for `CT`
/// columns overflow the L1 budget (the same bits either way).
///
/// # Safety
/// As [`body::body512`].
#[inline(always)]
unsafe fn body_any<C: Codec512, const R: usize, const CT: usize, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    g: &[Group],
    n: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller (both bodies have the same contract).
    unsafe {
        if body::segmented::<CT>(nb) {
            body::body512_seg::<C, R, CT, V>(w, rb, nb, g, n, out)
        } else {
            body::body512::<C, R, CT, V>(w, rb, nb, g, n, out)
        }
    }
}
