//! Registry, length checks and `#[target_feature]` entry points of the x86 kernels for the
//! formats beyond Q8_0/Q4_0/ROCmFPX: TQ2_0, TQ1_0 (AVX2 only), Q4_K and Q6_K (against Q8_K) and PQ2_0, PTQ1_0 (AVX2 only) (against
//! Q8_0); the HFP4 family (f32 activations) is forwarded to [`super::hfp4`]. The kernel bodies
//! live in [`super::ternary`], [`super::pq2_avx2`] and [`super::kquant`]; the AVX-512
//! entry points compile the same bodies with AVX-512 F/BW/VL enabled (EVEX encodings, 32
//! registers).
//!
//! Every kernel is bit-identical to the core's reference dot product (exact i32 block sums, the
//! reference's f32 expression per block, block order per row: the 8 lanes of a vector are 8
//! rows), so each inherits its format's reference bound constant, stated at its body.
//!
//! What must not live here: kernel arithmetic (bodies), the Q8_0/Q4_0/ROCmFPX kernels.

use std::arch::x86_64::*;
use std::ops::Range;

use lowbit_core::error::Buffer;
use lowbit_core::format::ggml::{BlockQ8K, BlockQ8_0};
use lowbit_core::{Error, FormatId};

use super::{kquant, pq2_avx2, ternary};
use crate::act::{ActData, Acts};
use crate::kernels::{Kernel, MAX_TILE};

/// Weight code: TQ2_0 (256-element blocks of 66 bytes, Q8_K activations).
pub(crate) const W_TQ2: u8 = 10;
/// Weight code: PQ2_0 (128-element blocks of 34 bytes, four Q8_0 blocks each).
pub(crate) const W_PQ2: u8 = 11;
/// Weight code: Q4_K (256-element blocks of 144 bytes, Q8_K activations).
pub(crate) const W_Q4K: u8 = 13;
/// Weight code: Q6_K (256-element blocks of 210 bytes, Q8_K activations).
pub(crate) const W_Q6K: u8 = 14;
/// Weight code: Q2_K (256-element blocks of 84 bytes, Q8_K activations; AVX-512 `super::z512`,
/// AVX2 `super::kquant_avx2`).
pub(crate) const W_Q2K: u8 = 15;
/// Weight code: Q5_K (256-element blocks of 176 bytes, Q8_K activations; AVX2 in `kquant_avx2`).
pub(crate) const W_Q5K: u8 = 16;

/// Weight code: IQ2_XXS (256-element blocks of 66 bytes, Q8_K activations; AVX-512 only,
/// `super::iq512`).
pub(crate) const W_IQ2XXS: u8 = 17;
/// Weight code: IQ2_XS (74-byte blocks, Q8_K; AVX-512 only).
pub(crate) const W_IQ2XS: u8 = 18;
/// Weight code: IQ2_S (82-byte blocks, Q8_K; AVX-512 only).
pub(crate) const W_IQ2S: u8 = 19;
/// Weight code: IQ3_XXS (98-byte blocks, Q8_K; AVX-512 only).
pub(crate) const W_IQ3XXS: u8 = 20;
/// Weight code: IQ3_S (110-byte blocks, Q8_K; AVX-512 only).
pub(crate) const W_IQ3S: u8 = 21;

