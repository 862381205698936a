//! # lowbit-cpu
//!
//! The CPU backend of lowbit: [`CpuBackend`] implements [`lowbit_core::backend::Backend`] for
//! every weight format the core can decode.
//!
//! * The instruction set ([`Isa`]) is detected once per process and the choice stored
//!   ([`isa::selected`]); `LOWBIT_CPU=scalar|avx2|avx512|neon|neon-dotprod` forces one (an
//!   error if the CPU lacks it); [`CpuBackend::with_isa`] picks one explicitly (tests).
//! * Kernels are chosen once, when the backend is built, from a per-format table of function
//!   pointers ([`kernels`]): a SIMD kernel where one exists for the ISA, otherwise the scalar
//!   fallback, which is the core's reference dot product (correct by construction).
//! * `matmul` quantizes the activations once per call (the core's own encoders, so the bytes
//!   are the reference's), splits rows into chunks across rayon, and hands each chunk up to 16
//!   columns at a time; SIMD kernels decode each weight block once and reuse it for every
//!   column of the tile.
//! * After a call that ran on several threads, one worker per extra thread stays awake (it
//!   yields the CPU in a loop) for up to 1 ms or until the next call or other pool work starts,
//!   so back-to-back calls do not wait for sleeping threads to wake;
//!   `LOWBIT_CPU_LINGER_US=<microseconds>` sets the time, `0` turns it off.
//!
//! * [`fp2_search`]: ROCmFP2 row encoding (`Rule::Reference`) with an AVX-512 scale search of
//!   8 halves per vector, the same bytes as the core's.
//!
//! Layout: `isa.rs` (detection), `act.rs` (activation preparation), `kernels.rs` (tables),
//! `matmul.rs` (threads and tiles), `scalar/` (fallback), `x86/` (AVX2 and AVX-512 kernels),
//! `aarch64/` (NEON kernels). `unsafe` lives only in the SIMD modules (`x86/`, `aarch64/`),
//! each block with a `// SAFETY:` line.
//!
//! NaN and infinite activations: formats whose activations are quantized (Q8_0, Q8_1, Q8_K)
//! reject them with [`lowbit_core::Error::BadInput`] (index into `x`), as the reference backend
//! does (it reports the index within the column); formats with f32 activations propagate them
//! into the outputs, as the reference does.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod act;
mod error;
pub mod fp2_search;
pub mod isa;
pub mod kernels;
mod matmul;
pub mod probe;
mod scalar;
mod shape;
pub mod vecops;
pub mod weights;
#[cfg(target_arch = "x86_64")]
mod x86;

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::codec;
use lowbit_core::error::Buffer;
use lowbit_core::FormatId;
use rayon::prelude::*;

pub use error::CpuError;
pub use isa::Isa;
pub use kernels::KernelTable;

/// The CPU backend: an instruction set, its kernel table, and an optional private thread pool.
#[derive(Debug)]
pub struct CpuBackend {
    isa: Isa,
    name: String,
    table: KernelTable,
    pool: Option<rayon::ThreadPool>,
    /// Where uploaded matrices are stored (huge-page-advised chunks, `weights`).
    arena: weights::Arena,
}

/// A matrix uploaded to the CPU backend: the bytes, every block validated, in canonical layout
/// or (where the format's kernel asks for it) rewritten row by row into the kernel's layout.
#[derive(Clone, Debug)]
pub struct CpuMatrix {
    desc: MatrixDesc,
    bytes: weights::WeightBuf,
    /// The kernel whose layout `bytes` is in, if not canonical.
    repacked_for: Option<&'static str>,
}

impl CpuMatrix {
    /// The stored bytes: canonical unless [`CpuMatrix::repacked_for`] names a kernel.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The kernel whose private layout the stored bytes are in (`None`: canonical).
    pub fn repacked_for(&self) -> Option<&'static str> {
        self.repacked_for
    }
}

impl CpuBackend {
    /// The backend with the process-wide instruction set ([`isa::selected`]: detected once,
    /// or forced by `LOWBIT_CPU`), on rayon's global pool.
    pub fn new() -> Result<Self, CpuError> {
        Self::with_isa(isa::selected()?)
    }

