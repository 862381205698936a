//! AVX2 (with FMA and F16C) kernels for the plain float formats F32, F16 and BF16 against f32
//! activations: the 8-lane counterpart of [`super::float`] (same loop shape: every row of the
//! group widens its 8 weights once, every column of the sub-tile loads its 8 activations once,
//! one FMA per (row, column)). F16 is widened by `vcvtph2ps` and BF16 by a 16-bit left shift,
//! both exact. A tail of `K % 8` elements is copied into zero-padded stack buffers.
//!
//! Bound. Lane `l` adds the products of elements `l, l + 8, ...` in order (one rounding each,
//! the product itself is exact inside the FMA) and [`hsum_ps`] adds at most 3 more, where
//! additions of an all-zero lane are exact: each term carries at most
//! `min(K, ceil(K / 8) + 3) <= K` roundings, so `|y - y_exact| <= c * K * 2^-24 * sum|t|` with
//! **c = 1**.
//!
//! What must not live here: quantized formats, the AVX-512 bodies, threading.

#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;
use std::ptr;

use lowbit_core::{Error, FormatId};

use super::avx2::hsum_ps;
use super::float::{checked_columns, esize, BF16, F16, F32};
use crate::act::Acts;
use crate::kernels::Kernel;

/// The kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::F32 => Some(Kernel { name: "avx2-f32", f: run::<F32> }),
        FormatId::F16 => Some(Kernel { name: "avx2-f16", f: run::<F16> }),
        FormatId::Bf16 => Some(Kernel { name: "avx2-bf16", f: run::<BF16> }),
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
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; the lengths were
    // checked above (`xs` holds `nc` columns of `k`).
    unsafe { entry::<T>(w, rb, k, xs, nc, out) };
    Ok(())
}

/// The 8 weights at element `i` of the row at `p`, as f32.
///
/// # Safety
/// Elements `i .. i + 8` are readable; the features of [`entry`] are available.
#[inline(always)]
unsafe fn load_w<const T: u8>(p: *const u8, i: usize) -> __m256 {
    // SAFETY: reads 8 elements (caller); register-only operations.
    unsafe {
        match T {
            F32 => _mm256_loadu_ps(p.add(4 * i).cast()),
            F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * i).cast())),
            _ => {
                let h = _mm_loadu_si128(p.add(2 * i).cast());
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
            }
        }
    }
}

/// Bytes ahead that each row stream prefetches.
const PF: usize = 1024;

/// Rows in groups of `R`, columns in sub-tiles of `CT` (the last row / column repeated, extra
/// results discarded). No intrinsics inside closures (they would not inherit `entry`'s
/// target features).
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
    let full = k / 8 * 8;
    let rest = k - full;
    // SAFETY: row pointers are clamped to `nrows - 1` and column pointers to the last column;
    // vector loads read elements `< full <= k`; the tail copies read elements `full .. k`
    // into buffers of 8 elements; the prefetch hint never faults.
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
                let mut acc = [[_mm256_setzero_ps(); CT]; R];
                let mut i = 0;
                while i < full {
                    let mut wv = [_mm256_setzero_ps(); R];
                    for r in 0..R {
                        let p = rp[r];
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(esize(T) * i + PF).cast());
                        wv[r] = load_w::<T>(p, i);
                    }
                    for jj in 0..CT {
                        let xv = _mm256_loadu_ps(xp[jj].add(i));
                        for r in 0..R {
                            acc[r][jj] = _mm256_fmadd_ps(wv[r], xv, acc[r][jj]);
                        }
                    }
                    i += 8;
                }
                if rest != 0 {
                    let mut wv = [_mm256_setzero_ps(); R];
                    for r in 0..R {
                        let mut buf = [0u8; 32];
                        let n = rest * esize(T);
                        ptr::copy_nonoverlapping(rp[r].add(full * esize(T)), buf.as_mut_ptr(), n);
                        wv[r] = load_w::<T>(buf.as_ptr(), 0);
                    }
                    for jj in 0..CT {
                        let mut xb = [0f32; 8];
                        ptr::copy_nonoverlapping(xp[jj].add(full), xb.as_mut_ptr(), rest);
                        let xv = _mm256_loadu_ps(xb.as_ptr());
                        for r in 0..R {
                            acc[r][jj] = _mm256_fmadd_ps(wv[r], xv, acc[r][jj]);
                        }
                    }
                }
                for r in 0..here {
                    for jj in 0..nc {
                        out[(r0 + r) * ncols + c0 + jj] = hsum_ps(acc[r][jj]);
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
/// As [`drive`], plus AVX2, FMA and F16C are available.
#[target_feature(enable = "avx2,fma,f16c")]
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
            1 => drive::<T, 4, 1>(w, rb, k, x, ncols, out),
            2 => drive::<T, 4, 2>(w, rb, k, x, ncols, out),
            _ => drive::<T, 3, 3>(w, rb, k, x, ncols, out),
        }
    }
}
