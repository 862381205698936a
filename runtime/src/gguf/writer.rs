//! [`GgufWriter`]: writes a GGUF v3 file tensor by tensor, atomically.
//!
//! The caller gives the metadata and every tensor's name, dims and format up front; the writer
//! computes each tensor's size (from the format's row size) and offset, writes the header,
//! metadata, tensor infos and padding at once, then takes the tensors' data in order. All of it
//! goes to a temporary file beside the target; [`GgufWriter::finish`] flushes it to disk and
//! renames it over the target, and dropping the writer without finishing removes it, so a
//! failed run never leaves a partial output (and never touches any other file).
//!
//! Layout as gguf-py's `GGUFWriter` writes it: every tensor's data starts at a multiple of the
//! alignment and is followed by padding to the next multiple (the last one too).
//! The writer adds [`KEY_DIALECT`] and [`KEY_FORMATS`] (replacing any copies in the given
//! metadata) and numbers the tensors' types in the given dialect.
//! What must not live here: reading, and the choice of formats (the quantize pipeline's).

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use lowbit_core::{Dialect, FormatId};

use super::dialect::{self, KEY_DIALECT, KEY_FORMATS};
use super::error::GgufError;
use super::value::Value;
use super::{tensor_bytes, DEFAULT_ALIGNMENT, KEY_ALIGNMENT, MAGIC, MAX_DIMS, MAX_NESTING};

type Result<T> = std::result::Result<T, GgufError>;

/// A tensor to be written: its name, dims (ggml order: `dims[0]` is the row length) and format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// The tensor's name.
    pub name: String,
    /// Dimensions in ggml order.
    pub dims: Vec<u64>,
    /// The format of its data.
    pub format: FormatId,
}

impl TensorSpec {
    /// A spec from its parts.
    pub fn new(name: impl Into<String>, dims: &[u64], format: FormatId) -> TensorSpec {
        TensorSpec { name: name.into(), dims: dims.to_vec(), format }
    }
}

struct Planned {
    name: String,
    bytes: u64,
}

/// Writes one GGUF file; see the module documentation.
pub struct GgufWriter {
    target: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    tensors: Vec<Planned>,
    next: usize,
    alignment: u64,
    written: u64,
    done: bool,
}

fn check_value(key: &str, v: &Value, depth: u32) -> Result<()> {
    if let Value::Array(a) = v {
        if depth >= MAX_NESTING {
            return Err(GgufError::write(format!(
                "metadata key '{key}': arrays nested deeper than {MAX_NESTING} levels"
            )));
        }
        for (i, item) in a.items.iter().enumerate() {
            if item.value_type() != a.elem {
                return Err(GgufError::write(format!(
                    "metadata key '{key}': item {i} is {}, the array holds {}",
                    item.value_type(),
                    a.elem
                )));
            }
            check_value(key, item, depth + 1)?;
        }
    }
    Ok(())
}

fn encode_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend(x.to_le_bytes()),
        Value::U16(x) => out.extend(x.to_le_bytes()),
        Value::I16(x) => out.extend(x.to_le_bytes()),
        Value::U32(x) => out.extend(x.to_le_bytes()),
        Value::I32(x) => out.extend(x.to_le_bytes()),
        Value::F32(x) => out.extend(x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => encode_str(out, s),
        Value::Array(a) => {
            out.extend(a.elem.code().to_le_bytes());
            out.extend((a.items.len() as u64).to_le_bytes());
            for item in &a.items {
                encode_value(out, item);
            }
        }
        Value::U64(x) => out.extend(x.to_le_bytes()),
        Value::I64(x) => out.extend(x.to_le_bytes()),
        Value::F64(x) => out.extend(x.to_le_bytes()),
    }
}

fn encode_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn pad_to(out: &mut Vec<u8>, alignment: u64) {
    while out.len() as u64 % alignment != 0 {
        out.push(0);
    }
}

static TMP_COUNTER: AtomicU32 = AtomicU32::new(0);

