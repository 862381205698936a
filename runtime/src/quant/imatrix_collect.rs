//! Computing an importance matrix: sums of squared activations per input column of every
//! weight matrix, gathered while a model runs over calibration text, written in llama.cpp's
//! GGUF imatrix layout (described in [`super::imatrix`]) so that both llama.cpp's quantizer and
//! lowbit read it.
//!
//! What is summed follows llama.cpp's collector (ggml-org/llama.cpp `tools/imatrix/imatrix.cpp`,
//! `IMatrixCollector::collect_imatrix`): for every matrix-vector product `y = W x` of a weight
//! `W` with rows of `k`, each activation column `x` adds `x_j^2` to `in_sum2[j]` and 1 to the
//! count; for stacked experts, the column goes to the expert it was routed to. Sums are kept in
//! f64 and written as f32. Files also carry `imatrix.datasets`, `imatrix.chunk_count` and
//! `imatrix.chunk_size`, which llama.cpp's quantizer requires.
//!
//! Optionally (lowbit extension, [`ImatrixCollector::with_covariance`]) the full input
//! covariance sums `sum x x^T` of the weights whose names match given globs, accumulated in f64
//! (each product of two f32 is exact in f64) and written as `W.in_cov` (F32, dims `[k, k]`, or
//! `[k, k, n_mat]`), a name llama.cpp's readers skip. Memory: `8 k^2` bytes per matrix while
//! collecting (ffn_down of a 1536-wide FFN: 18.9 MB per layer), only for the matched weights.
//! What must not live here: the forward pass (it calls [`ImatrixCollector::add`]) and reading
//! imatrix files ([`super::imatrix`]).

use std::collections::BTreeMap;
use std::path::Path;

use lowbit_core::{Dialect, FormatId};

use rayon::prelude::*;

use super::glob;
use crate::gguf::{GgufError, GgufWriter, TensorSpec, Value};

/// Sums for one weight tensor.
#[derive(Clone, Debug)]
struct Sums {
    k: usize,
    in_sum2: Vec<f64>,
    counts: Vec<u64>,
    /// `n_mat` row-major `k x k` sums of `x x^T` (upper triangle filled; mirrored on output).
    cov: Option<Vec<f64>>,
}

/// Accumulates squared activations per weight tensor.
#[derive(Clone, Debug, Default)]
pub struct ImatrixCollector {
    sums: BTreeMap<String, Sums>,
    chunks: u64,
    cov_patterns: Vec<String>,
}

/// A misuse of the collector: a weight seen with two row lengths or expert counts, or an
/// activation block of the wrong size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectError(pub String);

impl std::fmt::Display for CollectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CollectError {}

