//! Per-format kernel tables, built once per backend from the chosen [`Isa`].
//!
//! A kernel computes a chunk of rows against a tile of at most [`MAX_TILE`] activation
//! columns: `out[r * tile + j] = dot(row r, column cols.start + j)`. The table holds, for
//! every format the core can decode, the best kernel the ISA has (SIMD where written, else the
//! scalar fallback); formats the core cannot decode have no entry.
//!
//! What must not live here: kernel bodies (`scalar/`, `x86/`, `aarch64/`) and threading (`matmul.rs`).

use std::ops::Range;

use lowbit_core::codec::{self, EncodeOptions};
use lowbit_core::{Error, FormatId};

use crate::act::Acts;
use crate::error::CpuError;
use crate::isa::Isa;

/// Most activation columns one kernel call handles (the speculative-verify range 2..16).
pub const MAX_TILE: usize = 16;

/// A kernel: `(format, rows of the chunk, row bytes, activations, column tile, out)`.
pub(crate) type RowsKernel =
    fn(FormatId, &[u8], usize, &Acts, Range<usize>, &mut [f32]) -> Result<(), Error>;

/// A named kernel.
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    pub name: &'static str,
    pub f: RowsKernel,
}

/// Rewrites one validated canonical row (`row_bytes` long) in place into a kernel's layout
/// (a bijection of the row's bytes, so lengths and row offsets are unchanged).
pub(crate) type RepackFn = fn(&mut [u8]);

/// Builds a kernel's activation layout for every column of a call, once per matmul call.
pub(crate) type PrepFn = fn(&Acts) -> Option<crate::act::Layout>;

/// A prefill GEMM for calls of more than [`MAX_TILE`] columns: `panel` rearranges a call's
/// activations once, `f` runs a chunk of whole weight rows against every column of the panel
/// into a column-major block (`out[j * rows + r]`).
#[derive(Clone, Copy)]
pub(crate) struct GemmKernel {
    pub name: &'static str,
    pub panel: fn(FormatId, &Acts) -> Result<crate::act::Layout, Error>,
    pub f: GemmFn,
}

/// A GEMM body: `(format, whole rows, row bytes, panel, column-major out)`.
pub(crate) type GemmFn =
    fn(FormatId, &[u8], usize, &crate::act::Layout, &mut [f32]) -> Result<(), Error>;

/// What a kernel needs besides its body: an upload-time repack of the weight rows, a
/// once-per-call activation layout and a prefill GEMM (all optional).
#[derive(Clone, Copy, Default)]
pub(crate) struct Extras {
    /// Applied to every row at upload, after validation.
    pub repack: Option<RepackFn>,
    /// Run once per matmul call after the activations are quantized.
    pub prep: Option<PrepFn>,
    /// Runs calls of more than [`MAX_TILE`] columns instead of the tiled kernel (only on the
    /// canonical row layout, or on a repacked one that its unpack knows: Q4_1 and Q4_0 under
    /// AVX-512).
    pub gemm: Option<GemmKernel>,
}

/// The kernels of one ISA, one entry per [`FormatId::ALL`] position.
#[derive(Clone)]
pub struct KernelTable {
    isa: Isa,
    entries: Vec<Option<Kernel>>,
    extras: Vec<Extras>,
}

impl std::fmt::Debug for KernelTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for (fmt, e) in FormatId::ALL.iter().zip(&self.entries) {
            if let Some(k) = e {
                m.entry(&fmt.name(), &k.name);
            }
        }
        m.finish()
    }
}

/// Whether the core can decode `format` (the hipfire family may not be there yet): asks the
/// core to decode one row of a valid encoding (or zeros, where no encoder exists).
fn core_decodes(format: FormatId) -> bool {
    let k = format.geometry().row_multiple;
    let Ok(rb) = format.row_bytes(k) else { return false };
    let mut probe = vec![0u8; rb];
    let zeros = vec![0f32; k];
    if codec::encode_row(format, &zeros, &EncodeOptions::default(), &mut probe).is_err() {
        probe.iter_mut().for_each(|b| *b = 0);
    }
    let mut out = vec![0f32; k];
    !matches!(codec::decode_row(format, &probe, &mut out), Err(Error::Unsupported { .. }))
}

impl KernelTable {
    /// The table for `isa` (which must be available: SIMD entries are only sound then).
    pub fn new(isa: Isa) -> Result<Self, CpuError> {
        if !isa.available() {
            return Err(CpuError::IsaUnavailable { isa });
        }
        let entries = FormatId::ALL
            .iter()
            .map(|&f| {
                if !core_decodes(f) {
                    return None;
                }
                Some(simd_kernel(isa, f).unwrap_or(crate::scalar::GENERIC))
            })
            .collect::<Vec<_>>();
        let extras = FormatId::ALL
            .iter()
            .zip(&entries)
            .map(|(&f, e)| match e {
                Some(k) if k.name != crate::scalar::GENERIC.name => simd_extras(isa, f),
                _ => Extras::default(),
            })
            .collect();
        Ok(KernelTable { isa, entries, extras })
    }

    /// The ISA the table was built for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    pub(crate) fn get(&self, format: FormatId) -> Option<Kernel> {
        let i = FormatId::ALL.iter().position(|&f| f == format)?;
        self.entries.get(i).copied().flatten()
    }

    /// The repack and activation-layout hooks of `format`'s kernel.
    pub(crate) fn extras(&self, format: FormatId) -> Extras {
        let i = FormatId::ALL.iter().position(|&f| f == format);
        i.and_then(|i| self.extras.get(i).copied()).unwrap_or_default()
    }

    /// The name of the prefill GEMM that calls of more than [`MAX_TILE`] columns of `format`
    /// run with, if it has one (else they run the tiled kernel).
    pub fn gemm_name(&self, format: FormatId) -> Option<&'static str> {
        self.extras(format).gemm.map(|g| g.name)
    }

    /// The name of the kernel `format` runs with (`None`: not supported).
    pub fn kernel_name(&self, format: FormatId) -> Option<&'static str> {
        self.get(format).map(|k| k.name)
    }
}

#[cfg(target_arch = "x86_64")]
fn simd_kernel(isa: Isa, format: FormatId) -> Option<Kernel> {
    crate::x86::kernel(isa, format)
}

#[cfg(target_arch = "aarch64")]
fn simd_kernel(isa: Isa, format: FormatId) -> Option<Kernel> {
    crate::aarch64::kernel(isa, format)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn simd_kernel(_isa: Isa, _format: FormatId) -> Option<Kernel> {
    None
}

#[cfg(target_arch = "x86_64")]
fn simd_extras(isa: Isa, format: FormatId) -> Extras {
    crate::x86::extras(isa, format)
}

#[cfg(not(target_arch = "x86_64"))]
fn simd_extras(_isa: Isa, _format: FormatId) -> Extras {
    Extras::default()
}
