//! [`HipBackend`]: the [`Backend`] implementation. Opens a device (AMD first, then NVIDIA,
//! unless `LOWBIT_HIP_PLATFORM=amd|nvidia` picks one; `LOWBIT_HIP_DEVICE` = index), compiles the
//! base kernels when opened and a format stem's kernels at the first upload of that stem
//! (compile.rs `Part`), uploads matrices as planes (layout.rs), and per `matmul` uploads x, prepares
//! the activations on the device (Q8_0 quantization, FWHT-256 for MFP4) and runs the matvec
//! kernel for the column count.
//!
//! What must not live here: `unsafe` (ffi.rs), kernel source (kernels/), plane layout.

use std::sync::{Arc, Mutex};

use lowbit_core::backend::{Backend, MatrixDesc, PreparedActivations};
use lowbit_core::codec;
use lowbit_core::error::{Buffer, Error};
use lowbit_core::registry::{ActFormat, FormatId, Rotation};

use crate::compile;
use crate::error::HipError;
use crate::ffi::{Api, Device, Vendor};
use crate::layout::{self, Split};

/// Threads per block in every launch (the kernels' LB_BLOCK).
const BLOCK: u32 = 256;
/// The n = 1 pipeline codes (kernels/lowbit_kernels.hip, `lb_mv_any`): depth P = 1, 2, 4
/// with the activations in the ring, 10 + P (12, 14) without.
pub(crate) const PIPELINES: [usize; 5] = [1, 2, 4, 12, 14];
/// The staged n = 1 pipeline codes (`lb_mv1s`): 30 + S, the weights staged in shared memory
/// S - 1 steps ahead. Only the stems of layout.rs `STAGED_STEMS` have them, only matrices
/// whose planes every row starts chunk-aligned ([`staged_fits`]) run them, and only when
/// forced (no default: 4-25% slower than the defaults at 16384x16384 on the H200; S = 6 and
/// 8 were slower still and are not instantiated; docs/BENCHMARKS.md, session 12; staging
/// the activations in the same commit groups was 8-47% slower, session 13, removed).
pub(crate) const STAGED_PIPELINES: [usize; 2] = [33, 34];

/// Whether the staged n = 1 kernel of `rows_per_warp` rows and pipeline code `code` serves
/// a matrix of `nu` units per row: the stem has one, each row of each plane starts on a
/// multiple of its copy size (codes 16 bytes, scales and g-plane entries 4: planes start
/// 256-byte aligned) and the ring fits the 48 KiB of static shared memory (the kernel's
/// StagePlan: per warp and slot, each row's step of 32 units' codes, scales and g entries,
/// each rounded up to 16 bytes).
pub(crate) fn staged_fits(sp: &Split, nu: usize, rows_per_warp: usize, code: usize) -> bool {
    let r16 = |x: usize| x.div_ceil(16) * 16;
    let g_step = if sp.group_bytes > 0 { 32 / sp.group * sp.group_bytes } else { 0 };
    let row_bytes = r16(32 * sp.unit_q) + r16(32 * sp.unit_s) + r16(g_step);
    let slots = code.saturating_sub(30);
    layout::STAGED_STEMS.contains(&sp.stem)
        && STAGED_PIPELINES.contains(&code)
        && (nu * sp.unit_q) % 16 == 0
        && (nu * sp.unit_s) % 4 == 0
        && (sp.group_bytes == 0
            || (nu % sp.group == 0 && (nu / sp.group * sp.group_bytes) % 4 == 0))
        && WARPS_PER_CTA * slots * rows_per_warp * row_bytes <= 48 * 1024
}

/// Warps per block for 32-wide warps; kernels grid-stride rows, so wave64 is also correct.
const WARPS_PER_CTA: usize = 8;

/// (rows per warp, n = 1 pipeline code) for a matrix and a column tile of `nc`: the format's
/// n = 1 choice (layout.rs) for `nc == 1`, else (4, 1) for Q8 activations and (2, 1) for f32
/// ones (their decoded weights take 32 registers per row). `forced` (from
/// [`HipBackend::set_rows_per_warp`] / `set_units_per_step`, 0 = not forced) or
/// `LOWBIT_HIP_ROWS_PER_WARP` / `LOWBIT_HIP_UNITS` override each part, for tuning; units are 1
/// for `nc > 1`; a staged code counts only where it serves the matrix of `nu` units per row
/// ([`staged_fits`], with the rows per warp already chosen).
fn work_shape(sp: &Split, nc: usize, forced: (usize, usize), nu: usize) -> (usize, usize) {
    static ENV: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let env = *ENV.get_or_init(|| {
        std::env::var("LOWBIT_HIP_ROWS_PER_WARP").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
    });
    static UNITS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let env_units = *UNITS.get_or_init(|| {
        std::env::var("LOWBIT_HIP_UNITS").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
    });
    let (mut r, mut u) = if nc == 1 {
        sp.n1
    } else if sp.act == ActFormat::F32 {
        (2, 1)
    } else {
        (4, 1)
    };
    for f in [env, forced.0] {
        if [1, 2, 4].contains(&f) {
            r = f;
        }
    }
    for f in [env_units, forced.1] {
        if PIPELINES.contains(&f) || staged_fits(sp, nu, r, f) {
            u = f;
        }
    }
    (r, if nc == 1 { u } else { 1 })
}

