//! # lowbit-vulkan
//!
//! The Vulkan backend of lowbit: [`VulkanBackend`] implements
//! [`lowbit_core::backend::Backend`] on [`ash`], with kernels written in WGSL and compiled to
//! SPIR-V by naga in build.rs (no shader compiler or Vulkan SDK is needed to build; libvulkan
//! is loaded at run time).
//!
//! * [`VulkanBackend::new`] returns [`VulkanError::NoLoader`], [`VulkanError::NoDevice`] or
//!   [`VulkanError::MissingFeature`] when there is no usable device
//!   ([`VulkanError::is_unavailable`]): the runtime falls back to the CPU backend and says so.
//! * Upload validates every block with the core's decoder, then repacks into the device layout
//!   ([`repack`]). A matrix whose buffers would pass the device's single-buffer limit is split
//!   by rows into several segments, one buffer pair each, one dispatch each.
//! * Formats ([`FORMATS`]): Q8_0, Q4_0, Q4_1, MXFP4, NVFP4, ROCmFP2, ROCmFP3, PQ2_0, PTQ1_0
//!   (Q8_0 / Q8_1 activations), Q4_K, Q6_K, TQ2_0 (Q8_K activations), HFP4G32, MFP4G32,
//!   MFP4G32P (f32 activations; for the MFP4 pair they first go through hipfire's FWHT-256 on
//!   the device, bit for bit the core's `rotate::fwht256`). Most kernels share one matmul body
//!   (`shaders/mm_body.wgsl`) and state only their block layout and decode.
//! * `matmul` copies the activations to the device, quantizes them there to Q8_0 / Q8_1 for
//!   the formats whose activation format is one of those, or Q8_K (bytes identical to the
//!   core's encoders: a test checks it), and runs one dispatch per segment and per tile of at
//!   most 16 columns. Each weight word is read once per tile; Q8_0, Q4_0, Q4_1, ROCmFP2,
//!   ROCmFP3, MXFP4 and NVFP4 blocks are also decoded once and reused for every column, the
//!   others are decoded again per column (TQ2_0 keeps its whole block in registers; Q4_K and
//!   Q6_K keep only their block headers there and re-read the code words, from cache, per
//!   column). Kernels on the shared body fetch each step's weight words one step ahead.
//! * Q8_0 / Q8_1 activations are quantized eight threads to a block (`quant_q8_0p.wgsl`;
//!   `LOWBIT_VK_QUANT_WIDE=0` or [`VulkanOptions::quant_wide`] selects the one-thread-a-block
//!   `quant_q8_0.wgsl`; the bytes are the same). The dispatches of one call are separated by
//!   compute-to-compute barriers (on an H200 an empty dispatch plus such a barrier took 1.9
//!   µs, plus a barrier over every stage 3.0 µs: docs/BENCHMARKS.md, session 7).
//! * In their 4-, 8- and 16-column variants (calls of 3 or more columns), Q8_0, Q4_0, ROCmFP2
//!   and PQ2_0 use staged kernels (`act_q8s.wgsl`; `LOWBIT_VK_STAGED=0` or
//!   [`VulkanOptions::staged`] turns them off): each step's activation blocks are copied into
//!   workgroup memory once per workgroup instead of being read from L2 by every thread for
//!   its own rows. They and the fused kernels need 28 KiB of workgroup memory and stay off on
//!   a device that allows less.
//! * In its 8-column variant (calls of 5 to 8 columns) PQ2_0 uses a column-split kernel
//!   (`mm_cols.wgsl`; `LOWBIT_VK_COLS=0` or [`VulkanOptions::cols`] turns it off, and it
//!   needs staging on): the threads of a row split the columns as well as the blocks, one
//!   column a thread, so each decodes a block once for all its rows (PQ2_0's staged kernel
//!   decodes it again per column); 1.25-1.34x faster at n = 8 on an H200.
//! * In their 8-column variant (calls of 5 to 8 columns) Q8_0, Q4_0, Q4_1, ROCmFP2, ROCmFP3,
//!   MXFP4, NVFP4, PQ2_0, PTQ1_0, TQ2_0, Q4_K, Q6_K and the HFP4 family use tiled kernels
//!   (`mm_tile.wgsl`; the Q8_K formats' units are quarter blocks, `act_q8kt.wgsl`, the HFP4
//!   family's half blocks of f32 activations, `act_f32t.wgsl`; `LOWBIT_VK_TILE=0` or
//!   [`VulkanOptions::tile`] turns them off, and they need the staged kernels' workgroup
//!   memory): the workgroup stages a chunk of K of all eight activation columns in workgroup
//!   memory once per chunk, each thread keeps at most 4 rows (32 accumulators; 64-128
//!   registers on an H200 against 131-255 before) and decodes each block once for all
//!   columns; some shapes split K over several workgroups and add the partial sums in a
//!   second dispatch (`sum_parts.wgsl`). 1.02-2.6x faster at n = 8 on an H200
//!   (docs/BENCHMARKS.md, session 10; the Q8_K and HFP4 formats: session 11). Their final
//!   sums take one of two forms with the same results: constant accumulator indices by
//!   default since session 13, the rolled loop with `LOWBIT_VK_TILE_ROLLED=1` or
//!   [`VulkanOptions::tile_rolled`] ([`kernels::tile_rolled`]). Each format's tile shape is
//!   [`kernels::default_tile_shape`]; `lowbit bench --backend vulkan --vk-sweep` times every
//!   compiled shape.
//! * PTQ1_0 is stored on the device in PQ2_0's layout (its trits + 1 as 2-bit codes, 34
//!   bytes a block against 28) and runs PQ2_0's kernels (as the HIP backend does).
//! * Opt-in (`LOWBIT_VK_FUSED=1` or [`VulkanOptions::fused`]), n = 1 with K <= 16384 for Q8_0
//!   and Q4_0: a fused kernel whose every workgroup quantizes the activation column itself
//!   (the same bytes as the quantizer dispatch) into workgroup memory, so the call is one
//!   dispatch with no barrier before it. On an H200 it was faster only for small matrices
//!   (128 rows); for the formats with an ALU-heavy decode it was slower still (every
//!   workgroup repeats the quantization), so they have none (docs/BENCHMARKS.md, session 6).
//! * Kernels use the packed int8 dot product (`OpSDot`) when the device says it is
//!   accelerated (`LOWBIT_VK_DOT4=0|1` or [`VulkanOptions::dot4`] forces either way), and
//!   naga's exact bit-extract polyfill otherwise.
//! * Pipelines: a fixed, build-time set of variants, at most [`MAX_PIPELINES`] held in
//!   memory, created through the driver's pipeline cache, which is kept on disk between runs
//!   (keyed by device, driver and the kernel table's hash; bounded; safe to delete;
//!   `LOWBIT_VK_PIPELINE_CACHE=0` turns it off). `LOWBIT_VK_STATS=1` prints each new
//!   pipeline's compiler statistics (registers per thread on NVIDIA) to stderr where the
//!   device has VK_KHR_pipeline_executable_properties (a diagnostic; `pipeline.rs`).
//! * [`VulkanBackend::read_bandwidth`] and [`VulkanBackend::time_matmul`] time our own read
//!   kernel and matmuls with GPU timestamps (for `lowbit bench --backend vulkan`).
//!
//! Accumulation bound (DESIGN.md): each output sums per-block f32 terms (the integer block
//! sums are exact), per thread in block order, then over the row's threads; c = 1 against the
//! f64 sum for the formats with quantized activations (a few f32 roundings per block), c = 2
//! for the HFP4 family (as the core's own reference; for MFP4 the exact sum is taken over the
//! stored, rotated weights and the rotated activations).
//!
//! Known gaps (f32 subnormals): an HFP4G32 / MFP4G32 block with exponent byte 0 (2^-127) and
//! an MXFP4 block with scale byte 0 or 1 (2^-128, 2^-127) contribute 0 on a device that flushes
//! f32 subnormals in shaders (the core's reference keeps them; hipfire's encoder writes e = 0
//! only for blocks below 6 * 2^-127 of the row scale, in practice blocks of zeros). The HFP4
//! kernel sums each block's products at 2^-14 of their value (mm_hfp4.wgsl: E2M1 codes read
//! as f16s), so a block's partial loses bits to f32 subnormals only where its products are
//! below about 2^-112 (activations below ~1e-34 against the block's codes). A Q8_K
//! activation block whose largest magnitude is below 127 * 2^-126 has a subnormal d, which the
//! device quantizer stores as 0 (and below 2^-118, subnormal elements may quantize differently
//! where the device flushes them).
//!
//! NaN and infinite activations: formats with quantized activations reject them with the core's
//! error (index into `x`), as the CPU backend does; the HFP4 family propagates them.
//!
//! Layout: `device.rs` (instance, device, buffers), `pipeline.rs` (layouts, bounded pipeline
//! cache), `disk_cache.rs` (the on-disk pipeline cache), `run.rs` (recording, submission,
//! timestamps), `kernels.rs` (the build-time kernel table), `repack.rs` (device layouts),
//! `probe.rs` (timing, the read probe, quantization read-back), `shaders/` (WGSL). `unsafe` lives only in the FFI
//! modules `device.rs`, `pipeline.rs` and `run.rs`, each block with a `// SAFETY:` line.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod device;
mod disk_cache;
mod error;
pub mod kernels;
mod pipeline;
mod probe;
pub mod repack;
mod run;

