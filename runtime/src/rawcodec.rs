//! Raw-file codec conversion behind `lowbit codec`: little-endian f32 files to encoded rows of
//! a format and back, with errors that name the file and the byte offset, and outputs that are
//! either complete or absent (written to a temporary file in the output's directory, then
//! renamed over the target).
//!
//! Raw files carry no header: the caller says the format and, where needed, the row length K.
//! What must not live here: codec logic (that is `lowbit_core::codec`'s) and argument parsing
//! (that is the binary's).

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use lowbit_core::error::Buffer;
use lowbit_core::{codec, EncodeOptions, Error as CoreError, FormatId, Rule};

/// What can go wrong converting files. Every variant names the file it is about.
#[derive(Debug)]
pub enum CliError {
    /// Reading or writing a file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done ("read", "write", ...).
        op: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// The core rejected the data; byte offsets in `source` are offsets into `path`.
    Core {
        /// The file the offending data came from.
        path: PathBuf,
        /// The core's error.
        source: CoreError,
        /// Extra context (e.g. the byte offset of an element), empty if none.
        context: String,
    },
    /// The file's size or content does not fit the request.
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong, with offsets.
        msg: String,
    },
    /// The arguments do not fit together.
    Usage(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Io { path, op, source } => {
                write!(f, "{}: cannot {op}: {source}", path.display())
            }
            CliError::Core { path, source, context } => {
                write!(f, "{}: {source}{context}", path.display())
            }
            CliError::Input { path, msg } => write!(f, "{}: {msg}", path.display()),
            CliError::Usage(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Io { source, .. } => Some(source),
            CliError::Core { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result with a [`CliError`].
pub type Result<T, E = CliError> = std::result::Result<T, E>;

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|source| CliError::Io { path: path.to_owned(), op: "read", source })
}

/// Converts little-endian bytes (a multiple of 4 long) to f32 values.
pub fn f32_from_le(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Converts f32 values to little-endian bytes.
pub fn f32_to_le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Reads a raw little-endian f32 file; an empty file or trailing bytes are errors naming the
/// offset of the incomplete value.
pub fn read_f32_file(path: &Path) -> Result<Vec<f32>> {
    let bytes = read(path)?;
    if bytes.is_empty() {
        return Err(CliError::Input { path: path.to_owned(), msg: "file is empty".into() });
    }
    if bytes.len() % 4 != 0 {
        let off = bytes.len() / 4 * 4;
        return Err(CliError::Input {
            path: path.to_owned(),
            msg: format!(
                "{} bytes is not a whole number of little-endian f32 values: the value at \
                 offset {off} is truncated ({} of 4 bytes)",
                bytes.len(),
                bytes.len() - off
            ),
        });
    }
    Ok(f32_from_le(&bytes))
}

static TMP_COUNTER: AtomicU32 = AtomicU32::new(0);

/// Writes `bytes` to `path` atomically: into a new temporary file in the same directory,
/// flushed to disk, then renamed over `path`. On any failure the temporary file is removed and
/// `path` is left as it was (absent, or its old contents).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io_err = |op, source| CliError::Io { path: path.to_owned(), op, source };
    let name = path
        .file_name()
        .ok_or_else(|| CliError::Usage(format!("{}: output path names no file", path.display())))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(
        ".lowbit-tmp-{}-{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io_err("create a temporary file beside", e))?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_err("write", e));
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(io_err("replace", e));
    }
    Ok(())
}

/// Adds the byte offset of an element of an f32 file to a core error about that element.
fn element_context(e: &CoreError) -> String {
    match *e {
        CoreError::BadInput { index, .. } | CoreError::OutOfRange { index, .. } => {
            format!(" (byte offset {})", index * 4)
        }
        _ => String::new(),
    }
}

/// Which file a core encode error is about: the importance file for importance errors.
fn encode_error(input: &Path, imatrix: Option<&Path>, e: CoreError) -> CliError {
    let path = match (e, imatrix) {
        (CoreError::BadInput { buffer: Buffer::Importance, .. }, Some(p))
        | (CoreError::Length { buffer: Buffer::Importance, .. }, Some(p)) => p,
        _ => input,
    };
    CliError::Core { path: path.to_owned(), context: element_context(&e), source: e }
}

/// The row length for encoding `n` values, from `--k` or (formats without a row header) the
/// whole input as one row.
fn encode_k(format: FormatId, input: &Path, n: usize, k: Option<usize>) -> Result<usize> {
    let g = format.geometry();
    let k = match k {
        Some(k) => k,
        None if g.row_header_bytes == 0 => n,
        None => {
            return Err(CliError::Usage(format!(
                "--k is required for {format}: each row carries a {}-byte header",
                g.row_header_bytes
            )))
        }
    };
    format.row_bytes(k).map_err(|e| CliError::Core {
        path: input.to_owned(),
        source: e,
        context: String::new(),
    })?;
    if n % k != 0 {
        let last = n / k * k;
        return Err(CliError::Input {
            path: input.to_owned(),
            msg: format!(
                "{n} values is not a whole number of rows of K = {k}: the row at element {last} \
                 (byte offset {}) is truncated",
                last * 4
            ),
        });
    }
    Ok(k)
}

/// The row length for decoding `len` bytes, from `--k` or (formats without a row header) the
/// whole file as one row, with an error naming the offset of a truncated block or row.
fn decode_k(format: FormatId, input: &Path, len: usize, k: Option<usize>) -> Result<usize> {
    let g = format.geometry();
    if len == 0 {
        return Err(CliError::Input { path: input.to_owned(), msg: "file is empty".into() });
    }
    let (k, unit, what) = match k {
        Some(k) => {
            let rb = format.row_bytes(k).map_err(|e| CliError::Core {
                path: input.to_owned(),
                source: e,
                context: String::new(),
            })?;
            (k, rb, format!("rows of K = {k} ({rb} bytes)"))
        }
        None if g.row_header_bytes == 0 => (
            len / g.block_bytes * g.block_elems,
            g.block_bytes,
            format!("blocks of {} bytes", g.block_bytes),
        ),
        None => {
            return Err(CliError::Usage(format!(
                "--k is required for {format}: each row carries a {}-byte header",
                g.row_header_bytes
            )))
        }
    };
    if len % unit != 0 || k == 0 {
        let off = len / unit * unit;
        return Err(CliError::Input {
            path: input.to_owned(),
            msg: format!(
                "{len} bytes is not a whole number of {format} {what}: the one at offset {off} \
                 is truncated ({} of {unit} bytes)",
                len - off
            ),
        });
    }
    Ok(k)
}

/// What [`encode_file`] and [`decode_file`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The format.
    pub format: FormatId,
    /// Elements per row.
    pub k: usize,
    /// Number of rows.
    pub rows: usize,
    /// Bytes of encoded data.
    pub encoded_bytes: usize,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.k * self.rows;
        write!(
            f,
            "{}: {n} values ({} row{} of K = {}), {} bytes, {:.4} bits per weight",
            self.format,
            self.rows,
            if self.rows == 1 { "" } else { "s" },
            self.k,
            self.encoded_bytes,
            self.encoded_bytes as f64 * 8.0 / n as f64
        )
    }
}

