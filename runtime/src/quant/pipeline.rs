//! The quantization engine, independent of file formats: source tensors in (any format the
//! core decodes), encoded tensors out, in the same order, through a sink callback.
//!
//! For each tensor: the recipe plans its format ([`Recipe::plan`]); if the source already is
//! in that format its bytes are copied unchanged (after decoding every row once to refuse
//! invalid bytes and non-finite values, as the encoding path does); otherwise each row is
//! decoded exactly to f32 with `lowbit_core::codec` (a quantized source is recorded as
//! *requantized*) and encoded with the planned encoder rule, passing the row's importance
//! vector (from the imatrix entry of the tensor, per expert for stacked expert tensors) to
//! every encoder that takes one. A plan with `gptq` set runs [`super::gptq`] instead, on
//! batches of rows, with the factored input covariance of the tensor (per expert).
//!
//! Parallelism and determinism: rows are split into tasks of a fixed number of rows (from the
//! row length only, never from the thread count) across rayon's current pool; each row's
//! encoding depends on that row alone, so the output is byte-identical across runs and thread
//! counts, and the first failing row in row order is the error reported. Tensors are handled
//! one at a time, so the buffers held are one output tensor, one f32 row per running task, and
//! the current source tensor when the caller passed it owned; [`Summary::peak_bytes`] reports
//! the peak of exactly those (borrowed, e.g. memory-mapped, sources and the imatrix are not
//! counted).
//! What must not live here: file formats, recipes' matching rules, codecs.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

use lowbit_core::{codec, EncodeOptions, FormatId, Rule as Encoder};
use rayon::prelude::*;

use super::gptq;
use super::imatrix::ImportanceMatrix;
use super::recipe::{FallbackUsed, Recipe};
use super::{rows_and_k, QuantError};

/// A tensor to quantize.
#[derive(Clone, Debug)]
pub struct SourceTensor<'a> {
    /// llama.cpp GGUF name.
    pub name: String,
    /// Dims in ggml order (`dims[0]` = row length).
    pub dims: Vec<u64>,
    /// The format of `data` (F32, F16, BF16, or any format the core decodes).
    pub format: FormatId,
    /// The encoded rows, back to back (borrowed from a memory map, or owned).
    pub data: Cow<'a, [u8]>,
}

/// A quantized tensor, as handed to the sink.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedTensor {
    /// Name (as in the source).
    pub name: String,
    /// Dims (as in the source).
    pub dims: Vec<u64>,
    /// Its format.
    pub format: FormatId,
    /// The encoded rows, back to back.
    pub data: Vec<u8>,
}

/// What was done to a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Float source (F32/F16/BF16) encoded to the planned format.
    Encoded,
    /// Quantized source dequantized exactly, then encoded to a different format.
    Requantized,
    /// Source already in the planned format: bytes copied unchanged.
    Copied,
}

/// Whether importance weights went into a tensor's encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportanceUse {
    /// No imatrix, or no entry for this tensor.
    Absent,
    /// The entry was passed to the encoder.
    Used,
    /// The imatrix has an entry but the chosen format and encoder take no weights.
    NotTaken,
}

/// One line of the summary.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorReport {
    /// Tensor name.
    pub name: String,
    /// Dims (ggml order).
    pub dims: Vec<u64>,
    /// Elements.
    pub elements: u64,
    /// Source format.
    pub source_format: FormatId,
    /// Output format.
    pub format: FormatId,
    /// Encoder rule run (meaningless for [`Action::Copied`]).
    pub encoder: Encoder,
    /// Whether the GPTQ encoder ran instead of `encoder`.
    pub gptq: bool,
    /// Index of the recipe rule that matched (`None`: F32 default).
    pub rule: Option<usize>,
    /// The fallback, if the rule's format could not hold the rows.
    pub fallback: Option<FallbackUsed>,
    /// What was done.
    pub action: Action,
    /// Whether importance weights were used.
    pub importance: ImportanceUse,
    /// Source bytes.
    pub bytes_in: u64,
    /// Output bytes.
    pub bytes_out: u64,
}

/// Per-format totals of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FormatTotals {
    /// Tensors.
    pub tensors: usize,
    /// Elements.
    pub elements: u64,
    /// Output bytes.
    pub bytes: u64,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// One report per tensor, in order.
    pub tensors: Vec<TensorReport>,
    /// Peak bytes of the buffers the pipeline held (see the module documentation).
    pub peak_bytes: usize,
}