/// Weight code: Q3_K (110-byte blocks, Q8_K; AVX-512 `super::q3k512`, AVX2 `kquant_avx2`).
pub(crate) const W_Q3K: u8 = 22;
/// Weight code: TQ1_0 (54-byte blocks, Q8_K; AVX-512 only, `super::tq1_512`).
pub(crate) const W_TQ1: u8 = 23;
/// Weight code: PTQ1_0 (128-element blocks of 28 bytes, four Q8_0 blocks each; AVX-512 only).
pub(crate) const W_PTQ1: u8 = 24;
/// Weight code: NVFP4 (64-element blocks of 36 bytes, two Q8_0 blocks each; AVX-512 only).
pub(crate) const W_NVFP4: u8 = 25;
/// Weight code: IQ4_XS (136-byte blocks, Q8_K; AVX-512 only, `super::iq512`).
pub(crate) const W_IQ4XS: u8 = 26;
/// Weight code: IQ1_S (50-byte blocks, Q8_K; AVX-512 only, `super::iq512`).
pub(crate) const W_IQ1S: u8 = 27;
/// Weight code: IQ1_M (56-byte blocks, Q8_K; AVX-512 only, `super::iq512`).
pub(crate) const W_IQ1M: u8 = 28;

/// `(block bytes, elements per block)` of a weight code.
pub(crate) const fn geometry(f: u8) -> (usize, usize) {
    match f {
        W_IQ2XXS => (66, 256),
        W_IQ2XS => (74, 256),
        W_IQ2S => (82, 256),
        W_IQ3XXS => (98, 256),
        W_IQ3S | W_Q3K => (110, 256),
        W_TQ1 => (54, 256),
        W_PTQ1 => (28, 128),
        W_NVFP4 => (36, 64),
        W_IQ4XS => (136, 256),
        W_IQ1S => (50, 256),
        W_IQ1M => (56, 256),
        W_TQ2 => (66, 256),
        W_PQ2 => (34, 128),
        W_Q4K => (144, 256),
        W_Q6K => (210, 256),
        W_Q2K => (84, 256),
        _ => (176, 256),
    }
}

/// The AVX2 kernel for `format`, if this module has one.
pub(crate) fn kernel_avx2(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Tq2_0 => Some(Kernel { name: "avx2-tq2_0", f: run_avx2::<W_TQ2> }),
        FormatId::Tq1_0 => Some(Kernel { name: "avx2-tq1_0", f: run_avx2::<W_TQ1> }),
        FormatId::Ptq1_0 => Some(Kernel { name: "avx2-ptq1_0", f: run_avx2::<W_PTQ1> }),
        FormatId::Pq2_0 => Some(Kernel { name: "avx2-pq2_0", f: run_avx2::<W_PQ2> }),
        FormatId::Q4K => Some(Kernel { name: "avx2-q4_k", f: run_avx2::<W_Q4K> }),
        FormatId::Q6K => Some(Kernel { name: "avx2-q6_k", f: run_avx2::<W_Q6K> }),
        _ => super::hfp4::kernel_avx2(format),
    }
}

/// The AVX-512 kernel for `format`, if this module has one.
pub(crate) fn kernel_avx512(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Tq2_0 => Some(Kernel { name: "avx512-tq2_0", f: run_avx512::<W_TQ2> }),
        FormatId::Pq2_0 => Some(Kernel { name: "avx512-pq2_0", f: run_avx512::<W_PQ2> }),
        FormatId::Q4K => Some(Kernel { name: "avx512-q4_k", f: run_avx512::<W_Q4K> }),
        FormatId::Q6K => Some(Kernel { name: "avx512-q6_k", f: run_avx512::<W_Q6K> }),
        _ => super::hfp4::kernel_avx512(format),
    }
}

/// The prepared activations a body reads.
#[derive(Clone, Copy)]
pub(crate) enum ActSlice<'a> {
    /// Q8_0 blocks and their f32 scales.
    Q8_0(&'a [BlockQ8_0], &'a [f32]),
    /// Q8_K blocks.
    Q8K(&'a [BlockQ8K]),
}

/// What the bodies may rely on.
#[derive(Clone, Copy)]
pub(crate) struct Shape<'a> {
    /// The activations: `acts.n` columns of `k / act block` blocks.
    pub act: ActSlice<'a>,
    /// Weight blocks per row.
    pub nb: usize,
}

