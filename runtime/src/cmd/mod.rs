//! The model-file commands of `lowbit`: `quantize` ([`quantize`]), `dequantize`
//! ([`dequantize`]) and `eval-tensors` ([`eval_tensors`]), with what they share: opening a model
//! file of either kind by its content ([`model`]), reading an importance matrix file of either
//! llama.cpp layout ([`imatrix_file`]), the progress display ([`progress`]) and the output-path
//! checks ([`paths`]).
//!
//! These functions do the work and return reports; the binary parses arguments and prints.
//! What must not live here: codecs (lowbit-core), file layouts (`crate::gguf`,
//! `crate::safetensors`), quantization decisions (`crate::quant`).

pub mod dequantize;
pub mod eval_tensors;
pub mod generate;
pub mod imatrix;
pub mod imatrix_file;
pub mod model;
pub mod paths;
pub mod progress;
pub mod quantize;
pub mod score;
pub mod speed;

use std::fmt;

/// A command's failure: one message that names the file, tensor, key or offset concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError(pub String);

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CmdError {}

impl CmdError {
    /// An error from anything displayable.
    pub fn new(msg: impl fmt::Display) -> CmdError {
        CmdError(msg.to_string())
    }
}

/// Builds a local rayon pool of `threads` threads (or uses the global one for `None`) and
/// runs `f` in it.
pub fn with_threads<T: Send>(
    threads: Option<usize>,
    f: impl FnOnce() -> T + Send,
) -> Result<T, CmdError> {
    match threads {
        None => Ok(f()),
        Some(0) => Err(CmdError::new("--threads must be at least 1")),
        Some(n) => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| CmdError::new(format!("cannot start {n} threads: {e}")))?;
            Ok(pool.install(f))
        }
    }
}
