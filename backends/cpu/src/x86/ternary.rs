//! AVX2 kernel bodies for the ternary formats: TQ2_0 and TQ1_0 against Q8_K, PTQ1_0 against
//! Q8_0 (PQ2_0's body, with the activations in its plane order: [`super::pq2_avx2`]).
//!
//! Both store 2-bit codes `c` with value `c - 1` (code 3 decodes as +2). The codes are expanded
//! to unsigned bytes once per weight block and row, then reused for every column of the tile:
//! `maddubs(c, a)` (no saturation: a pair is at most 2 * 3 * 128 = 768) and `madd(.., 1)` give
//! exact i32 partial sums of `c * a`, and `Σ (c - 1) a = Σ c a - Σ a` with `Σ a` computed once
//! per column and activation block (shared by the 8 rows). Lanes of a vector are 8 *rows*
//! ([`super::ext::hsum8`]), so each lane evaluates its row's reference f32 expression in block
//! order: results are bit-identical to the core's reference dot products, whose bound constants
//! therefore apply (TQ2_0: c = 3 per 256 elements, i.e. `3 * n_blocks` in place of `c * n`;
//! PQ2_0: c = 1; see the core's `dot_row` docs, `format::ggml::tq2_0` and `format::prism`).
//!
//! TQ1_0 and PTQ1_0 store five base-3 digits per byte (`tq1_codes`, `ptq1_codes`); their codes
//! are decoded into a buffer per row and block and then follow TQ2_0's (PQ2_0's) path, with the same reference expression (its
//! `dot_row` multiplies `d_w * d_a` in the other order, the same product).
//!
//! Code layouts (from the core's block types): TQ2_0 element `i` is bits `2 * ((i / 32) % 4)`
//! of byte `32 * (i / 128) + i % 32`; PQ2_0 element `j` is bits `2 * (j % 4)` of byte `j / 4`.
//!
//! What must not live here: length checks and entry points (`ext.rs`), other formats.

use std::arch::x86_64::*;
use std::ops::Range;

use super::ext::{f16x8, hsum8, row_ptrs, store_rows, ActSlice, Shape};

/// Every lane holds the sum of the 8 i32 lanes of `v`.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
pub(crate) unsafe fn hsum_bcast(v: __m256i) -> __m256i {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        let s = _mm256_add_epi32(v, _mm256_permute2x128_si256::<1>(v, v));
        let s = _mm256_add_epi32(s, _mm256_shuffle_epi32::<0b0100_1110>(s));
        _mm256_add_epi32(s, _mm256_shuffle_epi32::<0b1011_0001>(s))
    }
}

/// TQ2_0: the codes of 32-element group `g` (0..8) from the two 32-byte code halves.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn tq2_codes(q: &[__m256i; 2], out: &mut [__m256i; 8]) {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        let m = _mm256_set1_epi8(3);
        for h in 0..2 {
            let x = q[h];
            out[4 * h] = _mm256_and_si256(x, m);
            out[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16::<2>(x), m);
            out[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16::<4>(x), m);
            out[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16::<6>(x), m);
        }
    }
}