use std::sync::{Arc, Mutex};

use half::f16;
use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::codec::{self, EncodeOptions};
use lowbit_core::error::Buffer as BufKind;
use lowbit_core::registry::{ActFormat, Rotation};
use lowbit_core::FormatId;

pub use device::DeviceInfo;
pub use error::VulkanError;
pub use pipeline::MAX_PIPELINES;
pub use probe::MatmulProfile;

use device::{Buffer, Context};
use run::{Bind, Recorder, Runner};

/// Choices made when the backend starts.
#[derive(Clone, Debug, Default)]
pub struct VulkanOptions {
    /// Device index among those with a compute queue (`None`: `LOWBIT_VK_DEVICE`, else the
    /// first discrete GPU, else the first).
    pub device: Option<usize>,
    /// Force the `OpSDot` kernels on or off (`None`: `LOWBIT_VK_DOT4`, else on when the device
    /// reports 4x8-bit packed signed dot products as accelerated).
    pub dot4: Option<bool>,
    /// Largest weight buffer to make (`None`: the device's limits). Tests set a small one to
    /// exercise matrices that span several buffers.
    pub max_weight_buffer_bytes: Option<u64>,
    /// Force a kernel shape (threads per row, rows per thread, blocks per step) wherever the
    /// column variant has it (bench sweeps); `None` picks the default per column count.
    pub shape: Option<kernels::Shape>,
    /// Folder of the on-disk pipeline cache (`None`: `LOWBIT_VK_CACHE_DIR`, else the user's
    /// cache folder); `LOWBIT_VK_PIPELINE_CACHE=0` turns the cache off either way.
    pub pipeline_cache_dir: Option<std::path::PathBuf>,
    /// Use the fused 1-column kernels (Q8_0, Q4_0), which quantize the activations inside the
    /// matmul dispatch (`None`: `LOWBIT_VK_FUSED`, else off: on an H200 they were slower at
    /// 14336x4096 and 16384x16384, faster only for a 128-row matrix). Off: a separate
    /// quantizer dispatch.
    pub fused: Option<bool>,
    /// Use the staged kernels in the 4-, 8- and 16-column variants where the format has one
    /// (each step's activation blocks copied into workgroup memory once per workgroup;
    /// `None`: `LOWBIT_VK_STAGED`, else on).
    pub staged: Option<bool>,
    /// Quantize Q8_0 / Q8_1 activations with eight threads per block (`quant_q8_0p`) rather
    /// than one (`quant_q8_0`); the same bytes (`None`: `LOWBIT_VK_QUANT_WIDE`, else on).
    pub quant_wide: Option<bool>,
    /// Use the column-split kernel (`mm_cols.wgsl`) in the 8-column variant where the format
    /// has one (PQ2_0), with the staged activations (so only where staging is on; `None`:
    /// `LOWBIT_VK_COLS`, else on).
    pub cols: Option<bool>,
    /// Use the tiled kernel (`mm_tile.wgsl`) in the 8-column variant where the format has one
    /// (`None`: `LOWBIT_VK_TILE`, else [`kernels::tile_default`] per format; it needs the
    /// workgroup memory of the staged kernels and stays off without it). It takes precedence
    /// over the column-split and staged kernels.
    pub tile: Option<bool>,
    /// Give the tiled kernels the rolled epilogue (`tile_sum_r.wgsl`) where the format has
    /// one, rather than the constant-index one (`tile_sum_c.wgsl`; the same results; `None`:
    /// `LOWBIT_VK_TILE_ROLLED`, else [`kernels::tile_rolled`] per format).
    pub tile_rolled: Option<bool>,
    /// Use the rotated-load kernel (`*_o`, [`kernels::rotated_shader`]; the same results) for
    /// 1-column calls where the format has one (`None`: `LOWBIT_VK_ROTATE`, else
    /// [`kernels::rotated_default`] per format).
    pub rotate: Option<bool>,
}

