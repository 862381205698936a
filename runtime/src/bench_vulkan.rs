//! `lowbit bench --backend vulkan`: the Vulkan backend's matmul speed as a fraction of the
//! device's streaming-read bandwidth, both measured in the same run with GPU timestamps.
//!
//! Method:
//! * Read ceiling: [`VulkanBackend::read_bandwidth`], our own WGSL read kernel (not a copy
//!   command) over a device buffer of up to 1 GiB (64 MiB with `--quick`, capped by the device's
//!   single-buffer limit), best over several grid sizes, each timed over `reps` passes.
//! * Matmul: for each format x shape x n the weights are built once ([`bench::make_weights`]:
//!   the reference encoder on a Gaussian tensor), uploaded once and copied on the device into
//!   several copies when one copy is smaller than 512 MiB (so consecutive calls cannot be
//!   served from the GPU's cache; at most 8), and timed with [`VulkanBackend::time_matmul`]:
//!   GPU time between timestamps around `reps` calls cycling through the copies (device
//!   activation quantization and every dispatch included; host copies of x and y excluded),
//!   `reps` sized for about 0.1 s; one untimed warm-up of the same length, then the median of
//!   3 timings. Before the first
//!   timing of each matrix the GPU is kept busy with it for 1 s of wall time (it lowers its
//!   clocks while the host builds the weights; without this the first row read 2-3x slow).
//!   Weight GB/s = canonical weight bytes / time per call; ratio = weight GB/s / read ceiling.
//! * `--vk-sweep`: every compiled kernel shape (threads per row, rows per thread, blocks per
//!   step) for each row, not only the default.
//! * `--vk-profile`: for each row also [`VulkanBackend::profile_matmul`] (the call's parts
//!   timed on their own) and [`VulkanBackend::read_dispatch_us`] (our read kernel over the
//!   same bytes, one dispatch and barrier per copy of the weights).
//!
//! What must not live here: kernels or device code (those are `lowbit-vulkan`'s).

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::FormatId;
use lowbit_vulkan::{kernels, VulkanBackend, VulkanError, VulkanOptions};

use crate::bench::{self, BenchConfig};
use crate::demo::Pcg32;

/// One matmul measurement on the device.
#[derive(Clone, Debug, PartialEq)]
pub struct VkRow {
    /// Weight format.
    pub format: FormatId,
    /// Output rows.
    pub rows: usize,
    /// Reduction length.
    pub k: usize,
    /// Activation columns.
    pub n: usize,
    /// Kernel shape: threads per row, rows per thread, blocks per step (of the n-column
    /// variant).
    pub shape: kernels::Shape,
    /// Median GPU time per call, microseconds.
    pub us_per_call: f64,
    /// Canonical weight bytes read per call.
    pub weight_bytes: usize,
    /// Copies of the weights cycled through.
    pub copies: usize,
    /// Weight bytes / time, GB/s.
    pub weight_gb_s: f64,
    /// 2 rows K n / time, GFLOP/s.
    pub gflop_s: f64,
    /// `weight_gb_s` / the read ceiling.
    pub ratio_to_bandwidth: f64,
    /// With `--vk-profile`: the call's parts, and our read kernel's microseconds per dispatch
    /// over the same bytes with the grid size that gave them.
    pub profile: Option<(lowbit_vulkan::MatmulProfile, f64, u32)>,
}

/// Everything one Vulkan run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct VkReport {
    /// Device facts.
    pub device: lowbit_vulkan::DeviceInfo,
    /// Whether the `OpSDot` kernels ran.
    pub dot4: bool,
    /// UTC start.
    pub date: String,
    /// The command line.
    pub command_line: String,
    /// Bytes of the read probe's buffer.
    pub read_buffer_bytes: u64,
    /// Read ceiling, GB/s.
    pub read_gb_s: f64,
    /// Matmul rows.
    pub matmul: Vec<VkRow>,
}

