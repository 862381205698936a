//! `lowbit inspect FILE`: what a GGUF or safetensors file holds (metadata with arrays
//! abbreviated; every tensor's shape, format, bytes and bits per weight; totals per format and
//! overall), as text or JSON.
//! What must not live here: parsing (`gguf`, `safetensors`) and argument handling (the binary).

use std::fmt::{self, Write as _};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use lowbit_core::{Dialect, FormatId};
use serde_json::{json, Value as Json};

use crate::gguf::{self, GgufError, GgufFile, Value};
use crate::safetensors::{SafeTensors, SafetensorsError};

/// Array items shown in text output.
const TEXT_ITEMS: usize = 6;
/// Array items kept in JSON output (longer arrays are abbreviated).
const JSON_ITEMS: usize = 16;

/// Why a file could not be inspected.
#[derive(Debug)]
pub enum InspectError {
    /// The file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Neither GGUF nor safetensors.
    UnknownKind {
        /// The file.
        path: PathBuf,
    },
    /// A bad GGUF file.
    Gguf(GgufError),
    /// A bad safetensors file.
    Safetensors(SafetensorsError),
}

impl fmt::Display for InspectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InspectError::Io { path, source } => {
                write!(f, "{}: cannot read: {source}", path.display())
            }
            InspectError::UnknownKind { path } => write!(
                f,
                "{}: neither a GGUF file (magic \"GGUF\") nor a safetensors file (.safetensors)",
                path.display()
            ),
            InspectError::Gguf(e) => e.fmt(f),
            InspectError::Safetensors(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for InspectError {}

/// One tensor's line in the report.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRow {
    /// The tensor's name.
    pub name: String,
    /// Dims in ggml order (`dims[0]` is the row length).
    pub dims: Vec<u64>,
    /// Its format.
    pub format: FormatId,
    /// The raw type id (GGUF only).
    pub type_id: Option<u32>,
    /// Bytes of data.
    pub bytes: u64,
    /// Elements.
    pub elements: u64,
}

/// What `lowbit inspect` reports about a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The file.
    pub path: PathBuf,
    /// "GGUF v3", "safetensors", ...
    pub kind: String,
    /// Header facts: (name, value), e.g. ("dialect", "ggml (default...)").
    pub facts: Vec<(String, String)>,
    /// Metadata: (key, value). GGUF values keep their type; safetensors values are strings.
    pub metadata: Vec<(String, Value)>,
    /// The tensors in file order.
    pub tensors: Vec<TensorRow>,
}

/// Reads `path` (GGUF, by its magic, or safetensors) and describes it; `dialect` applies to
/// GGUF type ids.
pub fn inspect(path: &Path, dialect: Option<Dialect>) -> Result<Report, InspectError> {
    let io = |source| InspectError::Io { path: path.to_owned(), source };
    let mut head = [0u8; 4];
    let n = File::open(path).and_then(|mut f| f.read(&mut head)).map_err(io)?;
    if n == 4 && head == gguf::MAGIC {
        let g = GgufFile::open(path, dialect).map_err(InspectError::Gguf)?;
        let h = g.header();
        let facts = vec![
            ("dialect".into(), h.dialect.to_string()),
            ("alignment".into(), h.alignment.to_string()),
            ("data offset".into(), h.data_offset.to_string()),
        ];
        let tensors = g
            .tensors()
            .iter()
            .map(|t| TensorRow {
                name: t.name.clone(),
                dims: t.dims.clone(),
                format: t.format,
                type_id: Some(t.type_id),
                bytes: t.bytes() as u64,
                elements: t.elements(),
            })
            .collect();
        return Ok(Report {
            path: path.to_owned(),
            kind: format!("GGUF v{}", h.version),
            facts,
            metadata: h.metadata.clone(),
            tensors,
        });
    }
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("safetensors")) {
        let st = SafeTensors::open(path).map_err(InspectError::Safetensors)?;
        let tensors = st
            .tensors()
            .iter()
            .map(|t| TensorRow {
                name: t.name.clone(),
                dims: t.dims.clone(),
                format: t.format,
                type_id: None,
                bytes: t.bytes() as u64,
                elements: t.elements(),
            })
            .collect();
        return Ok(Report {
            path: path.to_owned(),
            kind: "safetensors".into(),
            facts: Vec::new(),
            metadata: st
                .metadata()
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
            tensors,
        });
    }
    Err(InspectError::UnknownKind { path: path.to_owned() })
}

/// Totals per format, in registry order: (format, tensors, elements, bytes).
pub fn per_format(tensors: &[TensorRow]) -> Vec<(FormatId, usize, u64, u64)> {
    let mut out: Vec<(FormatId, usize, u64, u64)> = Vec::new();
    for t in tensors {
        match out.iter_mut().find(|(f, ..)| *f == t.format) {
            Some((_, n, e, b)) => {
                *n += 1;
                *e = e.saturating_add(t.elements);
                *b = b.saturating_add(t.bytes);
            }
            None => out.push((t.format, 1, t.elements, t.bytes)),
        }
    }
    out.sort_by_key(|(f, ..)| *f);
    out
}