/// One row range of an uploaded matrix, in its own buffers.
struct Segment {
    codes: Buffer,
    scales: Buffer,
    first_row: usize,
    rows: usize,
    scale_off: u32,
}

/// A matrix uploaded to the Vulkan backend: device buffers in the device layout, by segment.
pub struct VulkanMatrix {
    desc: MatrixDesc,
    segments: Vec<Segment>,
    /// Keeps the device alive while the buffers exist (dropped after `segments`).
    _ctx: Arc<Context>,
}

impl VulkanMatrix {
    /// Number of buffer segments (1 unless the matrix passes the single-buffer limit).
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Bytes of device memory the weights occupy.
    pub fn device_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.codes.size + s.scales.size).sum()
    }
}

impl std::fmt::Debug for VulkanMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanMatrix")
            .field("desc", &self.desc)
            .field("segments", &self.segments.len())
            .finish()
    }
}

/// Reusable per-call buffers, grown on demand.
#[derive(Default)]
struct Scratch {
    x_host: Option<Buffer>,
    x_dev: Option<Buffer>,
    act_q: Option<Buffer>,
    act_meta: Option<Buffer>,
    y_dev: Option<Buffer>,
    /// Partial sums of the K-split tiled kernels (splits x columns x rows).
    y_part: Option<Buffer>,
    y_host: Option<Buffer>,
    dummy: Option<Buffer>,
}

/// How a matmul's activations are prepared (see `VulkanBackend::act_plan`).
#[derive(Clone, Copy, Debug)]
struct ActPlan {
    /// The fused kernel quantizes the activation column itself.
    fused: bool,
    /// The quantizer dispatch: (kernel, elements per block, blocks per workgroup).
    quant: Option<(&'static str, usize, u32)>,
}

/// The whole of a staged scratch buffer as a kernel binding.
fn bind(o: &Option<Buffer>) -> Bind {
    let buf = o.as_ref().expect("staged");
    Bind { buffer: buf.buffer, range: buf.size }
}

fn ensure<'a>(
    ctx: &Context,
    slot: &'a mut Option<Buffer>,
    bytes: u64,
    host: bool,
) -> Result<&'a mut Buffer, VulkanError> {
    if slot.as_ref().is_none_or(|b| b.size < bytes) {
        *slot = None;
        // Grow by powers of two, but never past what one descriptor may cover.
        let size = bytes.next_power_of_two().min(ctx.info.max_buffer()).max(bytes).max(256);
        *slot = Some(Buffer::new(ctx, size, host)?);
    }
    Ok(slot.as_mut().expect("just set"))
}

struct State {
    runner: Runner,
    scratch: Scratch,
}

