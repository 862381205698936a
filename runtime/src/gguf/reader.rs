//! Parsing GGUF bytes: header, metadata, tensor infos, data section; and [`GgufFile`], a parsed
//! file over a memory map or an owned buffer.
//!
//! Layout (ggml `docs/gguf.md`; gguf-py `gguf/gguf_reader.py` reads the same): magic `GGUF`,
//! `u32` version, `u64` tensor count, `u64` metadata count, the metadata entries (`u64`-length
//! key, `u32` value type, value), the tensor infos (name, `u32` n_dims, `u64` dims in ggml order,
//! `u32` type id, `u64` offset relative to the data section), padding to `general.alignment`
//! (default 32), then the data. Little-endian throughout. Versions 2 and 3 share this layout;
//! version 1 (32-bit counts) is rejected.
//!
//! Every count, length, offset and size is checked, overflow-safe, against the bytes that are
//! actually there before it is used; a failure names the key or tensor and the byte offset.
//! Checks beyond gguf-py's, following llama.cpp's loader (`ggml/src/gguf.cpp`): duplicate keys
//! and tensor names, more than 4 dims, zero dims, offsets that are not multiples of the
//! alignment, tensors that overlap or run past the end of the file.
//! What must not live here: the dialect rules (`dialect.rs`) and writing (`writer.rs`).

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

use lowbit_core::{Dialect, FormatId};

use super::dialect::{self, DialectChoice};
use super::error::{Context, GgufError};
use super::mmap::Map;
use super::value::{Array, Value, ValueType};
use super::{tensor_bytes, DEFAULT_ALIGNMENT, KEY_ALIGNMENT, MAGIC, MAX_DIMS, MAX_NESTING};

type Result<T> = std::result::Result<T, GgufError>;

/// One tensor's info, as read (and checked) from the file.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// The tensor's name.
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the row length (the contiguous one).
    pub dims: Vec<u64>,
    /// The format its type id names under the file's dialect.
    pub format: FormatId,
    /// The raw type id in the file.
    pub type_id: u32,
    /// Offset of the data relative to the data section, as stored.
    pub offset: u64,
    /// Byte offset of this tensor's info in the file.
    pub info_offset: u64,
    start: usize,
    len: usize,
}

impl TensorInfo {
    /// Bytes of the tensor's data.
    pub fn bytes(&self) -> usize {
        self.len
    }

    /// Absolute byte offset of the tensor's data in the file.
    pub fn data_offset(&self) -> u64 {
        self.start as u64
    }

    /// Row length (`dims[0]`; 1 for a tensor with no dims).
    pub fn row_len(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }

    /// Number of rows (the product of `dims[1..]`).
    pub fn rows(&self) -> u64 {
        // Checked when the file was parsed: the product fits (bytes >= rows).
        self.dims.iter().skip(1).product()
    }

    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Bits per weight of the stored data (row headers included).
    pub fn bits_per_weight(&self) -> f64 {
        self.len as f64 * 8.0 / self.elements() as f64
    }
}