/// Checks `bytes` as `upload` must (length, dimensions below 2^32, every row through the
/// core's decoder, errors at their byte offset) and splits it into the device planes.
pub(crate) fn validated_planes(
    desc: MatrixDesc,
    bytes: &[u8],
) -> Result<(Split, layout::Planes), HipError> {
    let format = desc.format;
    let sp = layout::split(format)
        .ok_or(HipError::Core(Error::Unsupported { format, op: "matmul on the HIP backend" }))?;
    let rb = format.row_bytes(desc.cols)?;
    let need = desc.canonical_bytes()?;
    if bytes.len() != need {
        return Err(Error::Length {
            format,
            buffer: Buffer::Encoded,
            got: bytes.len(),
            expected: need,
        }
        .into());
    }
    u32_of(desc.rows, format)?;
    u32_of(desc.cols, format)?;
    let mut scratch = vec![0f32; desc.cols];
    for (r, row) in bytes.chunks_exact(rb.max(1)).enumerate() {
        codec::decode_row(format, row, &mut scratch).map_err(|e| e.at(r * rb))?;
    }
    let planes = layout::to_planes(&sp, &desc, bytes, rb);
    Ok((sp, planes))
}

/// The tensor-core kernel variants (kernels/lowbit_mma.h,
/// `lb_mv_<stem>_<nc>_mma_m<MT>b<RB>s<S>`): (forced rows-per-warp code, MT, RB, S, also for
/// 16 columns). A block owns 16 MT rows, each warp stages RB code bytes per row in each of S
/// shared-memory stages. A forced rows-per-warp value equal to a code selects that variant
/// (column tiles of 16: always the one with a 16-column kernel, (1, 64, 2), as the 48 KiB of
/// static shared memory allow); the first is the default.
pub(crate) const MMA_VARIANTS: [(usize, usize, usize, usize, bool); 4] =
    [(32, 2, 64, 2, false), (17, 1, 64, 3, false), (18, 1, 64, 2, true), (16, 1, 128, 2, false)];

/// Row groups each warp owns at n = 1 by default (the grid is cut by this factor and the
/// kernel's warps grid-stride over the groups): `LOWBIT_HIP_N1_GROUPS` (1..=64) overrides it.
const N1_GROUPS_PER_WARP: usize = 1;

fn n1_groups_per_warp() -> usize {
    static G: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *G.get_or_init(|| {
        std::env::var("LOWBIT_HIP_N1_GROUPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&g| (1..=64).contains(&g))
            .unwrap_or(N1_GROUPS_PER_WARP)
    })
}

/// Whether the dp4a matvec kernels are launched as programmatic dependents of the activation
/// preparation (NVIDIA sm_90+ with cuLaunchKernelEx): their weight prefetch overlaps it. Yes
/// unless `LOWBIT_HIP_PDL=0`.
fn dependent_launch_allowed() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| !std::env::var("LOWBIT_HIP_PDL").is_ok_and(|v| v == "0"))
}

/// Whether column tiles of 8 and 16 use the tensor-core kernels by default (where the format
/// has them): yes unless `LOWBIT_HIP_MMA=0`.
fn mma_by_default() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| !std::env::var("LOWBIT_HIP_MMA").is_ok_and(|v| v == "0"))
}

/// A matvec kernel to launch: its name, the column tile (grid y covers `n` in tiles of
/// `nc`), the rows one block owns (grid x covers the rows in those) and, for a tensor-core
/// kernel, the activation word order its fragments need (`lb_mma_acts`' `order`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelChoice {
    pub name: String,
    pub nc: usize,
    pub rows_per_block: usize,
    pub mma_order: Option<u32>,
}

/// The matvec kernel for `n` columns of a matrix of `nu` units per row. With `tensor_cores`
/// (NVIDIA, sm_80 and later) column tiles of 8 and 16 use the tensor-core kernels where the
/// format has one (layout.rs `MMA_STEMS`) and `nu` is a multiple of a stage's units: the
/// variant whose code `forced.0` is (see [`MMA_VARIANTS`]), else by default the variant
/// `MMA_STEMS` names for the stem (unless `LOWBIT_HIP_MMA=0` or rows per warp are forced to a dp4a
/// value); everything else the dp4a kernels with [`WARPS_PER_CTA`] warps of `work_shape` rows
/// per block.
pub(crate) fn kernel_choice(
    sp: &Split,
    n: usize,
    forced: (usize, usize),
    nu: usize,
    tensor_cores: bool,
) -> KernelChoice {
    // f32 activations: tiles of at most 8 columns (the shared-memory stage's limit).
    let max_nc = if sp.act == ActFormat::F32 { 8 } else { 16 };
    let nc = match n {
        1 => 1,
        2 => 2,
        3..=4 => 4,
        5..=8 => 8,
        _ => 16,
    }
    .min(max_nc);
    let stem = layout::MMA_STEMS.iter().find(|s| s.0 == sp.stem);
    let default_code = stem.map_or(0, |s| s.2);
    let by_default = forced.0 == 0 && mma_by_default() && default_code != 0;
    let variant = MMA_VARIANTS
        .iter()
        .find(|v| v.0 == forced.0)
        .or(if by_default { MMA_VARIANTS.iter().find(|v| v.0 == default_code) } else { None })
        .map(|v| if nc == 16 && !v.4 { MMA_VARIANTS[2] } else { *v });
    let order = stem.map(|s| s.1);
    if let (true, true, Some(order), Some((_, mt, rb, st, _))) =
        (tensor_cores, nc >= 8, order, variant)
    {
        // Units per stage: RB code bytes per row (Q8_0: halves of 16 bytes, so 32 per unit).
        if nu % (rb / sp.unit_q) == 0 {
            let name = format!("lb_mv_{}_{nc}_mma_m{mt}b{rb}s{st}", sp.stem);
            return KernelChoice { name, nc, rows_per_block: 16 * mt, mma_order: Some(order) };
        }
    }
    let (rpw, ups) = work_shape(sp, nc, forced, nu);
    let name = format!("lb_mv_{}_{nc}_r{rpw}_u{ups}", sp.stem);
    KernelChoice { name, nc, rows_per_block: WARPS_PER_CTA * rpw, mma_order: None }
}