fn bpw(bytes: u64, elements: u64) -> f64 {
    if elements == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 / elements as f64
    }
}

fn shape(dims: &[u64]) -> String {
    dims.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
}

/// The report as text: facts, metadata, one line per tensor, totals.
pub fn render_text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: {}", r.path.display(), r.kind);
    for (k, v) in &r.facts {
        let _ = writeln!(s, "  {k}: {v}");
    }
    let _ = writeln!(s, "\nmetadata ({} keys):", r.metadata.len());
    for (k, v) in &r.metadata {
        let _ = writeln!(s, "  {k} = {}", v.abbreviated(TEXT_ITEMS));
    }
    let w = r.tensors.iter().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    let _ = writeln!(s, "\ntensors ({}), shape in ggml order (row length first):", r.tensors.len());
    let _ = writeln!(
        s,
        "  {:<w$}  {:<20}  {:<9}  {:>12}  {:>7}",
        "name", "shape", "format", "bytes", "bpw"
    );
    for t in &r.tensors {
        let _ = writeln!(
            s,
            "  {:<w$}  {:<20}  {:<9}  {:>12}  {:>7.4}",
            t.name,
            shape(&t.dims),
            t.format.name(),
            t.bytes,
            bpw(t.bytes, t.elements)
        );
    }
    let _ = writeln!(s, "\ntotals:");
    for (f, n, e, b) in per_format(&r.tensors) {
        let _ = writeln!(
            s,
            "  {:<9}  {n:>5} tensors  {e:>14} elements  {b:>14} bytes  {:>7.4} bpw",
            f.name(),
            bpw(b, e)
        );
    }
    let (e, b) = r
        .tensors
        .iter()
        .fold((0u64, 0u64), |(e, b), t| (e.saturating_add(t.elements), b.saturating_add(t.bytes)));
    let _ = writeln!(
        s,
        "  {:<9}  {:>5} tensors  {e:>14} elements  {b:>14} bytes  {:>7.4} bpw",
        "all",
        r.tensors.len(),
        bpw(b, e)
    );
    s
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::U8(x) => json!(x),
        Value::I8(x) => json!(x),
        Value::U16(x) => json!(x),
        Value::I16(x) => json!(x),
        Value::U32(x) => json!(x),
        Value::I32(x) => json!(x),
        Value::U64(x) => json!(x),
        Value::I64(x) => json!(x),
        // Non-finite floats have no JSON number: they become strings.
        Value::F32(x) if x.is_finite() => json!(x),
        Value::F64(x) if x.is_finite() => json!(x),
        Value::F32(x) => json!(x.to_string()),
        Value::F64(x) => json!(x.to_string()),
        Value::Bool(x) => json!(x),
        Value::String(x) => json!(x),
        Value::Array(a) => {
            let items: Vec<Json> = a.items.iter().take(JSON_ITEMS).map(value_json).collect();
            json!({
                "elem": a.elem.name(),
                "len": a.items.len(),
                "items": items,
                "abbreviated": a.items.len() > JSON_ITEMS,
            })
        }
    }
}

/// The report as JSON (arrays keep their first 16 items).
pub fn render_json(r: &Report) -> String {
    let facts: serde_json::Map<String, Json> =
        r.facts.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let metadata: Vec<Json> = r
        .metadata
        .iter()
        .map(|(k, v)| json!({"key": k, "type": v.value_type().name(), "value": value_json(v)}))
        .collect();
    let tensors: Vec<Json> = r
        .tensors
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "dims": t.dims,
                "format": t.format.name(),
                "type_id": t.type_id,
                "bytes": t.bytes,
                "elements": t.elements,
                "bpw": bpw(t.bytes, t.elements),
            })
        })
        .collect();
    let per: Vec<Json> = per_format(&r.tensors)
        .into_iter()
        .map(|(f, n, e, b)| {
            json!({"format": f.name(), "tensors": n, "elements": e, "bytes": b, "bpw": bpw(b, e)})
        })
        .collect();
    let (e, b) = r
        .tensors
        .iter()
        .fold((0u64, 0u64), |(e, b), t| (e.saturating_add(t.elements), b.saturating_add(t.bytes)));
    let out = json!({
        "file": r.path.display().to_string(),
        "kind": r.kind,
        "facts": facts,
        "metadata": metadata,
        "tensors": tensors,
        "totals": {
            "per_format": per,
            "tensors": r.tensors.len(),
            "elements": e,
            "bytes": b,
            "bpw": bpw(b, e),
        },
    });
    let mut s = serde_json::to_string_pretty(&out).unwrap_or_default();
    s.push('\n');
    s
}