/// Everything in a GGUF file except the tensor data: what [`parse`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufHeader {
    /// The GGUF version (2 or 3).
    pub version: u32,
    /// The data alignment (`general.alignment`, default 32).
    pub alignment: u64,
    /// Absolute byte offset of the data section.
    pub data_offset: u64,
    /// The dialect(s) the type ids were read under, and why.
    pub dialect: DialectChoice,
    /// Metadata entries in file order.
    pub metadata: Vec<(String, Value)>,
    /// Tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: u64, ctx: &Context, what: &str) -> Result<&'a [u8]> {
        let left = self.remaining();
        match usize::try_from(n) {
            Ok(n) if n <= left => {
                let s = &self.buf[self.pos..self.pos + n];
                self.pos += n;
                Ok(s)
            }
            _ => Err(GgufError::malformed(
                ctx.clone(),
                self.offset(),
                format!("{what} needs {n} bytes but only {left} remain (truncated file?)"),
            )),
        }
    }

    fn array<const N: usize>(&mut self, ctx: &Context, what: &str) -> Result<[u8; N]> {
        let s = self.take(N as u64, ctx, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, ctx: &Context, what: &str) -> Result<u32> {
        self.array::<4>(ctx, what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, ctx: &Context, what: &str) -> Result<u64> {
        self.array::<8>(ctx, what).map(u64::from_le_bytes)
    }

    fn string(&mut self, ctx: &Context, what: &str) -> Result<String> {
        let at = self.offset();
        let len = self.u64(ctx, what)?;
        if len > self.remaining() as u64 {
            // Point at the length field, the value that is wrong.
            return Err(GgufError::malformed(
                ctx.clone(),
                at,
                format!(
                    "{what} of {len} bytes runs past the end ({} bytes remain)",
                    self.remaining()
                ),
            ));
        }
        let bytes = self.take(len, ctx, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| {
            GgufError::malformed(
                ctx.clone(),
                at + 8 + e.utf8_error().valid_up_to() as u64,
                format!("{what} is not valid UTF-8"),
            )
        })
    }

    fn value(&mut self, t: ValueType, ctx: &Context, depth: u32) -> Result<Value> {
        let at = self.offset();
        Ok(match t {
            ValueType::U8 => Value::U8(self.array::<1>(ctx, "u8 value")?[0]),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.array(ctx, "i8 value")?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(ctx, "u16 value")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(ctx, "i16 value")?)),
            ValueType::U32 => Value::U32(self.u32(ctx, "u32 value")?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(ctx, "i32 value")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(ctx, "f32 value")?)),
            ValueType::U64 => Value::U64(self.u64(ctx, "u64 value")?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(ctx, "i64 value")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(ctx, "f64 value")?)),
            ValueType::Bool => match self.array::<1>(ctx, "bool value")?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => {
                    return Err(GgufError::malformed(
                        ctx.clone(),
                        at,
                        format!("bool value byte is {b}, not 0 or 1"),
                    ))
                }
            },
            ValueType::String => Value::String(self.string(ctx, "string value")?),
            ValueType::Array => {
                if depth >= MAX_NESTING {
                    return Err(GgufError::malformed(
                        ctx.clone(),
                        at,
                        format!("arrays nested deeper than {MAX_NESTING} levels"),
                    ));
                }
                let code = self.u32(ctx, "array element type")?;
                let elem = ValueType::from_code(code).ok_or_else(|| {
                    GgufError::malformed(
                        ctx.clone(),
                        at,
                        format!("unknown array element type {code}"),
                    )
                })?;
                let count_at = self.offset();
                let count = self.u64(ctx, "array length")?;
                // Every element takes at least min_size bytes: reject absurd counts before
                // allocating or looping.
                let fits = count
                    .checked_mul(elem.min_size() as u64)
                    .is_some_and(|need| need <= self.remaining() as u64);
                if !fits {
                    return Err(GgufError::malformed(
                        ctx.clone(),
                        count_at,
                        format!(
                            "array of {count} {elem} values cannot fit in the {} bytes that remain",
                            self.remaining()
                        ),
                    ));
                }
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(elem, ctx, depth + 1)?);
                }
                Value::Array(Array { elem, items })
            }
        })
    }
}

fn align_up(x: u64, a: u64) -> Option<u64> {
    x.checked_add(a - 1).map(|v| v / a * a)
}

