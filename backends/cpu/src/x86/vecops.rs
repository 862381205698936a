//! AVX-512 and AVX2 bodies of [`crate::vecops`] (`dots`, `axpys`). Lane order: `dots` keeps
//! one 16-lane (AVX2: 8-lane) FMA accumulator per row, a masked load for the tail, and sums the
//! lanes by a fixed tree; `axpys` walks `out` in vectors and adds each row's weighted vector by
//! FMA in row order.
//!
//! The public wrappers in `crate::vecops` check that every row read lies inside `rows`; the
//! bodies here are reachable only through [`bodies`], which hands them out only for an
//! instruction set that [`Isa::available`] confirmed.
//!
//! What must not live here: the dispatch cell (`crate::vecops`), matmul kernels.

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use lowbit_core::format::ggml::{BlockQ8K, BlockQ8_0, BlockQ8_1};

use super::avx2::hsum_ps;
use crate::isa::Isa;

/// The `(dots, axpys)` bodies for `isa`, if it is an x86 SIMD set this CPU has.
#[allow(clippy::type_complexity)]
pub(crate) fn bodies(
    isa: Isa,
) -> Option<(fn(&[f32], &[f32], usize, &mut [f32]), fn(&[f32], &[f32], usize, &mut [f32]))> {
    if !isa.available() {
        return None;
    }
    match isa {
        Isa::Avx512 | Isa::Avx512Vnni => Some((dots512, axpys512)),
        Isa::Avx2 => Some((dots256, axpys256)),
        _ => None,
    }
}

/// The `(exp_shifted_sum, silu_mul)` bodies for `isa`: the portable code of
/// `crate::vecops` compiled with the ISA's vector width (the same operations, so the same
/// bits).
#[allow(clippy::type_complexity)]
pub(crate) fn exp_bodies(isa: Isa) -> Option<(fn(&mut [f32], f32) -> f32, fn(&mut [f32], &[f32]))> {
    if !isa.available() {
        return None;
    }
    match isa {
        Isa::Avx512 | Isa::Avx512Vnni => Some((exp_sum512, silu_mul512)),
        Isa::Avx2 => Some((exp_sum256, silu_mul256)),
        _ => None,
    }
}

/// The fast Q8_0 / Q8_1 activation encoders of `crate::act` compiled for `isa` (the same
/// operations, so the same bytes).
pub(crate) fn act_bodies(isa: Isa) -> Option<crate::act::FastBodies> {
    if !isa.available() {
        return None;
    }
    match isa {
        Isa::Avx512 | Isa::Avx512Vnni => {
            Some(crate::act::FastBodies { q8_0: q8_0_512, q8_1: q8_1_512, q8_k: q8_k_512 })
        }
        Isa::Avx2 => {
            Some(crate::act::FastBodies { q8_0: q8_0_256, q8_1: q8_1_256, q8_k: q8_k_256 })
        }
        _ => None,
    }
}

fn q8_0_512(x: &[f32], out: &mut [BlockQ8_0]) -> bool {
    // SAFETY: handed out by `act_bodies` only after `Isa::Avx512.available()`.
    unsafe { q8_0_512_body(x, out) }
}

fn q8_1_512(x: &[f32], out: &mut [BlockQ8_1]) -> bool {
    // SAFETY: as in `q8_0_512`.
    unsafe { q8_1_512_body(x, out) }
}

fn q8_k_512(x: &[f32], out: &mut [BlockQ8K]) -> bool {
    // SAFETY: as in `q8_0_512`.
    unsafe { q8_k_512_body(x, out) }
}

fn q8_k_256(x: &[f32], out: &mut [BlockQ8K]) -> bool {
    // SAFETY: as in `q8_0_256`.
    unsafe { q8_k_256_body(x, out) }
}

/// # Safety
/// AVX-512F/BW/VL and AVX2 are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
unsafe fn q8_k_512_body(x: &[f32], out: &mut [BlockQ8K]) -> bool {
    crate::act::q8_k_fast(x, out)
}

