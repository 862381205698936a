//! AVX2 kernels for the grid-coded i-quants against Q8_K activations: IQ2_XXS, IQ2_XS, IQ2_S
//! ([`iq2`]), IQ3_XXS, IQ3_S ([`iq3`]), IQ1_S and IQ1_M ([`iq1`]), **bit-identical** to the
//! core's reference dot products (`format::ggml::iq`), so each inherits its reference bound
//! (c = 4 per the core's docs).
//!
//! Reference order (every format): per block, an exact i32 block sum `T` (IQ2/IQ3:
//! `Σ_sb (2 ls + 1) Σ grid * sign * q`; IQ1: `8 Σ_sb (2 ls + 1) Σ grid * q + Σ_sb (2 ls + 1) Σ ±q`, see
//! below), then `sumf += (d_w * d_a) * (T as f32 * INNER)` in f32 (separate multiply and add,
//! block order), and at the end `sumf * FINAL` ([`IqGrid`]). Each vector lane here is one row
//! and replays exactly that sequence, so the result is the reference's bit for bit.
//!
//! IQ1_S and IQ1_M keep the reference's value: it computes `(d d_a) * (sumi + 1/8 sumi1)` with
//! `sumi` the grid sum and `sumi1` the delta sum; here the weight `8 grid + delta_sign`
//! (-9..=9, never 0) gives `T = 8 sumi + sumi1` in one pass, and `T as f32 * 0.125` is that
//! same real number exactly (|T| < 2^24, so the conversion and the power-of-two scaling are
//! exact, and `sumi + sumi1 / 8 = T / 8` is representable), which the reference's one rounding
//! also returns.
//!
//! Shape: rows in groups of 8 (one row per f32 lane, as `super::kquant`). Per row and block
//! the format's decode ([`IqGrid::prep`] once, [`IqGrid::part`] per 32 elements) gives 8
//! registers (one per 32 elements, element order) of unsigned magnitudes `m`, 8 of signs `s`
//! (bytes whose sign is the weight's, never 0) and 8 of i16 sub-block scales (`2 ls + 1` in
//! every word of the 16 elements it covers); one column consumes each 32 as it is decoded
//! ([`dot_streamed`]), several decode the block once ([`decode`]) and each takes [`dot`]. Per
//! column and 32 elements: `vpsignb` of the activations by `s`, `vpmaddubsw` with `m` and
//! `vpmaddwd` with the scales, and adds the 8 results: i32 lanes whose total is `T`
//! (algorithm as ggml's AVX2 `ggml_vec_dot_iq2_xxs_q8_K` and its siblings in
//! `ggml-cpu/arch/x86/quants.c`: signs applied to the Q8_K quants with `_mm256_sign_epi8`,
//! grid magnitudes through `maddubs`, sub-block scales through `madd`). `hsum8` turns the 8
//! rows' lane vectors into the rows' `T` in one vector. Bounds: magnitudes <= 62 (IQ2 <= 43,
//! IQ1 <= 9), |q| <= 127 (Q8_K quants lie in -127..=127, so `vpsignb` negates exactly), pairs
//! <= 2 * 62 * 127 < 2^15, `|T|` <= 256 * 62 * 127 * 31 < 2^31 (IQ1: < 2^23), all exact.
//!
//! Grid entries are fetched by scalar loads assembled into vectors (indices computed with
//! vector operations where they need more than a byte, stored once per block).
//!
//! What must not live here: the AVX-512 forms (`super::iq512`), length checks
//! (`super::ext::check`), other formats.

// Sub-block, row and column indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

mod iq1;
mod iq2;
mod iq3;

use std::arch::x86_64::*;
use std::ops::Range;

use lowbit_core::{Error, FormatId};

use super::ext::{
    self, hsum8, row_ptrs, store_rows, ActSlice, Shape, W_IQ1M, W_IQ1S, W_IQ2S, W_IQ2XS, W_IQ2XXS,
    W_IQ3S, W_IQ3XXS,
};
use super::Prefetch;
use crate::act::Acts;
use crate::kernels::Kernel;

