//! A model file of either kind lowbit reads, recognised by its content (never its name): GGUF
//! (the magic `GGUF`) or safetensors (an 8-byte little-endian header length, then a JSON
//! object). Both give their tensors as pipeline sources borrowing the memory map.
//! What must not live here: parsing (`crate::gguf`, `crate::safetensors`).

use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use lowbit_core::Dialect;

use super::CmdError;
use crate::gguf::{self, GgufFile, Value};
use crate::quant::pipeline::SourceTensor;
use crate::safetensors::SafeTensors;

/// Which kind of file a path holds, by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// GGUF (starts with `GGUF`).
    Gguf,
    /// safetensors (a header length, then `{`).
    Safetensors,
}

/// Tells a GGUF file from a safetensors file by its first nine bytes, or says why neither.
pub fn sniff(path: &Path) -> Result<FileKind, CmdError> {
    let mut head = [0u8; 9];
    let mut f = File::open(path)
        .map_err(|e| CmdError::new(format!("{}: cannot open: {e}", path.display())))?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(m) => n += m,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CmdError::new(format!("{}: cannot read: {e}", path.display()))),
        }
    }
    if n >= 4 && head[..4] == gguf::MAGIC {
        return Ok(FileKind::Gguf);
    }
    if n == 9 && head[8] == b'{' {
        return Ok(FileKind::Safetensors);
    }
    Err(CmdError::new(format!(
        "{}: neither a GGUF file (magic \"GGUF\") nor a safetensors file (8-byte header \
         length, then a JSON object); its first bytes are {:02x?}",
        path.display(),
        &head[..n]
    )))
}

/// An opened model file.
#[derive(Debug)]
pub enum ModelFile {
    /// A GGUF file.
    Gguf(GgufFile),
    /// A safetensors file.
    Safetensors(SafeTensors),
}

/// A model file and its path.
#[derive(Debug)]
pub struct Model {
    /// The path it was opened from.
    pub path: PathBuf,
    /// The parsed file.
    pub file: ModelFile,
}

impl Model {
    /// Opens `path` as GGUF (type ids read under `dialect`, else the one its metadata names)
    /// or safetensors, by content.
    pub fn open(path: &Path, dialect: Option<Dialect>) -> Result<Model, CmdError> {
        let file = match sniff(path)? {
            FileKind::Gguf => {
                ModelFile::Gguf(GgufFile::open(path, dialect).map_err(CmdError::new)?)
            }
            FileKind::Safetensors => {
                ModelFile::Safetensors(SafeTensors::open(path).map_err(CmdError::new)?)
            }
        };
        Ok(Model { path: path.to_owned(), file })
    }

    /// "GGUF v3 (dialect ...)" or "safetensors".
    pub fn describe(&self) -> String {
        match &self.file {
            ModelFile::Gguf(g) => format!("GGUF v{}, dialect {}", g.version(), g.dialect()),
            ModelFile::Safetensors(_) => "safetensors".to_owned(),
        }
    }

    /// The GGUF metadata, in file order (none for safetensors: its `__metadata__` strings are
    /// not GGUF keys).
    pub fn gguf_metadata(&self) -> &[(String, Value)] {
        match &self.file {
            ModelFile::Gguf(g) => g.metadata(),
            ModelFile::Safetensors(_) => &[],
        }
    }

    /// Every tensor in file order, as a pipeline source borrowing the file's bytes.
    pub fn sources(&self) -> Vec<SourceTensor<'_>> {
        match &self.file {
            ModelFile::Gguf(g) => g
                .tensors()
                .iter()
                .map(|t| SourceTensor {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    format: t.format,
                    data: Cow::Borrowed(g.tensor_data(t)),
                })
                .collect(),
            ModelFile::Safetensors(s) => s
                .tensors()
                .iter()
                .map(|t| SourceTensor {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    format: t.format,
                    data: Cow::Borrowed(s.tensor_data(t)),
                })
                .collect(),
        }
    }
}