/// # Safety
/// AVX2 is available.
#[target_feature(enable = "avx2")]
unsafe fn q8_k_256_body(x: &[f32], out: &mut [BlockQ8K]) -> bool {
    crate::act::q8_k_fast(x, out)
}

fn q8_0_256(x: &[f32], out: &mut [BlockQ8_0]) -> bool {
    // SAFETY: handed out by `act_bodies` only after `Isa::Avx2.available()` (AVX2, FMA, F16C).
    unsafe { q8_0_256_body(x, out) }
}

fn q8_1_256(x: &[f32], out: &mut [BlockQ8_1]) -> bool {
    // SAFETY: as in `q8_0_256`.
    unsafe { q8_1_256_body(x, out) }
}

/// `crate::act::q8_0_fast` written out in AVX-512 (the compiler's version of the portable loop
/// converted the f16 scale in software and reduced the maximum in scalar steps: ~70 ns per
/// block). The same operations on the same values, so the same bytes: the block maximum of
/// `|x|` (exact in any order), `d = amax / 127` and `1 / d` in scalar f32, `d` to f16 by
/// `vcvtps2ph` with round-to-nearest-even (IEEE, as `half`'s conversion), and per element
/// `round_away(x * id)` as truncation plus the `f >= 0.5` / `f <= -0.5` corrections.
///
/// # Safety
/// AVX-512F/BW/VL, AVX2 and F16C are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
unsafe fn q8_0_512_body(x: &[f32], out: &mut [BlockQ8_0]) -> bool {
    if x.len() != out.len() * 32 {
        return false;
    }
    // SAFETY: block `b` reads `x[32 b .. 32 b + 32]` (`x.len() == 32 * out.len()`) and writes
    // the 32 bytes of `out[b].qs`; the rest is register-only with the enabled features.
    unsafe {
        let absmask = _mm512_set1_epi32(0x7fff_ffff);
        let fmax = _mm512_set1_ps(f32::MAX);
        let half = _mm512_set1_ps(0.5);
        let mhalf = _mm512_set1_ps(-0.5);
        let one = _mm512_set1_epi32(1);
        for (xb, ob) in x.chunks_exact(32).zip(out.iter_mut()) {
            let v0 = _mm512_loadu_ps(xb.as_ptr());
            let v1 = _mm512_loadu_ps(xb.as_ptr().add(16));
            let a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), absmask));
            let a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), absmask));
            // Not finite (NaN compares false): the caller runs the core encoder.
            let fin = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(a0, fmax)
                & _mm512_cmp_ps_mask::<_CMP_LE_OQ>(a1, fmax);
            if fin != 0xffff {
                return false;
            }
            let amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
            let d = amax / 127.0;
            let h = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d));
            let hb = _mm_extract_epi16::<0>(h) as u16;
            if hb & 0x7c00 == 0x7c00 {
                return false;
            }
            ob.d = half::f16::from_bits(hb);
            let id = _mm512_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
            // A macro, not a closure: a closure's body is compiled without the features.
            macro_rules! q {
                ($v:expr) => {{
                    let p = _mm512_mul_ps($v, id);
                    let t = _mm512_cvttps_epi32(p);
                    let f = _mm512_sub_ps(p, _mm512_cvtepi32_ps(t));
                    let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(f, half);
                    let dn = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(f, mhalf);
                    let t = _mm512_mask_add_epi32(t, up, t, one);
                    _mm512_cvtepi32_epi8(_mm512_mask_sub_epi32(t, dn, t, one))
                }};
            }
            let q0 = q!(v0);
            let q1 = q!(v1);
            let dst = ob.qs.as_mut_ptr();
            _mm_storeu_si128(dst.cast(), q0);
            _mm_storeu_si128(dst.add(16).cast(), q1);
        }
    }
    true
}

/// # Safety
/// AVX-512F/BW/VL, AVX2 and F16C are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
unsafe fn q8_1_512_body(x: &[f32], out: &mut [BlockQ8_1]) -> bool {
    crate::act::q8_1_fast(x, out)
}

