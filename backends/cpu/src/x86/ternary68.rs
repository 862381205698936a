//! AVX2 and AVX-512 kernels for `Ternary68` (1bit's packed ternary layout, 68 bytes per 256
//! values) against f32 activations, the activation type its reference takes.
//!
//! Decode. Four code bytes hold 16 values, value `j` at bits `2j` of the little-endian `u32`
//! (core `format/onebit/ternary68.rs`: value `i` at bits `2(i % 4)` of byte `i / 4`). The `u32`
//! is broadcast to every 32-bit lane and shifted right by `2j` per lane (`vpsrlvd`), which
//! leaves value `j`'s code in bits 0..2. An in-lane `vpermilps`, which reads only those two
//! bits, then picks from a per-(row, group) table `d_g * [-1, 0, 1, 0]` held in every 128-bit
//! lane. (The lane-crossing `vpermps` did the same with a longer table and was 1.2-1.5x slower
//! on a Zen 3: BENCHMARKS "Session 13 (lead)".) The weight `t * d_g` comes out exact (`t` is
//! -1, 0 or +1; `d_g` is an
//! f16 value), and so is its product with `x` inside the FMA. Code 3 never reaches a kernel:
//! the upload decodes every row and refuses it, as the reference does.
//!
//! Bound. The reference sums `t * x` per 128-value group and scales the group sum by `d_g`;
//! here each lane adds the exact products `(t * d_g) * x` of its elements in order (one
//! rounding each; a single AVX2 column splits them over two accumulators, added first) and the
//! lanes are summed at the end (3 or 4 more). Each term carries at most `K / 8 + 4 <= K`
//! roundings (K >= 256), so `|y - y_exact| <= c * K * 2^-24 * sum|t|` with
//! **c = 1**. Non-finite activations give the reference's NaN or inf (a zero weight times an
//! infinity is NaN in both).
//!
//! Rows in groups of `R`, columns in sub-tiles of `CT` (the last row / column repeated, extra
//! results discarded): n = 1 runs four row streams, wider tiles reuse each decoded weight
//! vector for every column of the tile.
//!
//! The AVX-512 intrinsics are stable since Rust 1.89 (above the workspace MSRV of 1.85, as in
//! the other AVX-512 modules), hence the `incompatible_msrv` allowance.
//!
//! What must not live here: the other ternary formats (x86/ternary.rs, x86/ext.rs,
//! x86/tq1_512.rs), the Q4_0 repack (core), threading.

#![allow(clippy::incompatible_msrv)]
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use lowbit_core::{Error, FormatId};

use super::avx2::hsum_ps;
use super::float::checked_f32_columns;
use super::z512::hsum16;
use crate::act::Acts;
use crate::kernels::Kernel;

/// Block bytes: `d0`, `d1` (f16), 64 code bytes.
const BB: usize = 68;
/// Values per block.
const QK: usize = 256;
/// Bytes ahead that each row stream prefetches.
const PF: usize = 1024;

/// The AVX2 kernel for `format`, if this module has one.
pub(crate) fn kernel_avx2(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Ternary68 => Some(Kernel { name: "avx2-ternary68", f: run_avx2 }),
        _ => None,
    }
}

/// The AVX-512 kernel for `format`, if this module has one.
pub(crate) fn kernel_avx512(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Ternary68 => Some(Kernel { name: "avx512-ternary68", f: run_avx512 }),
        _ => None,
    }
}

/// The tile's activation columns, after checking every length the kernel bodies rely on.
fn checked<'a>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<&'a [f32], Error> {
    // K must be whole blocks: `k / QK * BB` alone would accept a partial last block.
    let row_bytes = if acts.k % QK == 0 { acts.k / QK * BB } else { 0 };
    checked_f32_columns(format, w, rb, row_bytes, acts, cols, out)
}

