//! `lowbit dequantize IN OUT`: every tensor of a GGUF or safetensors file decoded by the core to
//! F32 (F32, F16 and BF16 sources convert exactly; quantized ones decode bit-exactly as their
//! format's public decoder does), with the same names, dims and order, into an atomically
//! written GGUF file. GGUF metadata is carried over, with `general.file_type` set to 0
//! (llama.cpp's `LLAMA_FTYPE_ALL_F32`, `include/llama.h`). The output is what
//! `tools/check_gguf_decode.py` compares against gguf-py's dequantization of IN.
//! What must not live here: codecs (lowbit-core).

use std::path::Path;

use lowbit_core::{codec, Dialect, FormatId};
use rayon::prelude::*;

use super::model::Model;
use super::progress::{Mode, Progress};
use super::quantize::carried_metadata;
use super::{paths, with_threads, CmdError};
use crate::gguf::{GgufWriter, TensorSpec, Value};
use crate::quant::pipeline::SourceTensor;
use crate::quant::rows_and_k;

/// Rows decoded per task: about this many elements.
const TASK_ELEMS: usize = 1 << 16;

/// Decodes one tensor to little-endian F32 bytes (rows in parallel; the first bad row in row
/// order is the error).
pub fn decode_tensor(t: &SourceTensor<'_>) -> Result<Vec<u8>, CmdError> {
    let terr = |what: String| CmdError::new(format!("tensor {}: {what}", t.name));
    let (rows, k) =
        rows_and_k(&t.dims).ok_or_else(|| terr(format!("dims {:?} overflow", t.dims)))?;
    if rows * k == 0 {
        return Ok(Vec::new());
    }
    let rb = t.format.row_bytes(k).map_err(|e| terr(e.to_string()))?;
    if Some(t.data.len()) != rows.checked_mul(rb) {
        return Err(terr(format!(
            "{} bytes of {}, {rows} rows of {k} need {}",
            t.data.len(),
            t.format,
            rows * rb
        )));
    }
    let out_len = rows
        .checked_mul(k)
        .and_then(|n| n.checked_mul(4))
        .ok_or_else(|| terr("F32 size overflows".into()))?;
    let mut out = vec![0u8; out_len];
    let per_task = (TASK_ELEMS / k).max(1);
    let results: Vec<Result<(), CmdError>> = out
        .par_chunks_mut(per_task * k * 4)
        .enumerate()
        .map(|(ti, chunk)| {
            let mut buf = vec![0f32; k];
            for (j, dst) in chunk.chunks_exact_mut(k * 4).enumerate() {
                let r = ti * per_task + j;
                codec::decode_row(t.format, &t.data[r * rb..(r + 1) * rb], &mut buf)
                    .map_err(|e| terr(format!("row {r}: {e}")))?;
                for (d, v) in dst.chunks_exact_mut(4).zip(&buf) {
                    d.copy_from_slice(&v.to_le_bytes());
                }
            }
            Ok(())
        })
        .collect();
    results.into_iter().find_map(Result::err).map_or(Ok(out), Err)
}

/// Runs `lowbit dequantize`; returns the number of tensors and the bytes written.
pub fn run(
    input: &Path,
    output: &Path,
    dialect: Option<Dialect>,
    threads: Option<usize>,
    mode: Mode,
) -> Result<(usize, u64), CmdError> {
    paths::refuse_same(input, output)?;
    let model = Model::open(input, dialect)?;
    let sources = model.sources();
    let mut meta = carried_metadata(model.gguf_metadata());
    meta.push(("general.file_type".to_owned(), Value::U32(0)));
    let specs: Vec<TensorSpec> =
        sources.iter().map(|s| TensorSpec::new(s.name.clone(), &s.dims, FormatId::F32)).collect();
    let total: u64 = sources.iter().map(|s| s.dims.iter().product::<u64>()).sum();
    let mut w = GgufWriter::create(output, Dialect::Ggml, &meta, &specs).map_err(CmdError::new)?;
    let progress = Progress::new(mode, sources.len(), total);
    let mut bytes = 0u64;
    let result = with_threads(threads, || -> Result<(), CmdError> {
        for s in &sources {
            let data = decode_tensor(s)?;
            w.write_tensor(&s.name, &data).map_err(CmdError::new)?;
            bytes += data.len() as u64;
            progress.elements(&s.name, (data.len() / 4) as u64);
            progress.tensor_done(&s.name, &format!("{} -> F32", s.format));
        }
        Ok(())
    })?;
    progress.finish(result.is_ok());
    result?;
    w.finish().map_err(CmdError::new)?;
    Ok((sources.len(), bytes))
}
