//! GGUF metadata values: the thirteen value types of the GGUF spec and a typed value tree.
//!
//! Type codes and layouts: ggml `docs/gguf.md` (`gguf_metadata_value_type`) and gguf-py
//! `gguf/constants.py` `GGUFValueType` (UINT8 = 0 ... FLOAT64 = 12). Arrays carry their element
//! type, so an empty array keeps it, and arrays may nest.
//! What must not live here: byte parsing (`reader.rs`) and serialisation (`writer.rs`).

use std::fmt::{self, Write as _};

/// A GGUF metadata value type (the `u32` code before every value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// `u8` (code 0).
    U8,
    /// `i8` (code 1).
    I8,
    /// `u16` (code 2).
    U16,
    /// `i16` (code 3).
    I16,
    /// `u32` (code 4).
    U32,
    /// `i32` (code 5).
    I32,
    /// `f32` (code 6).
    F32,
    /// One byte, 0 or 1 (code 7).
    Bool,
    /// `u64` length + UTF-8 bytes (code 8).
    String,
    /// `u32` element type + `u64` count + elements (code 9).
    Array,
    /// `u64` (code 10).
    U64,
    /// `i64` (code 11).
    I64,
    /// `f64` (code 12).
    F64,
}

impl ValueType {
    /// Every value type, in code order.
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::String,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// The type with GGUF code `code`, if there is one.
    pub fn from_code(code: u32) -> Option<ValueType> {
        usize::try_from(code).ok().and_then(|i| ValueType::ALL.get(i).copied())
    }

    /// The GGUF code.
    pub fn code(self) -> u32 {
        ValueType::ALL.iter().position(|t| *t == self).map_or(u32::MAX, |i| i as u32)
    }

    /// gguf-py's name of the type (`UINT8`, `FLOAT32`, `STRING`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "UINT8",
            ValueType::I8 => "INT8",
            ValueType::U16 => "UINT16",
            ValueType::I16 => "INT16",
            ValueType::U32 => "UINT32",
            ValueType::I32 => "INT32",
            ValueType::F32 => "FLOAT32",
            ValueType::Bool => "BOOL",
            ValueType::String => "STRING",
            ValueType::Array => "ARRAY",
            ValueType::U64 => "UINT64",
            ValueType::I64 => "INT64",
            ValueType::F64 => "FLOAT64",
        }
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }

    /// The fewest bytes one value of this type can occupy in a file (a string's length field,
    /// an array's element type and count).
    pub fn min_size(self) -> usize {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.fixed_size().unwrap_or(1),
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An array value: its element type and items (every item of that type).
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// The element type (kept for empty arrays).
    pub elem: ValueType,
    /// The items, each of type `elem`.
    pub items: Vec<Value>,
}

/// A GGUF metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array (possibly of arrays).
    Array(Array),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

impl Value {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// An array of strings.
    pub fn string_array<S: AsRef<str>>(items: &[S]) -> Value {
        Value::Array(Array {
            elem: ValueType::String,
            items: items.iter().map(|s| Value::String(s.as_ref().to_owned())).collect(),
        })
    }

    /// The value as a non-negative integer, for any integer type holding one.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Bytes this value occupies in a GGUF file (without its leading type code), or `None` on
    /// overflow.
    pub fn encoded_len(&self) -> Option<u64> {
        match self {
            Value::String(s) => 8u64.checked_add(s.len() as u64),
            Value::Array(a) => a
                .items
                .iter()
                .try_fold(12u64, |acc, v| v.encoded_len().and_then(|n| acc.checked_add(n))),
            v => v.value_type().fixed_size().map(|n| n as u64),
        }
    }

    /// A one-line rendering with arrays abbreviated to their first `max_items` items (and
    /// strings to 80 characters), for `lowbit inspect`.
    pub fn abbreviated(&self, max_items: usize) -> String {
        let mut s = String::new();
        self.render(&mut s, max_items);
        s
    }

    fn render(&self, out: &mut String, max_items: usize) {
        match self {
            Value::U8(v) => write!(out, "{v}"),
            Value::I8(v) => write!(out, "{v}"),
            Value::U16(v) => write!(out, "{v}"),
            Value::I16(v) => write!(out, "{v}"),
            Value::U32(v) => write!(out, "{v}"),
            Value::I32(v) => write!(out, "{v}"),
            Value::U64(v) => write!(out, "{v}"),
            Value::I64(v) => write!(out, "{v}"),
            Value::F32(v) => write!(out, "{v:?}"),
            Value::F64(v) => write!(out, "{v:?}"),
            Value::Bool(v) => write!(out, "{v}"),
            Value::String(v) => {
                let short: String = v.chars().take(80).collect();
                let more = if short.len() < v.len() { "..." } else { "" };
                write!(out, "{short:?}{more}")
            }
            Value::Array(a) => {
                let _ = write!(out, "[{} x {}]", a.elem, a.items.len());
                if !a.items.is_empty() && max_items > 0 {
                    out.push_str(" [");
                    for (i, v) in a.items.iter().take(max_items).enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        v.render(out, max_items);
                    }
                    if a.items.len() > max_items {
                        out.push_str(", ...");
                    }
                    out.push(']');
                }
                Ok(())
            }
        }
        .unwrap_or(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for (i, t) in ValueType::ALL.iter().enumerate() {
            assert_eq!(t.code(), i as u32);
            assert_eq!(ValueType::from_code(i as u32), Some(*t));
        }
        assert_eq!(ValueType::from_code(13), None);
        assert_eq!(ValueType::from_code(u32::MAX), None);
    }

    #[test]
    fn abbreviation() {
        let v =
            Value::Array(Array { elem: ValueType::U32, items: (0..10).map(Value::U32).collect() });
        assert_eq!(v.abbreviated(3), "[UINT32 x 10] [0, 1, 2, ...]");
        assert_eq!(Value::String("ab".into()).abbreviated(3), "\"ab\"");
        assert_eq!(v.encoded_len(), Some(12 + 40));
    }
}