/// Whether `format`'s `encoder` takes importance weights. The registry flag says that some
/// encoder of the format does; in `lowbit-core` that is the improved rule of formats that have
/// one, and every rule of the others (the ROCmFPX scale searches).
pub fn takes_importance(format: FormatId, encoder: Encoder) -> bool {
    let e = format.info().encoders;
    e.importance && (!e.improved || encoder == Encoder::Improved)
}

/// Counts the bytes of live buffers and their peak.
#[derive(Debug, Default)]
pub struct MemTracker {
    current: AtomicUsize,
    peak: AtomicUsize,
}

/// A registration with a [`MemTracker`], released on drop.
#[derive(Debug)]
pub struct MemGuard<'t> {
    t: &'t MemTracker,
    n: usize,
}

impl MemTracker {
    /// Registers `n` live bytes until the guard drops.
    pub fn hold(&self, n: usize) -> MemGuard<'_> {
        let now = self.current.fetch_add(n, Ordering::SeqCst) + n;
        self.peak.fetch_max(now, Ordering::SeqCst);
        MemGuard { t: self, n }
    }

    /// The peak so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

impl Drop for MemGuard<'_> {
    fn drop(&mut self) {
        self.t.current.fetch_sub(self.n, Ordering::SeqCst);
    }
}

fn tensor_err(name: &str, what: String) -> QuantError {
    QuantError::Tensor { tensor: name.to_owned(), what }
}

/// Elements per rayon task (rows are grouped up to about this many elements).
const TASK_ELEMS: usize = 1 << 16;

/// Decodes every row of a tensor that is copied unchanged, so invalid bytes (an illegal scale
/// byte, a NaN scale) and non-finite values are refused as the encoding path refuses them.
fn validate_rows(
    src: &SourceTensor<'_>,
    name: &str,
    rows: usize,
    k: usize,
    src_rb: usize,
    mem: &MemTracker,
) -> Result<(), QuantError> {
    let rows_per_task = (TASK_ELEMS / k).max(1);
    let tasks = rows.div_ceil(rows_per_task);
    let results: Vec<Result<(), QuantError>> = (0..tasks)
        .into_par_iter()
        .map(|ti| {
            let _g = mem.hold(k * 4);
            let mut buf = vec![0f32; k];
            for r in ti * rows_per_task..((ti + 1) * rows_per_task).min(rows) {
                let srow = &src.data[r * src_rb..(r + 1) * src_rb];
                codec::decode_row(src.format, srow, &mut buf).map_err(|source| {
                    QuantError::Codec {
                        tensor: name.to_owned(),
                        stage: "decoding the source",
                        row: r,
                        source,
                    }
                })?;
                if let Some(i) = buf.iter().position(|x| !x.is_finite()) {
                    return Err(tensor_err(
                        name,
                        format!("row {r} element {i} is {} (copied unchanged otherwise)", buf[i]),
                    ));
                }
            }
            Ok(())
        })
        .collect();
    results.into_iter().find_map(Result::err).map_or(Ok(()), Err)
}