fn activations(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Pcg32::new(seed, 7);
    (0..len).map(|_| (rng.uniform() * 2.0 - 1.0) as f32).collect()
}

fn err(e: VulkanError) -> String {
    e.to_string()
}

/// Starts the backend (a [`VulkanError`] whose `is_unavailable()` is true means "fall back").
pub fn open() -> Result<VulkanBackend, VulkanError> {
    VulkanBackend::with_options(VulkanOptions::default())
}

/// Runs the benchmark on `vk`; `line` receives each printable line.
pub fn run(
    vk: &VulkanBackend,
    cfg: &BenchConfig,
    sweep: bool,
    profile: bool,
    line: &mut dyn FnMut(&str),
) -> Result<VkReport, String> {
    let start = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let info = vk.info().clone();
    line(&format!(
        "device: {} (driver {}, vendor 0x{:04x} device 0x{:04x}), subgroup size {}, \
         dot4 supported {} accelerated {} (kernels use it: {}), single buffer <= {} MiB",
        info.name,
        info.driver,
        info.vendor_id,
        info.device_id,
        info.subgroup_size,
        info.dot4_supported,
        info.dot4_accelerated,
        vk.uses_dot4(),
        info.max_buffer() >> 20
    ));
    let formats: Vec<FormatId> = if cfg.formats.is_empty() {
        lowbit_vulkan::FORMATS.to_vec()
    } else {
        if let Some(f) = cfg.formats.iter().find(|&&f| !vk.supports(f)) {
            return Err(format!("the Vulkan backend does not support {f} yet"));
        }
        cfg.formats.clone()
    };
    let probe = if cfg.quick { 64u64 << 20 } else { 1 << 30 };
    let (read_buffer_bytes, bps) =
        vk.read_bandwidth(probe, if cfg.quick { 3 } else { 20 }).map_err(err)?;
    let read_gb_s = bps / 1e9;
    line(&format!(
        "read ceiling (our read kernel, {} MiB buffer, GPU timestamps): {read_gb_s:.1} GB/s",
        read_buffer_bytes >> 20
    ));
    let mut report = VkReport {
        device: info,
        dot4: vk.uses_dot4(),
        date: bench::utc_string(start),
        command_line: cfg.command_line.clone(),
        read_buffer_bytes,
        read_gb_s,
        matmul: Vec::new(),
    };
    line(&format!(
        "{:<10} {:>12} {:>4} {:>8} {:>6} {:>11} {:>9} {:>9} {:>6}",
        "format", "rows x K", "n", "shape", "copies", "us/call", "GB/s", "GFLOP/s", "ratio"
    ));
    let budget = if cfg.quick { 0.01 } else { 0.1 };
    for &format in &formats {
        for &(rows, k) in &cfg.shapes {
            let w = bench::make_weights(format, rows, k, 0x5eed ^ (rows * 31 + k) as u64)?;
            let copies =
                if cfg.quick { 1 } else { ((512usize << 20).div_ceil(w.len().max(1))).clamp(1, 8) };
            let desc = MatrixDesc { format, rows, cols: k };
            let first =
                vk.upload(desc, &w).map_err(|e| format!("{format} {rows}x{k}: upload: {e}"))?;
            let mut ms = vec![];
            for _ in 1..copies {
                ms.push(
                    vk.duplicate(&first).map_err(|e| format!("{format} {rows}x{k}: copy: {e}"))?,
                );
            }
            ms.push(first);
            drop(w);
            let refs: Vec<_> = ms.iter().collect();
            let wbytes = desc.canonical_bytes().map_err(|e| e.to_string())?;
            // The GPU idles (and lowers its clocks) while the host builds the weights: keep it
            // busy with this matrix for a while before the first timing.
            if !cfg.quick {
                let x = activations(k, 1);
                let t0 = std::time::Instant::now();
                while t0.elapsed().as_secs_f64() < 1.0 {
                    vk.time_matmul(&refs, &x, 1, 50).map_err(err)?;
                }
            }
            for &n in &cfg.ns {
                let x = activations(n * k, n as u64);
                let ncols = kernels::ncols_for(n.min(kernels::MAX_COLS));
                // The shapes of the kernel this call uses (plain, staged or column-split).
                let (default, shader) = vk.kernel_for(format, n).map_err(err)?;
                let shapes = if sweep { kernels::shapes(shader, ncols) } else { vec![default] };
                for shape in shapes {
                    vk.set_shape(Some(shape)).map_err(err)?;
                    let one = vk.time_matmul(&refs, &x, n, 3).map_err(err)?;
                    let reps = ((budget / one.max(1e-7)) as usize).clamp(3, 500);
                    // Warm-up at full load first: the GPU lowers its clocks while the host
                    // builds weights, and a short first timing would catch the ramp.
                    vk.time_matmul(&refs, &x, n, reps).map_err(err)?;
                    let mut t = Vec::new();
                    for _ in 0..3 {
                        t.push(vk.time_matmul(&refs, &x, n, reps).map_err(err)?);
                    }
                    t.sort_by(f64::total_cmp);
                    let secs = t[1];
                    let weight_gb_s = wbytes as f64 / secs / 1e9;
                    let prof = if profile {
                        let p = vk.profile_matmul(&refs, &x, n, reps).map_err(err)?;
                        let (rus, groups) =
                            vk.read_dispatch_us(wbytes as u64, copies, reps).map_err(err)?;
                        line(&format!(
                            "  profile us: empty+barrier {:.2}, empty+compute barrier {:.2}, empty {:.2}, act {:.2}, \
                             matmul+barrier {:.2}, matmul {:.2}, call {:.2}; read kernel \
                             same bytes {:.2} ({} groups, {:.1} GB/s)",
                            p.empty_us,
                            p.empty_compute_barrier_us,
                            p.empty_no_barrier_us,
                            p.act_us,
                            p.matmul_us,
                            p.matmul_no_barrier_us,
                            p.full_us,
                            rus,
                            groups,
                            wbytes as f64 / rus / 1e3
                        ));
                        Some((p, rus, groups))
                    } else {
                        None
                    };
                    let row = VkRow {
                        format,
                        rows,
                        k,
                        n,
                        shape,
                        us_per_call: secs * 1e6,
                        weight_bytes: wbytes,
                        copies,
                        weight_gb_s,
                        gflop_s: 2.0 * (rows * k * n) as f64 / secs / 1e9,
                        ratio_to_bandwidth: weight_gb_s / read_gb_s,
                        profile: prof,
                    };
                    line(&format!(
                        "{:<10} {:>12} {:>4} {:>8} {:>6} {:>11.1} {:>9.1} {:>9.1} {:>6.3}",
                        format.name(),
                        format!("{rows}x{k}"),
                        n,
                        format!("{}x{}x{}", shape.0, shape.1, shape.2),
                        copies,
                        row.us_per_call,
                        row.weight_gb_s,
                        row.gflop_s,
                        row.ratio_to_bandwidth
                    ));
                    report.matmul.push(row);
                }
                vk.set_shape(None).map_err(err)?;
            }
        }
    }
    Ok(report)
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

impl VkReport {
    /// The report as JSON: `backend`, `device`, `date`, `command_line`, `read` and `matmul`.
    pub fn to_json(&self) -> String {
        let d = &self.device;
        let mut o = String::from("{\n  \"backend\": \"vulkan\",\n");
        let _ = writeln!(
            o,
            "  \"device\": {{\"name\": {}, \"driver\": {}, \"vendor_id\": {}, \"device_id\": {}, \
             \"subgroup_size\": {}, \"dot4_supported\": {}, \"dot4_accelerated\": {}, \
             \"dot4_used\": {}, \"max_buffer_bytes\": {}}},",
            json_str(&d.name),
            json_str(&d.driver),
            d.vendor_id,
            d.device_id,
            d.subgroup_size,
            d.dot4_supported,
            d.dot4_accelerated,
            self.dot4,
            d.max_buffer()
        );
        let _ = writeln!(o, "  \"date\": {},", json_str(&self.date));
        let _ = writeln!(o, "  \"command_line\": {},", json_str(&self.command_line));
        let _ = writeln!(
            o,
            "  \"read\": {{\"buffer_bytes\": {}, \"gb_s\": {}}},",
            self.read_buffer_bytes,
            json_num(self.read_gb_s)
        );
        let rows: Vec<String> = self
            .matmul
            .iter()
            .map(|r| {
                format!(
                    "    {{\"format\": {}, \"rows\": {}, \"k\": {}, \"n\": {}, \
                     \"threads_per_row\": {}, \"rows_per_thread\": {}, \"blocks_per_step\": {}, \
                     \"us_per_call\": {}, \
                     \"weight_bytes\": {}, \"copies\": {}, \"weight_gb_s\": {}, \"gflop_s\": {}, \
                     \"ratio_to_bandwidth\": {}{}}}",
                    json_str(r.format.name()),
                    r.rows,
                    r.k,
                    r.n,
                    r.shape.0,
                    r.shape.1,
                    r.shape.2,
                    json_num(r.us_per_call),
                    r.weight_bytes,
                    r.copies,
                    json_num(r.weight_gb_s),
                    json_num(r.gflop_s),
                    json_num(r.ratio_to_bandwidth),
                    r.profile.map_or(String::new(), |(p, rus, groups)| format!(
                        ", \"profile_us\": {{\"empty_barrier\": {}, \"empty_compute_barrier\": {}, \"empty\": {}, \"act\": {}, \
                         \"matmul_barrier\": {}, \"matmul\": {}, \"call\": {}, \
                         \"read_same_bytes\": {}, \"read_groups\": {}}}",
                        json_num(p.empty_us),
                        json_num(p.empty_compute_barrier_us),
                        json_num(p.empty_no_barrier_us),
                        json_num(p.act_us),
                        json_num(p.matmul_us),
                        json_num(p.matmul_no_barrier_us),
                        json_num(p.full_us),
                        json_num(rus),
                        groups
                    ))
                )
            })
            .collect();
        let _ = writeln!(o, "  \"matmul\": [\n{}\n  ]\n}}", rows.join(",\n"));
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_reports_ratios_and_valid_json() {
        let vk = match open() {
            Ok(vk) => vk,
            Err(e) if e.is_unavailable() => {
                assert_ne!(
                    std::env::var("LOWBIT_REQUIRE_VULKAN").as_deref(),
                    Ok("1"),
                    "LOWBIT_REQUIRE_VULKAN=1 but {e}"
                );
                eprintln!("skipped: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let cfg = BenchConfig {
            formats: vec![FormatId::Q4_0, FormatId::Hfp4G32],
            shapes: vec![(64, 256)],
            ns: vec![1, 3],
            threads: vec![1],
            isa: None,
            quick: true,
            encode: false,
            rounds: 1,
            command_line: "test".into(),
        };
        let mut lines = Vec::new();
        let r = run(&vk, &cfg, false, true, &mut |l| lines.push(l.to_string())).unwrap();
        assert!(r.read_gb_s > 0.0);
        assert_eq!(r.matmul.len(), 4);
        for row in &r.matmul {
            assert!(row.us_per_call > 0.0 && row.ratio_to_bandwidth > 0.0, "{row:?}");
            assert!((row.weight_gb_s / r.read_gb_s - row.ratio_to_bandwidth).abs() < 1e-9);
        }
        let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(j["backend"], "vulkan");
        assert_eq!(j["matmul"].as_array().map(Vec::len), Some(4));
        assert!(j["read"]["gb_s"].as_f64().unwrap() > 0.0);
        assert!(lines.iter().any(|l| l.starts_with("read ceiling")));
    }
}
