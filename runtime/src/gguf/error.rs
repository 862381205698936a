//! The GGUF error type: every failure names what it is about (the header, a metadata key, a
//! tensor) and, for bytes read from a file, the byte offset where the problem was found.
//! What must not live here: detection logic (the reader and writer raise these).

use std::fmt;
use std::io;
use std::path::PathBuf;

use lowbit_core::{Dialect, FormatId};

/// What a GGUF error is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Context {
    /// The fixed header (magic, version, counts).
    Header,
    /// The name of metadata entry number `index` (before the key is known).
    KeyName(u64),
    /// The value of metadata key `key`.
    Key(String),
    /// The name of tensor info number `index` (before the name is known).
    TensorName(u64),
    /// The tensor named here (its info or its data).
    Tensor(String),
    /// The data section as a whole.
    Data,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Context::Header => f.write_str("header"),
            Context::KeyName(i) => write!(f, "name of metadata entry #{i}"),
            Context::Key(k) => write!(f, "metadata key '{k}'"),
            Context::TensorName(i) => write!(f, "name of tensor info #{i}"),
            Context::Tensor(t) => write!(f, "tensor '{t}'"),
            Context::Data => f.write_str("data section"),
        }
    }
}

/// Everything that can go wrong reading or writing a GGUF file.
#[derive(Debug)]
pub enum GgufError {
    /// Reading, writing, mapping or renaming a file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done ("open", "map", "write", ...).
        op: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// The bytes are not a valid GGUF file: truncated, inconsistent or hostile.
    Malformed {
        /// What the bad bytes belong to.
        context: Context,
        /// Byte offset (from the start of the file) where the problem was found.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A tensor's type id names no format lowbit knows under the file's dialect(s).
    UnknownType {
        /// The tensor.
        tensor: String,
        /// Byte offset of the type id.
        offset: u64,
        /// The type id.
        id: u32,
        /// The dialects the file was read under, and why.
        dialects: String,
        /// What the id means elsewhere (other dialects, ggml types lowbit lacks), or empty.
        hint: String,
    },
    /// A tensor's type id means different formats under the file's candidate dialects.
    AmbiguousType {
        /// The tensor.
        tensor: String,
        /// Byte offset of the type id.
        offset: u64,
        /// The type id.
        id: u32,
        /// Every reading: (format, dialects that read the id as that format).
        readings: Vec<(FormatId, Vec<Dialect>)>,
    },
    /// The dialect metadata is unusable or contradicts the tensors.
    Dialect {
        /// What is wrong.
        reason: String,
    },
    /// The writer was given something it cannot write or was used out of order.
    Write {
        /// What is wrong.
        reason: String,
    },
    /// An error in the file at `path` (wraps the other variants for [`super::GgufFile::open`]).
    InFile {
        /// The file.
        path: PathBuf,
        /// The error.
        source: Box<GgufError>,
    },
}

impl GgufError {
    pub(crate) fn malformed(context: Context, offset: u64, reason: impl Into<String>) -> Self {
        GgufError::Malformed { context, offset, reason: reason.into() }
    }

    pub(crate) fn write(reason: impl Into<String>) -> Self {
        GgufError::Write { reason: reason.into() }
    }

    /// The byte offset the error points at, if it points at one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            GgufError::Malformed { offset, .. }
            | GgufError::UnknownType { offset, .. }
            | GgufError::AmbiguousType { offset, .. } => Some(*offset),
            GgufError::InFile { source, .. } => source.offset(),
            _ => None,
        }
    }
}

pub(crate) fn dialects_text(ds: &[Dialect]) -> String {
    ds.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgufError::Io { path, op, source } => {
                write!(f, "{}: cannot {op}: {source}", path.display())
            }
            GgufError::Malformed { context, offset, reason } => {
                write!(f, "{context} at byte offset {offset}: {reason}")
            }
            GgufError::UnknownType { tensor, offset, id, dialects, hint } => {
                write!(
                    f,
                    "tensor '{tensor}': type id {id} (at byte offset {offset}) names no format \
                     lowbit knows in {dialects}"
                )?;
                if !hint.is_empty() {
                    write!(f, "; {hint}")?;
                }
                Ok(())
            }
            GgufError::AmbiguousType { tensor, offset, id, readings } => {
                write!(
                    f,
                    "tensor '{tensor}': type id {id} (at byte offset {offset}) is ambiguous: "
                )?;
                for (i, (format, ds)) in readings.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" or ")?;
                    }
                    write!(f, "{format} (in {})", dialects_text(ds))?;
                }
                f.write_str("; state the dialect (--dialect) to read it")
            }
            GgufError::Dialect { reason } => write!(f, "dialect: {reason}"),
            GgufError::Write { reason } => write!(f, "GGUF writer: {reason}"),
            GgufError::InFile { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for GgufError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GgufError::Io { source, .. } => Some(source),
            GgufError::InFile { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
