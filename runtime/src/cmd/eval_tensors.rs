//! `lowbit eval-tensors SOURCE QUANTIZED`: the error of every tensor of a quantized model
//! against its source, matched by name (a tensor missing from either side, or with other
//! dims, is an error naming it), both sides decoded exactly by the core (a quantized source
//! too), measured by [`crate::quant::eval`]; as a table or JSON.
//! What must not live here: the metrics themselves (`quant::eval`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use lowbit_core::Dialect;
use serde_json::json;

use super::model::Model;
use super::{with_threads, CmdError};
use crate::quant::eval::{compare_encoded, EvalReport};
use crate::quant::pipeline::SourceTensor;

/// Compares every tensor of `quant` with the tensor of the same name in `source`, in
/// `source`'s order.
pub fn compare(
    source: &[SourceTensor<'_>],
    quant: &[SourceTensor<'_>],
) -> Result<EvalReport, CmdError> {
    let by_name: HashMap<&str, &SourceTensor<'_>> =
        quant.iter().map(|q| (q.name.as_str(), q)).collect();
    let source_names: HashSet<&str> = source.iter().map(|s| s.name.as_str()).collect();
    if let Some(q) = quant.iter().find(|q| !source_names.contains(q.name.as_str())) {
        return Err(CmdError::new(format!(
            "tensor {}: in the quantized file, not in the source",
            q.name
        )));
    }
    let mut report = EvalReport::default();
    for s in source {
        let q = by_name.get(s.name.as_str()).ok_or_else(|| {
            CmdError::new(format!(
                "tensor {}: in the source, missing from the quantized file",
                s.name
            ))
        })?;
        if q.dims != s.dims {
            return Err(CmdError::new(format!(
                "tensor {}: dims {:?} in the source but {:?} in the quantized file",
                s.name, s.dims, q.dims
            )));
        }
        let e = compare_encoded(&s.name, &s.dims, s.format, &s.data, q.format, &q.data)
            .map_err(CmdError::new)?;
        report.tensors.push(e);
    }
    Ok(report)
}

/// Opens both files (GGUF or safetensors, by content) and compares them. `source_dialect`
/// and `dialect` state how to read the GGUF type ids of the source and of the quantized file
/// (default: what each file's metadata names).
pub fn run(
    source: &Path,
    quantized: &Path,
    source_dialect: Option<Dialect>,
    dialect: Option<Dialect>,
    threads: Option<usize>,
) -> Result<EvalReport, CmdError> {
    let s = Model::open(source, source_dialect)?;
    let q = Model::open(quantized, dialect)?;
    let (ss, qs) = (s.sources(), q.sources());
    with_threads(threads, || compare(&ss, &qs))?
        .map_err(|e| CmdError::new(format!("{} vs {}: {e}", source.display(), quantized.display())))
}

fn num(x: f64) -> serde_json::Value {
    // JSON has no infinities or NaN: write them as strings.
    if x.is_finite() {
        json!(x)
    } else {
        json!(x.to_string())
    }
}

/// The report as JSON: per tensor and totals.
pub fn to_json(r: &EvalReport, source: &Path, quantized: &Path) -> String {
    let tensors: Vec<serde_json::Value> = r
        .tensors
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "source_format": t.source_format.name(),
                "format": t.format.name(),
                "elements": t.elements,
                "nrmse": num(t.nrmse),
                "max_abs_err": num(t.max_abs),
            })
        })
        .collect();
    let v = json!({
        "source": source.display().to_string(),
        "quantized": quantized.display().to_string(),
        "tensors": tensors,
        "total": {
            "tensors": r.tensors.len(),
            "elements": r.elements(),
            "nrmse_weighted": num(r.weighted_nrmse()),
            "nrmse_pooled": num(r.pooled_nrmse()),
            "max_abs_err": num(r.max_abs()),
        },
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}