/// The AVX2 kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Iq2Xxs => Some(Kernel { name: "avx2-iq2_xxs", f: run::<iq2::Iq2Xxs, W_IQ2XXS> }),
        FormatId::Iq2Xs => Some(Kernel { name: "avx2-iq2_xs", f: run::<iq2::Iq2Xs, W_IQ2XS> }),
        FormatId::Iq2S => Some(Kernel { name: "avx2-iq2_s", f: run::<iq2::Iq2S, W_IQ2S> }),
        FormatId::Iq3Xxs => Some(Kernel { name: "avx2-iq3_xxs", f: run::<iq3::Iq3Xxs, W_IQ3XXS> }),
        FormatId::Iq3S => Some(Kernel { name: "avx2-iq3_s", f: run::<iq3::Iq3S, W_IQ3S> }),
        FormatId::Iq1S => Some(Kernel { name: "avx2-iq1_s", f: run::<iq1::Iq1S, W_IQ1S> }),
        FormatId::Iq1M => Some(Kernel { name: "avx2-iq1_m", f: run::<iq1::Iq1M, W_IQ1M> }),
        _ => None,
    }
}

/// One decoded block (module doc): magnitudes, signs and scales per 32 elements.
pub(crate) struct Dec {
    /// Unsigned magnitudes, element `32 k + i` in byte `i` of register `k`.
    pub m: [__m256i; 8],
    /// A nonzero byte per element whose sign is the weight's.
    pub s: [__m256i; 8],
    /// `2 ls + 1` as i16 in every word (two elements) of the sub-block it covers.
    pub sc: [__m256i; 8],
}

/// A grid-coded format's decode, in two steps (what a block's registers are made from, then
/// the registers of one sub-block of 32) so that one column can consume each sub-block as it
/// is decoded ([`dot_streamed`]), and the constants of its reference's f32 expression.
pub(crate) trait IqGrid {
    /// Bytes of one 256-element block.
    const BB: usize;
    /// The factor on the converted block sum before the scale product (IQ1: 1/8, else 1).
    const INNER: f32;
    /// The factor on the row sum at the end (IQ2: 1/8, IQ3_XXS: 1/4, else 1).
    const FINAL: f32;
    /// What the sub-blocks' registers are made from (sign bytes, scale bytes, grid indices).
    type Ctx;
    /// The block's [`IqGrid::Ctx`].
    ///
    /// # Safety
    /// `p .. p + BB` is readable; AVX2, FMA and F16C are available.
    unsafe fn prep(p: *const u8) -> Self::Ctx;
    /// Magnitudes, signs and scales (as [`Dec`]) of sub-block `k` (< 8).
    ///
    /// # Safety
    /// As [`IqGrid::prep`], `c` made by it from the same `p`.
    unsafe fn part(p: *const u8, c: &Self::Ctx, k: usize) -> [__m256i; 3];
    /// The block's f16 `d`.
    ///
    /// # Safety
    /// As [`IqGrid::prep`].
    unsafe fn d(p: *const u8) -> u16;
}

/// The whole block at `p` decoded.
///
/// # Safety
/// As [`IqGrid::prep`].
#[inline(always)]
unsafe fn decode<G: IqGrid>(p: *const u8) -> Dec {
    // SAFETY: forwarded from the caller.
    unsafe {
        let c = G::prep(p);
        let mut d = Dec {
            m: [_mm256_setzero_si256(); 8],
            s: [_mm256_setzero_si256(); 8],
            sc: [_mm256_setzero_si256(); 8],
        };
        for k in 0..8 {
            [d.m[k], d.s[k], d.sc[k]] = G::part(p, &c, k);
        }
        d
    }
}

/// [`dot`] of the block at `p` against one column, each sub-block consumed as it is decoded
/// (fewer live registers than decoding the block first).
///
/// # Safety
/// As [`IqGrid::prep`]; `y .. y + 256` is readable.
#[inline(always)]
unsafe fn dot_streamed<G: IqGrid>(p: *const u8, y: *const i8) -> __m256i {
    // SAFETY: forwarded from the caller; reads the 256 bytes at `y`.
    unsafe {
        let c = G::prep(p);
        let mut acc = _mm256_setzero_si256();
        for k in 0..8 {
            let [m, s, sc] = G::part(p, &c, k);
            let a = _mm256_sign_epi8(_mm256_loadu_si256(y.add(32 * k).cast()), s);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(m, a), sc));
        }
        acc
    }
}