/// Device memory, freed on drop.
struct DeviceBuffer {
    ptr: u64,
    bytes: usize,
    dev: Arc<Device>,
}

impl DeviceBuffer {
    fn new(dev: &Arc<Device>, bytes: usize) -> Result<Self, HipError> {
        Ok(DeviceBuffer { ptr: dev.api.alloc(bytes)?, bytes, dev: dev.clone() })
    }
    fn with(dev: &Arc<Device>, data: &[u8]) -> Result<Self, HipError> {
        let b = Self::new(dev, data.len())?;
        dev.api.upload(b.ptr, data)?;
        Ok(b)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.dev.bind().is_ok() {
            self.dev.api.free(self.ptr);
        }
    }
}

/// Per-call scratch buffers, grown as needed and reused.
#[derive(Default)]
struct Workspace {
    x: Option<DeviceBuffer>,
    xt: Option<DeviceBuffer>,
    aq: Option<DeviceBuffer>,
    ad: Option<DeviceBuffer>,
    ae: Option<DeviceBuffer>,
    y: Option<DeviceBuffer>,
    /// The tensor-core kernels' reordered activations (lb_mma_acts: B words, scales).
    af: Option<DeviceBuffer>,
    adf: Option<DeviceBuffer>,
}

fn ensure(
    slot: &mut Option<DeviceBuffer>,
    dev: &Arc<Device>,
    bytes: usize,
) -> Result<u64, HipError> {
    if slot.as_ref().is_none_or(|b| b.bytes < bytes) {
        *slot = None; // free first
        *slot = Some(DeviceBuffer::new(dev, bytes)?);
    }
    Ok(slot.as_ref().map_or(0, |b| b.ptr))
}

/// A matrix on the device.
pub struct HipMatrix {
    desc: MatrixDesc,
    split: Split,
    q: DeviceBuffer,
    s: DeviceBuffer,
    g: DeviceBuffer,
    r: DeviceBuffer,
}

impl HipMatrix {
    /// Bytes of weight data read per product (the canonical size).
    pub fn weight_bytes(&self) -> usize {
        self.desc.canonical_bytes().unwrap_or(0)
    }
}

/// Device-prepared activations read back for tests: quants (element order), per-32 scales,
/// per-32 extra words.
pub type DeviceQuant = (Vec<i8>, Vec<f32>, Vec<u32>);

/// The HIP backend (see the crate docs).
pub struct HipBackend {
    dev: Arc<Device>,
    name: String,
    arch: String,
    ws: Mutex<Workspace>,
    signs: DeviceBuffer,
    forced_rows: std::sync::atomic::AtomicUsize,
    forced_units: std::sync::atomic::AtomicUsize,
    /// Matvec kernels launch as programmatic dependents (see [`dependent_launch_allowed`]).
    dependent_launch: bool,
    /// The format stems whose kernels are loaded (all of them with an AMD ahead-of-time code
    /// object); the lock is held while a stem compiles, so each compiles once.
    stems: Mutex<Vec<&'static str>>,
}

fn vendor_order() -> Vec<Vendor> {
    match std::env::var("LOWBIT_HIP_PLATFORM").as_deref() {
        Ok("amd") => vec![Vendor::Amd],
        Ok("nvidia") => vec![Vendor::Nvidia],
        _ => vec![Vendor::Amd, Vendor::Nvidia],
    }
}

fn too_large(format: FormatId) -> HipError {
    HipError::Core(Error::Unsupported {
        format,
        op: "a dimension of 2^32 or more on the HIP backend",
    })
}

fn u32_of(v: usize, format: FormatId) -> Result<u64, HipError> {
    u32::try_from(v).map(u64::from).map_err(|_| too_large(format))
}

impl HipBackend {
    /// Opens the first usable device. Errors for which [`HipError::is_unavailable`] holds mean
    /// "no runtime / no device here": use another backend.
    pub fn new() -> Result<Self, HipError> {
        let index: i32 =
            std::env::var("LOWBIT_HIP_DEVICE").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut why = Vec::new();
        for vendor in vendor_order() {
            match Api::load(vendor).and_then(|api| Device::open(api, index)) {
                Ok(dev) => return Self::with_device(dev),
                Err(e) if e.is_unavailable() => why.push(e),
                Err(e) => return Err(e),
            }
        }
        if why.len() == 1 {
            return Err(why.remove(0));
        }
        let detail = why.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ");
        Err(HipError::Unavailable { detail })
    }