/// Quantizes one tensor under `recipe` (see the module documentation).
pub fn quantize_tensor(
    src: &SourceTensor<'_>,
    recipe: &Recipe,
    imatrix: Option<&ImportanceMatrix>,
    mem: &MemTracker,
    progress: &Progress<'_>,
) -> Result<(QuantizedTensor, TensorReport), QuantError> {
    let name = src.name.as_str();
    let _src_guard = match &src.data {
        Cow::Owned(v) => Some(mem.hold(v.len())),
        Cow::Borrowed(_) => None,
    };
    let plan = recipe.plan(name, &src.dims)?;
    let (rows, k) = rows_and_k(&src.dims)
        .ok_or_else(|| tensor_err(name, format!("dims {:?} overflow", src.dims)))?;
    let elements = (rows * k) as u64;
    let src_rb = if elements == 0 {
        0
    } else {
        src.format.row_bytes(k).map_err(|e| {
            tensor_err(name, format!("source format {} cannot hold rows of {k}: {e}", src.format))
        })?
    };
    let need = rows.checked_mul(src_rb).ok_or_else(|| tensor_err(name, "size overflows".into()))?;
    if src.data.len() != need {
        return Err(tensor_err(
            name,
            format!(
                "{} bytes of {} data, {rows} rows of {k} need {need}",
                src.data.len(),
                src.format
            ),
        ));
    }
    let is_float = matches!(src.format, FormatId::F32 | FormatId::F16 | FormatId::Bf16);
    let n_mat: usize = src.dims.iter().skip(2).map(|&d| d as usize).product();
    let rows_per_mat = if src.dims.len() >= 2 { src.dims[1] as usize } else { rows };

    let has_entry = imatrix.is_some_and(|m| m.entries.contains_key(name));
    let copy = plan.format == src.format || elements == 0;
    let use_imp = !copy && has_entry && takes_importance(plan.format, plan.encoder);
    let importance = match (use_imp, imatrix) {
        (true, Some(m)) => m.for_tensor(name, k, n_mat)?,
        _ => None,
    };
    let importance_use = match (has_entry, importance.is_some() || (plan.gptq && !copy)) {
        (false, _) => ImportanceUse::Absent,
        (true, true) => ImportanceUse::Used,
        (true, false) => ImportanceUse::NotTaken,
    };
    let action = if copy {
        Action::Copied
    } else if is_float {
        Action::Encoded
    } else {
        Action::Requantized
    };

    let run_gptq = plan.gptq && !copy && elements > 0;
    let data = if run_gptq {
        let geo = TensorGeometry { rows, k, src_rb, n_mat, rows_per_mat };
        gptq_tensor(src, plan.format, plan.gptq_damp, &geo, imatrix, mem, progress)?
    } else if copy && plan.format == src.format && elements > 0 {
        validate_rows(src, name, rows, k, src_rb, mem)?;
        let _g = mem.hold(src.data.len());
        src.data.to_vec()
    } else if elements == 0 {
        Vec::new()
    } else {
        let rb = plan.format.row_bytes(k).map_err(|e| tensor_err(name, e.to_string()))?;
        let out_len =
            rows.checked_mul(rb).ok_or_else(|| tensor_err(name, "output size overflows".into()))?;
        let out_guard = mem.hold(out_len);
        let mut out = vec![0u8; out_len];
        let rows_per_task = (TASK_ELEMS / k).max(1);
        let results: Vec<Result<(), QuantError>> = out
            .par_chunks_mut(rows_per_task * rb)
            .enumerate()
            .map(|(ti, chunk)| {
                let _g = mem.hold(k * 4);
                let mut buf = vec![0f32; k];
                for (j, dst) in chunk.chunks_exact_mut(rb).enumerate() {
                    let r = ti * rows_per_task + j;
                    let srow = &src.data[r * src_rb..(r + 1) * src_rb];
                    codec::decode_row(src.format, srow, &mut buf).map_err(|source| {
                        QuantError::Codec {
                            tensor: name.to_owned(),
                            stage: "decoding the source",
                            row: r,
                            source,
                        }
                    })?;
                    let m = (r / rows_per_mat.max(1)).min(n_mat.saturating_sub(1));
                    let imp = importance.map(|w| &w[m * k..(m + 1) * k]);
                    let opts = EncodeOptions { rule: plan.encoder, importance: imp };
                    lowbit_cpu::fp2_search::encode_row(plan.format, &buf, &opts, dst).map_err(
                        |source| QuantError::Codec {
                            tensor: name.to_owned(),
                            stage: "encoding",
                            row: r,
                            source,
                        },
                    )?;
                }
                progress(name, (chunk.len() / rb * k) as u64);
                Ok(())
            })
            .collect();
        if let Some(e) = results.into_iter().find_map(Result::err) {
            return Err(e);
        }
        drop(out_guard);
        out
    };
    if copy {
        progress(name, elements);
    }
    let report = TensorReport {
        name: name.to_owned(),
        dims: src.dims.clone(),
        elements,
        source_format: src.format,
        format: if copy { src.format } else { plan.format },
        encoder: plan.encoder,
        gptq: run_gptq,
        rule: plan.rule,
        fallback: plan.fallback_used,
        action,
        importance: importance_use,
        bytes_in: src.data.len() as u64,
        bytes_out: data.len() as u64,
    };
    let q = QuantizedTensor {
        name: name.to_owned(),
        dims: src.dims.clone(),
        format: report.format,
        data,
    };
    Ok((q, report))
}

/// Row counts of a tensor being encoded.
struct TensorGeometry {
    rows: usize,
    k: usize,
    src_rb: usize,
    n_mat: usize,
    rows_per_mat: usize,
}