/// The Vulkan backend: one device, one queue, synchronous submissions.
pub struct VulkanBackend {
    state: Mutex<State>,
    name: String,
    dot4: bool,
    /// Largest weight buffer (segments are cut to fit).
    max_buffer: u64,
    shape: Mutex<Option<kernels::Shape>>,
    /// Whether n = 1 calls use the fused kernels where the format has one.
    fused: bool,
    /// Whether the 4-, 8- and 16-column variants are the staged kernels where the format has
    /// one.
    staged: bool,
    /// Whether Q8_0 / Q8_1 activations are quantized by `quant_q8_0p` (eight threads a
    /// block) rather than `quant_q8_0`.
    quant_wide: bool,
    /// Whether the 8-column variant is the column-split kernel where the format has one
    /// (implies `staged`).
    cols: bool,
    /// Whether the 8-column variant is the tiled kernel where the format has one (`None`: the
    /// per-format default).
    tile: Option<bool>,
    /// Whether the tiled kernels take the rolled epilogue where the format has one (`None`:
    /// the per-format default).
    tile_rolled: Option<bool>,
    /// Whether 1-column calls use the rotated-load kernel where the format has one (`None`:
    /// the per-format default).
    rotate: Option<bool>,
    ctx: Arc<Context>,
}

impl std::fmt::Debug for VulkanBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanBackend").field("name", &self.name).field("dot4", &self.dot4).finish()
    }
}

/// The formats the backend has kernels for.
pub const FORMATS: [FormatId; 15] = [
    FormatId::Q8_0,
    FormatId::Q4_0,
    FormatId::Q4_1,
    FormatId::RocmFp2,
    FormatId::Hfp4G32,
    FormatId::RocmFp3,
    FormatId::Mxfp4,
    FormatId::Nvfp4,
    FormatId::Q4K,
    FormatId::Q6K,
    FormatId::Tq2_0,
    FormatId::Pq2_0,
    FormatId::Ptq1_0,
    FormatId::Mfp4G32,
    FormatId::Mfp4G32P,
];

fn env_flag(name: &str) -> Result<Option<bool>, VulkanError> {
    match std::env::var(name) {
        Ok(v) if v == "1" => Ok(Some(true)),
        Ok(v) if v == "0" => Ok(Some(false)),
        Ok(v) => Err(VulkanError::BadArgument(format!("{name}={v:?}: expected 0 or 1"))),
        Err(_) => Ok(None),
    }
}

/// Q8_0 activations of one block: whether the core's encoder accepts it (finite values, scale
/// within f16) with the same arithmetic the core uses.
fn q8_block_ok(xb: &[f32]) -> bool {
    let mut amax = 0f32;
    for v in xb {
        if !v.is_finite() {
            return false;
        }
        amax = amax.max(v.abs());
    }
    f16::from_f32(amax / 127.0).is_finite()
}

impl VulkanBackend {
    /// The backend on the default device with default options.
    pub fn new() -> Result<Self, VulkanError> {
        Self::with_options(VulkanOptions::default())
    }

    /// The backend with explicit options.
    pub fn with_options(opts: VulkanOptions) -> Result<Self, VulkanError> {
        let index = match opts.device {
            Some(i) => Some(i),
            None => match std::env::var("LOWBIT_VK_DEVICE") {
                Ok(v) => Some(v.parse::<usize>().map_err(|_| {
                    VulkanError::BadArgument(format!("LOWBIT_VK_DEVICE={v:?}: expected an index"))
                })?),
                Err(_) => None,
            },
        };
        let dot4_forced = match opts.dot4 {
            Some(d) => Some(d),
            None => env_flag("LOWBIT_VK_DOT4")?,
        };
        let fused = match opts.fused {
            Some(f) => f,
            None => env_flag("LOWBIT_VK_FUSED")?.unwrap_or(false),
        };
        let staged = match opts.staged {
            Some(w) => w,
            None => env_flag("LOWBIT_VK_STAGED")?.unwrap_or(true),
        };
        let quant_wide = match opts.quant_wide {
            Some(w) => w,
            None => env_flag("LOWBIT_VK_QUANT_WIDE")?.unwrap_or(true),
        };
        let cols = match opts.cols {
            Some(c) => c,
            None => env_flag("LOWBIT_VK_COLS")?.unwrap_or(true),
        };
        let tile = match opts.tile {
            Some(t) => Some(t),
            None => env_flag("LOWBIT_VK_TILE")?,
        };
        let tile_rolled = match opts.tile_rolled {
            Some(t) => Some(t),
            None => env_flag("LOWBIT_VK_TILE_ROLLED")?,
        };
        let rotate = match opts.rotate {
            Some(t) => Some(t),
            None => env_flag("LOWBIT_VK_ROTATE")?,
        };
        let ctx = Arc::new(Context::new(index)?);
        let info = &ctx.info;
        let dot4 = match dot4_forced {
            Some(true) if !info.dot4_supported => {
                return Err(VulkanError::MissingFeature("shaderIntegerDotProduct".into()))
            }
            Some(d) => d,
            None => info.dot4_accelerated,
        };
        // The fused and staged kernels declare up to 28 KiB of workgroup memory (the plain
        // ones 16 KiB, Vulkan's minimum): on a device with less they stay off, and asking for
        // them is an error.
        let roomy = info.max_shared_bytes >= kernels::EXTRA_SHARED_BYTES;
        for (what, asked, on) in [
            (
                "the fused kernels",
                opts.fused.is_some() || env_flag("LOWBIT_VK_FUSED")?.is_some(),
                fused,
            ),
            (
                "the staged kernels",
                opts.staged.is_some() || env_flag("LOWBIT_VK_STAGED")?.is_some(),
                staged,
            ),
        ] {
            if asked && on && !roomy {
                return Err(VulkanError::MissingFeature(format!(
                    "{what} need {} bytes of workgroup memory, the device allows {}",
                    kernels::EXTRA_SHARED_BYTES,
                    info.max_shared_bytes
                )));
            }
        }
        let (fused, staged) = (fused && roomy, staged && roomy);
        let cols = cols && staged;
        let tile = if roomy { tile } else { Some(false) };
        let max_buffer = opts.max_weight_buffer_bytes.unwrap_or(u64::MAX).min(info.max_buffer());
        Self::check_shape(opts.shape)?;
        let cache_dir = disk_cache::folder(opts.pipeline_cache_dir.as_deref());
        let runner = Runner::new(&ctx, cache_dir.as_deref())?;
        let name = format!("vulkan:{}", info.name);
        Ok(VulkanBackend {
            state: Mutex::new(State { runner, scratch: Scratch::default() }),
            name,
            dot4,
            max_buffer,
            shape: Mutex::new(opts.shape),
            fused,
            staged,
            quant_wide,
            cols,
            tile,
            tile_rolled,
            rotate,
            ctx,
        })
    }

