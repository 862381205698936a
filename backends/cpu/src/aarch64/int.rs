//! The NEON kernel body for weight formats with integer (Q8_0 or Q8_K) activations, its length
//! checks, entry points and registry. The per-format weight decoders live in [`super::q8`]
//! (Q8_0, Q4_0, ROCmFP2) and [`super::ternary`] (PQ2_0, PTQ1_0, TQ2_0, TQ1_0).
//!
//! Shape of the body: every format is walked in 32-element *sub-blocks* (a Q8_0 activation
//! block, or an eighth of a Q8_K block). Rows go in groups of `R` (the last group repeats its
//! last row and discards the extra results), columns in sub-tiles of `CT` (the last sub-tile
//! repeats its last column). Per sub-block, each row's 32 weights are decoded once to two
//! `int8x16` vectors plus a weight scale per i32 lane, and reused for every column of the
//! sub-tile: `smull` + `smlal2` give 8 exact i16 pair sums per 16 elements (at most
//! 2 * 128 * 127 = 32512: Q8_0 weights may hold -128, the core's Q8_0 / Q8_K encoders write
//! activations in -127..=127), `saddlp` widens them to 4 i32 lanes, and `addp` folds the two
//! halves so that i32 lanes 0, 1 cover elements 0..16 and lanes 2, 3 cover 16..32 (ROCmFP2's two
//! half-block scales). With [`Isa::NeonDot`](crate::isa::Isa::NeonDot) two `sdot` replace the
//! multiplies and widenings (4-element i32 sums, then the same `addp`). The lanes are
//! converted to f32 (exact: |partial| <= 8 * 128 * 127 < 2^24) and FMA'd with `s_w * d_a` into an f32 accumulator of 4 lanes per (row, column). After the
//! last sub-block the 4 lanes are summed (`faddp` pairwise).
//!
//! Accumulation order and bound. Per (row, column), lane l accumulates, in sub-block order,
//! `fl(p_{g,l} * fl(s_w * d_a) + acc)` (one FMA), then the 4 lanes are added pairwise. Every
//! term carries one rounding of its scale product `fl(s_w * d_a)` (the weight scales are f16
//! or UE4M3 values widened exactly) and at most `K/32 + 2` roundings of the sums, so with
//! `u = 2^-24`: `|y - y_exact| <= c * K * u * sum|w_i a_i|` with **c = 1** (`K/32 + 3 <= K`
//! for `K >= 32`), against the exact sum of decoded weights times decoded activations; this
//! is what `tests/matmul.rs` checks (the reference dot products state their own constants:
//! c = 1 for ROCmFP2, PQ2_0, PTQ1_0, c = 2 for Q8_0, Q4_0, c = 3 per 256 elements for TQ2_0,
//! TQ1_0).
//!
//! What must not live here: weight decoding (per-format files), f32-activation formats.

use std::arch::aarch64::*;
use std::ops::Range;

use lowbit_core::error::Buffer;
use lowbit_core::format::ggml::{BlockQ8K, BlockQ8_0};
use lowbit_core::{Error, FormatId};

use super::q8::{Fp2, Q4_0, Q8_0};
use super::ternary::{Pq2, Ptq1, Tq1, Tq2};
use crate::act::{ActData, Acts};
use crate::kernels::{Kernel, RowsKernel, MAX_TILE};

/// A weight format the integer body can run.
pub(crate) trait IntFormat {
    /// Bytes per weight block.
    const BYTES: usize;
    /// 32-element sub-blocks per weight block.
    const SUB: usize;
    /// Whether the activations are Q8_K (otherwise Q8_0).
    const Q8K: bool;

    /// Sub-block `t` (`< SUB`) of the weight block at `p`: elements `32t..32t+16` and
    /// `32t+16..32t+32` as signed bytes, and the weight scale of i32 lanes 0, 1 (the first 16)
    /// and 2, 3 (the second 16).
    ///
    /// # Safety
    /// NEON is available; `p .. p + BYTES` is readable.
    unsafe fn decode(p: *const u8, t: usize) -> (int8x16_t, int8x16_t, float32x4_t);
}