fn run_avx2(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let xs = checked(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel_avx2`, which `KernelTable::new` reaches only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; the lengths were
    // checked above (`xs` holds `cols.len()` columns of `k`, `w` whole rows of `rb`).
    unsafe { entry_avx2(w, rb, acts.k, xs, cols.len(), out) };
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
    let xs = checked(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel_avx512`, which `KernelTable::new` reaches only for
    // `Isa::Avx512` / `Isa::Avx512Vnni` after `available()` detected AVX-512 F/BW/VL (and
    // AVX2, FMA, F16C); the lengths were checked above.
    unsafe { entry_avx512(w, rb, acts.k, xs, cols.len(), out) };
    Ok(())
}

/// The group scale `d_g` (f16 at byte `2g` of the block at `p`) widened exactly by `vcvtph2ps`
/// into every lane.
///
/// # Safety
/// The block's first 4 bytes are readable; F16C is available.
#[inline(always)]
unsafe fn group_scale(p: *const u8, g: usize) -> __m256 {
    // SAFETY: reads 2 of the block's first 4 bytes (caller); register-only conversion.
    unsafe {
        let bits = p.add(2 * g).cast::<i16>().read_unaligned();
        _mm256_cvtph_ps(_mm_set1_epi16(bits))
    }
}

/// [`group_scale`] in 16 lanes.
///
/// # Safety
/// The block's first 4 bytes are readable; AVX-512 F is available.
#[inline(always)]
unsafe fn group_scale512(p: *const u8, g: usize) -> __m512 {
    // SAFETY: reads 2 of the block's first 4 bytes (caller); register-only conversion.
    unsafe {
        let bits = p.add(2 * g).cast::<i16>().read_unaligned();
        _mm512_cvtph_ps(_mm256_set1_epi16(bits))
    }
}

/// The 16 codes of values `16 s .. 16 s + 16` of group `g` of the block at `p`.
///
/// # Safety
/// The whole block is readable; `g < 2`, `s < 8`.
#[inline(always)]
unsafe fn codes16(p: *const u8, g: usize, s: usize) -> i32 {
    // SAFETY: bytes `4 + 32 g + 4 s .. + 4` lie inside the 68-byte block (caller).
    unsafe { p.add(4 + 32 * g + 4 * s).cast::<i32>().read_unaligned() }
}

/// AVX2 body.
///
/// # Safety
/// AVX2, FMA and F16C are available; `w` is whole rows of `rb = k / 256 * 68` bytes; `x` holds
/// `ncols >= 1` columns of `k`; `out.len() == rows * ncols`.
#[inline(always)]
unsafe fn drive_avx2<const R: usize, const CT: usize>(
    w: &[u8],
    rb: usize,
    k: usize,
    x: &[f32],
    ncols: usize,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let nb = k / QK;
    // SAFETY: row pointers are clamped to `nrows - 1`, column pointers to the last column;
    // block `b < nb` lies inside its row and elements `< k` inside their column; the prefetch
    // hint never faults.
    unsafe {
        let sh_lo = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        let sh_hi = _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30);
        let signs = _mm256_setr_ps(-1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0);
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
                // One column keeps two accumulators per row (the low and high 8 of each 16
                // values), so it still has 2 R independent FMA chains; wider tiles have enough.
                let mut acc = [[_mm256_setzero_ps(); CT]; R];
                let mut acc2 = [[_mm256_setzero_ps(); CT]; R];
                for b in 0..nb {
                    let bp: [*const u8; R] = core::array::from_fn(|r| rp[r].add(b * BB));
                    for r in 0..R {
                        _mm_prefetch::<_MM_HINT_T0>(bp[r].wrapping_add(PF).cast());
                    }
                    for g in 0..2 {
                        let tab: [__m256; R] =
                            core::array::from_fn(|r| _mm256_mul_ps(group_scale(bp[r], g), signs));
                        for s in 0..8 {
                            let e = b * QK + 128 * g + 16 * s;
                            let mut lo = [_mm256_setzero_ps(); R];
                            let mut hi = [_mm256_setzero_ps(); R];
                            for r in 0..R {
                                let v = _mm256_set1_epi32(codes16(bp[r], g, s));
                                let il = _mm256_srlv_epi32(v, sh_lo);
                                let ih = _mm256_srlv_epi32(v, sh_hi);
                                lo[r] = _mm256_permutevar_ps(tab[r], il);
                                hi[r] = _mm256_permutevar_ps(tab[r], ih);
                            }
                            for jj in 0..CT {
                                let x0 = _mm256_loadu_ps(xp[jj].add(e));
                                let x1 = _mm256_loadu_ps(xp[jj].add(e + 8));
                                for r in 0..R {
                                    acc[r][jj] = _mm256_fmadd_ps(lo[r], x0, acc[r][jj]);
                                    if CT == 1 {
                                        acc2[r][jj] = _mm256_fmadd_ps(hi[r], x1, acc2[r][jj]);
                                    } else {
                                        acc[r][jj] = _mm256_fmadd_ps(hi[r], x1, acc[r][jj]);
                                    }
                                }
                            }
                        }
                    }
                }
                for r in 0..here {
                    for jj in 0..nc {
                        let v = _mm256_add_ps(acc[r][jj], acc2[r][jj]);
                        out[(r0 + r) * ncols + c0 + jj] = hsum_ps(v);
                    }
                }
                c0 += CT;
            }
            r0 += R;
        }
    }
}

