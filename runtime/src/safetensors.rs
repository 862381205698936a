//! safetensors files (f32, f16 and bf16 tensors) as quantization input, memory-mapped.
//!
//! Layout (huggingface/safetensors `docs/source/index.mdx`, "Format"): a little-endian `u64`
//! header length N, N bytes of JSON mapping each tensor name to `{"dtype", "shape",
//! "data_offsets": [begin, end]}` (offsets relative to the byte after the header) plus an
//! optional `"__metadata__"` map of strings, then the data. Shapes are row-major (the last
//! dimension is contiguous), so lowbit's dims, in ggml order, are the shape reversed.
//! Every length, shape and offset is checked before use; other dtypes are an error that names
//! the tensor and its dtype. The header is capped at 100 MB, as the reference implementation
//! caps it.
//! What must not live here: GGUF (`gguf`), conversion to other formats (the quantize pipeline).

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use lowbit_core::FormatId;

use crate::gguf::Map;

/// Largest JSON header accepted.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Everything that can go wrong reading a safetensors file.
#[derive(Debug)]
pub enum SafetensorsError {
    /// Opening or mapping the file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// The bytes are not a valid safetensors file.
    Malformed {
        /// The tensor the problem belongs to, if one.
        tensor: Option<String>,
        /// Byte offset in the file where the problem lies (the header's start, 8, for
        /// problems inside the JSON).
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A tensor's dtype is not F32, F16 or BF16.
    Dtype {
        /// The tensor.
        tensor: String,
        /// Its dtype.
        dtype: String,
    },
    /// An error in the file at `path`.
    InFile {
        /// The file.
        path: PathBuf,
        /// The error.
        source: Box<SafetensorsError>,
    },
}

impl fmt::Display for SafetensorsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SafetensorsError::Io { path, op, source } => {
                write!(f, "{}: cannot {op}: {source}", path.display())
            }
            SafetensorsError::Malformed { tensor: Some(t), offset, reason } => {
                write!(f, "tensor '{t}' (byte offset {offset}): {reason}")
            }
            SafetensorsError::Malformed { tensor: None, offset, reason } => {
                write!(f, "safetensors header at byte offset {offset}: {reason}")
            }
            SafetensorsError::Dtype { tensor, dtype } => write!(
                f,
                "tensor '{tensor}': dtype {dtype} is not supported as quantization input \
                 (F32, F16 and BF16 are)"
            ),
            SafetensorsError::InFile { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for SafetensorsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SafetensorsError::Io { source, .. } => Some(source),
            SafetensorsError::InFile { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, SafetensorsError>;

/// One tensor of a safetensors file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StTensor {
    /// The tensor's name.
    pub name: String,
    /// Dimensions in ggml order (the file's shape reversed: `dims[0]` is the row length).
    pub dims: Vec<u64>,
    /// F32, F16 or BF16.
    pub format: FormatId,
    start: usize,
    len: usize,
}

impl StTensor {
    /// Bytes of the tensor's data.
    pub fn bytes(&self) -> usize {
        self.len
    }

    /// Absolute byte offset of the data in the file.
    pub fn data_offset(&self) -> u64 {
        self.start as u64
    }

    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// The parsed header of a safetensors file: what [`parse`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StHeader {
    /// The `__metadata__` entries, sorted by key.
    pub metadata: Vec<(String, String)>,
    /// The tensors, in data order.
    pub tensors: Vec<StTensor>,
}

fn bad(tensor: Option<&str>, offset: u64, reason: impl Into<String>) -> SafetensorsError {
    SafetensorsError::Malformed { tensor: tensor.map(str::to_owned), offset, reason: reason.into() }
}

fn as_u64s(v: &serde_json::Value) -> Option<Vec<u64>> {
    v.as_array()?.iter().map(serde_json::Value::as_u64).collect()
}

/// Parses a whole safetensors file held in `bytes`; every tensor's data lies inside `bytes`.
pub fn parse(bytes: &[u8]) -> Result<StHeader> {
    let Some((len, rest)) = bytes.split_first_chunk::<8>() else {
        return Err(bad(
            None,
            0,
            format!("{} bytes: too short for the header length", bytes.len()),
        ));
    };
    let n = u64::from_le_bytes(*len);
    if n > MAX_HEADER_BYTES || n > rest.len() as u64 {
        return Err(bad(
            None,
            0,
            format!("header length {n} exceeds the file ({} bytes after it) or 100 MB", rest.len()),
        ));
    }
    let (json, data) = rest.split_at(n as usize);
    let data_start = 8 + n;
    let root: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| bad(None, 8, format!("invalid JSON: {e}")))?;
    let obj = root.as_object().ok_or_else(|| bad(None, 8, "the header is not a JSON object"))?;
    let mut metadata = Vec::new();
    let mut tensors = Vec::new();
    for (name, entry) in obj {
        if name == "__metadata__" {
            let m =
                entry.as_object().ok_or_else(|| bad(None, 8, "__metadata__ is not an object"))?;
            for (k, v) in m {
                let s = v
                    .as_str()
                    .ok_or_else(|| bad(None, 8, format!("__metadata__ '{k}' is not a string")))?;
                metadata.push((k.clone(), s.to_owned()));
            }
            continue;
        }
        let t = Some(name.as_str());
        let e = entry.as_object().ok_or_else(|| bad(t, 8, "entry is not a JSON object"))?;
        let dtype = e
            .get("dtype")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| bad(t, 8, "missing string \"dtype\""))?;
        let shape = e
            .get("shape")
            .and_then(as_u64s)
            .ok_or_else(|| bad(t, 8, "missing \"shape\" of non-negative integers"))?;
        let offs = e
            .get("data_offsets")
            .and_then(as_u64s)
            .filter(|o| o.len() == 2)
            .ok_or_else(|| bad(t, 8, "missing \"data_offsets\" [begin, end]"))?;
        let format = match dtype {
            "F32" => FormatId::F32,
            "F16" => FormatId::F16,
            "BF16" => FormatId::Bf16,
            other => {
                return Err(SafetensorsError::Dtype { tensor: name.clone(), dtype: other.into() })
            }
        };
        let (begin, end) = (offs[0], offs[1]);
        let elems = shape.iter().try_fold(1u64, |a, d| a.checked_mul(*d));
        let size = format.geometry().block_bytes as u64;
        let need = elems.and_then(|e| e.checked_mul(size));
        let abs = data_start.saturating_add(begin);
        if begin > end || end > data.len() as u64 {
            return Err(bad(
                t,
                abs,
                format!(
                    "data_offsets [{begin}, {end}] outside the {}-byte data section",
                    data.len()
                ),
            ));
        }
        if need != Some(end - begin) {
            return Err(bad(
                t,
                abs,
                format!(
                    "shape {shape:?} of {dtype} needs {need:?} bytes, data_offsets give {}",
                    end - begin
                ),
            ));
        }
        tensors.push(StTensor {
            name: name.clone(),
            dims: shape.iter().rev().copied().collect(),
            format,
            // data_start + end <= bytes.len(), so these fit in usize.
            start: (data_start + begin) as usize,
            len: (end - begin) as usize,
        });
    }
    tensors.sort_by_key(|t| t.start);
    for w in tensors.windows(2) {
        if w[0].start + w[0].len > w[1].start {
            return Err(bad(
                Some(&w[1].name),
                w[1].start as u64,
                format!("data overlaps tensor '{}'", w[0].name),
            ));
        }
    }
    metadata.sort();
    Ok(StHeader { metadata, tensors })
}