/// TQ2_0 rows against Q8_K columns. Per block and row, the reference's
/// `acc += (sumi as f32) * (d_act * d_w)` (f32, no FMA), blocks in order; `Σ a` per Q8_K block
/// comes from its `bsums` (the 16 group sums the core's Q8_K encoder stores).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold for TQ2_0
/// (`s.act` is Q8_K, `1 <= cols.len() <= MAXC`).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // `g`/`k` index codes and activations alike
pub(crate) unsafe fn tq2<const MAXC: usize>(
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
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (block `b < nb`, bytes
    // `b * 66 .. b * 66 + 66`); activation blocks are indexed safely (`a[ai]`) and their
    // 256-byte `qs` / 32-byte `bsums` are read whole; AVX2/FMA/F16C are available; prefetch
    // hints never fault.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let pfx = super::Prefetch::DEFAULT.one_group_ahead(8 * rb);
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<8>(w, rb, nrows, r0);
            let mut acc = [_mm256_setzero_ps(); MAXC];
            for b in 0..nb {
                let mut cv = [[_mm256_setzero_si256(); 8]; 8];
                let mut bp = rp;
                for (i, p) in bp.iter_mut().enumerate() {
                    *p = p.add(b * 66);
                    pfx.span(*p, 66);
                    let q = [_mm256_loadu_si256(p.cast()), _mm256_loadu_si256(p.add(32).cast())];
                    tq2_codes(&q, &mut cv[i]);
                }
                let dw = f16x8(&bp, 64);
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let blk = &a[(cols.start + jj) * nb + b];
                    let qp = blk.qs.as_ptr();
                    // i16 lanes: eight `vpmaddubsw` pairs of at most 2 * 3 * 128 (< 2^15),
                    // widened once by `vpmaddwd` (until session 12: once per pair).
                    let mut p = [_mm256_setzero_si256(); 8];
                    for g in 0..8 {
                        let av = _mm256_loadu_si256(qp.add(32 * g).cast());
                        for i in 0..8 {
                            p[i] = _mm256_add_epi16(p[i], _mm256_maddubs_epi16(cv[i][g], av));
                        }
                    }
                    for x in p.iter_mut() {
                        *x = _mm256_madd_epi16(*x, ones);
                    }
                    let (lo, hi) = hsum8(&p);
                    let bs = _mm256_loadu_si256(blk.bsums.as_ptr().cast());
                    let sa = hsum_bcast(_mm256_madd_epi16(bs, ones));
                    let sumi = _mm256_sub_epi32(_mm256_add_epi32(lo, hi), sa);
                    let scale = _mm256_mul_ps(_mm256_set1_ps(blk.d), dw);
                    *accj = _mm256_add_ps(*accj, _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), scale));
                }
            }
            store_rows(&acc, nc, r0, here, out);
            r0 += 8;
        }
    }
}

/// TQ1_0: the base-3 digit codes (0..=2, value `code - 1`) of the 54-byte block at `p`, in
/// element order, into `out`. Digit `n` of a packed byte is `((u8)(byte * 3^n) * 3) >> 8`
/// (the core's `format::ggml::tq1_0`, after ggml), computed for 32 (then 16) bytes at once as
/// `(q_n >= 86) + (q_n >= 171)` with `q_n = q_{n-1} * 3` per byte (`max_epu8` compares,
/// since AVX2 has no unsigned byte compare); bytes 0..32 give elements `32 n + b`, bytes
/// 32..48 elements `160 + 16 n + (b - 32)`, bytes 48..52 (4 digits each) elements
/// `240 + 4 n + (b - 48)`.
///
/// # Safety
/// AVX2 is available; `p .. p + 52` is readable.
#[inline(always)]
unsafe fn tq1_codes(p: *const u8, out: &mut [u8; 256]) {
    // SAFETY: reads bytes 0..52 at `p` (caller); writes inside `out` (32 n + 32 <= 160,
    // 160 + 16 n + 16 <= 240, 240 + 4 n + 4 <= 256).
    unsafe {
        let o = out.as_mut_ptr();
        let mut q = _mm256_loadu_si256(p.cast());
        let (t1, t2) = (_mm256_set1_epi8(86), _mm256_set1_epi8(171u8 as i8));
        for n in 0..5 {
            if n > 0 {
                q = _mm256_add_epi8(_mm256_add_epi8(q, q), q);
            }
            let ge1 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, t1), q);
            let ge2 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, t2), q);
            let d = _mm256_sub_epi8(_mm256_sub_epi8(_mm256_setzero_si256(), ge1), ge2);
            _mm256_storeu_si256(o.add(32 * n).cast(), d);
        }
        let planes = digits128(_mm_loadu_si128(p.add(32).cast()));
        for (n, d) in planes.iter().enumerate() {
            _mm_storeu_si128(o.add(160 + 16 * n).cast(), *d);
        }
        for b in 0..4 {
            let mut q = *p.add(48 + b);
            for n in 0..4 {
                *o.add(240 + 4 * n + b) = ((u16::from(q) * 3) >> 8) as u8;
                q = q.wrapping_mul(3);
            }
        }
    }
}