fn run<G: IqGrid, const F: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let s = ext::check::<F>(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel`, which `super::kernel` hands out only for
    // `Isa::Avx2`, which `KernelTable::new` reaches only after `Isa::Avx2.available()` detected
    // AVX2, FMA and F16C; `ext::check` checked the lengths the body relies on (`rb` is a whole
    // number `nb` of `G::BB`-byte blocks, `w` whole rows, Q8_K activations of `nb` blocks per
    // column, 1..=16 columns inside them, `out` of `rows * cols` values).
    unsafe { entry::<G>(w, rb, s, cols, out) };
    Ok(())
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry<G: IqGrid>(w: &[u8], rb: usize, s: Shape<'_>, cols: Range<usize>, out: &mut [f32]) {
    // SAFETY: forwarded from the caller (features and `ext::check` invariants).
    unsafe {
        match cols.len() {
            1 => body::<G, 1>(w, rb, s, cols, out),
            2..=4 => body::<G, 4>(w, rb, s, cols, out),
            _ => body::<G, 16>(w, rb, s, cols, out),
        }
    }
}

/// The block sum's i32 lanes of one row's decoded block against the 256 activations at `y`.
///
/// # Safety
/// `y .. y + 256` is readable; AVX2 is available.
#[inline(always)]
unsafe fn dot(d: &Dec, y: *const i8) -> __m256i {
    // SAFETY: reads the 256 bytes at `y` (caller); register-only operations otherwise.
    unsafe {
        let t = |k: usize| {
            let a = _mm256_sign_epi8(_mm256_loadu_si256(y.add(32 * k).cast()), d.s[k]);
            _mm256_madd_epi16(_mm256_maddubs_epi16(d.m[k], a), d.sc[k])
        };
        let s01 = _mm256_add_epi32(t(0), t(1));
        let s23 = _mm256_add_epi32(t(2), t(3));
        let s45 = _mm256_add_epi32(t(4), t(5));
        let s67 = _mm256_add_epi32(t(6), t(7));
        _mm256_add_epi32(_mm256_add_epi32(s01, s23), _mm256_add_epi32(s45, s67))
    }
}

/// Rows of format `G` against up to `MAXC` Q8_K columns (module doc).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold for `G`'s weight code
/// (`s.act` is Q8_K with `s.nb` blocks per column, `rb = s.nb * G::BB`, `1 <= cols.len() <=
/// MAXC`).
#[inline(always)]
unsafe fn body<G: IqGrid, const MAXC: usize>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let ActSlice::Q8K(a) = s.act else { return };
    let nb = s.nb;
    let nrows = w.len() / rb;
    let nc = cols.len().min(MAXC);
    // Each row stream prefetched into L2 one row group ahead (`Prefetch::one_group_ahead`).
    let pfx = Prefetch::DEFAULT.one_group_ahead(8 * rb);
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (block `b < nb`: bytes
    // `b * BB .. (b + 1) * BB` of a row of `rb = nb * BB`); activation blocks are indexed
    // safely and their 256 quants read whole; prefetch hints never fault; AVX2/FMA/F16C are
    // available (caller).
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<8>(w, rb, nrows, r0);
            let mut acc = [_mm256_setzero_ps(); MAXC];
            for b in 0..nb {
                // The tile's activation blocks `b` (quants and scales), looked up once.
                let mut yq = [std::ptr::null::<i8>(); MAXC];
                let mut yd = [0f32; MAXC];
                for j in 0..nc {
                    let y = &a[(cols.start + j) * nb + b];
                    (yq[j], yd[j]) = (y.qs.as_ptr(), y.d);
                }
                let mut lanes = [[_mm256_setzero_si256(); 8]; MAXC];
                let mut dbits = [0u16; 8];
                for i in 0..8 {
                    let q = rp[i].add(b * G::BB);
                    pfx.span(q, G::BB);
                    dbits[i] = G::d(q);
                    if MAXC == 1 {
                        lanes[0][i] = dot_streamed::<G>(q, yq[0]);
                        continue;
                    }
                    let dec = decode::<G>(q);
                    for j in 0..nc {
                        lanes[j][i] = dot(&dec, yq[j]);
                    }
                }
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(dbits.as_ptr().cast()));
                for j in 0..nc {
                    let (lo, hi) = hsum8(&lanes[j]);
                    let t = _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi));
                    let t = _mm256_mul_ps(t, _mm256_set1_ps(G::INNER));
                    let d = _mm256_mul_ps(dw, _mm256_set1_ps(yd[j]));
                    acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(d, t));
                }
            }
            for v in acc.iter_mut() {
                *v = _mm256_mul_ps(*v, _mm256_set1_ps(G::FINAL));
            }
            store_rows(&acc, nc, r0, here, out);
            r0 += 8;
        }
    }
}

