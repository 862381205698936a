//! Reads a llama.cpp importance matrix file of either layout, told apart by content: the GGUF
//! layout (magic `GGUF`, read through `crate::gguf`, interpreted by
//! [`quant::imatrix::from_gguf_parts`](crate::quant::imatrix::from_gguf_parts)) or the legacy
//! `.dat` layout ([`quant::imatrix::read_legacy`](crate::quant::imatrix::read_legacy)).
//! Layouts and their sources are documented in [`crate::quant::imatrix`].
//! What must not live here: applying the weights (the quantize pipeline).

use std::path::Path;

use lowbit_core::FormatId;

use super::CmdError;
use crate::gguf::{self, GgufFile, Value, ValueType};
use crate::quant::imatrix::{self, GgufImatrixTensor, ImportanceMatrix};
use crate::quant::MetaValue;

/// A GGUF metadata value as the quantization modules' plain value, where one fits (the
/// imatrix reader needs strings, string arrays and integers).
fn meta_value(v: &Value) -> Option<MetaValue> {
    Some(match v {
        Value::U8(x) => MetaValue::U8(*x),
        Value::I8(x) => MetaValue::I32(i32::from(*x)),
        Value::U16(x) => MetaValue::U32(u32::from(*x)),
        Value::I16(x) => MetaValue::I32(i32::from(*x)),
        Value::U32(x) => MetaValue::U32(*x),
        Value::I32(x) => MetaValue::I32(*x),
        Value::U64(x) => MetaValue::U64(*x),
        Value::I64(x) => MetaValue::I64(*x),
        Value::F32(x) => MetaValue::F32(*x),
        Value::Bool(x) => MetaValue::Bool(*x),
        Value::String(s) => MetaValue::String(s.clone()),
        Value::F64(_) => return None,
        Value::Array(a) => match a.elem {
            ValueType::String => MetaValue::StringArray(
                a.items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect(),
            ),
            ValueType::F32 => MetaValue::F32Array(
                a.items
                    .iter()
                    .filter_map(|i| if let Value::F32(x) = i { Some(*x) } else { None })
                    .collect(),
            ),
            ValueType::I32 => MetaValue::I32Array(
                a.items
                    .iter()
                    .filter_map(|i| if let Value::I32(x) = i { Some(*x) } else { None })
                    .collect(),
            ),
            _ => return None,
        },
    })
}

/// Reads the importance matrix at `path` (GGUF layout or legacy `.dat`, by content).
pub fn load(path: &Path) -> Result<ImportanceMatrix, CmdError> {
    let at = |e: &dyn std::fmt::Display| CmdError::new(format!("imatrix {}: {e}", path.display()));
    let bytes = std::fs::read(path).map_err(|e| at(&e))?;
    if bytes.len() >= 4 && bytes[..4] == gguf::MAGIC {
        let g = GgufFile::from_bytes(bytes, None).map_err(|e| at(&e))?;
        let mut values: Vec<Vec<f32>> = Vec::with_capacity(g.tensors().len());
        for t in g.tensors() {
            if t.format != FormatId::F32 {
                return Err(at(&format!(
                    "tensor {} is {}, the imatrix layout stores F32",
                    t.name, t.format
                )));
            }
            let data = g.tensor_data(t);
            values.push(
                data.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            );
        }
        let parts: Vec<GgufImatrixTensor<'_>> = g
            .tensors()
            .iter()
            .zip(&values)
            .map(|(t, v)| GgufImatrixTensor { name: &t.name, dims: &t.dims, data: v })
            .collect();
        let meta: Vec<(String, MetaValue)> = g
            .metadata()
            .iter()
            .filter_map(|(k, v)| meta_value(v).map(|m| (k.clone(), m)))
            .collect();
        imatrix::from_gguf_parts(&parts, &meta).map_err(|e| at(&e))
    } else {
        imatrix::read_legacy(&bytes).map_err(|e| at(&e))
    }
}