    fn check_shape(shape: Option<kernels::Shape>) -> Result<(), VulkanError> {
        if let Some(s) = shape {
            if !kernels::KERNELS.iter().any(|k| (k.tpr, k.rpt, k.bpt) == s) {
                return Err(VulkanError::BadArgument(format!(
                    "no kernel shape (threads per row, rows per thread, blocks per step) {s:?}"
                )));
            }
        }
        Ok(())
    }

    /// Forces a kernel shape from now on, where the column variant has it (`None`: the
    /// defaults). For bench sweeps.
    pub fn set_shape(&self, shape: Option<kernels::Shape>) -> Result<(), VulkanError> {
        Self::check_shape(shape)?;
        *self.shape.lock().unwrap_or_else(|p| p.into_inner()) = shape;
        Ok(())
    }

    /// What was read about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.ctx.info
    }

    /// Whether the kernels in use are the `OpSDot` ones.
    pub fn uses_dot4(&self) -> bool {
        self.dot4
    }

    /// Pipelines compiled so far and held now.
    pub fn pipeline_counts(&self) -> (u64, usize) {
        let st = self.lock();
        (st.runner.pipelines.created, st.runner.pipelines.len())
    }

    /// A device-side copy of an uploaded matrix (new buffers, filled by buffer copies on the
    /// device; no host validation or repacking, since the source was validated at upload).
    /// For benchmarks that cycle through several copies to keep the weights out of the cache.
    pub fn duplicate(&self, m: &VulkanMatrix) -> Result<VulkanMatrix, VulkanError> {
        if !Arc::ptr_eq(&m._ctx, &self.ctx) {
            return Err(VulkanError::BadArgument("matrix uploaded to another device".into()));
        }
        let mut st = self.lock();
        let mut segments = Vec::with_capacity(m.segments.len());
        for seg in &m.segments {
            let codes = Buffer::new(&self.ctx, seg.codes.size, false)?;
            let scales = Buffer::new(&self.ctx, seg.scales.size, false)?;
            st.runner.submit(&self.ctx, |rec| {
                rec.copy(seg.codes.buffer, codes.buffer, seg.codes.size);
                rec.copy(seg.scales.buffer, scales.buffer, seg.scales.size);
                Ok(false)
            })?;
            segments.push(Segment {
                codes,
                scales,
                first_row: seg.first_row,
                rows: seg.rows,
                scale_off: seg.scale_off,
            });
        }
        Ok(VulkanMatrix { desc: m.desc, segments, _ctx: self.ctx.clone() })
    }

    /// Bytes of pipeline-cache data read from disk at start (0: none, or the cache is off).
    pub fn pipeline_cache_loaded_bytes(&self) -> usize {
        self.lock().runner.pipelines.loaded_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves no half-written state the next call relies
        // on (every call rewrites what it reads), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_len(
        format: FormatId,
        buffer: BufKind,
        got: usize,
        expected: usize,
    ) -> Result<(), VulkanError> {
        if got != expected {
            return Err(lowbit_core::Error::Length { format, buffer, got, expected }.into());
        }
        Ok(())
    }

    /// Host-side checks of Q8_0 / Q8_1 activations (`act`): the first column (lowest index)
    /// with a non-finite value or a scale that overflows f16 gets the core encoder's error, its
    /// index shifted to a position in `x` (as the CPU backend reports it). Q8_1's `s` can only
    /// overflow when a block's largest magnitude passes 65504 / 32; such columns go through
    /// the core encoder too.
    fn check_q8(act: FormatId, x: &[f32], k: usize) -> Result<(), VulkanError> {
        for (j, col) in x.chunks_exact(k).enumerate() {
            let s_safe =
                |xb: &[f32]| act != FormatId::Q8_1 || xb.iter().all(|v| v.abs() * 32.0 <= 65504.0);
            if col.chunks_exact(32).all(|xb| q8_block_ok(xb) && s_safe(xb)) {
                continue;
            }
            let mut out = vec![0u8; act.row_bytes(k)?];
            codec::encode_row(act, col, &EncodeOptions::default(), &mut out)
                .map_err(|e| e.at_element(j * k))?;
        }
        Ok(())
    }

    fn helper_kernel(&self, shader: &str) -> Result<usize, VulkanError> {
        kernels::helper(shader, false).ok_or_else(|| {
            VulkanError::BadArgument(format!("kernel {shader} missing from the build"))
        })
    }

    /// The matmul kernel for `ncols` columns: the fused one (`fused`: the caller checked that
    /// the format has one and the call fits it), the tiled one (`ncols == 8`, where the format
    /// has one and it is on), the column-split one (`ncols == 8`, where the
    /// format has one and it is on), the staged one (`ncols >= 4`, where the format has one
    /// and staging is on) or the plain one.
    fn matmul_kernel(
        &self,
        format: FormatId,
        ncols: u32,
        fused: bool,
    ) -> Result<usize, VulkanError> {
        let plain = kernels::matmul_shader(format).ok_or(VulkanError::Unsupported { format })?;
        let plain = match kernels::rotated_shader(format) {
            Some(s) if ncols == 1 && self.rotate.unwrap_or(kernels::rotated_default(format)) => s,
            _ => plain,
        };
        let tiled = match kernels::tile_shader(format) {
            Some(s)
                if ncols == 8 && !fused && self.tile.unwrap_or(kernels::tile_default(format)) =>
            {
                let rolled = self.tile_rolled.unwrap_or(kernels::tile_rolled(format));
                Some(kernels::tile_rolled_shader(format).filter(|_| rolled).unwrap_or(s))
            }
            _ => None,
        };
        let split = match kernels::cols_shader(format) {
            Some(s) if self.cols && ncols == 8 && !fused => Some(s),
            _ => None,
        };
        let staged = match kernels::staged_shader(format) {
            Some(s) if self.staged && ncols >= 4 && !fused => Some(s),
            _ => None,
        };
        let shader = if fused {
            kernels::fused_shader(format).unwrap_or(plain)
        } else {
            tiled.or(split).or(staged).unwrap_or(plain)
        };
        let forced = *self.shape.lock().unwrap_or_else(|p| p.into_inner());
        let shape = match forced {
            Some(s) if kernels::find(shader, s, ncols, self.dot4).is_some() => s,
            _ if tiled.is_some() => kernels::default_tile_shape(format),
            _ if split.is_some() => kernels::COLS_SHAPE,
            _ if staged.is_some() => kernels::default_staged_shape(format, ncols),
            _ => kernels::default_shape(format, ncols),
        };
        kernels::find(shader, shape, ncols, self.dot4).ok_or_else(|| {
            VulkanError::BadArgument(format!("no {shader} kernel for {ncols} columns"))
        })
    }

    /// The kernel shape (threads per row, rows per thread, blocks per step) and shader a
    /// matmul of `n` columns (at most [`kernels::MAX_COLS`] per dispatch) of `format` uses now
    /// (with the fused kernels on: for K <= 16384, where n = 1 calls use them).
    pub fn kernel_for(
        &self,
        format: FormatId,
        n: usize,
    ) -> Result<(kernels::Shape, &'static str), VulkanError> {
        let ncols = kernels::ncols_for(n.clamp(1, kernels::MAX_COLS));
        let fused = self.fused && n == 1 && kernels::fused_shader(format).is_some();
        let k = &kernels::KERNELS[self.matmul_kernel(format, ncols, fused)?];
        Ok(((k.tpr, k.rpt, k.bpt), k.shader))
    }

    /// The largest K split ([`kernels::Kernel::k_split`]) among the kernels of a call of `n`
    /// columns of `format` (1: none writes partial sums).
    fn max_k_split(&self, format: FormatId, n: usize) -> Result<u32, VulkanError> {
        let mut split = 1;
        let mut c0 = 0;
        while c0 < n {
            let tile = (n - c0).min(kernels::MAX_COLS);
            let k = self.matmul_kernel(format, kernels::ncols_for(tile), false)?;
            split = split.max(kernels::KERNELS[k].k_split());
            c0 += tile;
        }
        Ok(split)
    }

    /// Stages `x` on the device and sizes the scratch buffers for `n` columns of `m`.
    fn stage(
        &self,
        st: &mut State,
        m: &VulkanMatrix,
        x: &[f32],
        n: usize,
    ) -> Result<(), VulkanError> {
        let MatrixDesc { rows, cols, .. } = m.desc;
        let ctx = &*self.ctx;
        let xb = (x.len() * 4) as u64;
        let limit = ctx.info.max_buffer();
        let too = |what, bytes: u64| {
            if bytes > limit {
                Err(VulkanError::TooLarge { what, bytes, limit })
            } else {
                Ok(())
            }
        };
        too("the activations", xb)?;
        too("the outputs", (n * rows * 4) as u64)?;
        too("the quantized activations' scales", (n * cols / 32 * 16) as u64)?;
        let s = &mut st.scratch;
        let host = ensure(ctx, &mut s.x_host, xb, true)?;
        let bytes = host.bytes_mut().ok_or(VulkanError::BadArgument("unmapped staging".into()))?;
        bytes[..x.len() * 4].copy_from_slice(bytemuck::cast_slice(x));
        ensure(ctx, &mut s.x_dev, xb, false)?;
        ensure(ctx, &mut s.act_q, (n * cols) as u64, false)?;
        ensure(ctx, &mut s.act_meta, (n * cols / 32 * 16) as u64, false)?;
        ensure(ctx, &mut s.y_dev, (n * rows * 4) as u64, false)?;
        let split = self.max_k_split(m.desc.format, n)?;
        if split > 1 {
            too("the partial sums", (split as usize * n * rows * 4) as u64)?;
            ensure(ctx, &mut s.y_part, (split as usize * n * rows * 4) as u64, false)?;
        }
        ensure(ctx, &mut s.y_host, (n * rows * 4) as u64, true)?;
        ensure(ctx, &mut s.dummy, 256, false)?;
        Ok(())
    }

    /// Records the activation quantization (if the format needs it) and every dispatch of one
    /// matmul of `m` with the staged activations.
    fn record_matmul(
        &self,
        rec: &mut Recorder<'_>,
        s: &Scratch,
        m: &VulkanMatrix,
        n: usize,
    ) -> Result<(), VulkanError> {
        let plan = self.record_act(rec, s, m, n)?;
        self.record_mm(rec, s, m, n, plan)
    }

    /// The Q8_0 / Q8_1 quantizer: (kernel, elements per block, blocks per workgroup).
    fn q8_0_quantizer(&self) -> (&'static str, usize, u32) {
        if self.quant_wide {
            ("quant_q8_0p", 32, 32)
        } else {
            ("quant_q8_0", 32, 64)
        }
    }

    /// How a matmul's activations reach its kernel: whether the call uses the fused kernel
    /// and whether the activations were quantized by their own dispatch (else read as f32).
    fn act_plan(&self, m: &VulkanMatrix, n: usize) -> ActPlan {
        let MatrixDesc { format, cols, .. } = m.desc;
        // One column of at most FUSED_BLOCKS activation blocks: the fused kernel quantizes it.
        let fused = self.fused
            && n == 1
            && cols / 32 <= kernels::FUSED_BLOCKS
            && kernels::fused_shader(format).is_some();
        let quant = match format.info().activation {
            _ if fused => None,
            ActFormat::Q8_0 | ActFormat::Q8_1 => Some(self.q8_0_quantizer()),
            ActFormat::Q8K => Some(("quant_q8_k", 256, 1)),
            ActFormat::F32 => None,
        };
        ActPlan { fused, quant }
    }

    /// Records the activation rotation and quantization of a matmul of `m` (each followed by a
    /// barrier), as the plan it returns says.
    fn record_act(
        &self,
        rec: &mut Recorder<'_>,
        s: &Scratch,
        m: &VulkanMatrix,
        n: usize,
    ) -> Result<ActPlan, VulkanError> {
        let MatrixDesc { format, cols, .. } = m.desc;
        let dummy = bind(&s.dummy);
        if format.info().rotation == Rotation::Fwht256 {
            // In place on the staged activations (every call stages them afresh).
            let k = self.helper_kernel("fwht256")?;
            let segs = (n * cols / 256) as u32;
            let binds = [bind(&s.x_dev), dummy, dummy, dummy, dummy];
            rec.dispatch(k, &binds, [segs, 0, 0, 0, 0, 0, 0, 0], segs)?;
            rec.compute_barrier();
        }
        let plan = self.act_plan(m, n);
        // (kernel, elements per block, blocks per workgroup) of the quantizer.
        if let Some((shader, elems, per_group)) = plan.quant {
            let k = self.helper_kernel(shader)?;
            let blocks = (n * cols / elems) as u32;
            let params = [blocks, (cols / elems) as u32, n as u32, 0, 0, 0, 0, 0];
            let binds = [bind(&s.x_dev), dummy, bind(&s.act_q), bind(&s.act_meta), dummy];
            rec.dispatch(k, &binds, params, blocks.div_ceil(per_group))?;
            rec.compute_barrier();
        }
        Ok(plan)
    }

    /// Records the matmul dispatches of `m` (one per segment and tile of columns) on
    /// activations prepared by [`Self::record_act`] with the same `plan`.
    fn record_mm(
        &self,
        rec: &mut Recorder<'_>,
        s: &Scratch,
        m: &VulkanMatrix,
        n: usize,
        plan: ActPlan,
    ) -> Result<(), VulkanError> {
        let MatrixDesc { format, rows, cols } = m.desc;
        let nb = cols / format.geometry().block_elems;
        let (act0, act1) = if plan.quant.is_some() {
            (bind(&s.act_q), bind(&s.act_meta))
        } else {
            (bind(&s.x_dev), bind(&s.dummy))
        };
        let mut c0 = 0;
        while c0 < n {
            let tile = (n - c0).min(kernels::MAX_COLS);
            let kidx = self.matmul_kernel(format, kernels::ncols_for(tile), plan.fused)?;
            let rpw = kernels::KERNELS[kidx].rows_per_workgroup();
            let split = kernels::KERNELS[kidx].k_split();
            let out = if split > 1 { bind(&s.y_part) } else { bind(&s.y_dev) };
            for seg in &m.segments {
                let params = [
                    seg.rows as u32,
                    nb as u32,
                    tile as u32,
                    seg.first_row as u32,
                    rows as u32,
                    c0 as u32,
                    seg.scale_off,
                    0,
                ];
                let binds = [
                    Bind { buffer: seg.codes.buffer, range: seg.codes.size },
                    Bind { buffer: seg.scales.buffer, range: seg.scales.size },
                    act0,
                    act1,
                    out,
                ];
                let groups = (seg.rows as u32).div_ceil(rpw) * split;
                rec.dispatch(kidx, &binds, params, groups)?;
            }
            if split > 1 {
                // The partial sums of this tile's columns, added up in split order.
                rec.compute_barrier();
                let k = self.helper_kernel("sum_parts")?;
                let outs = (tile * rows) as u32;
                let params = [outs, rows as u32, split, 0, 0, c0 as u32, 0, 0];
                let dummy = bind(&s.dummy);
                let binds = [bind(&s.y_part), dummy, dummy, dummy, bind(&s.y_dev)];
                rec.dispatch(k, &binds, params, outs.div_ceil(256))?;
            }
            c0 += tile;
        }
        Ok(())
    }

    fn check_call(&self, m: &VulkanMatrix, x: &[f32], n: usize) -> Result<(), VulkanError> {
        let MatrixDesc { format, cols, .. } = m.desc;
        Self::check_len(format, BufKind::Activations, x.len(), n * cols)?;
        match format.info().activation {
            ActFormat::Q8_0 if n > 0 => Self::check_q8(FormatId::Q8_0, x, cols)?,
            ActFormat::Q8_1 if n > 0 => Self::check_q8(FormatId::Q8_1, x, cols)?,
            ActFormat::Q8K if n > 0 => Self::check_q8(FormatId::Q8K, x, cols)?,
            _ => {}
        }
        Ok(())
    }
}