    fn with_device(dev: Device) -> Result<Self, HipError> {
        let arch = match dev.api.compute_capability(dev.index)? {
            Some((maj, min)) => format!("sm_{maj}{min}"),
            None => std::env::var("LOWBIT_HIP_ARCH").unwrap_or_default(),
        };
        let tc = tensor_cores(dev.api.vendor, &arch);
        let aot = match dev.api.vendor {
            Vendor::Amd => compile::aot_code_object(&arch),
            Vendor::Nvidia => None,
        };
        let stems = if let Some(code) = aot {
            // One module with every kernel.
            dev.load_kernels(code, &kernel_names(tc))?;
            layout::STEMS.iter().map(|s| s.0).collect()
        } else {
            let code = compile::compile_kernels(&dev.api, &arch, compile::Part::Base)?;
            dev.load_kernels(&code, &base_kernel_names(tc))?;
            Vec::new()
        };
        let name = format!(
            "hip-{}:{}",
            match dev.api.vendor {
                Vendor::Amd => "amd",
                Vendor::Nvidia => "nvidia",
            },
            dev.api.name(dev.index)?
        );
        let dev = Arc::new(dev);
        let mut words = [0u32; 16];
        for (i, s) in lowbit_core::rotate::FWHT_SIGNS1
            .iter()
            .chain(&lowbit_core::rotate::FWHT_SIGNS2)
            .enumerate()
        {
            if *s > 0.0 {
                words[i / 32] |= 1 << (i % 32);
            }
        }
        let signs = DeviceBuffer::with(&dev, bytemuck::cast_slice(&words))?;
        let dependent_launch = dependent_launch_allowed()
            && dev.api.has_dependent_launch()
            && sm_number(&arch).is_some_and(|v| v >= 90);
        Ok(HipBackend {
            dev,
            name,
            arch,
            ws: Mutex::new(Workspace::default()),
            signs,
            forced_rows: std::sync::atomic::AtomicUsize::new(0),
            forced_units: std::sync::atomic::AtomicUsize::new(0),
            dependent_launch,
            stems: Mutex::new(stems),
        })
    }

    /// Compiles (or takes from the cache) and loads the matvec kernels of `stem`, once.
    fn ensure_stem(&self, stem: &'static str, f32_act: bool) -> Result<(), HipError> {
        let mut stems = self.stems.lock().unwrap_or_else(|p| p.into_inner());
        if stems.contains(&stem) {
            return Ok(());
        }
        let code = compile::compile_kernels(&self.dev.api, &self.arch, compile::Part::Stem(stem))?;
        self.dev.load_kernels(&code, &stem_kernel_names(stem, f32_act, self.tensor_cores()))?;
        stems.push(stem);
        Ok(())
    }

    /// The compile target ("sm_90", "gfx1100"; empty = hiprtc's default for the device).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Forces the rows each warp owns (1, 2 or 4: the dp4a kernels), or a tensor-core variant
    /// for column tiles of 8 and 16 where the format has them (16, 32, 17, 18: `MMA_VARIANTS`);
    /// anything else restores the default. For tuning sweeps.
    pub fn set_rows_per_warp(&self, rows: usize) {
        self.forced_rows.store(rows, std::sync::atomic::Ordering::Relaxed);
    }

