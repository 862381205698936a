//! Matrices that multiply the same input ([`Stack`]): a block's `attn_q`/`attn_k`/`attn_v`, or
//! `ffn_gate`/`ffn_up`. When they share a weight format they are uploaded as one matrix, their
//! rows stacked, so one backend matmul serves them all: the activations are prepared
//! (rotated, quantized) once instead of once per matrix, and the backend dispatches once. For
//! decode on a small model this is a large share of the time (SmolLM2-135M: 7 matmuls per
//! block become 4). Matrices in different formats stay separate.
//!
//! Stacking changes nothing in the arithmetic: each output row is the same dot product of the
//! same row bytes with the same prepared activations, so results are bit-identical to separate
//! matmuls (tested below on the reference backend).
//!
//! What must not live here: the forward pass (`llama.rs`), the per-element ops (`ops.rs`).

use lowbit_core::backend::{Backend, MatrixDesc};

use crate::gguf::GgufFile;

use super::error::ModelError;
use super::llama::{tensor_checked, Weight};

/// One part of a stack: its tensor name and rows.
#[derive(Clone, Debug)]
pub(crate) struct Part {
    name: String,
    rows: usize,
}

/// Matrices with the same input, stacked into one backend matrix where their formats agree.
pub(crate) enum Stack<M> {
    /// One matrix whose rows are the parts' rows, part after part.
    Fused { w: Weight<M>, parts: Vec<Part> },
    /// Separate matrices (their formats differ, or the backend refused the stacked upload).
    Split(Vec<Weight<M>>),
}

