//! The backend's error type: the core's errors plus what only a CPU backend can get wrong
//! (an instruction set the CPU lacks, a bad `LOWBIT_CPU` value, a thread pool that will not
//! start).

use std::fmt;

use lowbit_core::FormatId;

use crate::isa::Isa;

/// Everything that can go wrong in the CPU backend.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CpuError {
    /// An error from the core (lengths, bad blocks with their offsets, bad activations).
    Core(lowbit_core::Error),
    /// The requested instruction set is not available on this CPU.
    IsaUnavailable {
        /// What was asked for.
        isa: Isa,
    },
    /// `LOWBIT_CPU` holds something other than `scalar`, `avx2`, `avx512`, `neon` or
    /// `neon-dotprod`.
    BadIsaName(String),
    /// No kernel for the format (the core cannot decode it yet).
    Unsupported {
        /// The format.
        format: FormatId,
    },
    /// The private rayon pool could not be built.
    ThreadPool(String),
    /// A matrix repacked at upload for another kernel (another instruction set's backend).
    ForeignLayout {
        /// The format.
        format: FormatId,
        /// The kernel whose layout the matrix holds.
        layout: &'static str,
    },
}

impl From<lowbit_core::Error> for CpuError {
    fn from(e: lowbit_core::Error) -> Self {
        CpuError::Core(e)
    }
}

impl fmt::Display for CpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuError::Core(e) => write!(f, "{e}"),
            CpuError::IsaUnavailable { isa } => {
                write!(f, "instruction set {} is not available on this CPU", isa.name())
            }
            CpuError::BadIsaName(s) => {
                let names: Vec<&str> = Isa::ALL.iter().map(|i| i.name()).collect();
                write!(f, "LOWBIT_CPU={s:?}: expected one of {}", names.join(", "))
            }
            CpuError::Unsupported { format } => {
                write!(f, "{format}: the CPU backend has no kernel for this format")
            }
            CpuError::ThreadPool(s) => write!(f, "cannot start the thread pool: {s}"),
            CpuError::ForeignLayout { format, layout } => write!(
                f,
                "{format}: the matrix is in the layout of kernel {layout}, not this backend's; \
                 upload it with this backend"
            ),
        }
    }
}

impl std::error::Error for CpuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CpuError::Core(e) => Some(e),
            _ => None,
        }
    }
}
