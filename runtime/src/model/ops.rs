//! The element-wise and attention arithmetic of the llama forward pass, on f32 columns:
//! RMSNorm, RoPE (adjacent pairs), causal grouped-query attention, SwiGLU's gate.
//!
//! Facts (llama.cpp `ggml/src/ggml-cpu/ops.cpp`: `ggml_compute_forward_rms_norm_f32` (the
//! mean of squares summed in double), `rope_f32` in "normal" mode (pairs `(2i, 2i+1)` rotated
//! by `theta = pos * base^(-2i / n_rot)`), `ggml_vec_silu_f32`; `src/llama-graph.cpp`
//! build_attn_mha: scale `1/sqrt(head_dim)`, causal mask, query head `h` reads key/value head
//! `h / (n_head / n_head_kv)`).
//!
//! The per-head dot products and weighted sums run on `lowbit_cpu::vecops` (SIMD, chosen once).
//! What must not live here: matrix products (the backend's), the cache's bookkeeping (`kv.rs`).

use lowbit_cpu::vecops;
use rayon::prelude::*;

/// `out = x / sqrt(mean(x^2) + eps) * w` for one column (`x`, `w`, `out` of equal length).
pub(crate) fn rmsnorm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let ss: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    let mean = ss / x.len().max(1) as f64;
    let scale = (1.0 / (mean + f64::from(eps)).sqrt()) as f32;
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = v * scale * g;
    }
}

/// Cosines and sines of RoPE's angles for one position: `n_rot / 2` pairs, computed in f64.
pub(crate) fn rope_angles(pos: usize, n_rot: usize, freq_base: f32) -> Vec<(f32, f32)> {
    let half = n_rot / 2;
    (0..half)
        .map(|i| {
            let inv = f64::from(freq_base).powf(-2.0 * i as f64 / n_rot as f64);
            let theta = pos as f64 * inv;
            (theta.cos() as f32, theta.sin() as f32)
        })
        .collect()
}

/// Rotates the pairs `(2i, 2i+1)`, `i < angles.len()`, of every head (`head_dim` floats each)
/// of one column in place.
pub(crate) fn rope(x: &mut [f32], head_dim: usize, angles: &[(f32, f32)]) {
    for head in x.chunks_exact_mut(head_dim) {
        for (pair, &(c, s)) in head.chunks_exact_mut(2).zip(angles) {
            let (x0, x1) = (pair[0], pair[1]);
            pair[0] = x0 * c - x1 * s;
            pair[1] = x0 * s + x1 * c;
        }
    }
}

/// `g = silu(g) * u` element-wise (`silu(x) = x / (1 + e^-x)`, `e^x` by
/// `lowbit_cpu::vecops::exp`).
pub(crate) fn swiglu(g: &mut [f32], u: &[f32]) {
    vecops::silu_mul(g, u);
}

/// Multiply-adds below which [`attention`] stays on the calling thread.
const PARALLEL_MIN_WORK: usize = 1 << 16;

/// The shape of one attention call.
pub(crate) struct AttnShape {
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads.
    pub n_head_kv: usize,
    /// Floats per head.
    pub head_dim: usize,
}