/// The five base-3 digit planes (0..=2 per byte) of the 16 packed bytes `q`, as in
/// [`tq1_codes`].
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn digits128(mut q: __m128i) -> [__m128i; 5] {
    // SAFETY: register-only operations.
    unsafe {
        let (t1, t2) = (_mm_set1_epi8(86), _mm_set1_epi8(171u8 as i8));
        let mut out = [_mm_setzero_si128(); 5];
        for (n, o) in out.iter_mut().enumerate() {
            if n > 0 {
                q = _mm_add_epi8(_mm_add_epi8(q, q), q);
            }
            let ge1 = _mm_cmpeq_epi8(_mm_max_epu8(q, t1), q);
            let ge2 = _mm_cmpeq_epi8(_mm_max_epu8(q, t2), q);
            *o = _mm_sub_epi8(_mm_sub_epi8(_mm_setzero_si128(), ge1), ge2);
        }
        out
    }
}

/// PTQ1_0: the digit codes (0..=2, value `code - 1`) of the 28-byte block at `p`, in element
/// order (Prism's `block_ptq1_0` placement, as the core's `PTQ1_0_PLACEMENT`): digit `n` of
/// byte `b` is element `b + 16 n` (`b < 16`), `80 + (b - 16) + 8 n` (`b < 24`) or
/// `120 + (b - 24) + 2 n` (`b < 26`, `n < 4`); digits as in [`tq1_codes`].
///
/// # Safety
/// AVX2 is available; `p .. p + 26` is readable.
#[inline(always)]
unsafe fn ptq1_codes(p: *const u8, out: &mut [u8; 128]) {
    // SAFETY: reads bytes 0..26 at `p` (caller); writes inside `out` (16 n + 16 <= 80,
    // 80 + 8 n + 8 <= 120, 120 + 2 n + 2 <= 128).
    unsafe {
        let o = out.as_mut_ptr();
        for (n, d) in digits128(_mm_loadu_si128(p.cast())).iter().enumerate() {
            _mm_storeu_si128(o.add(16 * n).cast(), *d);
        }
        for (n, d) in digits128(_mm_loadl_epi64(p.add(16).cast())).iter().enumerate() {
            _mm_storel_epi64(o.add(80 + 8 * n).cast(), *d);
        }
        for b in 0..2 {
            let mut q = *p.add(24 + b);
            for n in 0..4 {
                *o.add(120 + 2 * n + b) = ((u16::from(q) * 3) >> 8) as u8;
                q = q.wrapping_mul(3);
            }
        }
    }
}