/// The NEON kernel for `format`, if this module has one: with `sdot` (`DOT`, for
/// [`Isa::NeonDot`](crate::isa::Isa::NeonDot)) or without.
pub(crate) fn kernel<const DOT: bool>(format: FormatId) -> Option<Kernel> {
    let (name, f): (&'static str, RowsKernel) = match (format, DOT) {
        (FormatId::Q8_0, false) => ("neon-q8_0", run::<Q8_0, false>),
        (FormatId::Q8_0, true) => ("neon-dotprod-q8_0", run::<Q8_0, true>),
        (FormatId::Q4_0, false) => ("neon-q4_0", run::<Q4_0, false>),
        (FormatId::Q4_0, true) => ("neon-dotprod-q4_0", run::<Q4_0, true>),
        (FormatId::RocmFp2, false) => ("neon-rocmfp2", run::<Fp2, false>),
        (FormatId::RocmFp2, true) => ("neon-dotprod-rocmfp2", run::<Fp2, true>),
        (FormatId::Pq2_0, false) => ("neon-pq2_0", run::<Pq2, false>),
        (FormatId::Pq2_0, true) => ("neon-dotprod-pq2_0", run::<Pq2, true>),
        (FormatId::Ptq1_0, false) => ("neon-ptq1_0", run::<Ptq1, false>),
        (FormatId::Ptq1_0, true) => ("neon-dotprod-ptq1_0", run::<Ptq1, true>),
        (FormatId::Tq2_0, false) => ("neon-tq2_0", run::<Tq2, false>),
        (FormatId::Tq2_0, true) => ("neon-dotprod-tq2_0", run::<Tq2, true>),
        (FormatId::Tq1_0, false) => ("neon-tq1_0", run::<Tq1, false>),
        (FormatId::Tq1_0, true) => ("neon-dotprod-tq1_0", run::<Tq1, true>),
        _ => return None,
    };
    Some(Kernel { name, f })
}

/// What the body may rely on (checked by [`check`]).
#[derive(Clone, Copy)]
struct Shape<'a> {
    /// Q8_0 activation blocks (`acts.n * ng`; empty for Q8_K formats).
    a0: &'a [BlockQ8_0],
    /// Their scales as f32 (same length).
    ad: &'a [f32],
    /// Q8_K activation blocks (`acts.n * ng / 8`; empty for Q8_0 formats).
    ak: &'a [BlockQ8K],
    /// 32-element sub-blocks per row (= per column).
    ng: usize,
}

/// Checks, for format `F`: `rb == nb * F::BYTES` with `nb * F::SUB * 32 == acts.k`; `w` holds
/// whole rows; the tile is 1..=16 columns inside `acts`; `out` holds `rows * tile` values; the
/// activations are of the kind `F` needs with `n * k / block` entries. Any violation is an
/// internal error reported as [`Error::Length`] (or [`Error::WrongActivation`]).
fn check<'a, F: IntFormat>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<Shape<'a>, Error> {
    let (a0, ad, ak, have, per): (&[BlockQ8_0], &[f32], &[BlockQ8K], usize, usize) =
        match &acts.data {
            ActData::Q8K(b) if F::Q8K => (&[], &[], b, b.len(), 256),
            ActData::Q8_0 { blocks, d } if !F::Q8K && d.len() == blocks.len() => {
                (blocks, d, &[], blocks.len(), 32)
            }
            _ => {
                return Err(Error::WrongActivation {
                    format,
                    expected: format.info().activation,
                    got: acts.row(0).format(),
                })
            }
        };
    let nb = rb / F::BYTES;
    let ng = nb * F::SUB;
    let nc = cols.len();
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let want = acts.n * (acts.k / per);
    let ok = rb != 0
        && rb == nb * F::BYTES
        && ng * 32 == acts.k
        && acts.k % per == 0
        && w.len() == rows * rb
        && (1..=MAX_TILE).contains(&nc)
        && cols.end <= acts.n
        && have == want
        && out.len() == rows * nc;
    if !ok {
        return Err(Error::Length {
            format,
            buffer: Buffer::Activations,
            got: have,
            expected: want,
        });
    }
    Ok(Shape { a0, ad, ak, ng })
}

