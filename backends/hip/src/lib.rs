//! # lowbit-hip
//!
//! The HIP backend of lowbit: [`HipBackend`] implements [`lowbit_core::backend::Backend`] with
//! GPU kernels written once in HIP C++ (`kernels/lowbit_kernels.hip`) against a small header
//! of our own (`kernels/lowbit_hip.h`: thread ids, shuffles, dot4, byte permute, f16). The
//! same source runs
//!
//! * on AMD GPUs through libamdhip64 + hiprtc (`__builtin_amdgcn_sudot4` on RDNA3/4,
//!   `sdot4` on CDNA/RDNA2, `v_perm_b32` for codebook expansion, wave32 and wave64), and
//! * on NVIDIA GPUs through the CUDA driver API + NVRTC (`__dp4a`, `__byte_perm`), the way HIP
//!   itself runs on NVIDIA; there (sm_80 and later) column tiles of 8 and 16 also have int8
//!   tensor-core kernels (`kernels/lowbit_mma.h`: `mma.sync` m16n8k32, weights staged by
//!   cp.async, fragments decoded in registers).
//!
//! Both runtimes are loaded at run time ([`libloading`]); the crate builds with no GPU SDK
//! installed, and a machine without one gets an error with
//! [`HipError::is_unavailable`] set. Kernels are compiled at first use and cached on disk
//! (see `compile.rs` for the key and the `LOWBIT_HIP_CACHE*` variables).
//!
//! Environment: `LOWBIT_HIP_PLATFORM=amd|nvidia` (default: AMD first, then NVIDIA),
//! `LOWBIT_HIP_DEVICE` (index, default 0), `LOWBIT_HIP_ARCH` (AMD target such as `gfx1100`;
//! unset, hiprtc compiles for the current device), `LOWBIT_HIP_DRIVER_LIB` /
//! `LOWBIT_HIP_RTC_LIB` (library paths tried first), `LOWBIT_HIP_CACHE=0` /
//! `LOWBIT_HIP_CACHE_DIR` (code-object cache), `LOWBIT_HIP_ROWS_PER_WARP` (1, 2, 4: tuning),
//! `LOWBIT_HIP_MMA=0` (no tensor-core kernels).
//! Feature `aot`: embed clang-built code objects for gfx1100, gfx1151, gfx1201 and gfx942
//! (used on AMD when `LOWBIT_HIP_ARCH` names one of them).
//!
//! Status: AMD code objects are compiled in CI (clang-19, gfx1100/gfx1151/gfx1201/gfx942) but
//! have **not been run on AMD hardware**; the NVIDIA path has been run (H200).
//!
//! Formats: Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, MXFP4, NVFP4, ROCmFP2, ROCmFP3, TQ2_0, PQ2_0, PTQ1_0,
//! HFP4G32, MFP4G32 (FWHT-256 on the device), MFP4G32P; activations quantized to Q8_0, Q8_1 or
//! Q8_K on the device (bit-exact with the core's encoders) or kept f32.
//!
//! Layout: `ffi.rs` (all `unsafe`: libraries, driver calls), `compile.rs` (run-time
//! compilation, cache), `layout.rs` (device planes, one table row per format), `backend.rs`
//! (the trait), `testing.rs` (hidden: what the CPU emulation test of the kernels needs).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod backend;
mod compile;
mod error;
mod ffi;
mod layout;
#[doc(hidden)]
pub mod testing;

pub use backend::{DeviceQuant, HipBackend, HipMatrix};
pub use error::HipError;
pub use ffi::Vendor;