/// The request of `lowbit codec encode`.
#[derive(Clone, Copy, Debug)]
pub struct EncodeRequest<'a> {
    /// Target format.
    pub format: FormatId,
    /// Raw little-endian f32 input.
    pub input: &'a Path,
    /// Row length; `None` = the whole input as one row (formats without a row header only).
    pub k: Option<usize>,
    /// Encoder rule.
    pub rule: Rule,
    /// Raw little-endian f32 file of K importance weights, applied to every row.
    pub imatrix: Option<&'a Path>,
}

/// Encodes a raw f32 file in memory; returns the encoded bytes and a summary.
pub fn encode_bytes(req: &EncodeRequest<'_>) -> Result<(Vec<u8>, Vec<f32>, Summary)> {
    let x = read_f32_file(req.input)?;
    let k = encode_k(req.format, req.input, x.len(), req.k)?;
    let weights = match req.imatrix {
        Some(p) => {
            let w = read_f32_file(p)?;
            if w.len() != k {
                return Err(CliError::Input {
                    path: p.to_owned(),
                    msg: format!(
                        "{} importance weights, expected one per column: K = {k}",
                        w.len()
                    ),
                });
            }
            Some(w)
        }
        None => None,
    };
    let opts = EncodeOptions { rule: req.rule, importance: weights.as_deref() };
    let bytes = codec::encode_to_vec(req.format, k, &x, &opts)
        .map_err(|e| encode_error(req.input, req.imatrix, e))?;
    let summary = Summary { format: req.format, k, rows: x.len() / k, encoded_bytes: bytes.len() };
    Ok((bytes, x, summary))
}

/// `lowbit codec encode`: encodes a raw f32 file into `output` (written atomically).
pub fn encode_file(req: &EncodeRequest<'_>, output: &Path) -> Result<Summary> {
    let (bytes, _, summary) = encode_bytes(req)?;
    write_atomic(output, &bytes)?;
    Ok(summary)
}