impl Drop for VulkanBackend {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        st.scratch = Scratch::default();
        st.runner.destroy(&self.ctx);
    }
}

impl Backend for VulkanBackend {
    type Matrix = VulkanMatrix;
    type Error = VulkanError;

    fn name(&self) -> &str {
        &self.name
    }

    fn supports(&self, format: FormatId) -> bool {
        FORMATS.contains(&format)
    }

    /// Checks the length, decodes every row with the core (the first bad block is reported
    /// with its offset in `bytes`), repacks into the device layout and copies it to device
    /// memory, split by rows into segments that each fit one buffer.
    fn upload(&self, desc: MatrixDesc, bytes: &[u8]) -> Result<VulkanMatrix, VulkanError> {
        let format = desc.format;
        if !self.supports(format) {
            return Err(VulkanError::Unsupported { format });
        }
        let rb = format.row_bytes(desc.cols)?;
        Self::check_len(format, BufKind::Encoded, bytes.len(), desc.canonical_bytes()?)?;
        let mut scratch = vec![0f32; desc.cols];
        for (r, row) in bytes.chunks_exact(rb.max(1)).enumerate() {
            codec::decode_row(format, row, &mut scratch).map_err(|e| e.at(r * rb))?;
        }
        let nb = desc.cols / format.geometry().block_elems;
        let cw = repack::code_words(format).ok_or(VulkanError::Unsupported { format })?;
        let code_row = (nb * cw * 4) as u64;
        let scale_row = (repack::scale_words(format, 2, nb).0 * 4) as u64 / 2 + 8;
        let per_seg = (self.max_buffer / code_row.max(scale_row).max(1)) as usize;
        if per_seg == 0 && desc.rows > 0 {
            return Err(VulkanError::TooLarge {
                what: "one row of weights",
                bytes: code_row,
                limit: self.max_buffer,
            });
        }
        let mut segments = Vec::new();
        let mut st = self.lock();
        let State { runner, .. } = &mut *st;
        let mut first = 0;
        while first < desc.rows {
            let rows = per_seg.min(desc.rows - first);
            let src = &bytes[first * rb..(first + rows) * rb];
            let (codes, scales, scale_off) = repack::repack(format, src, rb, nb);
            let put = |runner: &mut Runner, words: &[u32]| -> Result<Buffer, VulkanError> {
                let size = (words.len() * 4) as u64;
                let dev = Buffer::new(&self.ctx, size, false)?;
                let mut host = Buffer::new(&self.ctx, size, true)?;
                host.bytes_mut().expect("mapped")[..words.len() * 4]
                    .copy_from_slice(bytemuck::cast_slice(words));
                runner.submit(&self.ctx, |rec| {
                    rec.copy(host.buffer, dev.buffer, size.max(16));
                    Ok(false)
                })?;
                Ok(dev)
            };
            let codes = put(runner, &codes)?;
            let scales = put(runner, &scales)?;
            segments.push(Segment { codes, scales, first_row: first, rows, scale_off });
            first += rows;
        }
        Ok(VulkanMatrix { desc, segments, _ctx: self.ctx.clone() })
    }