/// Causal attention for `n` query columns at positions `pos0..pos0 + n`: `q` holds the
/// columns (`n_head * head_dim` each), `keys` / `values` every position `0..pos0 + n`
/// (`n_head_kv * head_dim` each), and `out` receives `n` columns like `q`. Parallel over
/// (column, head) pairs.
pub(crate) fn attention(
    shape: &AttnShape,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    pos0: usize,
    out: &mut [f32],
) {
    let AttnShape { n_head, n_head_kv, head_dim: hd } = *shape;
    let kv_dim = n_head_kv * hd;
    let group = n_head / n_head_kv;
    let scale = 1.0 / (hd as f32).sqrt();
    let head = |scores: &mut Vec<f32>, (idx, (o, qh)): (usize, (&mut [f32], &[f32]))| {
        let (j, h) = (idx / n_head, idx % n_head);
        let kvh = h / group;
        let n_keys = pos0 + j + 1;
        scores.clear();
        scores.resize(n_keys, 0.0);
        vecops::dots(qh, &keys[kvh * hd..], kv_dim, scores);
        let mut max = f32::NEG_INFINITY;
        for s in scores.iter_mut() {
            *s *= scale;
            max = max.max(*s);
        }
        let sum = vecops::exp_shifted_sum(scores, max);
        let inv = 1.0 / sum;
        for s in scores.iter_mut() {
            *s *= inv;
        }
        o.fill(0.0);
        vecops::axpys(scores, &values[kvh * hd..], kv_dim, o);
    };
    // Small calls (decode over a short context) run on this thread: waking the pool costs more.
    let n = q.len() / (n_head * hd).max(1);
    let work = n * n_head * (pos0 + n) * hd;
    if work < PARALLEL_MIN_WORK {
        let mut scores = Vec::new();
        out.chunks_mut(hd).zip(q.chunks(hd)).enumerate().for_each(|p| head(&mut scores, p));
    } else {
        out.par_chunks_mut(hd).zip(q.par_chunks(hd)).enumerate().for_each_init(Vec::new, head);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_rotates_adjacent_pairs_by_position_angle() {
        // Head of 4 with n_rot 4, base 100: pair 0 turns by pos, pair 1 by pos / 10.
        let angles = rope_angles(3, 4, 100.0);
        let mut x = [1.0f32, 0.0, 0.0, 1.0];
        rope(&mut x, 4, &angles);
        let (a0, a1) = (3.0f64, 0.3f64);
        let want = [a0.cos(), a0.sin(), -a1.sin(), a1.cos()];
        for (g, w) in x.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() < 1e-6, "{x:?} vs {want:?}");
        }
    }

    #[test]
    fn attention_first_position_returns_its_value() {
        // One position: softmax over one key is 1, so out = v for every head of the group.
        let shape = AttnShape { n_head: 2, n_head_kv: 1, head_dim: 2 };
        let q = [1.0, 2.0, -3.0, 0.5];
        let (k, v) = ([0.3, -0.2], [7.0, -1.0]);
        let mut out = [0f32; 4];
        attention(&shape, &q, &k, &v, 0, &mut out);
        assert_eq!(out, [7.0, -1.0, 7.0, -1.0]);
    }

    /// Both paths (sequential for small calls, parallel above PARALLEL_MIN_WORK) against a
    /// plain f64 softmax attention.
    #[test]
    fn attention_matches_f64_on_both_paths() {
        let (n_head, n_head_kv, hd) = (4, 2, 32);
        let shape = AttnShape { n_head, n_head_kv, head_dim: hd };
        let val = |i: usize| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.7;
        for (pos0, n) in [(3usize, 2usize), (300, 2)] {
            let total = pos0 + n;
            let q: Vec<f32> = (0..n * n_head * hd).map(val).collect();
            let k: Vec<f32> = (0..total * n_head_kv * hd).map(|i| val(i + 11)).collect();
            let v: Vec<f32> = (0..total * n_head_kv * hd).map(|i| val(i + 23)).collect();
            let mut out = vec![0f32; q.len()];
            attention(&shape, &q, &k, &v, pos0, &mut out);
            for j in 0..n {
                for h in 0..n_head {
                    let kvh = h / (n_head / n_head_kv);
                    let qh = &q[(j * n_head + h) * hd..][..hd];
                    let s: Vec<f64> = (0..=pos0 + j)
                        .map(|t| {
                            let kt = &k[(t * n_head_kv + kvh) * hd..][..hd];
                            let d: f64 = qh.iter().zip(kt).map(|(a, b)| f64::from(a * b)).sum();
                            d / (hd as f64).sqrt()
                        })
                        .collect();
                    let m = s.iter().cloned().fold(f64::MIN, f64::max);
                    let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                    for e in 0..hd {
                        let want: f64 = s
                            .iter()
                            .enumerate()
                            .map(|(t, x)| {
                                (x - m).exp() / z * f64::from(v[(t * n_head_kv + kvh) * hd + e])
                            })
                            .sum();
                        let got = f64::from(out[(j * n_head + h) * hd + e]);
                        assert!((got - want).abs() < 1e-5, "pos0 {pos0} j {j} h {h}: {got} {want}");
                    }
                }
            }
        }
    }

    #[test]
    fn rmsnorm_unit_rms() {
        let x = [3.0f32, -4.0];
        let mut out = [0f32; 2];
        rmsnorm(&x, &[1.0, 2.0], 0.0, &mut out);
        let r = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / r).abs() < 1e-6 && (out[1] + 8.0 / r).abs() < 1e-6);
    }
}