impl ImatrixCollector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// A collector that also sums `x x^T` for the weights matching any of `patterns` (globs
    /// over tensor names, as in recipes).
    pub fn with_covariance(patterns: &[String]) -> Self {
        Self { cov_patterns: patterns.to_vec(), ..Self::default() }
    }

    /// Adds `x`, `n` activation columns of `k` values back to back, multiplied by `weight`
    /// (expert `expert` of `n_mat` stacked matrices; 0 of 1 for a plain matrix).
    pub fn add(
        &mut self,
        weight: &str,
        k: usize,
        n_mat: usize,
        expert: usize,
        x: &[f32],
        n: usize,
    ) -> Result<(), CollectError> {
        if k == 0 || expert >= n_mat || x.len() != k * n {
            return Err(CollectError(format!(
                "{weight}: {} activations for {n} columns of {k} (expert {expert} of {n_mat})",
                x.len()
            )));
        }
        let want_cov = self.cov_patterns.iter().any(|p| glob::matches(p, weight));
        let s = self.sums.entry(weight.to_owned()).or_insert_with(|| Sums {
            k,
            in_sum2: vec![0.0; k * n_mat],
            counts: vec![0; n_mat],
            cov: want_cov.then(|| vec![0.0; k * k * n_mat]),
        });
        if s.k != k || s.counts.len() != n_mat {
            return Err(CollectError(format!(
                "{weight}: seen as {} x {} matrices, now as {k} x {n_mat}",
                s.k,
                s.counts.len()
            )));
        }
        let dst = &mut s.in_sum2[expert * k..(expert + 1) * k];
        for col in x.chunks_exact(k) {
            for (d, &v) in dst.iter_mut().zip(col) {
                *d += f64::from(v) * f64::from(v);
            }
        }
        s.counts[expert] += n as u64;
        if let Some(cov) = &mut s.cov {
            add_outer(&mut cov[expert * k * k..(expert + 1) * k * k], x, k, n);
        }
        Ok(())
    }

    /// The covariance sums of `weight` (row-major `k x k` per matrix, symmetric), if collected.
    pub fn covariance(&self, weight: &str) -> Option<Vec<f64>> {
        let s = self.sums.get(weight)?;
        let c = s.cov.as_ref()?;
        Some(c.chunks_exact(s.k * s.k).flat_map(|m| mirrored(m, s.k)).collect())
    }

    /// Counts one finished chunk of calibration text.
    pub fn end_chunk(&mut self) {
        self.chunks += 1;
    }

    /// Chunks counted so far.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Weight tensors seen so far.
    pub fn len(&self) -> usize {
        self.sums.len()
    }

    /// Whether nothing was collected.
    pub fn is_empty(&self) -> bool {
        self.sums.is_empty()
    }

    /// The mean squared activation per column of `weight` (what a quantizer uses), 1 where a
    /// matrix saw no tokens, as [`super::imatrix::from_gguf_parts`] reads it back.
    pub fn means(&self, weight: &str) -> Option<Vec<f32>> {
        let s = self.sums.get(weight)?;
        Some(
            s.in_sum2
                .chunks_exact(s.k)
                .zip(&s.counts)
                .flat_map(|(v, &c)| {
                    v.iter().map(move |&x| if c > 0 { (x / c as f64) as f32 } else { 1.0 })
                })
                .collect(),
        )
    }

    /// Writes the GGUF imatrix file (atomically: temp file, then rename): for each weight
    /// `W`, `W.in_sum2` (F32, dims `[k, n_mat]`) and `W.counts` (F32, dims `[1, n_mat]`), plus
    /// `general.type = "imatrix"`, `imatrix.datasets`, `imatrix.chunk_count`,
    /// `imatrix.chunk_size`.
    pub fn write_gguf(
        &self,
        path: &Path,
        datasets: &[String],
        chunk_size: u32,
    ) -> Result<(), GgufError> {
        let metadata = vec![
            ("general.type".to_owned(), Value::String("imatrix".into())),
            ("imatrix.datasets".to_owned(), Value::string_array(datasets)),
            (
                "imatrix.chunk_count".to_owned(),
                Value::U32(u32::try_from(self.chunks).unwrap_or(u32::MAX)),
            ),
            ("imatrix.chunk_size".to_owned(), Value::U32(chunk_size)),
        ];
        let mut specs = Vec::new();
        for (name, s) in &self.sums {
            let n_mat = s.counts.len() as u64;
            specs.push(TensorSpec::new(
                format!("{name}.in_sum2"),
                &[s.k as u64, n_mat],
                FormatId::F32,
            ));
            specs.push(TensorSpec::new(format!("{name}.counts"), &[1, n_mat], FormatId::F32));
            if s.cov.is_some() {
                let k = s.k as u64;
                let dims: &[u64] = if n_mat == 1 { &[k, k] } else { &[k, k, n_mat] };
                specs.push(TensorSpec::new(format!("{name}.in_cov"), dims, FormatId::F32));
            }
        }
        let mut w = GgufWriter::create(path, Dialect::Ggml, &metadata, &specs)?;
        for (name, s) in &self.sums {
            let sums: Vec<u8> = s.in_sum2.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect();
            w.write_tensor(&format!("{name}.in_sum2"), &sums)?;
            let counts: Vec<u8> = s.counts.iter().flat_map(|&c| (c as f32).to_le_bytes()).collect();
            w.write_tensor(&format!("{name}.counts"), &counts)?;
            if let Some(c) = &s.cov {
                let bytes: Vec<u8> = c
                    .chunks_exact(s.k * s.k)
                    .flat_map(|m| mirrored(m, s.k))
                    .flat_map(|v| (v as f32).to_le_bytes())
                    .collect();
                w.write_tensor(&format!("{name}.in_cov"), &bytes)?;
            }
        }
        w.finish()
    }
}

/// Rows of the covariance tile that one task owns.
const COV_TILE: usize = 32;

/// `cov[i][j] += sum_t x_t[i] x_t[j]` for `j >= i` over the `n` columns of `x` (f64: each
/// product of two f32 is exact; the sum over `t` is in a fixed order, so the result does not
/// depend on the thread count). Tiled so that two 32-row slabs of the transposed input stay in
/// cache.
fn add_outer(cov: &mut [f64], x: &[f32], k: usize, n: usize) {
    let mut xt = vec![0f64; k * n];
    for (t, col) in x.chunks_exact(k).enumerate() {
        for (i, &v) in col.iter().enumerate() {
            xt[i * n + t] = f64::from(v);
        }
    }
    cov.par_chunks_mut(COV_TILE * k).enumerate().for_each(|(ib, rows)| {
        let i0 = ib * COV_TILE;
        for j0 in (i0..k).step_by(COV_TILE) {
            for (ii, row) in rows.chunks_exact_mut(k).enumerate() {
                let i = i0 + ii;
                let xi = &xt[i * n..(i + 1) * n];
                for j in j0.max(i)..(j0 + COV_TILE).min(k) {
                    row[j] += dot_f64(xi, &xt[j * n..(j + 1) * n]);
                }
            }
        }
    });
}