#[derive(Debug)]
enum Backing {
    Map(Map),
    Owned(Vec<u8>),
}

/// A parsed safetensors file and its bytes (memory-mapped, or owned).
#[derive(Debug)]
pub struct SafeTensors {
    header: StHeader,
    bytes: Backing,
}

impl SafeTensors {
    /// Maps and parses the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<SafeTensors> {
        let path = path.as_ref();
        let io = |op, source| SafetensorsError::Io { path: path.to_owned(), op, source };
        let file = File::open(path).map_err(|e| io("open", e))?;
        let map = Map::of(&file).map_err(|e| io("map", e))?;
        let header = parse(&map)
            .map_err(|e| SafetensorsError::InFile { path: path.to_owned(), source: Box::new(e) })?;
        Ok(SafeTensors { header, bytes: Backing::Map(map) })
    }

    /// Parses a safetensors file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<SafeTensors> {
        let header = parse(&bytes)?;
        Ok(SafeTensors { header, bytes: Backing::Owned(bytes) })
    }

    /// The `__metadata__` entries, sorted by key.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.header.metadata
    }

    /// The tensors, in data order.
    pub fn tensors(&self) -> &[StTensor] {
        &self.header.tensors
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&StTensor> {
        self.header.tensors.iter().find(|t| t.name == name)
    }

    /// The data of `t`, one of this file's tensors (little-endian values, row-major).
    pub fn tensor_data(&self, t: &StTensor) -> &[u8] {
        let raw: &[u8] = match &self.bytes {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
        };
        raw.get(t.start..t.start + t.len).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(json: &str, data: &[u8]) -> Vec<u8> {
        let mut v = (json.len() as u64).to_le_bytes().to_vec();
        v.extend(json.as_bytes());
        v.extend(data);
        v
    }

    #[test]
    fn reads_dtypes_and_reverses_shape() {
        let json = r#"{"__metadata__":{"format":"pt"},
            "b":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]},
            "a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}"#;
        let data: Vec<u8> = (0..28).collect();
        let st = SafeTensors::from_bytes(file(json, &data)).unwrap();
        assert_eq!(st.metadata(), [("format".to_string(), "pt".to_string())]);
        let a = &st.tensors()[0];
        assert_eq!(
            (a.name.as_str(), a.dims.as_slice(), a.format),
            ("a", &[3u64, 2][..], FormatId::F32)
        );
        assert_eq!(st.tensor_data(a), &data[..24]);
        let b = st.tensor("b").unwrap();
        assert_eq!((b.format, st.tensor_data(b)), (FormatId::Bf16, &data[24..28]));
    }

    #[test]
    fn rejects_bad_files() {
        let cases = [
            (r#"{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}"#, 8, "I64"),
            (r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, 8, "needs"),
            (r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}}"#, 8, "outside"),
            (
                r#"{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}"#,
                8,
                "needs",
            ),
            (
                r#"{"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}}"#,
                8,
                "overlaps",
            ),
            (r#"{"a":{"dtype":"F32","shape":[2]}}"#, 8, "data_offsets"),
            (r#"[1,2]"#, 0, "not a JSON object"),
            (r#"{"a":"#, 0, "invalid JSON"),
        ];
        for (json, n, want) in cases {
            let e = SafeTensors::from_bytes(file(json, &vec![0; n])).unwrap_err().to_string();
            assert!(e.contains(want), "{json}: {e}");
        }
        let mut huge = u64::MAX.to_le_bytes().to_vec();
        huge.extend(b"{}");
        assert!(SafeTensors::from_bytes(huge).is_err());
        assert!(SafeTensors::from_bytes(vec![1, 2]).is_err());
        // Every truncation of a valid file is an error, never a panic.
        let good = file(r#"{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}"#, &[0; 8]);
        assert!(SafeTensors::from_bytes(good.clone()).is_ok());
        for cut in 0..good.len() {
            assert!(SafeTensors::from_bytes(good[..cut].to_vec()).is_err(), "cut {cut}");
        }
    }
}