    fn desc(&self, matrix: &VulkanMatrix) -> MatrixDesc {
        matrix.desc
    }

    fn matmul(
        &self,
        m: &VulkanMatrix,
        x: &[f32],
        n: usize,
        y: &mut [f32],
    ) -> Result<(), VulkanError> {
        let MatrixDesc { format, rows, .. } = m.desc;
        if !Arc::ptr_eq(&m._ctx, &self.ctx) {
            return Err(VulkanError::BadArgument("matrix uploaded to another device".into()));
        }
        self.check_call(m, x, n)?;
        Self::check_len(format, BufKind::Values, y.len(), n * rows)?;
        if n == 0 || rows == 0 {
            return Ok(());
        }
        let mut st = self.lock();
        self.stage(&mut st, m, x, n)?;
        let State { runner, scratch } = &mut *st;
        let ybytes = (n * rows * 4) as u64;
        let xbytes = (x.len() * 4) as u64;
        runner.submit(&self.ctx, |rec| {
            let s = &*scratch;
            rec.copy(
                s.x_host.as_ref().expect("staged").buffer,
                s.x_dev.as_ref().expect("staged").buffer,
                xbytes,
            );
            rec.barrier();
            self.record_matmul(rec, s, m, n)?;
            rec.barrier();
            rec.copy(
                s.y_dev.as_ref().expect("staged").buffer,
                s.y_host.as_ref().expect("staged").buffer,
                ybytes,
            );
            rec.barrier();
            Ok(false)
        })?;
        let out = scratch.y_host.as_mut().expect("staged").bytes_mut().expect("mapped");
        y.copy_from_slice(bytemuck::cast_slice(&out[..n * rows * 4]));
        Ok(())
    }
}