/// Encodes a tensor with the GPTQ encoder: per stacked matrix, factor its input covariance
/// once, then encode batches of [`gptq::ROWS_PER_BATCH`] rows in parallel (fixed batches, so
/// the bytes do not depend on the thread count).
fn gptq_tensor(
    src: &SourceTensor<'_>,
    format: FormatId,
    damp: f64,
    g: &TensorGeometry,
    imatrix: Option<&ImportanceMatrix>,
    mem: &MemTracker,
    progress: &Progress<'_>,
) -> Result<Vec<u8>, QuantError> {
    let name = src.name.as_str();
    let k = g.k;
    let rb = format.row_bytes(k).map_err(|e| tensor_err(name, e.to_string()))?;
    let out_len =
        g.rows.checked_mul(rb).ok_or_else(|| tensor_err(name, "output size overflows".into()))?;
    let _out_guard = mem.hold(out_len);
    let mut out = vec![0u8; out_len];
    let n_mat = g.n_mat.max(1);
    let per_mat = if n_mat == 1 { g.rows } else { g.rows_per_mat };
    for m in 0..n_mat {
        let cov = imatrix
            .map(|im| im.covariance_for(name, k, n_mat, m))
            .transpose()?
            .flatten()
            .ok_or_else(|| {
                tensor_err(
                    name,
                    "encoder gptq needs the input covariance of this tensor (an imatrix made \
                     by `lowbit imatrix --covariance GLOB` matching it)"
                        .into(),
                )
            })?;
        // prepare's three k x k f64 matrices (a fourth: the rotated covariance of MFP4G32)
        let _pg = mem.hold(4 * k * k * 8);
        let prep = gptq::prepare_for(format, cov, k, damp)
            .map_err(|e| tensor_err(name, format!("matrix {m} of {n_mat}: {e}")))?;
        let first = m * per_mat;
        let mat_out = &mut out[first * rb..(first + per_mat) * rb];
        let results: Vec<Result<(), QuantError>> = mat_out
            .par_chunks_mut(gptq::ROWS_PER_BATCH * rb)
            .enumerate()
            .map(|(bi, chunk)| {
                let r0 = first + bi * gptq::ROWS_PER_BATCH;
                let nr = chunk.len() / rb;
                let _g = mem.hold(nr * k * 12);
                let mut buf = vec![0f32; nr * k];
                for (j, dst) in buf.chunks_exact_mut(k).enumerate() {
                    let r = r0 + j;
                    let srow = &src.data[r * g.src_rb..(r + 1) * g.src_rb];
                    codec::decode_row(src.format, srow, dst).map_err(|source| {
                        QuantError::Codec {
                            tensor: name.to_owned(),
                            stage: "decoding the source",
                            row: r,
                            source,
                        }
                    })?;
                }
                gptq::encode_rows(format, &prep, &buf, chunk).map_err(|e| {
                    tensor_err(
                        name,
                        format!("gptq, rows {r0}..{} (row numbers within): {e}", r0 + nr),
                    )
                })?;
                progress(name, (nr * k) as u64);
                Ok(())
            })
            .collect();
        if let Some(e) = results.into_iter().find_map(Result::err) {
            return Err(e);
        }
    }
    Ok(out)
}

/// The sink's error type.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// A progress callback: `(tensor name, elements just finished)`. Called from worker threads
/// after each group of rows (about 64 Ki elements), in no particular order; the elements of a
/// run add up to [`Summary::elements`].
pub type Progress<'p> = dyn Fn(&str, u64) + Sync + 'p;

/// Quantizes every tensor of `inputs` in order under `recipe` (with `imatrix`, if any) and
/// hands each result to `sink` in the same order, with its report. Stops at the first error.
pub fn quantize<'a, I, S>(
    inputs: I,
    recipe: &Recipe,
    imatrix: Option<&ImportanceMatrix>,
    sink: S,
) -> Result<Summary, QuantError>
where
    I: IntoIterator<Item = SourceTensor<'a>>,
    S: FnMut(QuantizedTensor, &TensorReport) -> Result<(), SinkError>,
{
    quantize_with_progress(inputs, recipe, imatrix, &|_, _| {}, sink)
}

/// [`quantize`] with a progress callback for the elements encoded inside large tensors
/// (copied tensors and tensors with no rows report all their elements at once).
pub fn quantize_with_progress<'a, I, S>(
    inputs: I,
    recipe: &Recipe,
    imatrix: Option<&ImportanceMatrix>,
    progress: &Progress<'_>,
    mut sink: S,
) -> Result<Summary, QuantError>
where
    I: IntoIterator<Item = SourceTensor<'a>>,
    S: FnMut(QuantizedTensor, &TensorReport) -> Result<(), SinkError>,
{
    let mem = MemTracker::default();
    let mut summary = Summary::default();
    for src in inputs {
        let (q, report) = quantize_tensor(&src, recipe, imatrix, &mem, progress)?;
        drop(src);
        // The output buffer stays ours until the sink has it.
        let g = mem.hold(q.data.len());
        sink(q, &report)
            .map_err(|source| QuantError::Sink { tensor: report.name.clone(), source })?;
        drop(g);
        summary.tensors.push(report);
    }
    summary.peak_bytes = mem.peak();
    Ok(summary)
}

