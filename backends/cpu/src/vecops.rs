//! f32 vector primitives for the model arithmetic outside the weight matmuls: many dot
//! products of one vector with strided rows ([`dots`]) and the weighted sum of strided rows
//! ([`axpys`]), the two halves of attention over a KV cache; and the exponentials of softmax
//! ([`exp_shifted_sum`]) and SwiGLU ([`silu_mul`]) on a vectorizable [`exp`]. The SIMD body (AVX-512, AVX2 or
//! the portable one) is chosen once per process from [`crate::isa::selected`] (so
//! `LOWBIT_CPU` forces it as it forces the matmul kernels) and the choice stored.
//!
//! Rounding: every body accumulates in f32 with FMA (the portable one with separate multiply
//! and add) in a fixed lane order, then sums its lanes by a fixed tree, so results are
//! deterministic for a given instruction set but differ between instruction sets in the last
//! bits; each is within `len * 2^-24 * sum|a_i b_i|` of the exact value.
//!
//! What must not live here: matmuls, anything with threads.

use std::sync::OnceLock;

use crate::isa::{self, Isa};

/// `out[t] = sum_i q[i] * rows[t * stride + i]` for `t < out.len()`.
type DotsFn = fn(&[f32], &[f32], usize, &mut [f32]);
/// `out[i] += sum_t w[t] * rows[t * stride + i]` for `i < out.len()`.
type AxpysFn = fn(&[f32], &[f32], usize, &mut [f32]);

/// `v[i] = exp(v[i] - shift)`, returning the sum.
type ExpSumFn = fn(&mut [f32], f32) -> f32;
/// `g[i] = silu(g[i]) * u[i]`.
type SiluMulFn = fn(&mut [f32], &[f32]);

struct Bodies {
    dots: DotsFn,
    axpys: AxpysFn,
    exp_sum: ExpSumFn,
    silu_mul: SiluMulFn,
}

static BODIES: OnceLock<Bodies> = OnceLock::new();

fn bodies() -> &'static Bodies {
    BODIES.get_or_init(|| {
        let isa = isa::selected().unwrap_or(Isa::Scalar);
        #[cfg(target_arch = "x86_64")]
        if let Some((dots, axpys)) = crate::x86::vecops::bodies(isa) {
            let (exp_sum, silu_mul) = crate::x86::vecops::exp_bodies(isa)
                .unwrap_or((exp_shifted_sum_portable, silu_mul_portable));
            return Bodies { dots, axpys, exp_sum, silu_mul };
        }
        let _ = isa;
        Bodies {
            dots: dots_portable,
            axpys: axpys_portable,
            exp_sum: exp_shifted_sum_portable,
            silu_mul: silu_mul_portable,
        }
    })
}

/// Checks the row extent both primitives read: `count` rows of `len` floats, `stride` apart.
fn check(len: usize, rows: &[f32], stride: usize, count: usize) {
    if count > 0 {
        let need = (count - 1) * stride + len;
        assert!(
            stride >= len && rows.len() >= need,
            "vecops: {count} rows of {len} floats, {stride} apart, need {need} floats, got {}",
            rows.len()
        );
    }
}

/// `out[t] = sum_i q[i] * rows[t * stride + i]` for every `t < out.len()`: the dot products
/// of `q` with `out.len()` rows of `q.len()` floats laid out `stride` floats apart (the keys
/// of one attention head across positions).
///
/// # Panics
/// If `stride < q.len()` or `rows` is shorter than `(out.len() - 1) * stride + q.len()` (a
/// caller's bug, as with slice indexing).
pub fn dots(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    check(q.len(), rows, stride, out.len());
    (bodies().dots)(q, rows, stride, out)
}

/// `out[i] += sum_t w[t] * rows[t * stride + i]` for every `i < out.len()`: the sum of
/// `w.len()` rows of `out.len()` floats, `stride` apart, weighted by `w` (the values of one
/// attention head weighted by its probabilities).
///
/// # Panics
/// If `stride < out.len()` or `rows` is shorter than `(w.len() - 1) * stride + out.len()`.
pub fn axpys(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    check(out.len(), rows, stride, w.len());
    (bodies().axpys)(w, rows, stride, out)
}

