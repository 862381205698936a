//! `lowbit bench --backend hip`: the HIP backend's matmul speed against the device's read
//! bandwidth measured in the same run (feature `hip`).
//!
//! Method: the read ceiling is lowbit-hip's `lb_read` kernel over a buffer the size of the
//! largest weight matrix (at least 256 MiB), best of three timings of 20 passes. Each matmul
//! (weights from [`crate::bench::make_weights`], uploaded once) is timed with GPU events over
//! back-to-back calls lasting about 0.1 s, activation preparation (Q8_0 quantization, FWHT)
//! included, host copies excluded; best of three. Weight TB/s = canonical weight bytes / time
//! (1e12 bytes/s); `vs n=1` = this n's time over the n = 1 time of the same format and shape.
//! `LOWBIT_HIP_BENCH_ROWS_PER_WARP=1,2,4` and `LOWBIT_HIP_BENCH_UNITS=1,2,4` time every point
//! once per rows-per-warp and (n = 1 only) units-per-step setting: a tuning sweep; the JSON's
//! `rows_per_warp` / `units_per_step` are 0 for the backend's default. Units per step are the
//! n = 1 pipeline codes (lowbit-hip's `set_units_per_step`: 1, 2, 4, 12, 14); rows per
//! warp 32, 17, 18 and 16 select the tensor-core kernel variants for n >= 5 where a format has
//! them (lowbit-hip's `set_rows_per_warp`).
//!
//! What must not live here: kernels or device code (lowbit-hip's).

use std::fmt::Write as _;

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::FormatId;
use lowbit_hip::HipBackend;

use crate::bench::{json_str, make_weights};
use crate::demo::Pcg32;

/// One measurement.
#[derive(Clone, Debug)]
pub struct HipRow {
    /// Format.
    pub format: FormatId,
    /// Output rows.
    pub rows: usize,
    /// K.
    pub k: usize,
    /// Columns.
    pub n: usize,
    /// GPU microseconds per call.
    pub us: f64,
    /// Weight TB/s.
    pub tb_s: f64,
    /// tb_s / read ceiling.
    pub ratio: f64,
    /// time / time at n = 1 (same format, shape and rows per warp), if measured.
    pub vs_n1: Option<f64>,
    /// Rows per warp forced for this point (0 = the backend's default).
    pub rows_per_warp: usize,
    /// Units per lane step forced for this point (n = 1 only; 0 = the backend's default).
    pub units_per_step: usize,
}