    /// Forces the n = 1 pipeline, for tuning sweeps: P = 1, 2 or 4 keeps the loads of P units
    /// (weights and activations) in flight per lane; 10 + P (12, 14) the weights' only, the
    /// activations loaded when used; 30 + S (33, 34) the staged kernel with S slots
    /// where it serves the matrix (`staged_fits`); anything else restores the default. `LOWBIT_HIP_UNITS`
    /// sets it for a whole process (e.g. to run the device tests on one pipeline).
    pub fn set_units_per_step(&self, units: usize) {
        self.forced_units.store(units, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the matvec kernels launch as programmatic dependents of the activation
    /// preparation (NVIDIA sm_90+, unless `LOWBIT_HIP_PDL=0`).
    pub fn dependent_launch(&self) -> bool {
        self.dependent_launch
    }

    /// The loaded driver and compiler libraries.
    pub fn libraries(&self) -> [&str; 2] {
        [&self.dev.api.paths[0], &self.dev.api.paths[1]]
    }

    fn launch(&self, name: &str, grid: [u32; 2], args: &mut [u64]) -> Result<(), HipError> {
        let f = self.dev.kernel(name)?;
        self.dev.api.launch_kernel(f, grid, BLOCK, args)
    }

    /// Checks activations the way the reference encoder would: for quantized activations any
    /// non-finite value, or a block scale (Q8_1: or sum) that may not fit f16, is checked by
    /// the reference's encoder for that column, whose error is returned.
    fn check_activations(&self, format: FormatId, x: &[f32], cols: usize) -> Result<(), HipError> {
        // Conservative limits: Q8_0's d = amax / 127 and Q8_1's s = sum(q) * d (at most
        // 32 * amax) must fit f16 (65504); Q8_K's f32 d always fits.
        let limit = match format.info().activation {
            ActFormat::Q8_1 => 2000.0,
            ActFormat::Q8K => f32::INFINITY,
            _ => 8.0e6,
        };
        let bad = x.iter().any(|v| !v.is_finite() || v.abs() >= limit);
        if bad {
            for col in x.chunks_exact(cols) {
                PreparedActivations::new(format, col)?;
            }
        }
        Ok(())
    }

    /// Uploads `x` and prepares it on the device; returns the activation pointers for the
    /// matvec kernel: [Q8 quants, Q8 scales, Q8 extra words, f32 (interleaved)]; unused ones
    /// are 0.
    fn prepare(
        &self,
        ws: &mut Workspace,
        sp: &Split,
        format: FormatId,
        x: &[f32],
        cols: usize,
        order: u32,
    ) -> Result<[u64; 4], HipError> {
        let total = x.len();
        let xp = ensure(&mut ws.x, &self.dev, total * 4)?;
        self.dev.api.upload(xp, bytemuck::cast_slice(x))?;
        let act = if sp.act == ActFormat::F32 {
            [0, 0, 0, ensure(&mut ws.xt, &self.dev, total * 4)?]
        } else {
            [
                ensure(&mut ws.aq, &self.dev, total)?,
                ensure(&mut ws.ad, &self.dev, (total / 32) * 4)?,
                ensure(&mut ws.ae, &self.dev, (total / 32) * 4)?,
                0,
            ]
        };
        self.prepare_on_device(sp, format, xp, act, (total, cols), order)?;
        Ok(act)
    }

    /// Whether this device runs the tensor-core kernels.
    fn tensor_cores(&self) -> bool {
        tensor_cores(self.dev.api.vendor, &self.arch)
    }

    /// The kernel `run_matvec` launches for `n` columns of `m`.
    fn choice(&self, m: &HipMatrix, n: usize) -> KernelChoice {
        let forced = (
            self.forced_rows.load(std::sync::atomic::Ordering::Relaxed),
            self.forced_units.load(std::sync::atomic::Ordering::Relaxed),
        );
        kernel_choice(&m.split, n, forced, m.desc.cols / 32, self.tensor_cores())
    }

    /// The activation order (`lb_quantize_q8`'s `order`) the kernel for `n` columns of `m` reads.
    fn act_order(&self, m: &HipMatrix, n: usize) -> u32 {
        act_order(&m.split, self.choice(m, n).mma_order.is_some())
    }

    /// The reordered-activation buffers a tensor-core kernel needs for `n` columns of `m`
    /// ([0, 0] when the kernel for `n` is a dp4a one).
    fn mma_buffers(
        &self,
        ws: &mut Workspace,
        m: &HipMatrix,
        n: usize,
    ) -> Result<[u64; 2], HipError> {
        let k = self.choice(m, n);
        if k.mma_order.is_none() {
            return Ok([0, 0]);
        }
        let tiles_units = n.div_ceil(k.nc) * k.nc / 8 * (m.desc.cols / 32);
        Ok([
            ensure(&mut ws.af, &self.dev, tiles_units * 256)?,
            ensure(&mut ws.adf, &self.dev, tiles_units * 32)?,
        ])
    }

    /// Launches the matvec kernel for `n` columns into `yp` (for a tensor-core kernel, first
    /// the activation reorder into `mb`, from [`Self::mma_buffers`]).
    fn run_matvec(
        &self,
        m: &HipMatrix,
        act: [u64; 4],
        yp: u64,
        n: usize,
        mb: [u64; 2],
    ) -> Result<(), HipError> {
        let MatrixDesc { format, rows, cols } = m.desc;
        let KernelChoice { name, nc, rows_per_block, mma_order } = self.choice(m, n);
        let gy = u32::try_from(n.div_ceil(nc)).map_err(|_| too_large(format))?;
        // n = 1: each warp may own several row groups (grid-strided).
        let per = if nc == 1 && mma_order.is_none() { n1_groups_per_warp() } else { 1 };
        let gx = u32::try_from(rows.div_ceil(rows_per_block * per).min(1 << 20))
            .map_err(|_| too_large(format))?;
        let tiles = n.div_ceil(nc) * nc / 8;
        let (rows, nu, n) = (u32_of(rows, format)?, u32_of(cols / 32, format)?, u32_of(n, format)?);
        let mut act = act;
        if let Some(order) = mma_order {
            let threads = tiles * (cols / 32) * 32;
            let blocks =
                u32::try_from(threads.div_ceil(BLOCK as usize)).map_err(|_| too_large(format))?;
            let tiles = u32_of(tiles, format)?;
            self.launch(
                "lb_mma_acts",
                [blocks, 1],
                &mut [act[0], act[1], mb[0], mb[1], nu, n, tiles, u64::from(order)],
            )?;
            act[0] = mb[0];
            act[1] = mb[1];
        }
        let mut args =
            [m.q.ptr, m.s.ptr, m.g.ptr, m.r.ptr, act[0], act[1], act[2], act[3], yp, rows, nu, n];
        // The dp4a kernels wait for the preparation (lb_grid_wait) before reading activations;
        // the tensor-core ones follow lb_mma_acts in stream order.
        let dependent = mma_order.is_none() && self.dependent_launch;
        let f = self.dev.kernel(&name)?;
        self.dev.api.launch_kernel_dependent(f, [gx, gy], BLOCK, &mut args, dependent)
    }

    fn check_lengths(desc: &MatrixDesc, x: &[f32], n: usize, y: &[f32]) -> Result<(), HipError> {
        let MatrixDesc { format, rows, cols } = *desc;
        if x.len() != n * cols {
            return Err(Error::Length {
                format,
                buffer: Buffer::Activations,
                got: x.len(),
                expected: n * cols,
            }
            .into());
        }
        if y.len() != n * rows {
            return Err(Error::Length {
                format,
                buffer: Buffer::Values,
                got: y.len(),
                expected: n * rows,
            }
            .into());
        }
        Ok(())
    }

    /// GPU time of one `matmul` (activation preparation + matvec, x already on the device),
    /// averaged over `reps` back-to-back calls between two events, in seconds.
    pub fn time_matmul(
        &self,
        m: &HipMatrix,
        x: &[f32],
        n: usize,
        reps: usize,
    ) -> Result<f64, HipError> {
        let mut y = vec![0f32; n * m.desc.rows];
        self.matmul(m, x, n, &mut y)?; // validates, warms up
        let mut ws = self.ws.lock().unwrap_or_else(|p| p.into_inner());
        let order = self.act_order(m, n);
        let act = self.prepare(&mut ws, &m.split, m.desc.format, x, m.desc.cols, order)?;
        let yp = ensure(&mut ws.y, &self.dev, n * m.desc.rows * 4)?;
        let mb = self.mma_buffers(&mut ws, m, n)?;
        let xp = ws.x.as_ref().map_or(0, |b| b.ptr);
        let ms = self.dev.api.time_ms(&mut || {
            for _ in 0..reps {
                let (sp, f, cols) = (&m.split, m.desc.format, m.desc.cols);
                self.prepare_on_device(sp, f, xp, act, (x.len(), cols), order)?;
                self.run_matvec(m, act, yp, n, mb)?;
            }
            Ok(())
        })?;
        Ok(f64::from(ms) * 1e-3 / reps.max(1) as f64)
    }

    /// The device part of `prepare` (x already uploaded to `xp`): FWHT-256 in place for
    /// rotated formats, then quantization into the Q8 buffers `act[0..3]` or the f32
    /// interleave into `act[3]` in activation order `order` ([`act_order`]); `dims` = (total
    /// elements, columns of the matrix). Re-running it re-rotates x, which only timing does.
    fn prepare_on_device(
        &self,
        sp: &Split,
        format: FormatId,
        xp: u64,
        act: [u64; 4],
        (total, cols): (usize, usize),
        order: u32,
    ) -> Result<(), HipError> {
        let nu = u32_of(cols / 32, format)?;
        let blocks = |per: usize| u32::try_from(total.div_ceil(per)).map_err(|_| too_large(format));
        if format.info().rotation == Rotation::Fwht256 {
            let segs = u32_of(total / 256, format)?;
            self.launch("lb_fwht256", [segs as u32, 1], &mut [xp, self.signs.ptr, segs])?;
        }
        let order = u64::from(order);
        match sp.act {
            ActFormat::F32 => {
                let total4 = total / 4;
                self.launch(
                    "lb_interleave_f32",
                    [blocks(4 * BLOCK as usize)?, 1],
                    &mut [xp, act[3], u32_of(total4, format)?, nu],
                )
            }
            ActFormat::Q8K => self.launch(
                "lb_quantize_q8k",
                [blocks(256)?, 1],
                &mut [xp, act[0], act[1], act[2], nu, order],
            ),
            ActFormat::Q8_0 | ActFormat::Q8_1 => {
                let q81 = u64::from(sp.act == ActFormat::Q8_1);
                self.launch(
                    "lb_quantize_q8",
                    [blocks(BLOCK as usize)?, 1],
                    &mut [xp, act[0], act[1], act[2], u32_of(total, format)?, nu, order, q81],
                )
            }
        }
    }

    /// Read bandwidth of this device (bytes/s) for a buffer of `bytes`: the `lb_read` kernel
    /// timed with events over `reps` passes. The ceiling matvec figures are compared with.
    pub fn read_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64, HipError> {
        self.dev.bind()?;
        let n16 = bytes / 16;
        let buf = DeviceBuffer::new(&self.dev, n16 * 16)?;
        let sink = DeviceBuffer::new(&self.dev, 4)?;
        let grid = 132 * 16; // enough resident blocks for any current GPU; grid-strided
        let mut args = [buf.ptr, n16 as u64, sink.ptr];
        self.launch("lb_read", [grid, 1], &mut args)?;
        self.dev.api.sync()?;
        let ms = self.dev.api.time_ms(&mut || {
            for _ in 0..reps {
                self.launch("lb_read", [grid, 1], &mut args)?;
            }
            Ok(())
        })?;
        Ok((n16 * 16 * reps) as f64 / (f64::from(ms) * 1e-3))
    }

    /// Prepares `x` (one column) for `format` with the device kernels and returns the quants
    /// (element order), the per-32 scales and the per-32 extra words (Q8_1: f32 bits of `s`;
    /// Q8_K: the two 16-element sums as i16 halves); for tests that check the device encoders
    /// against the core's bit for bit.
    #[doc(hidden)]
    pub fn device_quantize(&self, format: FormatId, x: &[f32]) -> Result<DeviceQuant, HipError> {
        self.dev.bind()?;
        let mut ws = self.ws.lock().unwrap_or_else(|p| p.into_inner());
        let sp = layout::split(format).ok_or(HipError::Core(Error::Unsupported {
            format,
            op: "matmul on the HIP backend",
        }))?;
        let order = act_order(&sp, false);
        let act = self.prepare(&mut ws, &sp, format, x, x.len(), order)?;
        let mut qi = vec![0i8; x.len()];
        let mut d = vec![0f32; x.len() / 32];
        let mut e = vec![0u32; x.len() / 32];
        self.dev.api.download(bytemuck::cast_slice_mut(&mut qi), act[0])?;
        self.dev.api.download(bytemuck::cast_slice_mut(&mut d), act[1])?;
        self.dev.api.download(bytemuck::cast_slice_mut(&mut e), act[2])?;
        // Undo the half-unit interleave (and the codebook order) of one column.
        let nu = x.len() / 32;
        let pos = |j: usize| match order {
            1 => codebook_pos(&self.dev, j),
            2 => 4 * (j & 3) + (j >> 2),
            _ => j,
        };
        let q = (0..x.len())
            .map(|i| {
                let (b, j) = (i / 32, i % 32);
                qi[(j / 16) * nu * 16 + b * 16 + pos(j % 16)]
            })
            .collect();
        Ok((q, d, e))
    }
}

/// The activation order a kernel of split `sp` reads (`lb_quantize_q8`'s `order`): 2
/// (transposed, with integer sums) for the ternary dp4a kernels, 1 (lb_codebook16 order) for
/// the other 2-bit kernels and the tensor-core ones, else 0 (element order).
pub(crate) fn act_order(sp: &Split, mma: bool) -> u32 {
    if sp.transposed_dp4a && !mma {
        2
    } else {
        u32::from(sp.codebook_order)
    }
}

/// Where lb_codebook4_pos stores element `e` (0..16) of a half unit on this vendor.
fn codebook_pos(dev: &Device, e: usize) -> usize {
    match dev.api.vendor {
        Vendor::Nvidia => 4 * ((if e >= 8 { 2 } else { 0 }) + (e & 1)) + ((e & 7) >> 1),
        Vendor::Amd => 4 * (e & 3) + (e >> 2),
    }
}

/// Whether a device runs the tensor-core kernels: NVIDIA, sm_80 and later (`mma.sync` with
/// int8, cp.async).
fn tensor_cores(vendor: Vendor, arch: &str) -> bool {
    vendor == Vendor::Nvidia && sm_number(arch).is_some_and(|v| v >= 80)
}

/// 90 for "sm_90" (NVIDIA targets only).
fn sm_number(arch: &str) -> Option<u32> {
    arch.strip_prefix("sm_").and_then(|v| v.parse::<u32>().ok())
}

/// The kernels of the base module (the tensor-core activation reorder only where it runs).
fn base_kernel_names(tensor_cores: bool) -> Vec<String> {
    let mut v: Vec<String> =
        ["lb_quantize_q8", "lb_quantize_q8k", "lb_interleave_f32", "lb_fwht256", "lb_read"]
            .map(String::from)
            .to_vec();
    if tensor_cores {
        v.push("lb_mma_acts".to_string());
    }
    v
}

/// The matvec kernels of one stem's module (the tensor-core ones only where they exist).
fn stem_kernel_names(stem: &str, f32_act: bool, tensor_cores: bool) -> Vec<String> {
    let mut v = Vec::new();
    let tiles: &[usize] = if f32_act { &[1, 2, 4, 8] } else { &[1, 2, 4, 8, 16] };
    if tensor_cores && layout::MMA_STEMS.iter().any(|s| s.0 == stem) {
        for (_, mt, rb, st, with16) in MMA_VARIANTS {
            let ncs: &[usize] = if with16 { &[8, 16] } else { &[8] };
            v.extend(ncs.iter().map(|nc| format!("lb_mv_{stem}_{nc}_mma_m{mt}b{rb}s{st}")));
        }
    }
    for &nc in tiles {
        for r in [1, 2, 4] {
            let units: &[usize] = if nc == 1 { &PIPELINES } else { &[1] };
            for u in units {
                v.push(format!("lb_mv_{stem}_{nc}_r{r}_u{u}"));
            }
            if nc == 1 && layout::STAGED_STEMS.contains(&stem) {
                v.extend(STAGED_PIPELINES.iter().map(|u| format!("lb_mv_{stem}_1_r{r}_u{u}")));
            }
        }
    }
    v
}

/// Every kernel of the source (the tensor-core ones only where they exist): the base
/// module's and every stem's.
fn kernel_names(tensor_cores: bool) -> Vec<String> {
    let mut v = base_kernel_names(tensor_cores);
    for (stem, f32_act) in layout::STEMS {
        v.extend(stem_kernel_names(stem, f32_act, tensor_cores));
    }
    v
}

impl Backend for HipBackend {
    type Matrix = HipMatrix;
    type Error = HipError;

    fn name(&self) -> &str {
        &self.name
    }

    fn supports(&self, format: FormatId) -> bool {
        layout::split(format).is_some()
    }

    fn upload(&self, desc: MatrixDesc, bytes: &[u8]) -> Result<HipMatrix, HipError> {
        let (sp, planes) = validated_planes(desc, bytes)?;
        self.dev.bind()?;
        let f32_act = sp.act == ActFormat::F32;
        self.ensure_stem(sp.stem, f32_act)?;
        Ok(HipMatrix {
            desc,
            split: sp,
            q: DeviceBuffer::with(&self.dev, &planes.q)?,
            s: DeviceBuffer::with(&self.dev, &planes.s)?,
            g: DeviceBuffer::with(&self.dev, &planes.g)?,
            r: DeviceBuffer::with(&self.dev, &planes.r)?,
        })
    }

    fn desc(&self, m: &HipMatrix) -> MatrixDesc {
        m.desc
    }

    fn matmul(&self, m: &HipMatrix, x: &[f32], n: usize, y: &mut [f32]) -> Result<(), HipError> {
        Self::check_lengths(&m.desc, x, n, y)?;
        let MatrixDesc { format, rows, cols } = m.desc;
        if n == 0 || rows == 0 {
            return Ok(());
        }
        if cols == 0 {
            y.iter_mut().for_each(|v| *v = 0.0);
            return Ok(());
        }
        if m.split.act != ActFormat::F32 {
            self.check_activations(format, x, cols)?;
        }
        self.dev.bind()?;
        let mut ws = self.ws.lock().unwrap_or_else(|p| p.into_inner());
        let act = self.prepare(&mut ws, &m.split, format, x, cols, self.act_order(m, n))?;
        let yp = ensure(&mut ws.y, &self.dev, n * rows * 4)?;
        let mb = self.mma_buffers(&mut ws, m, n)?;
        self.run_matvec(m, act, yp, n, mb)?;
        self.dev.api.download(bytemuck::cast_slice_mut(y), yp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(format: FormatId, n: usize, forced: usize, nu: usize, tc: bool) -> KernelChoice {
        let sp = layout::split(format).unwrap();
        kernel_choice(&sp, n, (forced, 0), nu, tc)
    }

    #[test]
    fn staged_codes_only_where_they_fit() {
        let staged = |f: FormatId, rows: usize, units: usize, nu: usize| {
            kernel_choice(&layout::split(f).unwrap(), 1, (rows, units), nu, true).name
        };
        assert_eq!(staged(FormatId::RocmFp2, 2, 34, 512), "lb_mv_rocmfp2_1_r2_u34");
        assert_eq!(staged(FormatId::Pq2_0, 4, 33, 40), "lb_mv_pq2_1_r4_u33");
        assert_eq!(staged(FormatId::Hfp4G32, 1, 34, 8), "lb_mv_hfp4_1_r1_u34");
        // Not for a stem without them, rows of planes not chunk-aligned (ROCmFP2's codes at
        // nu = 5: 40 bytes; TQ2_0's g plane at nu = 8: 2 bytes), or a ring over 48 KiB
        // (MXFP4, 4 rows x 4 slots x 544 bytes x 8 warps): the default pipeline.
        assert_eq!(staged(FormatId::Q4_0, 2, 34, 512), "lb_mv_q4_0_1_r2_u12");
        assert_eq!(staged(FormatId::RocmFp2, 2, 34, 5), "lb_mv_rocmfp2_1_r2_u14");
        assert_eq!(staged(FormatId::Tq2_0, 2, 34, 8), "lb_mv_tq2_0_1_r2_u12");
        assert_eq!(staged(FormatId::Tq2_0, 2, 34, 16), "lb_mv_tq2_0_1_r2_u34");
        assert_eq!(staged(FormatId::Mxfp4, 4, 34, 512), "lb_mv_mxfp4_1_r4_u12");
        assert_eq!(staged(FormatId::Mxfp4, 2, 34, 512), "lb_mv_mxfp4_1_r2_u34");
    }

    #[test]
    fn tensor_core_kernels_only_where_they_run() {
        // NVIDIA sm_80+, a format with fragment decoders, 5..16 columns, whole stages per row.
        let k = choice(FormatId::RocmFp2, 8, 0, 512, true);
        assert_eq!(k.name, "lb_mv_rocmfp2_8_mma_m2b64s2");
        assert_eq!((k.rows_per_block, k.mma_order), (32, Some(2)));
        assert_eq!(
            choice(FormatId::RocmFp2, 16, 0, 512, true).name,
            "lb_mv_rocmfp2_16_mma_m1b64s2"
        );
        // AMD (or pre-sm_80), n = 4, a format without them, a row of 12 units (stages of 8),
        // Q8_0 by default: dp4a.
        assert_eq!(choice(FormatId::RocmFp2, 8, 0, 512, false).mma_order, None);
        assert_eq!(choice(FormatId::RocmFp2, 4, 0, 512, true).mma_order, None);
        assert_eq!(choice(FormatId::Q4K, 8, 0, 512, true).mma_order, None);
        assert_eq!(choice(FormatId::RocmFp2, 8, 0, 12, true).mma_order, None);
        assert_eq!(choice(FormatId::Q8_0, 8, 0, 512, true).name, "lb_mv_q8_0_8_r4_u1");
        // TQ2_0's default is its own variant (m1b64s2), also for 16 columns.
        assert_eq!(choice(FormatId::Tq2_0, 8, 0, 512, true).name, "lb_mv_tq2_0_8_mma_m1b64s2");
        assert_eq!(choice(FormatId::Tq2_0, 16, 0, 512, true).name, "lb_mv_tq2_0_16_mma_m1b64s2");
        // Forced variant codes select the variant (16 columns: the one with a 16-column kernel).
        assert_eq!(choice(FormatId::Q8_0, 8, 16, 512, true).name, "lb_mv_q8_0_8_mma_m1b128s2");
        assert_eq!(choice(FormatId::Q4_0, 16, 17, 512, true).name, "lb_mv_q4_0_16_mma_m1b64s2");
        assert!(tensor_cores(Vendor::Nvidia, "sm_90") && tensor_cores(Vendor::Nvidia, "sm_80"));
        assert!(!tensor_cores(Vendor::Nvidia, "sm_75") && !tensor_cores(Vendor::Amd, "gfx942"));
    }

    #[test]
    fn every_chosen_kernel_is_resolved_at_load() {
        let names = kernel_names(true);
        for f in FormatId::ALL {
            let Some(sp) = layout::split(f) else { continue };
            for n in [1, 2, 3, 5, 8, 13, 16, 40] {
                for forced in [0, 1, 2, 4, 16, 17, 18, 32] {
                    for (nu, units) in [(8, 0), (512, 0), (512, 2), (512, 14), (512, 34), (12, 33)]
                    {
                        let k = kernel_choice(&sp, n, (forced, units), nu, true);
                        assert!(names.contains(&k.name), "{f} n {n} forced {forced}: {}", k.name);
                        // ... and in the module of the matrix's stem, loaded at its upload.
                        let f32_act = sp.act == ActFormat::F32;
                        let stem = stem_kernel_names(sp.stem, f32_act, true);
                        assert!(stem.contains(&k.name), "{f}: {} not in {}", k.name, sp.stem);
                    }
                }
            }
        }
        assert!(!kernel_names(false).iter().any(|n| n.contains("mma")));
    }

    #[test]
    fn every_part_has_a_section_in_the_source() {
        // Each stem's kernels are instantiated under its own guard, the launch helpers under
        // the base module's (kernels/lowbit_kernels.hip, lowbit_mma.h).
        for (stem, _) in layout::STEMS {
            let guard = format!("#if !defined(LB_SELECT) || defined(LB_STEM_{stem})\n");
            assert_eq!(compile::KERNELS.matches(&guard).count(), 1, "{stem}");
        }
        let base = "#if !defined(LB_SELECT) || defined(LB_BASE)\n";
        assert_eq!(compile::KERNELS.matches(base).count(), 1);
        assert_eq!(compile::MMA_HEADER.matches(base).count(), 1);
        for name in base_kernel_names(true) {
            let def = format!("LB_KERNEL void {name}(");
            let src = if name == "lb_mma_acts" { compile::MMA_HEADER } else { compile::KERNELS };
            let at = src.find(&def).unwrap_or_else(|| panic!("{name}"));
            assert!(src[..at].rfind(base) > src[..at].rfind("#endif"), "{name} outside LB_BASE");
        }
    }
}