/// `v[i] = exp(v[i] - shift)` for every element, returning their sum (accumulated in eight
/// partial sums, then a fixed tree): the numerator and denominator of a softmax whose maximum
/// is `shift`. Each exponential is [`exp`]'s.
pub fn exp_shifted_sum(v: &mut [f32], shift: f32) -> f32 {
    (bodies().exp_sum)(v, shift)
}

/// `g[i] = silu(g[i]) * u[i]` with `silu(x) = x / (1 + exp(-x))` (SwiGLU's gate), over the
/// common length, with [`exp`]'s exponential.
pub fn silu_mul(g: &mut [f32], u: &[f32]) {
    (bodies().silu_mul)(g, u)
}

/// `e^x` in f32 without a library call, in operations a compiler vectorizes (so every
/// instruction set computes the same bits): `x = n ln2 + r` with `n` the nearest integer to
/// `x / ln2` and `r` reduced by a two-part `ln2` (0.693359375 - 2.12194440e-4), then
/// `e^r = 1 + r + r^2 P(r)` with Cephes `expf`'s degree-5 minimax coefficients, scaled by
/// `2^n` through the exponent bits. Accuracy: within 2 ulp of `e^x` for `x` in [-87.3, 88]
/// (tested against f64 on a sweep); `x` above 88 saturates at `e^88` (about 1.65e38, finite:
/// `silu` of a large negative input stays a signed zero), below -87.33 gives 0; NaN gives NaN.
/// Source of the coefficients and the reduction: Cephes `expf.c` (S. Moshier).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    // 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    // max/min rather than clamp: no NaN branch, so the loops that call this vectorize (a NaN
    // input is restored by the final select).
    #[allow(clippy::manual_clamp)]
    let xc = x.max(-87.336_54).min(88.0);
    let t = xc * LOG2E + MAGIC;
    let n = t - MAGIC;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = xc - n * C1 - n * C2;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5; // Cephes: 5.0000001201e-1, which rounds to 0.5 in f32
    let er = p * r * r + r + 1.0;
    let scale = f32::from_bits(((ni + 127) as u32) << 23);
    let y = er * scale;
    let y = if x < -87.336_54 { 0.0 } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// The portable body of [`exp_shifted_sum`] (also the SIMD ones': they compile this with