impl<M> Stack<M> {
    /// Uploads the tensors `names`, each `[cols, rows[i]]` (ggml order), stacked when they
    /// share a format. A bad block is reported against its own tensor and offset: on a failed
    /// stacked upload each part is uploaded alone, which names the culprit.
    pub(crate) fn upload<B: Backend<Matrix = M>>(
        backend: &B,
        file: &GgufFile,
        names: &[String],
        cols: usize,
        rows: &[usize],
    ) -> Result<Self, ModelError> {
        let infos = names
            .iter()
            .zip(rows)
            .map(|(name, &r)| tensor_checked(backend, file, name, cols, r))
            .collect::<Result<Vec<_>, _>>()?;
        let format = infos[0].format;
        if infos.len() > 1 && infos.iter().all(|t| t.format == format) {
            let total: usize = rows.iter().sum();
            let mut bytes = Vec::new();
            for t in &infos {
                bytes.extend_from_slice(file.tensor_data(t));
            }
            let desc = MatrixDesc { format, rows: total, cols };
            if let Ok(m) = backend.upload(desc, &bytes) {
                let parts = names
                    .iter()
                    .zip(rows)
                    .map(|(name, &rows)| Part { name: name.clone(), rows })
                    .collect();
                let w = Weight { name: names.join("+"), rows: total, bytes: bytes.len() as u64, m };
                return Ok(Stack::Fused { w, parts });
            }
        }
        let ws = names
            .iter()
            .zip(rows)
            .map(|(name, &r)| super::llama::upload(backend, file, name, cols, r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Stack::Split(ws))
    }

    /// Bytes of every matrix in its stored format (what one application streams).
    pub(crate) fn bytes(&self) -> u64 {
        match self {
            Stack::Fused { w, .. } => w.bytes,
            Stack::Split(ws) => ws.iter().map(|w| w.bytes).sum(),
        }
    }

    /// The tensor names, in order (what an observer is told).
    pub(crate) fn names(&self) -> Vec<&str> {
        match self {
            Stack::Fused { parts, .. } => parts.iter().map(|p| p.name.as_str()).collect(),
            Stack::Split(ws) => ws.iter().map(|w| w.name.as_str()).collect(),
        }
    }

    /// `y_i = W_i x` for every part, `n` columns; `mm` is the model's matmul of one weight.
    /// Each output is column after column (`y_i[j * rows_i + r]`), as separate matmuls give.
    pub(crate) fn apply(
        &self,
        x: &[f32],
        n: usize,
        mut mm: impl FnMut(&Weight<M>, &[f32], usize) -> Result<Vec<f32>, ModelError>,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        match self {
            Stack::Split(ws) => ws.iter().map(|w| mm(w, x, n)).collect(),
            Stack::Fused { w, parts } => {
                let y = mm(w, x, n)?;
                let total = w.rows;
                let mut out: Vec<Vec<f32>> =
                    parts.iter().map(|p| Vec::with_capacity(p.rows * n)).collect();
                for col in y.chunks_exact(total) {
                    let mut off = 0;
                    for (p, o) in parts.iter().zip(out.iter_mut()) {
                        o.extend_from_slice(&col[off..off + p.rows]);
                        off += p.rows;
                    }
                }
                Ok(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use lowbit_core::backend::ReferenceBackend;
    use lowbit_core::codec::{self, EncodeOptions};
    use lowbit_core::FormatId;

    use super::*;

    /// Q4_0 rows of a deterministic pseudo-random matrix.
    fn q4_0_rows(rows: usize, cols: usize, seed: u32) -> Vec<u8> {
        let rb = FormatId::Q4_0.row_bytes(cols).unwrap();
        let mut out = vec![0u8; rows * rb];
        let mut s = seed;
        for r in 0..rows {
            let x: Vec<f32> = (0..cols)
                .map(|_| {
                    s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
                })
                .collect();
            let row = &mut out[r * rb..(r + 1) * rb];
            codec::encode_row(FormatId::Q4_0, &x, &EncodeOptions::default(), row).unwrap();
        }
        out
    }

    #[test]
    fn fused_outputs_equal_separate_matmuls_bit_for_bit() {
        let b = ReferenceBackend;
        let (cols, rows, n) = (64, [5usize, 3, 3], 4);
        let parts: Vec<Vec<u8>> =
            rows.iter().enumerate().map(|(i, &r)| q4_0_rows(r, cols, i as u32 + 7)).collect();
        let upload = |bytes: &[u8], rows| {
            let desc = MatrixDesc { format: FormatId::Q4_0, rows, cols };
            b.upload(desc, bytes).unwrap()
        };
        let names = ["q", "k", "v"];
        let split = Stack::Split(
            parts
                .iter()
                .zip(rows)
                .zip(names)
                .map(|((p, r), name)| Weight {
                    name: name.into(),
                    rows: r,
                    bytes: p.len() as u64,
                    m: upload(p, r),
                })
                .collect(),
        );
        let all: Vec<u8> = parts.concat();
        let total = rows.iter().sum();
        let fused = Stack::Fused {
            w: Weight {
                name: "q+k+v".into(),
                rows: total,
                bytes: all.len() as u64,
                m: upload(&all, total),
            },
            parts: names
                .iter()
                .zip(rows)
                .map(|(name, rows)| Part { name: (*name).into(), rows })
                .collect(),
        };
        let x: Vec<f32> = (0..n * cols).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
        let mm = |w: &Weight<_>, x: &[f32], n: usize| {
            let mut y = vec![0f32; w.rows * n];
            b.matmul(&w.m, x, n, &mut y).unwrap();
            Ok(y)
        };
        let a = split.apply(&x, n, mm).unwrap();
        let f = fused.apply(&x, n, mm).unwrap();
        assert_eq!(a.len(), 3);
        for (i, (p, q)) in a.iter().zip(&f).enumerate() {
            assert_eq!(p.len(), rows[i] * n);
            let (pb, qb): (Vec<u32>, Vec<u32>) =
                (p.iter().map(|v| v.to_bits()).collect(), q.iter().map(|v| v.to_bits()).collect());
            assert_eq!(pb, qb, "part {i}");
        }
        assert_eq!(fused.names(), names);
        assert_eq!(fused.bytes(), split.bytes());
    }
}
