//! `lowbit quantize`: a GGUF or safetensors model (or the built-in synthetic llama) through
//! the quantization pipeline into an atomically written GGUF file.
//!
//! Order of work, so that every refusal comes before anything is written: the output is
//! checked not to be the input; the input, recipe and imatrix are read; every imatrix entry
//! whose tensor is in the model is checked against the tensor's shape (whatever format the
//! tensor gets); every tensor's format is planned; the output dialect is chosen (the first of
//! ggml, rocmfpx, prism, hipfire that numbers every planned format, unless stated). Only then
//! does the GGUF writer start its temporary file, which the pipeline fills tensor by tensor
//! in order and which is renamed over the output at the end (dropped on any error).
//!
//! Metadata of a GGUF input is copied in order, except `general.file_type` (llama.cpp's
//! file-type code, which would describe the input's types; llama.cpp infers it when absent)
//! and lowbit's own keys, which the writer sets. A safetensors input has no GGUF metadata.
//! What must not live here: argument parsing and printing (the binary), quantization rules.

use std::path::{Path, PathBuf};
use std::time::Instant;

use lowbit_core::{Dialect, FormatId};

use super::model::Model;
use super::progress::{Mode, Progress};
use super::{eval_tensors, imatrix_file, paths, with_threads, CmdError};
use crate::gguf::dialect::id_for_format;
use crate::gguf::{Array, GgufWriter, TensorSpec, Value, ValueType, KEY_DIALECT, KEY_FORMATS};
use crate::quant::eval::EvalReport;
use crate::quant::imatrix::ImportanceMatrix;
use crate::quant::pipeline::{self, SourceTensor, Summary};
use crate::quant::recipe::Recipe;
use crate::quant::synthetic::{synthetic_llama, LlamaShape, SyntheticModel};
use crate::quant::{rows_and_k, MetaValue};

/// The recipe used when none is given for the synthetic model.
pub const DEFAULT_RECIPE: &str = "fpx-ifp2";

/// The synthetic model's default shape: [`LlamaShape::default`] (vocab 512, dim 256, 2 layers,
/// FFN 704; 1.7 M weights, a second or two with any built-in recipe in a release build).
pub fn default_synthetic_shape() -> LlamaShape {
    LlamaShape::default()
}

/// The default output file for the synthetic model quantized with `recipe`.
pub fn default_synthetic_output(recipe: &str) -> PathBuf {
    let stem: String = Path::new(recipe)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| recipe.to_owned());
    PathBuf::from(format!("lowbit-synthetic.{stem}.gguf"))
}

/// Where the tensors come from.
#[derive(Clone, Debug)]
pub enum Input {
    /// A GGUF or safetensors file.
    File(PathBuf),
    /// The built-in synthetic llama of this shape and seed.
    Synthetic {
        /// Its shape.
        shape: LlamaShape,
        /// Its seed.
        seed: u64,
    },
}

/// What to do.
#[derive(Clone, Debug)]
pub struct QuantizeRequest {
    /// The input.
    pub input: Input,
    /// The output GGUF file.
    pub output: PathBuf,
    /// A built-in recipe name or a TOML recipe file.
    pub recipe: String,
    /// An importance matrix file (legacy `.dat` or GGUF layout).
    pub imatrix: Option<PathBuf>,
    /// The dialect to read a GGUF input's type ids in (default: the one its metadata names).
    pub dialect: Option<Dialect>,
    /// The dialect to number the output's type ids in (default: chosen from the formats).
    pub out_dialect: Option<Dialect>,
    /// Worker threads (default: rayon's global pool, one per core).
    pub threads: Option<usize>,
    /// How progress is shown.
    pub progress: Mode,
}

/// What a quantize run did.
#[derive(Clone, Debug)]
pub struct QuantizeOutcome {
    /// The input, described ("GGUF v3, dialect ...", "synthetic llama ...").
    pub input: String,
    /// The recipe's name.
    pub recipe: String,
    /// The output's dialect.
    pub dialect: Dialect,
    /// The pipeline's summary.
    pub summary: Summary,
    /// Imatrix entries naming no tensor of the model.
    pub imatrix_unused: Vec<String>,
    /// For the synthetic model: the output's error against the source, per tensor.
    pub eval: Option<EvalReport>,
    /// Tensors of a real model put in a format below 3 bits per weight without an importance
    /// matrix (the summary warns: on SmolLM2 that breaks the model, docs/QUALITY.md section 4).
    pub two_bit_without_imatrix: usize,
    /// Wall-clock seconds of reading, quantizing and writing.
    pub seconds: f64,
}

