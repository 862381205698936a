//! [`HipError`]: everything the HIP backend can fail with. "No runtime" and "no device" are
//! their own variants ([`HipError::is_unavailable`]) so an application can fall back to another
//! backend instead of stopping.

use crate::ffi::Vendor;

/// An error of the HIP backend.
#[derive(Debug)]
pub enum HipError {
    /// No GPU runtime library could be loaded for `vendor` (`tried` lists the names).
    NoRuntime {
        /// The vendor whose libraries were looked for.
        vendor: Vendor,
        /// Library names and paths tried, in order.
        tried: String,
        /// The loader's message for the last one.
        last: String,
    },
    /// Neither vendor's runtime is usable (each vendor's reason, joined).
    Unavailable {
        /// What each vendor's attempt said.
        detail: String,
    },
    /// A runtime loaded but reports no usable device.
    NoDevice {
        /// Which runtimes were asked, and what each said.
        detail: String,
    },
    /// A runtime library lacks an entry point this crate needs (too old, or not the real one).
    MissingSymbol {
        /// The library.
        library: String,
        /// The symbol name(s) looked for.
        symbol: String,
    },
    /// A driver call failed.
    Driver {
        /// What was being done.
        call: &'static str,
        /// The driver's status code.
        code: i32,
        /// The driver's name for it.
        name: String,
    },
    /// Run-time compilation failed; the compiler's log.
    Compile {
        /// Compiler output.
        log: String,
    },
    /// A format, shape or data error (the same errors as the reference backend).
    Core(lowbit_core::Error),
}

impl HipError {
    /// True for "no HIP/CUDA runtime" and "no device": conditions where an application should
    /// use another backend rather than fail.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            HipError::NoRuntime { .. } | HipError::NoDevice { .. } | HipError::Unavailable { .. }
        )
    }
}

impl core::fmt::Display for HipError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HipError::NoRuntime { vendor, tried, last } => {
                write!(f, "no {vendor} runtime found (tried {tried}; last error: {last})")
            }
            HipError::Unavailable { detail } => write!(f, "no usable GPU runtime: {detail}"),
            HipError::NoDevice { detail } => write!(f, "no HIP-capable device: {detail}"),
            HipError::MissingSymbol { library, symbol } => {
                write!(f, "{library} has no {symbol} (runtime too old?)")
            }
            HipError::Driver { call, code, name } => {
                write!(f, "GPU driver call {call} failed: {name} ({code})")
            }
            HipError::Compile { log } => write!(f, "kernel compilation failed:\n{log}"),
            HipError::Core(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HipError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HipError::Core(e) => Some(e),
            _ => None,
        }
    }
}

impl From<lowbit_core::Error> for HipError {
    fn from(e: lowbit_core::Error) -> Self {
        HipError::Core(e)
    }
}