/// Checks, for weight code `F`: `rb == nb * bs` with `nb * qk == acts.k`; `w` holds whole rows;
/// the tile is 1..=16 columns inside `acts`; `out` holds `rows * tile` values; the activation
/// arrays hold `n * k / act_block` entries of the kind `F` needs. Any violation is an internal
/// error reported as [`Error::Length`] (or [`Error::WrongActivation`]).
pub(crate) fn check<'a, const F: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<Shape<'a>, Error> {
    let (bs, qk) = geometry(F);
    let (act, have, act_block) = match (&acts.data, F) {
        (
            ActData::Q8K(b),
            W_TQ2 | W_Q4K | W_Q6K | W_Q2K | W_Q5K | W_IQ2XXS | W_IQ2XS | W_IQ2S | W_IQ3XXS | W_IQ3S
            | W_Q3K | W_TQ1 | W_IQ4XS | W_IQ1S | W_IQ1M,
        ) => (ActSlice::Q8K(b), b.len(), 256),
        (ActData::Q8_0 { blocks, d }, W_PQ2 | W_PTQ1 | W_NVFP4) if d.len() == blocks.len() => {
            (ActSlice::Q8_0(blocks, d), blocks.len(), 32)
        }
        _ => {
            return Err(Error::WrongActivation {
                format,
                expected: format.info().activation,
                got: acts.row(0).format(),
            })
        }
    };
    let nb = rb / bs;
    let nc = cols.len();
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let want = acts.n * (acts.k / act_block);
    let ok = rb != 0
        && rb == nb * bs
        && nb * qk == acts.k
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
    Ok(Shape { act, nb })
}

fn run_avx2<const F: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let s = check::<F>(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel_avx2`, which `KernelTable::new` reaches only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; the lengths the
    // bodies rely on were checked by `check`.
    unsafe { entry_avx2::<F>(w, rb, s, acts, cols, out) };
    Ok(())
}

fn run_avx512<const F: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let s = check::<F>(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel_avx512`, which `KernelTable::new` reaches only for
    // `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2, FMA and
    // F16C; the lengths the bodies rely on were checked by `check`.
    unsafe { entry_avx512::<F>(w, rb, s, acts, cols, out) };
    Ok(())
}

