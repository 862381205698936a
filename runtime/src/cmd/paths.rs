//! Output-path checks shared by the commands that write a file: the output must not be the
//! input, by path (after resolving `.`, `..` and symbolic links) or, on Unix, by file identity
//! (a hard link to the input).
//! What must not live here: writing (the GGUF writer writes to a temporary file and renames).

use std::path::{Path, PathBuf};

use super::CmdError;

/// `path` made absolute with every symbolic link resolved; for a file that does not exist yet,
/// its directory resolved and its name appended.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = path.canonicalize() {
        return Some(p);
    }
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(dir.canonicalize().ok()?.join(name))
}

#[cfg(unix)]
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_: &Path, _: &Path) -> bool {
    false
}

/// Refuses an output that is the input (same resolved path, or a hard link to it).
pub fn refuse_same(input: &Path, output: &Path) -> Result<(), CmdError> {
    let same_path = match (resolved(input), resolved(output)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    if same_path || same_file(input, output) {
        return Err(CmdError::new(format!(
            "the output {} is the input {}; write to another file (the input is left untouched)",
            output.display(),
            input.display()
        )));
    }
    Ok(())
}