impl Summary {
    /// Total source bytes.
    pub fn bytes_in(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes_in).sum()
    }

    /// Total output bytes.
    pub fn bytes_out(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes_out).sum()
    }

    /// Total elements.
    pub fn elements(&self) -> u64 {
        self.tensors.iter().map(|t| t.elements).sum()
    }

    /// Output bits per weight over all tensors (0 for an empty model).
    pub fn bpw(&self) -> f64 {
        let n = self.elements();
        if n == 0 {
            0.0
        } else {
            self.bytes_out() as f64 * 8.0 / n as f64
        }
    }

    /// Every tensor that got a fallback format.
    pub fn fallbacks(&self) -> impl Iterator<Item = (&TensorReport, &FallbackUsed)> {
        self.tensors.iter().filter_map(|t| t.fallback.as_ref().map(|f| (t, f)))
    }

    /// Every requantized tensor.
    pub fn requantized(&self) -> impl Iterator<Item = &TensorReport> {
        self.tensors.iter().filter(|t| t.action == Action::Requantized)
    }

    /// Totals per output format.
    pub fn per_format(&self) -> BTreeMap<FormatId, FormatTotals> {
        let mut m: BTreeMap<FormatId, FormatTotals> = BTreeMap::new();
        for t in &self.tensors {
            let e = m.entry(t.format).or_default();
            e.tensors += 1;
            e.elements += t.elements;
            e.bytes += t.bytes_out;
        }
        m
    }

    /// The summary as text: per tensor, per format, every fallback, every requantized tensor,
    /// totals and peak memory.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<36} {:<18} {:<8} {:<9} {:<10} {:>7} {:>12}",
            "tensor", "dims", "source", "format", "encoder", "bpw", "bytes"
        );
        for t in &self.tensors {
            let dims = t.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
            let bpw =
                if t.elements == 0 { 0.0 } else { t.bytes_out as f64 * 8.0 / t.elements as f64 };
            let enc = match t.action {
                Action::Copied => "copy".to_owned(),
                _ => {
                    let r = if t.gptq { "gptq" } else { crate::demo::rule_name(t.encoder) };
                    if t.importance == ImportanceUse::Used {
                        format!("{r}+imat")
                    } else {
                        r.to_owned()
                    }
                }
            };
            let _ = writeln!(
                s,
                "{:<36} {:<18} {:<8} {:<9} {:<10} {:>7.4} {:>12}",
                t.name,
                dims,
                t.source_format.name(),
                t.format.name(),
                enc,
                bpw,
                t.bytes_out
            );
        }
        let _ = writeln!(s, "\nper format:");
        for (f, tot) in self.per_format() {
            let bpw =
                if tot.elements == 0 { 0.0 } else { tot.bytes as f64 * 8.0 / tot.elements as f64 };
            let _ = writeln!(
                s,
                "  {:<9} {:>4} tensors {:>12} elements {:>12} bytes {:>7.4} bpw",
                f.name(),
                tot.tensors,
                tot.elements,
                tot.bytes,
                bpw
            );
        }
        let fb: Vec<_> = self.fallbacks().collect();
        let _ = writeln!(s, "fallbacks: {}", fb.len());
        for (t, f) in fb {
            let _ =
                writeln!(s, "  {}: {} instead of {} ({})", t.name, t.format, f.wanted, f.reason);
        }
        let rq: Vec<_> = self.requantized().collect();
        let _ = writeln!(s, "requantized (dequantized exactly first): {}", rq.len());
        for t in rq {
            let _ = writeln!(s, "  {}: {} -> {}", t.name, t.source_format, t.format);
        }
        let _ = writeln!(
            s,
            "total: {} tensors, {} elements, {} -> {} bytes, {:.4} bpw, peak buffers {} bytes",
            self.tensors.len(),
            self.elements(),
            self.bytes_in(),
            self.bytes_out(),
            self.bpw(),
            self.peak_bytes
        );
        s
    }
}