/// Dispatch on format and tile size.
///
/// # Safety
/// AVX2, FMA and F16C are available; the `check` invariants hold.
#[inline(always)]
unsafe fn dispatch<const F: u8>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match (F, cols.len()) {
            (W_TQ2, 1) => ternary::tq2::<1>(w, rb, s, cols, out),
            (W_TQ2, 2..=4) => ternary::tq2::<4>(w, rb, s, cols, out),
            (W_TQ2, _) => ternary::tq2::<16>(w, rb, s, cols, out),
            (W_TQ1, 1) => ternary::tq1::<1>(w, rb, s, cols, out),
            (W_TQ1, 2..=4) => ternary::tq1::<4>(w, rb, s, cols, out),
            (W_TQ1, _) => ternary::tq1::<16>(w, rb, s, cols, out),
            (W_PTQ1, 1) => ternary::ptq1::<1>(w, rb, s, cols, out),
            (W_PTQ1, 2..=4) => ternary::ptq1::<4>(w, rb, s, cols, out),
            (W_PTQ1, _) => ternary::ptq1::<16>(w, rb, s, cols, out),
            (W_Q4K, 1) => kquant::kq::<false, 1>(w, rb, s, cols, out),
            (W_Q4K, 2..=4) => kquant::kq::<false, 4>(w, rb, s, cols, out),
            (W_Q4K, _) => kquant::kq::<false, 16>(w, rb, s, cols, out),
            (W_Q6K, 1) => kquant::kq::<true, 1>(w, rb, s, cols, out),
            (W_Q6K, 2..=4) => kquant::kq::<true, 4>(w, rb, s, cols, out),
            (W_Q6K, _) => kquant::kq::<true, 16>(w, rb, s, cols, out),
            (_, 1) => pq2_avx2::run::<1>(w, rb, s, acts, cols, out),
            (_, 2..=4) => pq2_avx2::run::<4>(w, rb, s, acts, cols, out),
            (_, _) => pq2_avx2::run::<16>(w, rb, s, acts, cols, out),
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry_avx2<const F: u8>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees the features and the `check` invariants.
    unsafe { dispatch::<F>(w, rb, s, acts, cols, out) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn entry_avx512<const F: u8>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees the features and the `check` invariants.
    unsafe { dispatch::<F>(w, rb, s, acts, cols, out) }
}

/// Row sums of 8 rows' i32 partials: (lanes 0..4 of each row, lanes 4..8 of each row), lane i
/// of each result belonging to row i (for 32-byte blocks: the sums of the two 16-byte halves).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
pub(crate) unsafe fn hsum8(p: &[__m256i; 8]) -> (__m256i, __m256i) {
    // SAFETY: register-only AVX2 operations; the caller has AVX2.
    unsafe {
        let h01 = _mm256_hadd_epi32(p[0], p[1]);
        let h23 = _mm256_hadd_epi32(p[2], p[3]);
        let h45 = _mm256_hadd_epi32(p[4], p[5]);
        let h67 = _mm256_hadd_epi32(p[6], p[7]);
        let h0123 = _mm256_hadd_epi32(h01, h23);
        let h4567 = _mm256_hadd_epi32(h45, h67);
        (
            _mm256_permute2x128_si256::<0x20>(h0123, h4567),
            _mm256_permute2x128_si256::<0x31>(h0123, h4567),
        )
    }
}

/// The f16 scales at byte offset `off` of 8 blocks (`p[i] + off`), widened to f32.
///
/// # Safety
/// F16C and AVX are available; each `p[i] + off .. + 2` is readable.
#[inline(always)]
pub(crate) unsafe fn f16x8(p: &[*const u8; 8], off: usize) -> __m256 {
    let mut bits = [0u16; 8];
    // SAFETY: the caller guarantees the reads; the load reads the 16 bytes of `bits`.
    unsafe {
        for (b, q) in bits.iter_mut().zip(p) {
            *b = std::ptr::read_unaligned(q.add(off).cast::<u16>());
        }
        _mm256_cvtph_ps(_mm_loadu_si128(bits.as_ptr().cast()))
    }
}

/// Writes the `here` valid lanes of each column accumulator to `out[(r0 + i) * nc + j]`.
///
/// # Safety
/// AVX is available.
#[inline(always)]
pub(crate) unsafe fn store_rows(
    acc: &[__m256],
    nc: usize,
    r0: usize,
    here: usize,
    out: &mut [f32],
) {
    for (j, a) in acc.iter().enumerate().take(nc) {
        let mut t = [0f32; 8];
        // SAFETY: stores 8 floats into `t`; AVX is available.
        unsafe { _mm256_storeu_ps(t.as_mut_ptr(), *a) };
        for (i, &v) in t.iter().enumerate().take(here) {
            out[(r0 + i) * nc + j] = v;
        }
    }
}

/// Pointers to the `R` rows of the group starting at `r0` (the last row repeated past `nrows`)
/// and how many of them are real.
///
/// # Safety
/// `w` holds `nrows > r0` rows of `rb` bytes.
#[inline(always)]
pub(crate) unsafe fn row_ptrs<const R: usize>(
    w: &[u8],
    rb: usize,
    nrows: usize,
    r0: usize,
) -> ([*const u8; R], usize) {
    let here = (nrows - r0).min(R);
    let mut rp = [w.as_ptr(); R];
    for (i, p) in rp.iter_mut().enumerate() {
        // SAFETY: row index `r0 + min(i, here - 1) < nrows`, inside `w`.
        *p = unsafe { w.as_ptr().add((r0 + i.min(here - 1)) * rb) };
    }
    (rp, here)
}
