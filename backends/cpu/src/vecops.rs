//! f32 vector primitives for the model arithmetic outside the weight matmuls: many dot
//! products of one vector with strided rows ([`dots`]) and the weighted sum of strided rows
//! ([`axpys`]), the two halves of attention over a KV cache. The SIMD body (AVX-512, AVX2 or
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

struct Bodies {
    dots: DotsFn,
    axpys: AxpysFn,
}

static BODIES: OnceLock<Bodies> = OnceLock::new();

fn bodies() -> &'static Bodies {
    BODIES.get_or_init(|| {
        let isa = isa::selected().unwrap_or(Isa::Scalar);
        #[cfg(target_arch = "x86_64")]
        if let Some((dots, axpys)) = crate::x86::vecops::bodies(isa) {
            return Bodies { dots, axpys };
        }
        let _ = isa;
        Bodies { dots: dots_portable, axpys: axpys_portable }
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
                for count in [1usize, 3, 4, 5, 9] {
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

    #[test]
    #[should_panic(expected = "vecops")]
    fn short_rows_panic_with_a_message() {
        let mut out = [0f32; 3];
        dots(&[1.0; 8], &[0.0; 20], 8, &mut out);
    }
}