/// Decodes a file of encoded rows in memory.
pub fn decode_bytes(
    format: FormatId,
    input: &Path,
    k: Option<usize>,
) -> Result<(Vec<f32>, Summary)> {
    let bytes = read(input)?;
    let k = decode_k(format, input, bytes.len(), k)?;
    let values = codec::decode_to_vec(format, k, &bytes).map_err(|e| CliError::Core {
        path: input.to_owned(),
        source: e,
        context: String::new(),
    })?;
    let summary = Summary { format, k, rows: values.len() / k, encoded_bytes: bytes.len() };
    Ok((values, summary))
}

/// `lowbit codec decode`: decodes a file of encoded rows to raw f32 in `output` (written
/// atomically).
pub fn decode_file(
    format: FormatId,
    input: &Path,
    output: &Path,
    k: Option<usize>,
) -> Result<Summary> {
    let (values, summary) = decode_bytes(format, input, k)?;
    write_atomic(output, &f32_to_le(&values))?;
    Ok(summary)
}

/// Error statistics of a reconstruction `y` of `x`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorStats {
    /// sqrt(sum (x - y)^2 / sum x^2), 0 when x is all zero and y equals it.
    pub nrmse: f64,
    /// max |x - y|.
    pub max_abs: f64,
}

/// Computes [`ErrorStats`] in f64 (`x` and `y` of equal length).
pub fn error_stats(x: &[f32], y: &[f32]) -> ErrorStats {
    let (mut num, mut den, mut max_abs) = (0f64, 0f64, 0f64);
    for (&a, &b) in x.iter().zip(y) {
        let d = f64::from(a) - f64::from(b);
        num += d * d;
        den += f64::from(a) * f64::from(a);
        max_abs = max_abs.max(d.abs());
    }
    let nrmse = if den > 0.0 {
        (num / den).sqrt()
    } else if num == 0.0 {
        0.0
    } else {
        f64::INFINITY
    };
    ErrorStats { nrmse, max_abs }
}

/// `lowbit codec roundtrip`: encodes a raw f32 file, decodes the result, and returns the
/// summary and error statistics; writes the decoded values to `output` if given.
pub fn roundtrip_file(
    req: &EncodeRequest<'_>,
    output: Option<&Path>,
) -> Result<(Summary, ErrorStats)> {
    let (bytes, x, summary) = encode_bytes(req)?;
    let y = codec::decode_to_vec(req.format, summary.k, &bytes).map_err(|e| CliError::Core {
        path: req.input.to_owned(),
        source: e,
        context: " (decoding the freshly encoded bytes)".into(),
    })?;
    if let Some(out) = output {
        write_atomic(out, &f32_to_le(&y))?;
    }
    Ok((summary, error_stats(&x, &y)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lowbit-rawcodec-{tag}-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn f16_round_trip_through_files() {
        let d = tmpdir("f16");
        let x: Vec<f32> = (0..64).map(|i| i as f32 * 0.25 - 3.0).collect();
        let input = d.join("x.f32");
        fs::write(&input, f32_to_le(&x)).unwrap();
        let req = EncodeRequest {
            format: FormatId::F16,
            input: &input,
            k: None,
            rule: Rule::Reference,
            imatrix: None,
        };
        let s = encode_file(&req, &d.join("x.f16")).unwrap();
        assert_eq!((s.k, s.rows, s.encoded_bytes), (64, 1, 128));
        let s = decode_file(FormatId::F16, &d.join("x.f16"), &d.join("y.f32"), Some(16)).unwrap();
        assert_eq!(s.rows, 4);
        assert_eq!(read_f32_file(&d.join("y.f32")).unwrap(), x);
        // No temporary files left behind.
        let names: Vec<_> = fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn truncated_inputs_name_the_offset() {
        let d = tmpdir("trunc");
        let input = d.join("x.f32");
        fs::write(&input, [0u8; 10]).unwrap();
        let e = read_f32_file(&input).unwrap_err().to_string();
        assert!(e.contains("x.f32") && e.contains("offset 8"), "{e}");
        let e = decode_k(FormatId::Q8_0, &input, 70, None).unwrap_err().to_string();
        assert!(e.contains("offset 68") && e.contains("2 of 34 bytes"), "{e}");
        let e = decode_k(FormatId::Hfp4G32, &input, 70, None).unwrap_err().to_string();
        assert!(e.contains("--k is required"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn stats() {
        let s = error_stats(&[3.0, 4.0], &[3.0, 3.5]);
        assert_eq!(s.max_abs, 0.5);
        assert!((s.nrmse - 0.1).abs() < 1e-12);
        assert_eq!(error_stats(&[0.0], &[0.0]).nrmse, 0.0);
    }
}
