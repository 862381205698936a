//! CPU matmul benchmark (no criterion): measures this machine's read bandwidth, then times
//! `CpuBackend::matmul` for Q8_0, Q4_0 and ROCmFP2 weights and reports weight GB/s and its
//! ratio to the bandwidth measured in the same run, with 1 thread and all threads.
//!
//! ```text
//! cargo run --release -p lowbit-cpu --example matmul_bench -- [--quick] [--json PATH]
//!     [--format q8_0|q4_0|rocmfp2] [--n 1|4|16] [--threads T] [--no-bw]
//! LOWBIT_CPU=avx2 cargo run --release -p lowbit-cpu --example matmul_bench
//! ```
//!
//! Shapes are `rows x K` (output rows x reduction length): 4096x4096, 14336x4096, 4096x14336,
//! 576x1536 (`--quick`: 4096x14336 only); n = 1, 4, 16 columns. Weights are random valid
//! blocks generated directly (no encoder run). Time per call is the median (and the best) of the timed calls
//! after two warm-up calls; "cpu us" is the process CPU time per call divided by the threads
//! (on a loaded machine it approximates the uncontended wall time better than the median). Bandwidth: `lowbit_cpu::probe::read_bandwidth` over a 1 GiB
//! buffer (>> L3) in the weights' kind of memory, the best of its read patterns over 5 passes;
//! "all threads" splits it into one contiguous range per thread. Note: 4096x4096 Q8_0 (18 MB)
//! and the smaller shapes fit in this machine's L3, so their ratios can exceed 1.
//!
//! JSON goes to `PATH` (default `matmul_bench.json`).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::FormatId;
use lowbit_cpu::CpuBackend;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Random valid blocks: random quants/codes, legal scales.
fn weights(format: FormatId, rows: usize, k: usize, rng: &mut Rng) -> Vec<u8> {
    let g = format.geometry();
    let mut w = vec![0u8; format.row_bytes(k).unwrap() * rows];
    for chunk in w.chunks_exact_mut(8) {
        chunk.copy_from_slice(&rng.next().to_le_bytes());
    }
    let d = half::f16::from_f32(0.0123).to_bits().to_le_bytes();
    for blk in w.chunks_exact_mut(g.block_bytes) {
        match format {
            FormatId::Q8_0 | FormatId::Q4_0 => blk[..2].copy_from_slice(&d),
            FormatId::RocmFp2 => {
                blk[8] %= 0x7F;
                blk[9] %= 0x7F;
            }
            _ => unreachable!(),
        }
    }
    w
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// CPU seconds (user + system, every thread) this process has used, from `/proc/self/stat`
/// (clock ticks of 10 ms; NaN where unavailable).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    match (
        f.get(11).and_then(|v| v.parse::<f64>().ok()),
        f.get(12).and_then(|v| v.parse::<f64>().ok()),
    ) {
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json_path = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| "matmul_bench.json".into());
    let opt =
        |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned());
    let only_format = opt("--format").map(|f| f.to_ascii_lowercase());
    let only_n: Option<usize> = opt("--n").and_then(|v| v.parse().ok());
    let only_threads: Option<usize> = opt("--threads").and_then(|v| v.parse().ok());
    let all_threads = rayon::current_num_threads();
    let load_start = loadavg();

    let (bw1, bwn) = if args.iter().any(|a| a == "--no-bw") {
        (f64::NAN, f64::NAN)
    } else {
        let buf = lowbit_cpu::weights::Arena::default().store_with(1 << 30, |dst| {
            for (i, b) in dst.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(0x9D);
            }
        });
        let words = buf.as_u64s().expect("1 GiB is whole u64s");
        let bw = |t| lowbit_cpu::probe::read_bandwidth(words, t, 5).gb_s;
        (bw(1), bw(all_threads))
    };
    println!("read bandwidth: 1 thread {bw1:.1} GB/s, {all_threads} threads {bwn:.1} GB/s");
    println!("load average at start: {load_start}");

    let shapes: &[(usize, usize)] = if quick {
        &[(4096, 14336)]
    } else {
        &[(4096, 14336), (14336, 4096), (4096, 4096), (576, 1536)]
    };
    let formats: Vec<FormatId> = [FormatId::Q8_0, FormatId::Q4_0, FormatId::RocmFp2]
        .into_iter()
        .filter(|f| only_format.as_ref().is_none_or(|o| f.name().eq_ignore_ascii_case(o)))
        .collect();
    let ns: Vec<usize> =
        [1usize, 4, 16].into_iter().filter(|&n| only_n.is_none_or(|o| o == n)).collect();
    let thread_counts: Vec<usize> = [1usize, all_threads]
        .into_iter()
        .filter(|&t| only_threads.is_none_or(|o| o == t))
        .collect();
    let mut rng = Rng(42);
    let mut rows_json = Vec::new();
    let mut isa_name = String::new();
    println!(
        "{:<8} {:>11} {:>3} {:>3} {:>9} {:>9} {:>9} {:>7} {:>8} {:>6} {:>10}",
        "format",
        "rows x K",
        "n",
        "thr",
        "us/call",
        "best us",
        "cpu us",
        "GB/s",
        "GFLOP/s",
        "ratio",
        "us/column"
    );
    for &(rows, k) in shapes {
        for &format in &formats {
            let w = weights(format, rows, k, &mut rng);
            for &threads in &thread_counts {
                let cpu = CpuBackend::new().unwrap().with_threads(threads).unwrap();
                isa_name = cpu.name().to_string();
                let m = cpu.upload(MatrixDesc { format, rows, cols: k }, &w).unwrap();
                let bw = if threads == 1 { bw1 } else { bwn };
                for &n in &ns {
                    let x: Vec<f32> = (0..n * k)
                        .map(|_| (rng.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
                        .collect();
                    let mut y = vec![0f32; n * rows];
                    for _ in 0..2 {
                        cpu.matmul(&m, &x, n, &mut y).unwrap();
                    }
                    let mut times = Vec::new();
                    let start = Instant::now();
                    let cpu0 = cpu_seconds();
                    while times.len() < 5
                        || (start.elapsed() < Duration::from_millis(600) && times.len() < 300)
                    {
                        let t = Instant::now();
                        cpu.matmul(&m, &x, n, &mut y).unwrap();
                        times.push(t.elapsed());
                    }
                    std::hint::black_box(&y);
                    let cpu_us = (cpu_seconds() - cpu0) / times.len() as f64 / threads as f64 * 1e6;
                    let best = times.iter().min().unwrap().as_secs_f64();
                    let t = median(times).as_secs_f64();
                    let gbs = w.len() as f64 / t / 1e9;
                    let gflops = 2.0 * (rows * k * n) as f64 / t / 1e9;
                    let ratio = gbs / bw;
                    println!(
                        "{:<8} {:>11} {:>3} {:>3} {:>9.0} {:>9.0} {:>9.0} {:>7.1} {:>8.1} {:>6.2} {:>10.1}",
                        format.name(),
                        format!("{rows}x{k}"),
                        n,
                        threads,
                        t * 1e6,
                        best * 1e6,
                        cpu_us,
                        gbs,
                        gflops,
                        ratio,
                        t * 1e6 / n as f64
                    );
                    rows_json.push(format!(
                        "{{\"format\":\"{}\",\"rows\":{rows},\"k\":{k},\"n\":{n},\"threads\":{threads},\"us_per_call\":{:.2},\"best_us\":{:.2},\"cpu_us_per_thread\":{cpu_us:.1},\"weight_gb_s\":{gbs:.3},\"gflop_s\":{gflops:.3},\"ratio_to_bandwidth\":{ratio:.4}}}",
                        format.name(),
                        t * 1e6,
                        best * 1e6
                    ));
                }
            }
        }
    }
    let load_end = loadavg();
    println!("load average at end: {load_end}");
    let mut json = String::new();
    let _ = write!(
        json,
        "{{\"backend\":\"{isa_name}\",\"threads_all\":{all_threads},\"bandwidth_gb_s\":{{\"1\":{bw1:.3},\"all\":{bwn:.3}}},\"loadavg_start\":\"{load_start}\",\"loadavg_end\":\"{load_end}\",\"results\":[\n{}\n]}}\n",
        rows_json.join(",\n")
    );
    std::fs::write(&json_path, json).unwrap();
    println!("wrote {json_path}");
}