/// The first dialect (ggml, rocmfpx, prism, hipfire) that numbers every format of `formats`.
pub fn dialect_for(formats: &[FormatId]) -> Result<Dialect, CmdError> {
    Dialect::ALL
        .into_iter()
        .find(|&d| formats.iter().all(|&f| id_for_format(d, f).is_some()))
        .ok_or_else(|| {
            let mut names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
            names.sort_unstable();
            names.dedup();
            CmdError::new(format!(
                "no GGUF dialect numbers all of the recipe's formats ({}); split the recipe",
                names.join(", ")
            ))
        })
}

/// A quantization module metadata value as a GGUF value.
pub fn gguf_value(v: &MetaValue) -> Value {
    let arr = |elem, items| Value::Array(Array { elem, items });
    match v {
        MetaValue::U8(x) => Value::U8(*x),
        MetaValue::U32(x) => Value::U32(*x),
        MetaValue::I32(x) => Value::I32(*x),
        MetaValue::U64(x) => Value::U64(*x),
        MetaValue::I64(x) => Value::I64(*x),
        MetaValue::F32(x) => Value::F32(*x),
        MetaValue::Bool(x) => Value::Bool(*x),
        MetaValue::String(s) => Value::String(s.clone()),
        MetaValue::StringArray(a) => Value::string_array(a),
        MetaValue::F32Array(a) => arr(ValueType::F32, a.iter().map(|x| Value::F32(*x)).collect()),
        MetaValue::I32Array(a) => arr(ValueType::I32, a.iter().map(|x| Value::I32(*x)).collect()),
    }
}

/// Metadata to carry into an output: everything but `general.file_type` and lowbit's keys.
pub fn carried_metadata(meta: &[(String, Value)]) -> Vec<(String, Value)> {
    meta.iter()
        .filter(|(k, _)| k != "general.file_type" && k != KEY_DIALECT && k != KEY_FORMATS)
        .cloned()
        .collect()
}

/// Checks every imatrix entry that names a tensor of the model against that tensor's row
/// length and matrix count; returns the entries that name no tensor.
fn check_imatrix(
    m: &ImportanceMatrix,
    tensors: &[(String, Vec<u64>)],
) -> Result<Vec<String>, CmdError> {
    for (name, dims) in tensors {
        if !m.entries.contains_key(name) {
            continue;
        }
        let (_, k) = rows_and_k(dims)
            .ok_or_else(|| CmdError::new(format!("tensor {name}: dims {dims:?} overflow")))?;
        let n_mat: usize = dims.iter().skip(2).map(|&d| d as usize).product();
        m.for_tensor(name, k, n_mat).map_err(|e| CmdError::new(format!("imatrix: {e}")))?;
    }
    Ok(m.entries.keys().filter(|k| !tensors.iter().any(|(n, _)| n == *k)).cloned().collect())
}

fn synthetic_sources(m: &SyntheticModel) -> Vec<SourceTensor<'static>> {
    m.sources().collect()
}