/// # Safety
/// AVX2 and F16C are available.
#[target_feature(enable = "avx2,f16c")]
unsafe fn q8_0_256_body(x: &[f32], out: &mut [BlockQ8_0]) -> bool {
    crate::act::q8_0_fast(x, out)
}

/// # Safety
/// AVX2 and F16C are available.
#[target_feature(enable = "avx2,f16c")]
unsafe fn q8_1_256_body(x: &[f32], out: &mut [BlockQ8_1]) -> bool {
    crate::act::q8_1_fast(x, out)
}

fn exp_sum512(v: &mut [f32], shift: f32) -> f32 {
    // SAFETY: handed out by `exp_bodies` only after `Isa::Avx512.available()`.
    unsafe { exp_sum512_body(v, shift) }
}

fn silu_mul512(g: &mut [f32], u: &[f32]) {
    // SAFETY: as in `exp_sum512`.
    unsafe { silu_mul512_body(g, u) }
}

fn exp_sum256(v: &mut [f32], shift: f32) -> f32 {
    // SAFETY: handed out by `exp_bodies` only after `Isa::Avx2.available()`.
    unsafe { exp_sum256_body(v, shift) }
}

fn silu_mul256(g: &mut [f32], u: &[f32]) {
    // SAFETY: as in `exp_sum256`.
    unsafe { silu_mul256_body(g, u) }
}

/// # Safety
/// AVX-512F and AVX2 are available.
#[target_feature(enable = "avx512f,avx2")]
unsafe fn exp_sum512_body(v: &mut [f32], shift: f32) -> f32 {
    crate::vecops::exp_shifted_sum_portable(v, shift)
}

/// # Safety
/// AVX-512F and AVX2 are available.
#[target_feature(enable = "avx512f,avx2")]
unsafe fn silu_mul512_body(g: &mut [f32], u: &[f32]) {
    crate::vecops::silu_mul_portable(g, u)
}

/// # Safety
/// AVX2 is available.
#[target_feature(enable = "avx2")]
unsafe fn exp_sum256_body(v: &mut [f32], shift: f32) -> f32 {
    crate::vecops::exp_shifted_sum_portable(v, shift)
}

/// # Safety
/// AVX2 is available.
#[target_feature(enable = "avx2")]
unsafe fn silu_mul256_body(g: &mut [f32], u: &[f32]) {
    crate::vecops::silu_mul_portable(g, u)
}

fn dots512(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    // SAFETY: handed out by `bodies` only after `Isa::Avx512.available()`; the caller
    // (`crate::vecops::dots`) checked that rows `0..out.len()` of `q.len()` floats, `stride`
    // apart, lie inside `rows`.
    unsafe { dots512_body(q, rows, stride, out) }
}

fn axpys512(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    // SAFETY: as in `dots512` (`crate::vecops::axpys` checked the extent).
    unsafe { axpys512_body(w, rows, stride, out) }
}

fn dots256(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    // SAFETY: handed out only after `Isa::Avx2.available()` (AVX2 + FMA); extent checked.
    unsafe { dots256_body(q, rows, stride, out) }
}

fn axpys256(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    // SAFETY: as in `dots256`.
    unsafe { axpys256_body(w, rows, stride, out) }
}