/// A 32-byte-aligned row of shuffle constants.
#[repr(C, align(32))]
struct Row32([u8; 32]);

/// Per register `k` of [`sign_reg`] (within the half of the sign bytes that holds it,
/// `k % 4`): bytes 0..8 take sign byte `4k`, 8..16 `4k + 1`, 16..24 `4k + 2`, 24..32 `4k + 3`
/// (lane-relative indices: both lanes hold the same 16 bytes).
static SIGN_SPREAD: [Row32; 4] = {
    let mut t = [Row32([0; 32]), Row32([0; 32]), Row32([0; 32]), Row32([0; 32])];
    let mut k = 0;
    while k < 4 {
        let mut i = 0;
        while i < 32 {
            t[k].0[i] = (4 * k + i / 8) as u8;
            i += 1;
        }
        k += 1;
    }
    t
};

/// Byte `i`: `1 << (i % 8)`.
static BITS: Row32 = {
    let mut t = Row32([0; 32]);
    let mut i = 0;
    while i < 32 {
        t.0[i] = 1 << (i % 8);
        i += 1;
    }
    t
};

/// Per-16 scales: register `k` takes scale byte `2k` (zero-extended) in every word of its low
/// lane and `2k + 1` in its high lane.
static SCALE16: [Row32; 8] = scale_rows(true);
/// Per-32 scales: register `k` takes scale byte `k` in every word.
static SCALE32: [Row32; 8] = scale_rows(false);

const fn scale_rows(per16: bool) -> [Row32; 8] {
    let mut t = [
        Row32([0; 32]),
        Row32([0; 32]),
        Row32([0; 32]),
        Row32([0; 32]),
        Row32([0; 32]),
        Row32([0; 32]),
        Row32([0; 32]),
        Row32([0; 32]),
    ];
    let mut k = 0;
    while k < 8 {
        let mut i = 0;
        while i < 32 {
            let src = if per16 { 2 * k + i / 16 } else { k };
            t[k].0[i] = if i % 2 == 0 { src as u8 } else { 0x80 };
            i += 1;
        }
        k += 1;
    }
    t
}

/// Loads a [`Row32`].
///
/// # Safety
/// AVX is available.
#[inline(always)]
unsafe fn row(r: &Row32) -> __m256i {
    // SAFETY: reads the 32 aligned bytes of `r`.
    unsafe { _mm256_load_si256(r.0.as_ptr().cast()) }
}

/// The two halves of a block's 32 sign bytes `s8` (byte `g`: bit `j` set = element `8 g + j`
/// negative), each in both lanes, for [`sign_reg`].
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn sign_halves(s8: __m256i) -> [__m256i; 2] {
    // SAFETY: register-only operations.
    unsafe {
        [_mm256_permute2x128_si256::<0x00>(s8, s8), _mm256_permute2x128_si256::<0x11>(s8, s8)]
    }
}

/// The sign register of sub-block `k`: `-1` where the element's sign bit is set, else `1`.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn sign_reg(h: &[__m256i; 2], k: usize) -> __m256i {
    // SAFETY: reads the static rows; register-only operations otherwise.
    unsafe {
        let bits = row(&BITS);
        let x = _mm256_shuffle_epi8(h[k / 4], row(&SIGN_SPREAD[k % 4]));
        let neg = _mm256_cmpeq_epi8(_mm256_and_si256(x, bits), bits);
        _mm256_or_si256(neg, _mm256_set1_epi8(1))
    }
}

/// `parity(i) << 7` for every nibble `i`.
const PARITY7: [i8; 16] = {
    let mut t = [0i8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = if (i as u32).count_ones() % 2 == 1 { i8::MIN } else { 0 };
        i += 1;
    }
    t
};

/// Each byte of `s7` (7 stored sign bits, < 128) with its parity as bit 7: ggml's
/// `ksigns_iq2xs` entry for it (by two nibble lookups; a test checks all 128 entries).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn with_parity(s7: __m256i) -> __m256i {
    // SAFETY: reads the 16 bytes of `PARITY7`; register-only operations otherwise.
    unsafe {
        let par = _mm256_broadcastsi128_si256(_mm_loadu_si128(PARITY7.as_ptr().cast()));
        let m = _mm256_set1_epi8(0x0F);
        let lo = _mm256_shuffle_epi8(par, _mm256_and_si256(s7, m));
        let hi = _mm256_shuffle_epi8(par, _mm256_and_si256(_mm256_srli_epi16::<4>(s7), m));
        _mm256_or_si256(s7, _mm256_xor_si256(lo, hi))
    }
}