/// Runs `lowbit quantize`.
pub fn run(req: &QuantizeRequest) -> Result<QuantizeOutcome, CmdError> {
    let start = Instant::now();
    if let Input::File(input) = &req.input {
        paths::refuse_same(input, &req.output)?;
    }
    let recipe = Recipe::from_name_or_file(&req.recipe).map_err(CmdError::new)?;
    // The input: a memory-mapped file, or the synthetic model generated in memory.
    let model;
    let mut synth = None;
    let (describe, metadata, sources) = match &req.input {
        Input::File(path) => {
            model = Model::open(path, req.dialect)?;
            let meta = carried_metadata(model.gguf_metadata());
            (format!("{} ({})", path.display(), model.describe()), meta, model.sources())
        }
        Input::Synthetic { shape, seed } => {
            let m = synth.insert(
                synthetic_llama(shape, *seed)
                    .map_err(|e| CmdError::new(format!("synthetic model: {e}")))?,
            );
            let meta: Vec<(String, Value)> =
                m.metadata.iter().map(|(k, v)| (k.clone(), gguf_value(v))).collect();
            let d = format!(
                "synthetic llama (vocab {}, dim {}, {} layers, ffn {}, {} heads / {} kv, seed {seed:#x})",
                shape.vocab, shape.dim, shape.layers, shape.ffn, shape.heads, shape.kv_heads
            );
            (d, carried_metadata(&meta), synthetic_sources(m))
        }
    };
    let shapes: Vec<(String, Vec<u64>)> =
        sources.iter().map(|s| (s.name.clone(), s.dims.clone())).collect();
    let imatrix = match &req.imatrix {
        Some(p) => Some(imatrix_file::load(p)?),
        None => None,
    };
    let imatrix_unused = match &imatrix {
        Some(m) => check_imatrix(m, &shapes)?,
        None => Vec::new(),
    };
    let mut specs = Vec::with_capacity(sources.len());
    let mut total_elems = 0u64;
    for s in &sources {
        let (rows, k) = rows_and_k(&s.dims).ok_or_else(|| {
            CmdError::new(format!("tensor {}: dims {:?} overflow", s.name, s.dims))
        })?;
        total_elems += (rows * k) as u64;
        let format = if rows * k == 0 {
            s.format
        } else {
            recipe.plan(&s.name, &s.dims).map_err(CmdError::new)?.format
        };
        specs.push(TensorSpec::new(s.name.clone(), &s.dims, format));
    }
    let formats: Vec<FormatId> = specs.iter().map(|s| s.format).collect();
    let dialect = match req.out_dialect {
        Some(d) => d,
        None => dialect_for(&formats)?,
    };
    let mut writer =
        GgufWriter::create(&req.output, dialect, &metadata, &specs).map_err(CmdError::new)?;
    let progress = Progress::new(req.progress, specs.len(), total_elems);
    let result = with_threads(req.threads, || {
        pipeline::quantize_with_progress(
            sources,
            &recipe,
            imatrix.as_ref(),
            &|name, n| progress.elements(name, n),
            |q, report| {
                writer.write_tensor(&q.name, &q.data)?;
                let what = format!(
                    "{} -> {} ({:?}, {} bytes)",
                    report.source_format, report.format, report.action, report.bytes_out
                );
                progress.tensor_done(&q.name, &what);
                Ok(())
            },
        )
    })?;
    progress.finish(result.is_ok());
    let summary = result.map_err(CmdError::new)?;
    writer.finish().map_err(CmdError::new)?;
    let seconds = start.elapsed().as_secs_f64();
    let eval = match &synth {
        Some(m) => {
            let out = Model::open(&req.output, None)?;
            let src = synthetic_sources(m);
            Some(with_threads(req.threads, || eval_tensors::compare(&src, &out.sources()))??)
        }
        None => None,
    };
    let two_bit_without_imatrix = if imatrix.is_none() && synth.is_none() {
        summary
            .per_format()
            .iter()
            .filter(|(f, _)| f.nominal_bits_per_weight() < 3.0)
            .map(|(_, t)| t.tensors)
            .sum()
    } else {
        0
    };
    Ok(QuantizeOutcome {
        two_bit_without_imatrix,
        input: describe,
        recipe: recipe.name.clone(),
        dialect,
        summary,
        imatrix_unused,
        eval,
        seconds,
    })
}

impl QuantizeOutcome {
    /// The report printed at the end: the pipeline summary, then (synthetic input) the error
    /// table.
    pub fn render(&self, output: &Path) -> String {
        let mut s = format!(
            "input: {}\nrecipe: {}\noutput: {} (dialect {})\n\n",
            self.input,
            self.recipe,
            output.display(),
            self.dialect.name()
        );
        s.push_str(&self.summary.render());
        if !self.imatrix_unused.is_empty() {
            s.push_str(&format!(
                "imatrix entries naming no tensor of the model: {} ({})\n",
                self.imatrix_unused.len(),
                self.imatrix_unused.iter().take(4).cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if self.two_bit_without_imatrix > 0 {
            s.push_str(&format!(
                "warning: {} tensors are in a format below 3 bits per weight and no importance \
                 matrix was given (--imatrix); on small dense models that can break the model \
                 (docs/QUALITY.md, section 4)\n",
                self.two_bit_without_imatrix
            ));
        }
        s.push_str(&format!("time: {:.2} s\n", self.seconds));
        if let Some(e) = &self.eval {
            s.push_str("\nerror of the output against the synthetic source:\n");
            s.push_str(&e.render());
        }
        s
    }
}