/// # Safety
/// AVX-512F, AVX2 and FMA are available; rows `0..out.len()` of `q.len()` floats, `stride`
/// apart, lie inside `rows`.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dots512_body(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    let len = q.len();
    let full = len / 16;
    let tail = (len % 16) as u32;
    let mask: __mmask16 = ((1u32 << tail) - 1) as __mmask16;
    let mut t0 = 0;
    // SAFETY: every load reads `q[16c..16c + 16]` (c < full), or the masked tail of `q`, or the
    // same offsets of a row `t < out.len()` inside `rows` (the caller's extent); masked-off
    // lanes are not read; stores write `out[t0..t0 + 16]` with `t0 + 16 <= out.len()`.
    unsafe {
        if tail == 0 {
            // Blocks of 16 rows (attention heads of 32, 64 or 128 floats): the same per-lane
            // FMA chain as below, then one transposing reduction for all 16 rows.
            t0 = match full {
                2 => dots16::<2>(q, rows, stride, out),
                4 => dots16::<4>(q, rows, stride, out),
                8 => dots16::<8>(q, rows, stride, out),
                _ => 0,
            };
        }
        for (t, o) in out.iter_mut().enumerate().skip(t0) {
            let r = rows.as_ptr().add(t * stride);
            let mut acc = _mm512_setzero_ps();
            for c in 0..full {
                let a = _mm512_loadu_ps(q.as_ptr().add(16 * c));
                let b = _mm512_loadu_ps(r.add(16 * c));
                acc = _mm512_fmadd_ps(a, b, acc);
            }
            if tail != 0 {
                let a = _mm512_maskz_loadu_ps(mask, q.as_ptr().add(16 * full));
                let b = _mm512_maskz_loadu_ps(mask, r.add(16 * full));
                acc = _mm512_fmadd_ps(a, b, acc);
            }
            let lo = _mm512_castps512_ps256(acc);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc)));
            *o = hsum_ps(_mm256_add_ps(lo, hi));
        }
    }
}

/// The rows of [`dots512_body`] in whole blocks of 16, for `q.len() == 16 * V`, with `q`
/// and the 16 accumulators in registers; returns the rows done.
///
/// # Safety
/// As [`dots512_body`], and `q.len() == 16 * V`.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn dots16<const V: usize>(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) -> usize {
    let mut t0 = 0;
    // SAFETY: reads `q[..16 V]` and the same extent of rows `t0..t0 + 16 <= out.len()`
    // (caller); writes `out[t0..t0 + 16]`.
    unsafe {
        let mut qv = [_mm512_setzero_ps(); V];
        for c in 0..V {
            qv[c] = _mm512_loadu_ps(q.as_ptr().add(16 * c));
        }
        while t0 + 16 <= out.len() {
            let mut acc = [_mm512_setzero_ps(); 16];
            for i in 0..16 {
                let r = rows.as_ptr().add((t0 + i) * stride);
                for c in 0..V {
                    acc[i] = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(r.add(16 * c)), acc[i]);
                }
            }
            _mm512_storeu_ps(out.as_mut_ptr().add(t0), sum16x16(&acc));
            t0 += 16;
        }
    }
    t0
}

/// Lane `t` of the result is the sum of the 16 lanes of `v[t]`, by a fixed tree: pairs of
/// vectors interleaved and added (elements `e` and `e + 2` of each 128-bit block), then pairs
/// of those (elements `e` and `e + 1`), then the four 128-bit blocks in two transposing steps.
///
/// # Safety
/// AVX-512F is available.
#[inline(always)]
unsafe fn sum16x16(v: &[__m512; 16]) -> __m512 {
    // SAFETY: register-only operations.
    unsafe {
        let mut w = [_mm512_setzero_ps(); 8];
        for i in 0..8 {
            let (a, b) = (v[2 * i], v[2 * i + 1]);
            w[i] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
        }
        let mut x = [_mm512_setzero_ps(); 4];
        for i in 0..4 {
            let (a, b) = (_mm512_castps_pd(w[2 * i]), _mm512_castps_pd(w[2 * i + 1]));
            x[i] = _mm512_add_ps(
                _mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)),
            );
        }
        let z01 = add_blocks(x[0], x[1]);
        let z23 = add_blocks(x[2], x[3]);
        add_blocks(z01, z23)
    }
}

/// `[a0 + a1, a2 + a3, b0 + b1, b2 + b3]` in 128-bit blocks.
///
/// # Safety
/// AVX-512F is available.
#[inline(always)]
unsafe fn add_blocks(a: __m512, b: __m512) -> __m512 {
    // SAFETY: register-only operations.
    unsafe {
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
            _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
        )
    }
}