fn run<F: IntFormat, const DOT: bool>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let s = check::<F>(format, w, rb, acts, &cols, out)?;
    if DOT {
        // SAFETY: `run::<_, true>` is reachable only through `kernel::<true>`, which
        // `KernelTable::new` calls only for `Isa::NeonDot` after `Isa::NeonDot.available()`
        // detected NEON and dotprod; the lengths the body relies on were checked by `check`.
        unsafe { entry_dot::<F>(w, rb, s, cols, out) };
    } else {
        // SAFETY: reachable only through `kernel`, which `KernelTable::new` calls only for
        // `Isa::Neon` (or `Isa::NeonDot`) after `available()` detected NEON; the lengths the
        // body relies on were checked by `check`.
        unsafe { entry::<F>(w, rb, s, cols, out) };
    }
    Ok(())
}

/// Dispatch on the tile size.
///
/// # Safety
/// NEON (and dotprod if `DOT`) is available; the `check` invariants hold.
#[inline(always)]
unsafe fn dispatch<F: IntFormat, const DOT: bool>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match cols.len() {
            1 => body::<F, DOT, 1, 4>(w, rb, s, cols, out),
            2 => body::<F, DOT, 2, 4>(w, rb, s, cols, out),
            3 | 4 => body::<F, DOT, 4, 2>(w, rb, s, cols, out),
            5..=8 => body::<F, DOT, 8, 1>(w, rb, s, cols, out),
            _ => body::<F, DOT, 16, 1>(w, rb, s, cols, out),
        }
    }
}

#[target_feature(enable = "neon")]
unsafe fn entry<F: IntFormat>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees NEON and the `check` invariants.
    unsafe { dispatch::<F, false>(w, rb, s, cols, out) }
}

#[target_feature(enable = "neon,dotprod")]
unsafe fn entry_dot<F: IntFormat>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees NEON, dotprod and the `check` invariants.
    unsafe { dispatch::<F, true>(w, rb, s, cols, out) }
}

/// `acc + (4-byte dot products of a and b)`: the `sdot` instruction (Armv8.2 dotprod), by
/// inline assembly because its intrinsic is not stable Rust.
///
/// # Safety
/// NEON and dotprod are available.
#[inline(always)]
unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut r = acc;
    // SAFETY: a register-only instruction the caller's CPU has (dotprod); no memory, stack or
    // flags are touched.
    unsafe {
        std::arch::asm!(
            "sdot {r:v}.4s, {a:v}.16b, {b:v}.16b",
            r = inout(vreg) r,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    r
}

/// Exact i32 partial sums of `w · a` over 32 elements: lanes 0, 1 cover elements 0..16 and
/// lanes 2, 3 cover 16..32 (see the module doc for why nothing overflows). With `DOT`, two
/// `sdot` and one `addp`; otherwise `smull`, `smlal2`, `saddlp` per half and one `addp`. The
/// two group the elements of a half differently between lanes 0 and 1 (2 and 3), so their f32
/// results may differ in the last bits; both satisfy the bound.
///
/// # Safety
/// NEON (and dotprod if `DOT`) is available.
#[inline(always)]
unsafe fn dot32<const DOT: bool>(
    w0: int8x16_t,
    w1: int8x16_t,
    a0: int8x16_t,
    a1: int8x16_t,
) -> int32x4_t {
    // SAFETY: register-only NEON (and dotprod) operations.
    unsafe {
        if DOT {
            let z = vdupq_n_s32(0);
            vpaddq_s32(sdot(z, w0, a0), sdot(z, w1, a1))
        } else {
            let p0 = vmlal_high_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(a0)), w0, a0);
            let p1 = vmlal_high_s8(vmull_s8(vget_low_s8(w1), vget_low_s8(a1)), w1, a1);
            vpaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1))
        }
    }
}

