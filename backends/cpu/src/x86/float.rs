//! AVX-512 (F/BW/VL) kernels for the plain float formats F32, F16 and BF16 against f32
//! activations: FMA dot products, several rows per loop sharing each activation load.
//!
//! Per 16 elements: every row of the group loads and widens its 16 weights once (F32 as is;
//! F16 with `vcvtph2ps`, which is exact; BF16 by a 16-bit left shift of the zero-extended
//! halves, also exact), every column of the sub-tile loads its 16 activations once, and one
//! FMA per (row, column) adds the products into 16 f32 lanes. A tail of `K % 16` elements is
//! read with masked loads (masked-off lanes read nothing and are zero). At the end the 16
//! lanes are summed by a fixed tree (`lo256 + hi256`, then [`hsum_ps`]).
//!
//! Bound. Each product is exact inside its FMA; lane `l` adds the `ceil(K / 16)` products of
//! elements `l, l + 16, ...` in order (one rounding each) and the tree adds at most 4 more,
//! where additions of an all-zero lane are exact: each term carries at most
//! `min(K, ceil(K / 16) + 4) <= K` roundings, so `|y - y_exact| <= c * K * 2^-24 * sum|t|` with
//! **c = 1** (not bit-identical to the reference, which sums element by element).
//!
//! What must not live here: quantized formats, threading.

#![allow(clippy::incompatible_msrv)]
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use lowbit_core::error::Buffer;
use lowbit_core::{Error, FormatId};

use super::z512::hsum16;
use crate::act::{ActData, Acts};
use crate::kernels::{Kernel, MAX_TILE};

/// Weight code: F32.
pub(super) const F32: u8 = 0;
/// Weight code: F16.
pub(super) const F16: u8 = 1;
/// Weight code: BF16.
pub(super) const BF16: u8 = 2;

/// Bytes per weight of a code.
pub(super) const fn esize(t: u8) -> usize {
    if t == F32 {
        4
    } else {
        2
    }
}

/// Checks every length of a call of a float kernel of code `T` (this module's or
/// [`super::float2`]'s) and returns the activations of the tile's columns `cols`.
pub(super) fn checked_columns<'a, const T: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<&'a [f32], Error> {
    checked_f32_columns(format, w, rb, acts.k * esize(T), acts, cols, out)
}

/// Checks every length of a call of a kernel that takes f32 activations (the float formats,
/// `super::ternary68`) against the row size `row_bytes` its format has at the activations'
/// K, and returns the activations of the tile's columns `cols`.
pub(super) fn checked_f32_columns<'a>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    row_bytes: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<&'a [f32], Error> {
    let ActData::F32(x) = &acts.data else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: acts.row(0).format(),
        });
    };
    let k = acts.k;
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let nc = cols.len();
    let ok = rb != 0
        && rb == row_bytes
        && w.len() == rows * rb
        && (1..=MAX_TILE).contains(&nc)
        && cols.end <= acts.n
        && x.len() == acts.n * k
        && out.len() == rows * nc;
    if !ok {
        return Err(Error::Length {
            format,
            buffer: Buffer::Activations,
            got: x.len(),
            expected: acts.n * k,
        });
    }
    Ok(&x[cols.start * k..cols.end * k])
}

/// The kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::F32 => Some(Kernel { name: "avx512-f32", f: run::<F32> }),
        FormatId::F16 => Some(Kernel { name: "avx512-f16", f: run::<F16> }),
        FormatId::Bf16 => Some(Kernel { name: "avx512-bf16", f: run::<BF16> }),
        _ => None,
    }
}

fn run<const T: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let xs = checked_columns::<T>(format, w, rb, acts, &cols, out)?;
    let (k, nc) = (acts.k, cols.len());
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` reaches only for
    // `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2, FMA and
    // F16C; the lengths were checked above (`xs` holds `nc` columns of `k`).
    unsafe { entry::<T>(w, rb, k, xs, nc, out) };
    Ok(())
}

/// The weights of elements `i .. i + 16` (lanes outside `m` zero) of the row at `p`, as f32.
///
/// # Safety
/// Every element selected by `m` is readable; the features of [`entry`] are available.
#[inline(always)]
unsafe fn load_w<const T: u8>(p: *const u8, i: usize, m: __mmask16) -> __m512 {
    // SAFETY: masked loads read only the selected elements (caller); register-only operations.
    unsafe {
        // A full mask (a compile-time constant in the main loop) takes plain loads, which
        // fold into the conversion.
        let full = m == 0xFFFF;
        match T {
            F32 if full => _mm512_loadu_ps(p.add(4 * i).cast()),
            F32 => _mm512_maskz_loadu_ps(m, p.add(4 * i).cast()),
            _ => {
                let h = if full {
                    _mm256_loadu_si256(p.add(2 * i).cast())
                } else {
                    _mm256_maskz_loadu_epi16(m, p.add(2 * i).cast())
                };
                if T == F16 {
                    _mm512_cvtph_ps(h)
                } else {
                    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
                }
            }
        }
    }
}