/// Vectors of `out` that [`axpys512_body`] keeps in registers during one pass over the rows.
const AXPY_VECS: usize = 8;

/// # Safety
/// As [`dots512_body`], with rows `0..w.len()` of `out.len()` floats.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn axpys512_body(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    let len = out.len();
    // SAFETY: reads and writes `out[i..i + 16 * AXPY_VECS]` (lanes past `len` masked off) and
    // the same offsets of rows `0..w.len()`, inside `rows` by the caller's extent.
    unsafe {
        let mut i0 = 0;
        while i0 < len {
            // One pass over the rows per block of up to AXPY_VECS vectors of `out` (a head of
            // 64 or 128 floats is one block).
            let mut m = [0 as __mmask16; AXPY_VECS];
            let mut acc = [_mm512_setzero_ps(); AXPY_VECS];
            let mut nv = 0;
            while nv < AXPY_VECS && i0 + 16 * nv < len {
                let left = len - i0 - 16 * nv;
                m[nv] = if left >= 16 { 0xFFFF } else { ((1u32 << left) - 1) as __mmask16 };
                acc[nv] = _mm512_maskz_loadu_ps(m[nv], out.as_ptr().add(i0 + 16 * nv));
                nv += 1;
            }
            for (t, &wt) in w.iter().enumerate() {
                let wv = _mm512_set1_ps(wt);
                let r = rows.as_ptr().add(t * stride + i0);
                for v in 0..AXPY_VECS {
                    if v < nv {
                        let x = _mm512_maskz_loadu_ps(m[v], r.add(16 * v));
                        acc[v] = _mm512_fmadd_ps(wv, x, acc[v]);
                    }
                }
            }
            for v in 0..nv {
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(i0 + 16 * v), m[v], acc[v]);
            }
            i0 += 16 * AXPY_VECS;
        }
    }
}

/// # Safety
/// AVX2 and FMA are available; the extent as in [`dots512_body`].
#[target_feature(enable = "avx2,fma")]
unsafe fn dots256_body(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    let len = q.len();
    let full = len / 8;
    // SAFETY: loads `q[8c..8c + 8]` (c < full) and the same offsets of a row inside `rows`;
    // the tail is read element by element.
    unsafe {
        for (t, o) in out.iter_mut().enumerate() {
            let r = rows.as_ptr().add(t * stride);
            let mut acc = _mm256_setzero_ps();
            for c in 0..full {
                let a = _mm256_loadu_ps(q.as_ptr().add(8 * c));
                let b = _mm256_loadu_ps(r.add(8 * c));
                acc = _mm256_fmadd_ps(a, b, acc);
            }
            let mut s = hsum_ps(acc);
            for (i, &qi) in q.iter().enumerate().skip(8 * full) {
                s = qi.mul_add(*r.add(i), s);
            }
            *o = s;
        }
    }
}

/// # Safety
/// As [`dots256_body`], with rows `0..w.len()` of `out.len()` floats.
#[target_feature(enable = "avx2,fma")]
unsafe fn axpys256_body(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    let len = out.len();
    let full = len / 8;
    // SAFETY: reads and writes `out[8c..8c + 8]` (c < full) and the same offsets of rows
    // `0..w.len()` inside `rows`; the tail element by element.
    unsafe {
        for c in 0..full {
            let mut acc = _mm256_loadu_ps(out.as_ptr().add(8 * c));
            for (t, &wt) in w.iter().enumerate() {
                let v = _mm256_loadu_ps(rows.as_ptr().add(t * stride + 8 * c));
                acc = _mm256_fmadd_ps(_mm256_set1_ps(wt), v, acc);
            }
            _mm256_storeu_ps(out.as_mut_ptr().add(8 * c), acc);
        }
        for (i, o) in out.iter_mut().enumerate().skip(8 * full) {
            for (t, &wt) in w.iter().enumerate() {
                *o = wt.mul_add(*rows.as_ptr().add(t * stride + i), *o);
            }
        }
    }
}
