//! [`MetaValue`]: a plain metadata value (the GGUF value types lowbit's quantization pieces
//! produce or consume), so these modules need no GGUF reader or writer. The lead maps it to and
//! from the GGUF module's own value type. What must not live here: encoding to bytes.

use std::fmt;

/// One metadata value. Arrays are homogeneous by construction (one variant per element type).
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// GGUF `UINT8`.
    U8(u8),
    /// GGUF `UINT32`.
    U32(u32),
    /// GGUF `INT32`.
    I32(i32),
    /// GGUF `UINT64`.
    U64(u64),
    /// GGUF `INT64`.
    I64(i64),
    /// GGUF `FLOAT32`.
    F32(f32),
    /// GGUF `BOOL`.
    Bool(bool),
    /// GGUF `STRING` (UTF-8).
    String(String),
    /// GGUF `ARRAY` of `STRING`.
    StringArray(Vec<String>),
    /// GGUF `ARRAY` of `FLOAT32`.
    F32Array(Vec<f32>),
    /// GGUF `ARRAY` of `INT32`.
    I32Array(Vec<i32>),
}

impl MetaValue {
    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(u64::from(v)),
            MetaValue::U32(v) => Some(u64::from(v)),
            MetaValue::U64(v) => Some(v),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The string, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The GGUF type name of the value, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            MetaValue::U8(_) => "u8",
            MetaValue::U32(_) => "u32",
            MetaValue::I32(_) => "i32",
            MetaValue::U64(_) => "u64",
            MetaValue::I64(_) => "i64",
            MetaValue::F32(_) => "f32",
            MetaValue::Bool(_) => "bool",
            MetaValue::String(_) => "string",
            MetaValue::StringArray(_) => "array of string",
            MetaValue::F32Array(_) => "array of f32",
            MetaValue::I32Array(_) => "array of i32",
        }
    }
}

impl fmt::Display for MetaValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaValue::U8(v) => write!(f, "{v}"),
            MetaValue::U32(v) => write!(f, "{v}"),
            MetaValue::I32(v) => write!(f, "{v}"),
            MetaValue::U64(v) => write!(f, "{v}"),
            MetaValue::I64(v) => write!(f, "{v}"),
            MetaValue::F32(v) => write!(f, "{v}"),
            MetaValue::Bool(v) => write!(f, "{v}"),
            MetaValue::String(s) => write!(f, "{s:?}"),
            MetaValue::StringArray(a) => write!(f, "[{} strings]", a.len()),
            MetaValue::F32Array(a) => write!(f, "[{} f32]", a.len()),
            MetaValue::I32Array(a) => write!(f, "[{} i32]", a.len()),
        }
    }
}