/// How far ahead each row stream prefetches, into L2: one row group (`R` rows of `rb` bytes),
/// 8 KiB at least, as [`super::Prefetch::one_group_ahead`] does for the quantized drivers.
/// Against the former L1 prefetch 1 KiB ahead, with the weights read from memory (`lowbit
/// bench` cycling through copies), F16, n = 1, µs one / two threads, two interleaved rounds,
/// 2026-12-01 20:23 UTC: 4096 x 14336 8166 / 5200 -> 5232 / 4300, 14336 x 4096 8966 / 5526 ->
/// 5085 / 4653; a fixed 8 KiB ahead in L2 gave 6340 / 3840 and 7047 / 5410.
fn prefetch_ahead<const R: usize>(rb: usize) -> usize {
    (R * rb).max(8 << 10)
}

/// Rows in groups of `R`, columns in sub-tiles of `CT` (the last row / column repeated, extra
/// results discarded). No intrinsics inside closures: a closure does not inherit `entry`'s
/// target features, so they would not be inlined.
///
/// # Safety
/// The features of [`entry`] are available; `w` is whole rows of `rb = k * esize(T)` bytes;
/// `x` holds `ncols >= 1` columns of `k`; `out.len() == rows * ncols`.
#[inline(always)]
unsafe fn drive<const T: u8, const R: usize, const CT: usize>(
    w: &[u8],
    rb: usize,
    k: usize,
    x: &[f32],
    ncols: usize,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let ahead = prefetch_ahead::<R>(rb);
    let full = k / 16 * 16;
    let tail: __mmask16 = (1u32 << (k - full)).wrapping_sub(1) as __mmask16;
    // SAFETY: row pointers are clamped to `nrows - 1` and column pointers to the last column;
    // unmasked loads read elements `< full <= k`, masked ones only elements `< k`; the
    // prefetch hint never faults.
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let here = (nrows - r0).min(R);
            let rp: [*const u8; R] =
                core::array::from_fn(|i| w.as_ptr().add((r0 + i.min(here - 1)) * rb));
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let xp: [*const f32; CT] =
                    core::array::from_fn(|jj| x.as_ptr().add((c0 + jj.min(nc - 1)) * k));
                let mut acc = [[_mm512_setzero_ps(); CT]; R];
                let mut i = 0;
                while i < full {
                    let mut wv = [_mm512_setzero_ps(); R];
                    for r in 0..R {
                        let p = rp[r];
                        _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(esize(T) * i + ahead).cast());
                        wv[r] = load_w::<T>(p, i, 0xFFFF);
                    }
                    for jj in 0..CT {
                        let xv = _mm512_loadu_ps(xp[jj].add(i));
                        for r in 0..R {
                            acc[r][jj] = _mm512_fmadd_ps(wv[r], xv, acc[r][jj]);
                        }
                    }
                    i += 16;
                }
                if tail != 0 {
                    let mut wv = [_mm512_setzero_ps(); R];
                    for r in 0..R {
                        wv[r] = load_w::<T>(rp[r], i, tail);
                    }
                    for jj in 0..CT {
                        let xv = _mm512_maskz_loadu_ps(tail, xp[jj].add(i));
                        for r in 0..R {
                            acc[r][jj] = _mm512_fmadd_ps(wv[r], xv, acc[r][jj]);
                        }
                    }
                }
                for r in 0..here {
                    for jj in 0..nc {
                        out[(r0 + r) * ncols + c0 + jj] = hsum16(acc[r][jj]);
                    }
                }
                c0 += CT;
            }
            r0 += R;
        }
    }
}

/// Column-count dispatch.
///
/// # Safety
/// As [`drive`], plus AVX-512 F/BW/VL, AVX2, FMA and F16C are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn entry<const T: u8>(
    w: &[u8],
    rb: usize,
    k: usize,
    x: &[f32],
    ncols: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match ncols {
            1 => drive::<T, 8, 1>(w, rb, k, x, ncols, out),
            2 => drive::<T, 4, 2>(w, rb, k, x, ncols, out),
            _ => drive::<T, 4, 4>(w, rb, k, x, ncols, out),
        }
    }
}