/// The kernel body (see the module doc). `CT` is the columns per sub-tile, `R` the rows per
/// group.
///
/// # Safety
/// NEON (and dotprod if `DOT`) is available, and the `check` invariants hold: `w` is whole
/// rows of `rb = nb * F::BYTES` bytes with `nb * F::SUB == s.ng`; the activation arrays hold
/// `s.ng` Q8_0 blocks (or `s.ng / 8` Q8_K blocks) per column for every column in `cols`;
/// `out.len() == rows * cols.len()`; `1 <= cols.len()`.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn body<F: IntFormat, const DOT: bool, const CT: usize, const R: usize>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let ncols = cols.len();
    let ng = s.ng;
    let base = w.as_ptr();
    let a0 = s.a0.as_ptr().cast::<u8>();
    let ak = s.ak.as_ptr().cast::<u8>();
    let q8k_bytes = std::mem::size_of::<BlockQ8K>();
    // SAFETY: all pointer offsets stay inside `w` and the activation arrays by the invariants
    // above: row index clamped to `nrows - 1`, weight block `g / SUB < nb`, activation index
    // `j * ng + g` (Q8_0) or `j * ng / 8 + g / 8` (Q8_K) with `j < acts.n`, reads of 32 quants
    // inside one activation block (Q8_0: bytes 2..34; Q8_K: `qs` at 4 + 32 (g % 8)); NEON is
    // available.
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let here = (nrows - r0).min(R);
            let rp: [*const u8; R] =
                core::array::from_fn(|i| base.add((r0 + i.min(here - 1)) * rb));
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                // Columns past the tile's end repeat its last one (results discarded), so every
                // loop below has the constant trip count CT.
                let js: [usize; CT] = core::array::from_fn(|jj| cols.start + c0 + jj.min(nc - 1));
                let mut acc = [[vdupq_n_f32(0.0); CT]; R];
                for g in 0..ng {
                    let (b, t) = (g / F::SUB, g % F::SUB);
                    let mut w0 = [vdupq_n_s8(0); R];
                    let mut w1 = [vdupq_n_s8(0); R];
                    let mut sw = [vdupq_n_f32(0.0); R];
                    for i in 0..R {
                        (w0[i], w1[i], sw[i]) = F::decode(rp[i].add(b * F::BYTES), t);
                    }
                    for jj in 0..CT {
                        let j = js[jj];
                        let (qp, da) = if F::Q8K {
                            let blk = ak.add((j * (ng / 8) + g / 8) * q8k_bytes);
                            (blk.add(4 + 32 * (g % 8)), *blk.cast::<f32>())
                        } else {
                            (a0.add((j * ng + g) * 34 + 2), *s.ad.as_ptr().add(j * ng + g))
                        };
                        let av0 = vld1q_s8(qp.cast());
                        let av1 = vld1q_s8(qp.add(16).cast());
                        let dv = vdupq_n_f32(da);
                        for i in 0..R {
                            let si = dot32::<DOT>(w0[i], w1[i], av0, av1);
                            let sc = vmulq_f32(sw[i], dv);
                            acc[i][jj] = vfmaq_f32(acc[i][jj], vcvtq_f32_s32(si), sc);
                        }
                    }
                }
                for (i, acci) in acc.iter().enumerate().take(here) {
                    for (jj, accj) in acci.iter().enumerate().take(nc) {
                        out[(r0 + i) * ncols + c0 + jj] = vaddvq_f32(*accj);
                    }
                }
                c0 += CT;
            }
            r0 += R;
        }
    }
}

/// An f16 (bits) widened to f32, exactly, for finite values (the scales the kernels read were
/// validated finite at upload): the exponent is rebased by multiplying with 2^112, which also
/// normalises f16 subnormals.
#[inline(always)]
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let mag = f32::from_bits(u32::from(h & 0x7FFF) << 13) * f32::from_bits((127 + 112) << 23);
    f32::from_bits(mag.to_bits() | (u32::from(h & 0x8000) << 16))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_widening_is_exact() {
        for h in 0..=u16::MAX {
            let v = half::f16::from_bits(h);
            if v.is_finite() {
                assert_eq!(f16_to_f32(h).to_bits(), v.to_f32().to_bits(), "{h:#06x}");
            }
        }
    }
}