/// Column-count dispatch of the AVX2 body.
///
/// # Safety
/// As [`drive_avx2`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry_avx2(w: &[u8], rb: usize, k: usize, x: &[f32], ncols: usize, out: &mut [f32]) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match ncols {
            1 => drive_avx2::<4, 1>(w, rb, k, x, ncols, out),
            2 => drive_avx2::<3, 2>(w, rb, k, x, ncols, out),
            _ => drive_avx2::<2, 3>(w, rb, k, x, ncols, out),
        }
    }
}

/// AVX-512 body: as [`drive_avx2`] with 16 values per `u32` of codes in one vector.
///
/// # Safety
/// AVX-512 F is available; otherwise as [`drive_avx2`].
#[inline(always)]
unsafe fn drive_avx512<const R: usize, const CT: usize>(
    w: &[u8],
    rb: usize,
    k: usize,
    x: &[f32],
    ncols: usize,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let nb = k / QK;
    // SAFETY: as in `drive_avx2`: clamped row and column pointers, blocks inside their row,
    // elements inside their column, a non-faulting prefetch hint.
    unsafe {
        let shifts = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let signs = _mm512_setr_ps(
            -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0,
        );
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
                for b in 0..nb {
                    let bp: [*const u8; R] = core::array::from_fn(|r| rp[r].add(b * BB));
                    for r in 0..R {
                        _mm_prefetch::<_MM_HINT_T0>(bp[r].wrapping_add(PF).cast());
                    }
                    for g in 0..2 {
                        let tab: [__m512; R] = core::array::from_fn(|r| {
                            _mm512_mul_ps(group_scale512(bp[r], g), signs)
                        });
                        for s in 0..8 {
                            let e = b * QK + 128 * g + 16 * s;
                            let mut wv = [_mm512_setzero_ps(); R];
                            for r in 0..R {
                                let v = _mm512_set1_epi32(codes16(bp[r], g, s));
                                let idx = _mm512_srlv_epi32(v, shifts);
                                wv[r] = _mm512_permutevar_ps(tab[r], idx);
                            }
                            for jj in 0..CT {
                                let xv = _mm512_loadu_ps(xp[jj].add(e));
                                for r in 0..R {
                                    acc[r][jj] = _mm512_fmadd_ps(wv[r], xv, acc[r][jj]);
                                }
                            }
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

/// Column-count dispatch of the AVX-512 body.
///
/// # Safety
/// As [`drive_avx512`].
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn entry_avx512(w: &[u8], rb: usize, k: usize, x: &[f32], ncols: usize, out: &mut [f32]) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match ncols {
            1 => drive_avx512::<4, 1>(w, rb, k, x, ncols, out),
            2 => drive_avx512::<4, 2>(w, rb, k, x, ncols, out),
            _ => drive_avx512::<3, 4>(w, rb, k, x, ncols, out),
        }
    }
}