fn dot_f64(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// The full symmetric matrix from its upper triangle.
fn mirrored(m: &[f64], k: usize) -> Vec<f64> {
    let mut out = m.to_vec();
    for i in 0..k {
        for j in 0..i {
            out[i * k + j] = m[j * k + i];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgufFile;

    fn f32s(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    #[test]
    fn sums_counts_and_the_written_file() {
        let mut c = ImatrixCollector::new();
        // Two columns of k = 3 into a plain matrix, one column into expert 1 of 2.
        c.add("blk.0.attn_q.weight", 3, 1, 0, &[1.0, -2.0, 0.5, 3.0, 0.0, -1.0], 2).unwrap();
        c.add("blk.0.ffn_up_exps.weight", 2, 2, 1, &[2.0, -4.0], 1).unwrap();
        c.end_chunk();
        assert_eq!(c.means("blk.0.attn_q.weight").unwrap(), vec![5.0, 2.0, 0.625]);
        assert_eq!(c.means("blk.0.ffn_up_exps.weight").unwrap(), vec![1.0, 1.0, 4.0, 16.0]);
        // Misuse is an error naming the weight.
        let e = c.add("blk.0.attn_q.weight", 4, 1, 0, &[0.0; 4], 1).unwrap_err();
        assert!(e.0.contains("blk.0.attn_q.weight"), "{e}");
        assert!(c.add("w", 2, 1, 1, &[0.0; 2], 1).is_err());
        assert!(c.add("w", 2, 1, 0, &[0.0; 3], 1).is_err());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("imatrix.gguf");
        c.write_gguf(&path, &["licenses.txt".to_owned()], 512).unwrap();
        let g = GgufFile::open(&path, None).unwrap();
        assert_eq!(g.get("general.type").and_then(|v| v.as_str()), Some("imatrix"));
        assert_eq!(g.get("imatrix.chunk_count").and_then(|v| v.as_u64()), Some(1));
        assert_eq!(g.get("imatrix.chunk_size").and_then(|v| v.as_u64()), Some(512));
        let by_name = |n: &str| g.tensors().iter().find(|t| t.name == n).unwrap().clone();
        let s = by_name("blk.0.ffn_up_exps.weight.in_sum2");
        assert_eq!(s.dims, vec![2, 2]);
        assert_eq!(f32s(g.tensor_data(&s)), vec![0.0, 0.0, 4.0, 16.0]);
        let n = by_name("blk.0.ffn_up_exps.weight.counts");
        assert_eq!((n.dims.clone(), f32s(g.tensor_data(&n))), (vec![1, 2], vec![0.0, 1.0]));
        let q = by_name("blk.0.attn_q.weight.in_sum2");
        assert_eq!(f32s(g.tensor_data(&q)), vec![10.0, 4.0, 1.25]);
    }

    #[test]
    fn covariance_sums_and_file() {
        // k = 37 (not a multiple of the tile), 3 + 2 columns; brute-force oracle in f64.
        let k = 37;
        let xs: Vec<f32> = (0..5 * k).map(|i| ((i * 7919 % 113) as f32 - 56.0) / 17.0).collect();
        let mut c = ImatrixCollector::with_covariance(&["blk.*.ffn_down.weight".to_owned()]);
        c.add("blk.0.ffn_down.weight", k, 1, 0, &xs[..3 * k], 3).unwrap();
        c.add("blk.0.ffn_down.weight", k, 1, 0, &xs[3 * k..], 2).unwrap();
        c.add("blk.0.ffn_up.weight", k, 1, 0, &xs[..k], 1).unwrap();
        c.end_chunk();
        assert!(c.covariance("blk.0.ffn_up.weight").is_none());
        let cov = c.covariance("blk.0.ffn_down.weight").unwrap();
        for i in 0..k {
            for j in 0..k {
                let want: f64 =
                    (0..5).map(|t| f64::from(xs[t * k + i]) * f64::from(xs[t * k + j])).sum();
                // f64 sums of exact products, in another order: equal to ~1e-15 relative.
                assert!((cov[i * k + j] - want).abs() <= 1e-12 * want.abs().max(1.0), "({i},{j})");
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("imatrix.gguf");
        c.write_gguf(&path, &["t".to_owned()], 512).unwrap();
        let g = GgufFile::open(&path, None).unwrap();
        let t = g.tensors().iter().find(|t| t.name == "blk.0.ffn_down.weight.in_cov").unwrap();
        assert_eq!(t.dims, vec![k as u64, k as u64]);
        let got = f32s(g.tensor_data(t));
        assert_eq!(got, cov.iter().map(|&v| v as f32).collect::<Vec<_>>());
        assert!(!g.tensors().iter().any(|t| t.name == "blk.0.ffn_up.weight.in_cov"));
    }
}