/// The four 7-bit fields (bits `7l .. 7l + 7`, `l` < 4) of each dword `k` of `x`, as byte
/// `4k + l`.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn fields7(x: __m256i) -> __m256i {
    // SAFETY: register-only operations.
    unsafe {
        let b0 = _mm256_and_si256(x, _mm256_set1_epi32(0x7F));
        let b1 = _mm256_and_si256(_mm256_slli_epi32::<1>(x), _mm256_set1_epi32(0x7F00));
        let b2 = _mm256_and_si256(_mm256_slli_epi32::<2>(x), _mm256_set1_epi32(0x7F_0000));
        let b3 = _mm256_and_si256(_mm256_slli_epi32::<3>(x), _mm256_set1_epi32(0x7F00_0000));
        _mm256_or_si256(_mm256_or_si256(b0, b1), _mm256_or_si256(b2, b3))
    }
}

/// `2 ls + 1` (as bytes 0..8) for the 4-bit scales `ls` in bits 28..32 of the dwords of `x`.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn top_nibble_scales(x: __m256i) -> __m128i {
    // SAFETY: register-only operations.
    unsafe {
        let ls = _mm256_srli_epi32::<28>(x);
        let ls = _mm256_add_epi32(_mm256_add_epi32(ls, ls), _mm256_set1_epi32(1));
        #[rustfmt::skip]
        let pick = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        );
        let b = _mm256_shuffle_epi8(ls, pick);
        _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b))
    }
}

/// `2 ls + 1` (as bytes `0 .. 2 n`) for the `2 n` 4-bit scales `ls` packed two per byte (low
/// nibble first) in the low `n` bytes of `s`.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn nibble_scales(s: __m128i) -> __m128i {
    // SAFETY: register-only operations.
    unsafe {
        let m = _mm_set1_epi8(0x0F);
        let b = _mm_unpacklo_epi8(_mm_and_si128(s, m), _mm_and_si128(_mm_srli_epi16::<4>(s), m));
        _mm_add_epi8(_mm_add_epi8(b, b), _mm_set1_epi8(1))
    }
}

/// The scale register of sub-block `k` from the scale bytes `b` (`2 ls + 1`) in both lanes:
/// per 16 elements (`PER16`, bytes 0..16) or per 32 (bytes 0..8).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn scale_reg<const PER16: bool>(b: __m256i, k: usize) -> __m256i {
    // SAFETY: reads the static rows; register-only operations otherwise.
    unsafe { _mm256_shuffle_epi8(b, row(if PER16 { &SCALE16[k] } else { &SCALE32[k] })) }
}

/// Four 8-byte grid entries of `grid` at `i`, in order.
///
/// # Safety
/// Every index is below `grid.len()`; AVX2 is available.
#[inline(always)]
unsafe fn grid64x4(grid: &[u64], i: [usize; 4]) -> __m256i {
    // SAFETY: the caller bounds the indices; register-only operations otherwise.
    unsafe {
        let e = |k: usize| *grid.get_unchecked(i[k]) as i64;
        let lo = _mm_set_epi64x(e(1), e(0));
        let hi = _mm_set_epi64x(e(3), e(2));
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi)
    }
}

/// Eight 4-byte grid entries of `grid` at `idx(0..8)`, in order.
///
/// # Safety
/// Every index is below `grid.len()`; AVX2 is available.
#[inline(always)]
unsafe fn grid32x8(grid: &[u32], idx: impl Fn(usize) -> usize) -> __m256i {
    // SAFETY: the caller bounds the indices; register-only operations otherwise.
    unsafe {
        let e = |k: usize| *grid.get_unchecked(idx(k)) as i32;
        let lo = _mm_setr_epi32(e(0), e(1), e(2), e(3));
        let hi = _mm_setr_epi32(e(4), e(5), e(6), e(7));
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi)
    }
}

/// The f16 bits at `p`.
///
/// # Safety
/// `p .. p + 2` is readable.
#[inline(always)]
unsafe fn f16_bits(p: *const u8) -> u16 {
    // SAFETY: the caller guarantees the read.
    u16::from_le(unsafe { std::ptr::read_unaligned(p.cast::<u16>()) })
}

#[cfg(test)]
mod tests;