/// Parses a whole GGUF file held in `bytes` under `dialect` (or the dialect its metadata
/// names; see [`dialect::choose`]). Checks everything; the tensors' data ranges lie inside
/// `bytes`.
pub fn parse(bytes: &[u8], dialect: Option<Dialect>) -> Result<GgufHeader> {
    let mut c = Cursor { buf: bytes, pos: 0 };
    let h = Context::Header;
    let magic = c.array::<4>(&h, "magic")?;
    if magic != MAGIC {
        return Err(GgufError::malformed(
            h,
            0,
            format!("magic is {magic:02x?}, not \"GGUF\": not a GGUF file"),
        ));
    }
    let version = c.u32(&h, "version")?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(GgufError::malformed(
                h,
                4,
                "GGUF version 1 (32-bit counts, 2023) is not supported; convert the file with a \
                 current llama.cpp",
            ))
        }
        v if (1..=3).contains(&v.swap_bytes()) => {
            return Err(GgufError::malformed(h, 4, "big-endian GGUF is not supported"))
        }
        v => return Err(GgufError::malformed(h, 4, format!("unknown GGUF version {v}"))),
    }
    let tensor_count = c.u64(&h, "tensor count")?;
    let kv_count_at = c.offset();
    let kv_count = c.u64(&h, "metadata count")?;
    // A metadata entry takes at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 4 + 8.
    if kv_count.checked_mul(13).is_none_or(|n| n > c.remaining() as u64) {
        return Err(GgufError::malformed(
            h,
            kv_count_at,
            format!("metadata count {kv_count} cannot fit in a {}-byte file", bytes.len()),
        ));
    }

    let mut metadata: Vec<(String, Value)> = Vec::with_capacity(kv_count as usize);
    let mut keys: HashSet<String> = HashSet::new();
    for i in 0..kv_count {
        let key_at = c.offset();
        let key = c.string(&Context::KeyName(i), "key")?;
        let ctx = Context::Key(key.clone());
        if !keys.insert(key.clone()) {
            return Err(GgufError::malformed(ctx, key_at, "duplicate key"));
        }
        let type_at = c.offset();
        let code = c.u32(&ctx, "value type")?;
        let t = ValueType::from_code(code).ok_or_else(|| {
            GgufError::malformed(ctx.clone(), type_at, format!("unknown value type {code}"))
        })?;
        let v = c.value(t, &ctx, 0)?;
        metadata.push((key, v));
    }

    let alignment = match metadata.iter().find(|(k, _)| k == KEY_ALIGNMENT) {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
        Some((_, v)) => {
            return Err(GgufError::malformed(
                Context::Key(KEY_ALIGNMENT.into()),
                kv_count_at,
                format!("must be a UINT32 power of two, found {}", v.abbreviated(0)),
            ))
        }
    };
    let choice = dialect::choose(dialect, &metadata)?;
    let listed = dialect::listed_formats(&metadata)?;

    let infos_at = c.offset();
    if tensor_count.checked_mul(24).is_none_or(|n| n > c.remaining() as u64) {
        return Err(GgufError::malformed(
            h,
            infos_at,
            format!("tensor count {tensor_count} cannot fit in a {}-byte file", bytes.len()),
        ));
    }
    struct Raw {
        name: String,
        dims: Vec<u64>,
        format: FormatId,
        type_id: u32,
        offset: u64,
        info_offset: u64,
        bytes: u64,
        offset_at: u64,
    }
    let mut raws: Vec<Raw> = Vec::with_capacity(tensor_count as usize);
    let mut names: HashSet<String> = HashSet::new();
    for i in 0..tensor_count {
        let info_offset = c.offset();
        let name = c.string(&Context::TensorName(i), "tensor name")?;
        let ctx = Context::Tensor(name.clone());
        if !names.insert(name.clone()) {
            return Err(GgufError::malformed(ctx, info_offset, "duplicate tensor name"));
        }
        let nd_at = c.offset();
        let n_dims = c.u32(&ctx, "dimension count")?;
        if n_dims as usize > MAX_DIMS {
            return Err(GgufError::malformed(
                ctx,
                nd_at,
                format!("{n_dims} dimensions (ggml allows at most {MAX_DIMS})"),
            ));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            let at = c.offset();
            let v = c.u64(&ctx, "dimension")?;
            if v == 0 {
                return Err(GgufError::malformed(ctx, at, format!("dimension {d} is 0")));
            }
            dims.push(v);
        }
        let type_at = c.offset();
        let type_id = c.u32(&ctx, "type id")?;
        let format = dialect::resolve(&choice, type_id, &name, type_at)?;
        if let Some(list) = &listed {
            if !list.contains(&format) {
                return Err(GgufError::Dialect {
                    reason: format!(
                        "tensor '{name}' (type id {type_id} at byte offset {type_at}) reads as \
                         {format} under {choice}, but {} lists only {}",
                        dialect::KEY_FORMATS,
                        list.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
        let bytes = tensor_bytes(format, &dims)
            .map_err(|why| GgufError::malformed(ctx.clone(), nd_at, why))?;
        let offset_at = c.offset();
        let offset = c.u64(&ctx, "data offset")?;
        if offset % alignment != 0 {
            return Err(GgufError::malformed(
                ctx,
                offset_at,
                format!("data offset {offset} is not a multiple of the alignment {alignment}"),
            ));
        }
        raws.push(Raw { name, dims, format, type_id, offset, info_offset, bytes, offset_at });
    }

    let data_offset = align_up(c.offset(), alignment).unwrap_or(u64::MAX);
    let file_len = bytes.len() as u64;
    if !raws.is_empty() && data_offset > file_len {
        return Err(GgufError::malformed(
            Context::Data,
            c.offset(),
            format!("the data section would start at {data_offset}, past the end ({file_len})"),
        ));
    }
    let mut tensors = Vec::with_capacity(raws.len());
    for r in raws {
        let end = data_offset.checked_add(r.offset).and_then(|s| s.checked_add(r.bytes));
        let Some(end) = end.filter(|e| *e <= file_len) else {
            return Err(GgufError::malformed(
                Context::Tensor(r.name),
                r.offset_at,
                format!(
                    "data [{data_offset} + {}, + {} bytes) runs past the end of the {file_len}-byte \
                     file",
                    r.offset, r.bytes
                ),
            ));
        };
        // end <= file_len <= usize::MAX, so both fit.
        tensors.push(TensorInfo {
            name: r.name,
            dims: r.dims,
            format: r.format,
            type_id: r.type_id,
            offset: r.offset,
            info_offset: r.info_offset,
            start: (end - r.bytes) as usize,
            len: r.bytes as usize,
        });
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.start);
    for w in order.windows(2) {
        if w[0].start + w[0].len > w[1].start {
            return Err(GgufError::malformed(
                Context::Tensor(w[1].name.clone()),
                w[1].start as u64,
                format!(
                    "data overlaps tensor '{}' (bytes {}..{})",
                    w[0].name,
                    w[0].start,
                    w[0].start + w[0].len
                ),
            ));
        }
    }
    Ok(GgufHeader { version, alignment, data_offset, dialect: choice, metadata, tensors })
}

#[derive(Debug)]
enum Backing {
    Map(Map),
    Owned(Vec<u8>),
}

/// A parsed GGUF file and its bytes (memory-mapped, or owned).
#[derive(Debug)]
pub struct GgufFile {
    header: GgufHeader,
    bytes: Backing,
}

impl GgufFile {
    /// Maps and parses the file at `path`, reading type ids under `dialect` if given, else
    /// under the dialect its metadata names (see [`dialect::choose`]).
    pub fn open(path: impl AsRef<Path>, dialect: Option<Dialect>) -> Result<GgufFile> {
        let path = path.as_ref();
        let io = |op, source| GgufError::Io { path: path.to_owned(), op, source };
        let file = File::open(path).map_err(|e| io("open", e))?;
        let map = Map::of(&file).map_err(|e| io("map", e))?;
        let header = parse(&map, dialect)
            .map_err(|e| GgufError::InFile { path: path.to_owned(), source: Box::new(e) })?;
        Ok(GgufFile { header, bytes: Backing::Map(map) })
    }

    /// Parses a GGUF file held in memory (tests, fuzzing, small files).
    pub fn from_bytes(bytes: Vec<u8>, dialect: Option<Dialect>) -> Result<GgufFile> {
        let header = parse(&bytes, dialect)?;
        Ok(GgufFile { header, bytes: Backing::Owned(bytes) })
    }

    fn raw(&self) -> &[u8] {
        match &self.bytes {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
        }
    }

    /// Everything but the data.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.header.version
    }

    /// The data alignment.
    pub fn alignment(&self) -> u64 {
        self.header.alignment
    }

    /// The dialect(s) the type ids were read under.
    pub fn dialect(&self) -> &DialectChoice {
        &self.header.dialect
    }

    /// Metadata entries in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.header.metadata
    }

    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.header.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensors.iter().find(|t| t.name == name)
    }

    /// The data of `info`, one of this file's [`tensors`](Self::tensors) (an info from another
    /// file gives an empty slice if its range lies outside this file).
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        self.raw().get(info.start..info.start + info.len).unwrap_or(&[])
    }
}