impl GgufWriter {
    /// Starts writing `path`: checks the metadata and tensor specs, numbers the tensors' types
    /// in `dialect`, and writes everything up to the first tensor's data to a temporary file in
    /// `path`'s directory.
    pub fn create(
        path: impl AsRef<Path>,
        dialect: Dialect,
        metadata: &[(String, Value)],
        infos: &[TensorSpec],
    ) -> Result<GgufWriter> {
        let target = path.as_ref().to_owned();
        let alignment = match metadata.iter().find(|(k, _)| k == KEY_ALIGNMENT) {
            None => DEFAULT_ALIGNMENT,
            Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
            Some((_, v)) => {
                return Err(GgufError::write(format!(
                    "{KEY_ALIGNMENT} must be a UINT32 power of two, found {}",
                    v.abbreviated(0)
                )))
            }
        };
        // Metadata: the caller's (minus lowbit's own keys), then lowbit's.
        let mut keys = HashSet::new();
        let mut kv: Vec<(&str, Value)> = Vec::with_capacity(metadata.len() + 2);
        for (k, v) in metadata {
            if !keys.insert(k.as_str()) {
                return Err(GgufError::write(format!("duplicate metadata key '{k}'")));
            }
            check_value(k, v, 0)?;
            if k != KEY_DIALECT && k != KEY_FORMATS {
                kv.push((k, v.clone()));
            }
        }
        kv.push((KEY_DIALECT, Value::String(dialect.name().into())));
        kv.push((KEY_FORMATS, dialect::formats_value(infos.iter().map(|t| t.format))));

        let mut names = HashSet::new();
        let mut head = Vec::new();
        head.extend(MAGIC);
        head.extend(3u32.to_le_bytes());
        head.extend((infos.len() as u64).to_le_bytes());
        head.extend((kv.len() as u64).to_le_bytes());
        for (k, v) in &kv {
            encode_str(&mut head, k);
            head.extend(v.value_type().code().to_le_bytes());
            encode_value(&mut head, v);
        }
        let mut tensors = Vec::with_capacity(infos.len());
        let mut offset = 0u64;
        for t in infos {
            let bad = |why: String| GgufError::write(format!("tensor '{}': {why}", t.name));
            if !names.insert(t.name.as_str()) {
                return Err(bad("duplicate tensor name".into()));
            }
            if t.dims.is_empty() || t.dims.len() > MAX_DIMS || t.dims.contains(&0) {
                return Err(bad(format!(
                    "dims {:?}: need 1 to {MAX_DIMS} dimensions, none of them 0",
                    t.dims
                )));
            }
            let id = dialect::id_for_format(dialect, t.format).ok_or_else(|| {
                let elsewhere: Vec<&str> = Dialect::ALL
                    .into_iter()
                    .filter(|d| dialect::id_for_format(*d, t.format).is_some())
                    .map(|d| d.name())
                    .collect();
                bad(format!(
                    "{} has no type id in the {} dialect (it has one in: {})",
                    t.format,
                    dialect.name(),
                    if elsewhere.is_empty() { "none".into() } else { elsewhere.join(", ") }
                ))
            })?;
            let bytes = tensor_bytes(t.format, &t.dims).map_err(bad)?;
            encode_str(&mut head, &t.name);
            head.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                head.extend(d.to_le_bytes());
            }
            head.extend(id.to_le_bytes());
            head.extend(offset.to_le_bytes());
            let padded = bytes.div_ceil(alignment).checked_mul(alignment);
            offset = padded
                .and_then(|p| offset.checked_add(p))
                .ok_or_else(|| bad("the file would exceed 2^64 bytes".into()))?;
            tensors.push(Planned { name: t.name.clone(), bytes });
        }
        pad_to(&mut head, alignment);

        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let file_name = target
            .file_name()
            .ok_or_else(|| GgufError::write(format!("{}: not a file path", target.display())))?;
        let mut tmp_name = OsString::from(".");
        tmp_name.push(file_name);
        tmp_name.push(format!(
            ".lowbit-tmp-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = dir.join(tmp_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| GgufError::Io { path: tmp.clone(), op: "create", source: e })?;
        let mut w = GgufWriter {
            target,
            tmp,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            tensors,
            next: 0,
            alignment,
            written: 0,
            done: false,
        };
        w.put(&head)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        let out = self.out.as_mut().ok_or_else(|| GgufError::write("already finished"))?;
        out.write_all(bytes).map_err(|e| GgufError::Io {
            path: self.tmp.clone(),
            op: "write",
            source: e,
        })?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// The name of the next tensor [`write_tensor`](Self::write_tensor) expects, if any.
    pub fn next_tensor(&self) -> Option<&str> {
        self.tensors.get(self.next).map(|t| t.name.as_str())
    }

    /// Writes the data of tensor `name`, which must be the next one in the order given to
    /// [`create`](Self::create) and exactly its size.
    pub fn write_tensor(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let Some(t) = self.tensors.get(self.next) else {
            return Err(GgufError::write(format!(
                "tensor '{name}': all {} tensors are already written",
                self.tensors.len()
            )));
        };
        if t.name != name {
            return Err(GgufError::write(format!(
                "tensor '{name}' written out of order: '{}' comes next",
                t.name
            )));
        }
        if t.bytes != bytes.len() as u64 {
            return Err(GgufError::write(format!(
                "tensor '{name}': {} bytes given, its dims and format need {}",
                bytes.len(),
                t.bytes
            )));
        }
        self.put(bytes)?;
        let pad = (self.alignment - self.written % self.alignment) % self.alignment;
        self.put(&vec![0u8; pad as usize])?;
        self.next += 1;
        Ok(())
    }

    /// Checks that every tensor was written, flushes the file to disk and renames it over the
    /// target.
    pub fn finish(mut self) -> Result<()> {
        if let Some(t) = self.tensors.get(self.next) {
            return Err(GgufError::write(format!(
                "finish with {} of {} tensors written ('{}' is missing)",
                self.next,
                self.tensors.len(),
                t.name
            )));
        }
        let out = self.out.take().ok_or_else(|| GgufError::write("already finished"))?;
        let io = |path: &Path, op, e| GgufError::Io { path: path.to_owned(), op, source: e };
        let file = out.into_inner().map_err(|e| io(&self.tmp, "write", e.into_error()))?;
        file.sync_all().map_err(|e| io(&self.tmp, "sync", e))?;
        drop(file);
        fs::rename(&self.tmp, &self.target).map_err(|e| io(&self.target, "rename onto", e))?;
        self.done = true;
        // Make the rename durable too (best effort: not every platform syncs directories).
        if let Some(dir) = self.target.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }
}

impl Drop for GgufWriter {
    fn drop(&mut self) {
        drop(self.out.take());
        if !self.done {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

impl std::fmt::Debug for GgufWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufWriter")
            .field("target", &self.target)
            .field("tmp", &self.tmp)
            .field("next", &self.next)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}