/// Runs the benchmark and returns the JSON report; `line` receives the table.
pub fn run(
    formats: &[FormatId],
    shapes: &[(usize, usize)],
    ns: &[usize],
    command_line: &str,
    line: &mut dyn FnMut(&str),
) -> Result<String, String> {
    let hip = HipBackend::new().map_err(|e| e.to_string())?;
    let formats: Vec<FormatId> = if formats.is_empty() {
        FormatId::ALL.into_iter().filter(|f| hip.supports(*f)).collect()
    } else {
        formats.to_vec()
    };
    for f in &formats {
        if !hip.supports(*f) {
            return Err(format!("the HIP backend does not support {f}"));
        }
    }
    let max_bytes = formats
        .iter()
        .flat_map(|f| shapes.iter().map(move |&(r, k)| f.row_bytes(k).map(|b| b * r).unwrap_or(0)))
        .max()
        .unwrap_or(0)
        .max(256 << 20);
    let mut read = 0f64;
    for _ in 0..3 {
        read = read.max(hip.read_bandwidth(max_bytes, 20).map_err(|e| e.to_string())?);
    }
    let date = crate::bench::utc_string(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    line(&format!(
        "device: {} (arch {}, dependent launch {}), date {date}",
        hip.name(),
        hip.arch(),
        if hip.dependent_launch() { "on" } else { "off" }
    ));
    line(&format!("read ceiling (lb_read, {} MiB): {:.3} TB/s", max_bytes >> 20, read / 1e12));
    let list = |var| {
        std::env::var(var)
            .ok()
            .map(|v| v.split(',').filter_map(|r| r.trim().parse().ok()).collect())
            .filter(|v: &Vec<usize>| !v.is_empty())
            .unwrap_or_else(|| vec![0])
    };
    let sweep = list("LOWBIT_HIP_BENCH_ROWS_PER_WARP");
    let units = list("LOWBIT_HIP_BENCH_UNITS");
    line(&format!(
        "{:<9} {:>13} {:>4} {:>3} {:>3} {:>10} {:>8} {:>9} {:>7}",
        "format", "rows x K", "n", "rpw", "ups", "us/call", "TB/s", "vs read", "vs n=1"
    ));
    let mut rows_out = Vec::new();
    for &format in &formats {
        for &(rows, k) in shapes {
            if k % format.geometry().row_multiple != 0 {
                line(&format!(
                    "{format}: K = {k} is not a multiple of {}, skipped",
                    format.geometry().row_multiple
                ));
                continue;
            }
            let w = make_weights(format, rows, k, 1)?;
            let m =
                hip.upload(MatrixDesc { format, rows, cols: k }, &w).map_err(|e| e.to_string())?;
            drop(w);
            let mut t1 = vec![None; sweep.len()];
            // Units per step exist only at n = 1; vs n=1 compares with the same rows per warp
            // and the first units setting.
            let points = ns.iter().flat_map(|&n| {
                let us: &[usize] = if n == 1 { &units } else { &units[..1] };
                sweep.iter().flat_map(move |&r| us.iter().map(move |&u| (n, r, u)))
            });
            for (n, rpw, ups) in points {
                let si = sweep.iter().position(|&r| r == rpw).unwrap_or(0);
                hip.set_rows_per_warp(rpw);
                hip.set_units_per_step(if n == 1 { ups } else { 0 });
                let mut rng = Pcg32::new(5, n as u64);
                let x: Vec<f32> = (0..n * k).map(|_| rng.normal() as f32).collect();
                let est = hip.time_matmul(&m, &x, n, 3).map_err(|e| e.to_string())?;
                let reps = ((0.1 / est.max(1e-7)) as usize).clamp(3, 5000);
                let mut best = f64::INFINITY;
                for _ in 0..3 {
                    best = best.min(hip.time_matmul(&m, &x, n, reps).map_err(|e| e.to_string())?);
                }
                if n == 1 && ups == units[0] {
                    t1[si] = Some(best);
                }
                let tb_s = m.weight_bytes() as f64 / best / 1e12;
                let r = HipRow {
                    format,
                    rows,
                    k,
                    n,
                    us: best * 1e6,
                    tb_s,
                    ratio: tb_s * 1e12 / read,
                    vs_n1: t1[si].map(|t| best / t),
                    rows_per_warp: rpw,
                    units_per_step: if n == 1 { ups } else { 0 },
                };
                line(&format!(
                    "{:<9} {:>13} {:>4} {:>3} {:>3} {:>10.2} {:>8.3} {:>8.1}% {:>7}",
                    format.to_string(),
                    format!("{rows}x{k}"),
                    n,
                    rpw,
                    r.units_per_step,
                    r.us,
                    r.tb_s,
                    r.ratio * 100.0,
                    r.vs_n1.map_or("-".to_string(), |v| format!("{v:.2}x"))
                ));
                rows_out.push(r);
            }
        }
    }
    let mut j = String::new();
    let _ = writeln!(j, "{{");
    let _ = writeln!(j, "  \"backend\": \"hip\",");
    let _ = writeln!(j, "  \"device\": {},", json_str(hip.name()));
    let _ = writeln!(j, "  \"arch\": {},", json_str(hip.arch()));
    let _ = writeln!(j, "  \"date\": {},", json_str(&date));
    let _ = writeln!(j, "  \"command\": {},", json_str(command_line));
    let _ = writeln!(j, "  \"read_tb_s\": {:.4},", read / 1e12);
    let _ = writeln!(j, "  \"matmul\": [");
    for (i, r) in rows_out.iter().enumerate() {
        let _ = writeln!(
            j,
            "    {{\"format\": \"{}\", \"rows\": {}, \"k\": {}, \"n\": {}, \"us_per_call\": {:.3}, \"weight_tb_s\": {:.4}, \"ratio_to_read\": {:.4}, \"time_vs_n1\": {}, \"rows_per_warp\": {}, \"units_per_step\": {}}}{}",
            r.format,
            r.rows,
            r.k,
            r.n,
            r.us,
            r.tb_s,
            r.ratio,
            r.vs_n1.map_or("null".to_string(), |v| format!("{v:.4}")),
            r.rows_per_warp,
            r.units_per_step,
            if i + 1 < rows_out.len() { "," } else { "" }
        );
    }
    let _ = writeln!(j, "  ]\n}}");
    Ok(j)
}