/// PTQ1_0 rows against Q8_0 columns: PQ2_0's reference expression per block and row
/// (`super::pq2_avx2`; bit-identical results), with each row's block decoded by [`ptq1_codes`] into a
/// 128-byte code buffer once and reused for every column of the tile.
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold for PTQ1_0
/// (`s.act` is Q8_0 with `4 * nb` blocks per column, `1 <= cols.len() <= MAXC`).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // `k`/`i` index codes and activations alike
pub(crate) unsafe fn ptq1<const MAXC: usize>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let ActSlice::Q8_0(a, ad) = s.act else { return };
    let nb = s.nb;
    let nbq = 4 * nb;
    let nrows = w.len() / rb;
    let nc = cols.len().min(MAXC);
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (block `b < nb`, bytes
    // `b * 28 .. b * 28 + 28`); activation blocks are indexed safely and their 32 quants read
    // whole; code reads stay inside `codes`; AVX2/FMA/F16C are available.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let ones8 = _mm256_set1_epi8(1);
        let mut codes = [[0u8; 128]; 8];
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<8>(w, rb, nrows, r0);
            let mut acc = [_mm256_setzero_ps(); MAXC];
            for b in 0..nb {
                let mut bp = rp;
                for (i, p) in bp.iter_mut().enumerate() {
                    *p = p.add(b * 28);
                    ptq1_codes(*p, &mut codes[i]);
                }
                let dw = f16x8(&bp, 26);
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let mut sf = _mm256_setzero_ps();
                    for k in 0..4 {
                        let ai = (cols.start + jj) * nbq + 4 * b + k;
                        let av = _mm256_loadu_si256(a[ai].qs.as_ptr().cast());
                        let mut p = [_mm256_setzero_si256(); 8];
                        for i in 0..8 {
                            let cv = _mm256_loadu_si256(codes[i].as_ptr().add(32 * k).cast());
                            p[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(cv, av), ones);
                        }
                        let (lo, hi) = hsum8(&p);
                        let sa =
                            hsum_bcast(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, av), ones));
                        let sumi = _mm256_sub_epi32(_mm256_add_epi32(lo, hi), sa);
                        let v = _mm256_mul_ps(_mm256_set1_ps(ad[ai]), _mm256_cvtepi32_ps(sumi));
                        sf = _mm256_add_ps(sf, v);
                    }
                    *accj = _mm256_add_ps(*accj, _mm256_mul_ps(dw, sf));
                }
            }
            store_rows(&acc, nc, r0, here, out);
            r0 += 8;
        }
    }
}

/// TQ1_0 rows against Q8_K columns: as [`tq2`] (the same reference expression per block and
/// row, bit-identical results), with each row's block decoded by [`tq1_codes`] into a
/// 256-byte code buffer once and reused for every column of the tile.
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold for TQ1_0
/// (`s.act` is Q8_K, `1 <= cols.len() <= MAXC`).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // `g`/`i` index codes and activations alike
pub(crate) unsafe fn tq1<const MAXC: usize>(
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
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (block `b < nb`, bytes
    // `b * 54 .. b * 54 + 54`); activation blocks are indexed safely (`a[ai]`) and their
    // 256-byte `qs` / 32-byte `bsums` are read whole; code reads stay inside `codes`;
    // AVX2/FMA/F16C are available.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut codes = [[0u8; 256]; 8];
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<8>(w, rb, nrows, r0);
            let mut acc = [_mm256_setzero_ps(); MAXC];
            for b in 0..nb {
                let mut bp = rp;
                for (i, p) in bp.iter_mut().enumerate() {
                    *p = p.add(b * 54);
                    tq1_codes(*p, &mut codes[i]);
                }
                let dw = f16x8(&bp, 52);
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let blk = &a[(cols.start + jj) * nb + b];
                    let qp = blk.qs.as_ptr();
                    let mut p = [_mm256_setzero_si256(); 8];
                    for g in 0..8 {
                        let av = _mm256_loadu_si256(qp.add(32 * g).cast());
                        for i in 0..8 {
                            let cv = _mm256_loadu_si256(codes[i].as_ptr().add(32 * g).cast());
                            let m = _mm256_madd_epi16(_mm256_maddubs_epi16(cv, av), ones);
                            p[i] = _mm256_add_epi32(p[i], m);
                        }
                    }
                    let (lo, hi) = hsum8(&p);
                    let bs = _mm256_loadu_si256(blk.bsums.as_ptr().cast());
                    let sa = hsum_bcast(_mm256_madd_epi16(bs, ones));
                    let sumi = _mm256_sub_epi32(_mm256_add_epi32(lo, hi), sa);
                    let scale = _mm256_mul_ps(_mm256_set1_ps(blk.d), dw);
                    *accj = _mm256_add_ps(*accj, _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), scale));
                }
            }
            store_rows(&acc, nc, r0, here, out);
            r0 += 8;
        }
    }
}