/// wider vectors).
#[inline(always)]
pub(crate) fn exp_shifted_sum_portable(v: &mut [f32], shift: f32) -> f32 {
    for e in v.iter_mut() {
        *e = exp(*e - shift);
    }
    let mut acc = [0f32; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for i in 0..8 {
            acc[i] += c[i];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for e in chunks.remainder() {
        s += *e;
    }
    s
}

/// The portable body of [`silu_mul`] (also the SIMD ones').
#[inline(always)]
pub(crate) fn silu_mul_portable(g: &mut [f32], u: &[f32]) {
    for (a, &b) in g.iter_mut().zip(u) {
        *a = *a / (1.0 + exp(-*a)) * b;
    }
}

/// The portable body of [`dots`]: eight partial sums per dot product.
fn dots_portable(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    for (t, o) in out.iter_mut().enumerate() {
        let r = &rows[t * stride..][..q.len()];
        let mut acc = [0f32; 8];
        let (qc, qr) = q.split_at(q.len() / 8 * 8);
        let (rc, rr) = r.split_at(qc.len());
        for (x, y) in qc.chunks_exact(8).zip(rc.chunks_exact(8)) {
            for i in 0..8 {
                acc[i] += x[i] * y[i];
            }
        }
        let mut s =
            ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
        for (x, y) in qr.iter().zip(rr) {
            s += x * y;
        }
        *o = s;
    }
}

/// The portable body of [`axpys`].
fn axpys_portable(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    for (t, &wt) in w.iter().enumerate() {
        let r = &rows[t * stride..][..out.len()];
        for (o, &v) in out.iter_mut().zip(r) {
            *o += wt * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// Every body (portable and each SIMD one this CPU runs) against an f64 reference within
    /// the stated bound, for lengths around the vector widths and strides with gaps.
    #[test]
    fn bodies_match_f64_within_bound() {
        let mut all: Vec<(&str, DotsFn, AxpysFn)> =
            vec![("portable", dots_portable, axpys_portable)];
        #[cfg(target_arch = "x86_64")]
        for isa in Isa::available_all() {
            if let Some((d, a)) = crate::x86::vecops::bodies(isa) {
                all.push((isa.name(), d, a));
            }
        }
        all.push(("dispatched", |q, r, s, o| dots(q, r, s, o), |w, r, s, o| axpys(w, r, s, o)));
        for (name, d, a) in all {
            for len in [1usize, 7, 8, 15, 16, 17, 33, 64, 100, 128, 129] {
                for count in [1usize, 3, 4, 5, 9, 16, 17, 40] {
                    let stride = len + 3;
                    let rows = data(count * stride, len as u64 * 31 + count as u64);
                    let q = data(len, 7 + len as u64);
                    let mut out = vec![0f32; count];
                    d(&q, &rows, stride, &mut out);
                    for (t, &o) in out.iter().enumerate() {
                        let r = &rows[t * stride..][..len];
                        let exact: f64 =
                            q.iter().zip(r).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
                        let mag: f64 = q
                            .iter()
                            .zip(r)
                            .map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs())
                            .sum();
                        let bound = len as f64 * 2f64.powi(-24) * mag + 1e-30;
                        assert!(
                            (f64::from(o) - exact).abs() <= bound,
                            "{name} dots len {len} count {count} t {t}"
                        );
                    }
                    let w = data(count, 99 + count as u64);
                    let init = data(len, 5);
                    let mut acc = init.clone();
                    a(&w, &rows, stride, &mut acc);
                    for i in 0..len {
                        let exact: f64 = f64::from(init[i])
                            + (0..count)
                                .map(|t| f64::from(w[t]) * f64::from(rows[t * stride + i]))
                                .sum::<f64>();
                        let mag: f64 = f64::from(init[i]).abs()
                            + (0..count)
                                .map(|t| (f64::from(w[t]) * f64::from(rows[t * stride + i])).abs())
                                .sum::<f64>();
                        let bound = (count + 1) as f64 * 2f64.powi(-24) * mag + 1e-30;
                        assert!(
                            (f64::from(acc[i]) - exact).abs() <= bound,
                            "{name} axpys len {len} count {count} i {i}"
                        );
                    }
                }
            }
        }
    }

    /// [`exp`] against f64 on a dense sweep of its range (within 2 ulp), its edges, and the
    /// SIMD bodies of the softmax and SwiGLU helpers give the portable ones' bits.
    #[test]
    fn exp_within_two_ulp_and_bodies_agree() {
        let mut x = -87.3f32;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            let ulp = f64::from(f32::EPSILON) * want;
            assert!((got - want).abs() <= 2.0 * ulp, "exp({x}) = {got}, want {want}");
            x += 0.0037;
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(100.0), exp(88.0));
        assert!(exp(88.0) > 1.6e38 && exp(88.0).is_finite());
        assert!(exp(f32::NAN).is_nan());
        let v0 = data(1003, 3).iter().map(|v| v * 30.0).collect::<Vec<_>>();
        let u = data(1003, 4);
        let (mut a, mut g) = (v0.clone(), v0.clone());
        let sum = exp_shifted_sum_portable(&mut a, 2.0);
        silu_mul_portable(&mut g, &u);
        let (mut b, mut h) = (v0.clone(), v0.clone());
        assert_eq!(exp_shifted_sum(&mut b, 2.0).to_bits(), sum.to_bits());
        silu_mul(&mut h, &u);
        assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
        assert!(g.iter().zip(&h).all(|(p, q)| p.to_bits() == q.to_bits()));
        for ((&x, &y), &w) in v0.iter().zip(&g).zip(&u) {
            let want = f64::from(x) / (1.0 + (-f64::from(x)).exp()) * f64::from(w);
            assert!((f64::from(y) - want).abs() <= 1e-6 * want.abs() + 1e-30, "silu {x}");
        }
    }

    #[test]
    #[should_panic(expected = "vecops")]
    fn short_rows_panic_with_a_message() {
        let mut out = [0f32; 3];
        dots(&[1.0; 8], &[0.0; 20], 8, &mut out);
    }
}