    /// The backend with instruction set `isa`, or [`CpuError::IsaUnavailable`] if this CPU
    /// lacks it.
    pub fn with_isa(isa: Isa) -> Result<Self, CpuError> {
        if !isa.available() {
            return Err(CpuError::IsaUnavailable { isa });
        }
        Ok(CpuBackend {
            isa,
            name: format!("cpu-{}", isa.name()),
            table: KernelTable::new(isa)?,
            pool: None,
            arena: weights::Arena::default(),
        })
    }

    /// Runs matmuls on a private pool of `threads` threads instead of rayon's global pool.
    pub fn with_threads(mut self, threads: usize) -> Result<Self, CpuError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .build()
            .map_err(|e| CpuError::ThreadPool(e.to_string()))?;
        self.pool = Some(pool);
        Ok(self)
    }

    /// The instruction set in use.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The kernel table in use.
    pub fn table(&self) -> &KernelTable {
        &self.table
    }

    /// Threads a matmul runs on.
    pub fn threads(&self) -> usize {
        match &self.pool {
            Some(p) => p.current_num_threads(),
            None => rayon::current_num_threads(),
        }
    }

    /// Runs `f` on a worker of the backend's pool (its private pool, or rayon's global one).
    /// Matmuls called inside `f` then split their rows from that worker, instead of handing
    /// each call from a waiting caller to the pool and back: wrap a whole forward pass in it.
    /// Decode on a small model makes hundreds of short matmuls per token, and the two thread
    /// hand-offs per call would otherwise cost about as much as the arithmetic.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            // `rayon::scope` runs its body on a worker of the global pool (in place if the
            // caller already is one).
            None => rayon::scope(|_| f()),
        }
    }

    fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }
}

impl Backend for CpuBackend {
    type Matrix = CpuMatrix;
    type Error = CpuError;

    fn name(&self) -> &str {
        &self.name
    }

    fn supports(&self, format: FormatId) -> bool {
        self.table.get(format).is_some()
    }

    /// Checks the length, then decodes every row with the core (in parallel) and rejects the
    /// first bad block (lowest row) with the core's error, its offset shifted to the position
    /// in `bytes`. Stores the canonical bytes, rewritten row by row into the kernel's layout
    /// where the format's kernel has a repack (only after every block passed validation).
    fn upload(&self, desc: MatrixDesc, bytes: &[u8]) -> Result<CpuMatrix, CpuError> {
        if !self.supports(desc.format) {
            return Err(CpuError::Unsupported { format: desc.format });
        }
        let rb = desc.format.row_bytes(desc.cols)?;
        let need = desc.canonical_bytes()?;
        if bytes.len() != need {
            return Err(lowbit_core::Error::Length {
                format: desc.format,
                buffer: Buffer::Encoded,
                got: bytes.len(),
                expected: need,
            }
            .into());
        }
        let bad = self.run(|| {
            bytes
                .par_chunks_exact(rb)
                .enumerate()
                .map_init(
                    || vec![0f32; desc.cols],
                    |scratch, (r, row)| {
                        codec::decode_row(desc.format, row, scratch).map_err(|e| e.at(r * rb)).err()
                    },
                )
                .find_map_first(|e| e)
        });
        if let Some(e) = bad {
            return Err(e.into());
        }
        let mut repacked_for = None;
        let bytes =
            match (self.table.extras(desc.format).repack, self.table.kernel_name(desc.format)) {
                (Some(repack), Some(k)) => {
                    let mut packed = bytes.to_vec();
                    self.run(|| packed.par_chunks_exact_mut(rb).for_each(repack));
                    repacked_for = Some(k);
                    self.arena.store(&packed)
                }
                _ => self.arena.store(bytes),
            };
        Ok(CpuMatrix { desc, bytes, repacked_for })
    }

    fn desc(&self, matrix: &CpuMatrix) -> MatrixDesc {
        matrix.desc
    }

    /// Errors with [`CpuError::ForeignLayout`] when `m` was repacked for another kernel than
    /// this backend's (uploaded by a backend with another instruction set).
    fn matmul(&self, m: &CpuMatrix, x: &[f32], n: usize, y: &mut [f32]) -> Result<(), CpuError> {
        if let Some(k) = m.repacked_for {
            if self.table.kernel_name(m.desc.format) != Some(k) {
                return Err(CpuError::ForeignLayout { format: m.desc.format, layout: k });
            }
        }
        self.run(|| matmul::matmul(&self.table, m.desc, &m.bytes, x, n, y))
    }
}
