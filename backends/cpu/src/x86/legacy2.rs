//! AVX2 (with FMA and F16C) kernels for Q4_1 and Q5_1 against Q8_1 activations.
//!
//! Per block and row: the 16 nibble bytes widen to 32 unsigned codes in element order (low
//! nibbles in the low 128 bits, high nibbles in the high 128 bits: elements 0..16, 16..32;
//! Q5_1 adds its fifth bits as 16, [`super::avx2::fifth_bits`]), and per column
//! `madd(maddubs(codes, a), 1)` gives 8 exact i32 partial sums of `sum q * a` (i16 pairs
//! <= 2 * 31 * 128 < 2^15), converted exactly and added by
//! `fma(sums, d_w * d_a, acc)`; the minimum term `m_w * s_a` (the activation block's stored
//! `s`, as the reference and ggml's `ggml_vec_dot_q4_1_q8_1` use) is rounded once and added
//! to lane 0. Rows in groups of 4, columns in sub-tiles of 2; the 8 lanes are summed at the
//! end by [`hsum_ps`].
//!
//! Bound. Per block each lane takes one rounded scale product and one FMA rounding (lane 0
//! one product and one addition more), and the tree adds 3: each term carries at most
//! `4 + 2 * K / 32 + 3 <= K` roundings (K >= 32), so `|y - y_exact| <= c * K * 2^-24 * sum|t|`
//! with **c = 1**.
//!
//! Layouts: ggml `block_q4_1` (ggml/src/ggml-common.h): `d, m` (f16), 16 nibble bytes (20
//! bytes); `block_q5_1`: `d, m` (f16), `qh` (u32, bit `j` = bit 4 of element `j`), 16 nibble
//! bytes (24 bytes).
//!
//! What must not live here: other formats, the AVX-512 kernels, threading.

#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use lowbit_core::error::Buffer;
use lowbit_core::format::ggml::BlockQ8_1;
use lowbit_core::{Error, FormatId};

use super::avx2::{fifth_bits, hsum_ps};
use crate::act::{ActData, Acts};
use crate::kernels::{Kernel, MAX_TILE};

/// Block bytes: Q4_1 (`Q5 = false`) or Q5_1 (`Q5 = true`).
const fn block_bytes(q5: bool) -> usize {
    if q5 {
        24
    } else {
        20
    }
}

/// The kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Q4_1 => Some(Kernel { name: "avx2-q4_1", f: run::<false> }),
        FormatId::Q5_1 => Some(Kernel { name: "avx2-q5_1", f: run::<true> }),
        _ => None,
    }
}

fn run<const Q5: bool>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let ActData::Q8_1(a) = &acts.data else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: acts.row(0).format(),
        });
    };
    let bb = block_bytes(Q5);
    let nb = rb / bb;
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let nc = cols.len();
    let ok = rb != 0
        && rb == nb * bb
        && nb * 32 == acts.k
        && w.len() == rows * rb
        && (1..=MAX_TILE).contains(&nc)
        && cols.end <= acts.n
        && a.len() == acts.n * nb
        && out.len() == rows * nc;
    if !ok {
        let e = Error::Length {
            format,
            buffer: Buffer::Activations,
            got: a.len(),
            expected: acts.n * nb,
        };
        return Err(e);
    }
    let cols_a = &a[cols.start * nb..cols.end * nb];
    // Scales of the tile's activation blocks, widened once: `(d, s)`.
    let ds: Vec<(f32, f32)> = cols_a.iter().map(|b| (b.d.to_f32(), b.s.to_f32())).collect();
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` reaches only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; the lengths were
    // checked above (`cols_a` and `ds` hold `nc` columns of `nb` blocks).
    unsafe { entry::<Q5>(w, rb, nb, cols_a, &ds, nc, out) };
    Ok(())
}

/// Rows in groups of `R`, columns in sub-tiles of `CT` (the last row / column repeated,
/// extra results discarded). No intrinsics inside closures.
///
/// # Safety
/// AVX2, FMA and F16C are available; `w` is whole rows of `rb = nb * block_bytes(Q5)` bytes; `a` and `ds`
/// hold `ncols >= 1` columns of `nb` entries; `out.len() == rows * ncols`.
#[inline(always)]
unsafe fn drive<const Q5: bool, const R: usize, const CT: usize>(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8_1],
    ds: &[(f32, f32)],
    ncols: usize,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let bb = block_bytes(Q5);
    // SAFETY: row pointers are clamped to `nrows - 1`, block reads stay inside the row (block
    // `b < nb`), column indices are clamped to the last column; the prefetch never faults.
    unsafe {
        let m4 = _mm_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let mut r0 = 0;
        while r0 < nrows {
            let here = (nrows - r0).min(R);
            let rp: [*const u8; R] =
                core::array::from_fn(|i| w.as_ptr().add((r0 + i.min(here - 1)) * rb));
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let cj: [usize; CT] = core::array::from_fn(|jj| (c0 + jj.min(nc - 1)) * nb);
                let mut acc = [[_mm256_setzero_ps(); CT]; R];
                for b in 0..nb {
                    let mut q = [_mm256_setzero_si256(); R];
                    let mut dw = [0f32; R];
                    let mut mw = [0f32; R];
                    for i in 0..R {
                        let p = rp[i].add(b * bb);
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(640).cast());
                        let x = _mm_loadu_si128(p.add(if Q5 { 8 } else { 4 }).cast());
                        let lo = _mm_and_si128(x, m4);
                        let hi = _mm_and_si128(_mm_srli_epi16::<4>(x), m4);
                        q[i] = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi);
                        if Q5 {
                            let qh = std::ptr::read_unaligned(p.add(4).cast::<u32>());
                            q[i] = _mm256_or_si256(q[i], fifth_bits(qh));
                        }
                        let h = _mm_cvtph_ps(_mm_cvtsi32_si128(std::ptr::read_unaligned(
                            p.cast::<u32>(),
                        ) as i32));
                        dw[i] = _mm_cvtss_f32(h);
                        mw[i] = _mm_cvtss_f32(_mm_movehdup_ps(h));
                    }
                    for jj in 0..CT {
                        let ab = &a[cj[jj] + b];
                        let (da, sa) = ds[cj[jj] + b];
                        let av = _mm256_loadu_si256(ab.qs.as_ptr().cast());
                        for i in 0..R {
                            let s = _mm256_madd_epi16(_mm256_maddubs_epi16(q[i], av), ones);
                            let sc = _mm256_set1_ps(dw[i] * da);
                            let t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, acc[i][jj]);
                            let mt = _mm256_zextps128_ps256(_mm_set_ss(mw[i] * sa));
                            acc[i][jj] = _mm256_add_ps(t, mt);
                        }
                    }
                }
                for i in 0..here {
                    for jj in 0..nc {
                        out[(r0 + i) * ncols + c0 + jj] = hsum_ps(acc[i][jj]);
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
/// As [`drive`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry<const Q5: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8_1],
    ds: &[(f32, f32)],
    ncols: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match ncols {
            1 => drive::<Q5, 4, 1>(w, rb, nb, a, ds, ncols, out),
            _ => drive::<Q5, 2, 4>(w, rb, nb, a, ds, ncols, out),
        }
    }
}
