//! Instruction-set selection: detected once per process and stored, as RustFFT does.
//!
//! [`selected`] reads `LOWBIT_CPU` (`scalar`, `avx2`, `avx512`, `avx512-vnni`, `neon` or
//! `neon-dotprod`) the
//! first time it is called; if set, that ISA is used (an error if the CPU lacks it), otherwise
//! the best available one.
//! The answer (or the error) is kept in a [`OnceLock`] and never recomputed.
//!
//! What each ISA needs:
//! * [`Isa::Avx2`]: AVX2, FMA and F16C (f16 scales are widened with `vcvtph2ps`).
//! * [`Isa::Avx512`]: the AVX2 set plus AVX-512 F, BW and VL.
//! * [`Isa::Avx512Vnni`]: the AVX-512 set plus AVX-512 VNNI (`vpdpbusd`); a separate ISA, as
//!   [`Isa::NeonDot`] is, so that tests can force and check both the plain and the VNNI
//!   kernels on one machine. Where the CPU also has AVX512_BF16 ([`has_avx512_bf16`]), its
//!   table runs the HFP4 family with `vdpbf16ps` (`x86/hfp4_bf16.rs`); `avx512` keeps the f32
//!   kernel, so forcing each ISA tests both.
//! * [`Isa::Neon`]: aarch64 Advanced SIMD (baseline on aarch64, still detected at run time so
//!   every ISA goes through the same check).
//! * [`Isa::NeonDot`]: NEON plus the dot-product extension (`sdot`, Armv8.2 `dotprod`); a
//!   separate ISA so that tests can force, and check, both the plain and the `sdot` kernels on
//!   one machine.

use std::sync::OnceLock;

use crate::error::CpuError;

/// An instruction set the CPU backend has kernels for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Portable Rust: the core's reference dot products.
    Scalar,
    /// x86-64 AVX2 + FMA + F16C.
    Avx2,
    /// x86-64 AVX-512 F/BW/VL (plus the AVX2 set).
    Avx512,
    /// x86-64 AVX-512 F/BW/VL plus VNNI (`vpdpbusd`).
    Avx512Vnni,
    /// aarch64 NEON (Advanced SIMD).
    Neon,
    /// aarch64 NEON with the dot-product extension (`sdot`).
    NeonDot,
}

impl Isa {
    /// Every ISA, from the most portable.
    pub const ALL: [Isa; 6] =
        [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni, Isa::Neon, Isa::NeonDot];

    /// The name `LOWBIT_CPU` uses.
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Neon => "neon",
            Isa::NeonDot => "neon-dotprod",
        }
    }

    /// Parses a `LOWBIT_CPU` value (case-insensitive).
    pub fn parse(s: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Whether this CPU can run the ISA's kernels.
    pub fn available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::is_x86_feature_detected!("avx2")
                    && std::is_x86_feature_detected!("fma")
                    && std::is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.available()
                    && std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => {
                Isa::Avx512.available() && std::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 | Isa::Avx512Vnni => false,
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[cfg(target_arch = "aarch64")]
            Isa::NeonDot => {
                Isa::Neon.available() && std::arch::is_aarch64_feature_detected!("dotprod")
            }
            #[cfg(not(target_arch = "aarch64"))]
            Isa::Neon | Isa::NeonDot => false,
        }
    }

    /// The ISAs this CPU can run, from the most portable.
    pub fn available_all() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.available()).collect()
    }

    /// The best ISA this CPU can run.
    pub fn best() -> Isa {
        Isa::ALL.into_iter().rev().find(|i| i.available()).unwrap_or(Isa::Scalar)
    }
}

/// Whether this CPU has AVX512_BF16 (`vdpbf16ps`, `vcvtneps2bf16`), detected once per process
/// and stored. Only the `Isa::Avx512Vnni` table asks (after `Isa::Avx512Vnni.available()`).
pub fn has_avx512_bf16() -> bool {
    static BF16: OnceLock<bool> = OnceLock::new();
    *BF16.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx512bf16")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

static SELECTED: OnceLock<Result<Isa, CpuError>> = OnceLock::new();

/// The process-wide ISA: `LOWBIT_CPU` if set (an error if unknown or unavailable), otherwise
/// [`Isa::best`]. Computed on the first call and stored.
pub fn selected() -> Result<Isa, CpuError> {
    SELECTED
        .get_or_init(|| match std::env::var("LOWBIT_CPU") {
            Ok(v) if !v.trim().is_empty() => {
                let isa = Isa::parse(&v).ok_or(CpuError::BadIsaName(v))?;
                if isa.available() {
                    Ok(isa)
                } else {
                    Err(CpuError::IsaUnavailable { isa })
                }
            }
            _ => Ok(Isa::best()),
        })
        .clone()
}
