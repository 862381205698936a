//! `lowbit bench`: the CPU backend's matmul speed as a fraction of this machine's read bandwidth,
//! measured in the same run, plus encoder throughput.
//!
//! Method:
//! * Read bandwidth: a buffer of at least 1 GiB of `u64` (64 MiB with `--quick`), written first
//!   (so no page is the shared zero page), in the same kind of memory as the weights, then read
//!   by each thread over its own contiguous part in several ways ([`lowbit_cpu::probe`]: four
//!   interleaved streams, one linear pass of vector loads, the same with the drivers' L2 or L1
//!   software prefetch), the ways taking turns pass by pass. The ceiling is the best way's
//!   fastest pass, for every thread count asked; each way's figure is in the JSON. GB/s are 1e9
//!   bytes per second.
//! * Matmul: for each format x shape x n x threads, the weights are built once (the core's
//!   reference encoder on a deterministic Gaussian tensor; formats without an encoder get random
//!   valid blocks: random bytes, the bytes the core rejects redrawn until every block decodes),
//!   uploaded as many times as it takes to span eight times the largest CPU cache and at least
//!   256 MiB ([`stream_copies`]; one copy with `--quick`), and the calls cycle through the copies
//!   so each reads its weights from memory, not from a cache (the session-7 figures on; before
//!   them, matrices under the 32 MiB L3 of the project's EPYC, such as 4096 x 14336 ROCmFP2 or
//!   TQ2_0, were partly read from it). Then the matrix is timed in `--rounds` rounds (default
//!   1). Each round first re-reads 256 MiB of the probe buffer at each thread count (every
//!   pattern, best of two passes), then times `CpuBackend::matmul` for
//!   every `n` and thread count, called from a worker of the backend's pool
//!   (`CpuBackend::install`, as the engine calls it; from session 9 on: before, each call
//!   was handed from the bench's thread to the pool and back, which cost 20-170 µs a call on
//!   the project's VM): warm-up calls, then several runs of enough calls that all runs
//!   together last at least 0.2 s; the round's time per call is the median of its runs. A row
//!   reports its fastest round. Its ceiling is the best read bandwidth measured at its thread
//!   count in the run so far (the start's probe, and every probe beside a matrix). On a shared
//!   machine other processes only ever slow a kernel or a probe down, and they come and go
//!   minute by minute (on the project's VM the same kernel measured 2x apart ten minutes
//!   apart, 2026-12-01), so best against best, measured minutes apart at most, is the fair
//!   ratio; every round's time is in the JSON (`us_per_call_rounds`). Weight GB/s = weight
//!   bytes / time per call; GFLOP/s = 2 rows K n / time; ratio = weight GB/s / ceiling.
//! * Encode (`--encode`): every offered rule of every selected format with an encoder, one
//!   thread, weights per second (the fastest of several timed passes); for formats with an exhaustive search (ROCmFP2/3), the fast
//!   (reference) rule against the exhaustive one on the same tensor (the two take turns row by
//!   row, each row's fastest of several runs per rule), and whether the bytes match. Rows are
//!   encoded through `lowbit_cpu::fp2_search::encode_row`, as the quantizer does: ROCmFP2's
//!   reference rule there runs the CPU backend's AVX-512 search where the process-wide ISA
//!   (`LOWBIT_CPU`) has AVX-512, the core's otherwise; every other rule is the core's.
//!
//! The JSON report ([`BenchReport::to_json`]) is written by hand (no serde in the runtime).
//! What must not live here: kernels or codecs (those are `lowbit-cpu`'s and `lowbit-core`'s).

use std::fmt::Write as _;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::{codec, EncodeOptions, Error as CoreError, FormatId, Rule};
use lowbit_cpu::{CpuBackend, Isa};
use rayon::prelude::*;

use crate::demo::{offered_rules, rule_name, synthetic_weights, Pcg32};

/// Default shapes (rows x K): the list.
pub const DEFAULT_SHAPES: [(usize, usize); 4] =
    [(4096, 4096), (14336, 4096), (4096, 14336), (576, 1536)];
/// Default column counts.
pub const DEFAULT_NS: [usize; 4] = [1, 4, 16, 512];
/// `--quick` shapes when none are given.
pub const QUICK_SHAPES: [(usize, usize); 1] = [(256, 1024)];
/// `--quick` column counts when none are given.
pub const QUICK_NS: [usize; 2] = [1, 4];

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Weight formats (empty: every format the CPU backend supports).
    pub formats: Vec<FormatId>,
    /// Shapes `(rows, K)`.
    pub shapes: Vec<(usize, usize)>,
    /// Activation column counts.
    pub ns: Vec<usize>,
    /// Thread counts (deduplicated, each >= 1).
    pub threads: Vec<usize>,
    /// Instruction set (`None`: the process-wide selection, detected or `LOWBIT_CPU`).
    pub isa: Option<Isa>,
    /// Small buffers and short timings (tests).
    pub quick: bool,
    /// Also measure encoders.
    pub encode: bool,
    /// Rounds over each matrix (at least 1): each round re-measures the read ceiling beside the
    /// timings and times every `n` and thread count again ([`run`]'s method).
    pub rounds: usize,
    /// The command line, for the report.
    pub command_line: String,
}

/// Read bandwidth measured with one thread count: the best of several ways of reading the
/// probe buffer ([`lowbit_cpu::probe`]), each pattern's figure kept beside it.
pub type Bandwidth = lowbit_cpu::probe::ReadBandwidth;

/// One matmul measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct MatmulRow {
    /// Weight format.
    pub format: FormatId,
    /// Output rows.
    pub rows: usize,
    /// Reduction length.
    pub k: usize,
    /// Activation columns.
    pub n: usize,
    /// Threads.
    pub threads: usize,
    /// Time per call, microseconds: the fastest round's (each round's figure is the median of
    /// its timed runs).
    pub us_per_call: f64,
    /// Every round's time per call, microseconds, in the order measured.
    pub us_per_call_rounds: Vec<f64>,
    /// The read ceiling this row is compared with: the best read bandwidth measured at this
    /// thread count in the run (at the start, and beside this matrix in every round), GB/s.
    pub ceiling_gb_s: f64,
    /// Bytes of weights read per call.
    pub weight_bytes: usize,
    /// Uploaded copies of the weights the timed calls cycle through ([`stream_copies`]).
    pub weight_copies: usize,
    /// Weight bytes / time, GB/s.
    pub weight_gb_s: f64,
    /// 2 rows K n / time, GFLOP/s.
    pub gflop_s: f64,
    /// `weight_gb_s` / `ceiling_gb_s`.
    pub ratio_to_bandwidth: f64,
}

impl MatmulRow {
    /// Microseconds per activation column.
    pub fn us_per_column(&self) -> f64 {
        self.us_per_call / self.n as f64
    }
}

/// One encoder measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodeRow {
    /// Format.
    pub format: FormatId,
    /// Rule.
    pub rule: Rule,
    /// Weights per second (one thread), or the error text.
    pub result: Result<f64, String>,
}

/// The fast-vs-exhaustive search comparison of one format.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchRatio {
    /// Format (ROCmFP2, ROCmFP3).
    pub format: FormatId,
    /// Weights encoded by each rule.
    pub weights: usize,
    /// Fast (reference rule) weights per second.
    pub fast_w_s: f64,
    /// Exhaustive weights per second.
    pub exhaustive_w_s: f64,
    /// Whether both produced the same bytes.
    pub identical: bool,
}

/// Everything one run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// Instruction set of the kernels.
    pub isa: String,
    /// UTC date and time of the start.
    pub date: String,
    /// The command line.
    pub command_line: String,
    /// /proc/loadavg at the start and at the end.
    pub loadavg: (String, String),
    /// Bytes of the bandwidth probe's buffer.
    pub bandwidth_buffer_bytes: usize,
    /// Read bandwidth per thread count.
    pub bandwidth: Vec<Bandwidth>,
    /// Matmul rows.
    pub matmul: Vec<MatmulRow>,
    /// (format, shape) pairs skipped, with the reason.
    pub skipped: Vec<String>,
    /// Encoder rows (`--encode`).
    pub encode: Vec<EncodeRow>,
    /// Fast vs exhaustive searches (`--encode`).
    pub search: Vec<SearchRatio>,
}

/// Logical CPUs available to this process (at least 1).
pub fn all_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Parses `RxK` (or `RXK`).
pub fn parse_shape(s: &str) -> Result<(usize, usize), String> {
    let (r, k) = s.split_once(['x', 'X']).ok_or_else(|| format!("shape '{s}' is not ROWSxK"))?;
    let p = |v: &str| v.trim().parse::<usize>().ok().filter(|&v| v > 0);
    match (p(r), p(k)) {
        (Some(r), Some(k)) => Ok((r, k)),
        _ => Err(format!("shape '{s}': rows and K must be positive integers")),
    }
}

/// Parses a thread count: a positive integer or `all`.
pub fn parse_threads(s: &str) -> Result<usize, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(all_threads());
    }
    s.trim()
        .parse::<usize>()
        .ok()
        .filter(|&t| t > 0)
        .ok_or_else(|| format!("threads '{s}': a positive integer or 'all'"))
}

/// The CPU model name (first `model name` line of /proc/cpuinfo), or "unknown".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time (days to civil date: Howard Hinnant's algorithm).
pub fn utc_string(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let sod = unix_secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", sod / 3600, sod / 60 % 60, sod % 60)
}

// ---------------------------------------------------------------- bandwidth probe

/// Allocates and writes the probe buffer (`bytes`, rounded down to whole u64). It lives in
/// the same kind of memory as the weights the kernels read ([`lowbit_cpu::weights::Arena`]:
/// 2 MiB-aligned, advised for transparent huge pages), so the ratio of a kernel's weight
/// bandwidth to this probe compares like with like.
pub fn probe_buffer(bytes: usize, threads: usize) -> lowbit_cpu::weights::WeightBuf {
    let arena = lowbit_cpu::weights::Arena::default();
    arena.store_with(bytes / 8 * 8, |dst| {
        let chunk = dst.len().div_ceil(threads.max(1)).div_ceil(8).max(1) * 8;
        std::thread::scope(|s| {
            for (i, p) in dst.chunks_mut(chunk).enumerate() {
                s.spawn(move || {
                    let base = (i * chunk / 8) as u64;
                    for (j, v) in p.chunks_exact_mut(8).enumerate() {
                        let x = (base + j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        v.copy_from_slice(&x.to_le_bytes());
                    }
                });
            }
        });
    })
}

// ---------------------------------------------------------------- weights

/// Random valid blocks for one row of a format without an encoder: random bytes, redrawing the
/// bytes the core rejects (as backends/cpu/tests/common does).
fn random_row(
    format: FormatId,
    rng: &mut Pcg32,
    row: &mut [u8],
    scratch: &mut [f32],
) -> Result<(), String> {
    let g = format.geometry();
    if g.row_header_bytes != 0 {
        return Err(format!("{format}: has a row header and no encoder"));
    }
    for blk in row.chunks_exact_mut(g.block_bytes) {
        blk.iter_mut().for_each(|b| *b = rng.next_u32() as u8);
        let mut tries = 0;
        loop {
            match codec::decode_row(format, blk, &mut scratch[..g.block_elems]) {
                Ok(()) => break,
                Err(CoreError::IllegalByte { offset, .. }) if offset < blk.len() => {
                    blk[offset] = rng.next_u32() as u8;
                }
                Err(CoreError::NonFiniteScale { offset, .. }) if offset < blk.len() => {
                    let end = (offset + 8).min(blk.len());
                    blk[offset..end].iter_mut().for_each(|b| *b = rng.next_u32() as u8);
                }
                Err(_) => blk.iter_mut().for_each(|b| *b = rng.next_u32() as u8),
            }
            tries += 1;
            if tries > 10_000 {
                return Err(format!("{format}: no valid random block after 10000 draws"));
            }
        }
    }
    Ok(())
}

/// The weight bytes of a `rows x k` matrix: each row encoded with the reference rule from
/// Gaussian values (sigma 0.02, generator seeded by `seed` and the row), or random valid blocks
/// for formats without an encoder. Rows are built in parallel; the result depends on the seed
/// only.
pub fn make_weights(format: FormatId, rows: usize, k: usize, seed: u64) -> Result<Vec<u8>, String> {
    let rb = format.row_bytes(k).map_err(|e| e.to_string())?;
    let mut out = vec![0u8; rows * rb];
    let encoder = format.info().encoders.reference;
    let opts = EncodeOptions { rule: Rule::Reference, importance: None };
    out.par_chunks_mut(rb).enumerate().try_for_each_init(
        || vec![0f32; k],
        |vals, (r, row)| {
            let mut rng = Pcg32::new(seed, r as u64 + 16);
            if encoder {
                vals.iter_mut().for_each(|v| *v = (rng.normal() * 0.02) as f32);
                codec::encode_row(format, vals, &opts, row).map_err(|e| format!("{format}: {e}"))
            } else {
                random_row(format, &mut rng, row, vals)
            }
        },
    )?;
    Ok(out)
}

// ---------------------------------------------------------------- matmul timing

struct Timing {
    target: Duration,
    runs: usize,
    warmup: usize,
}

/// How many copies of a `bytes`-byte matrix the timed calls cycle through: enough that together
/// they span eight times the largest CPU cache and at least 256 MiB, so that every call reads
/// its weights from memory, as decode does with a model larger than the caches, and not from a
/// cache a smaller matrix fits in (4096 x 14336 ROCmFP2 is 18 MB, TQ2_0 15 MB: inside a 32 MiB
/// L3). At most 1024 copies.
pub fn stream_copies(bytes: usize) -> usize {
    stream_footprint().div_ceil(bytes.max(1)).clamp(1, 1024)
}

/// Eight times the largest CPU cache (Linux sysfs; 32 MiB when unknown), and at least 256 MiB.
fn stream_footprint() -> usize {
    (8 * largest_cache_bytes().unwrap_or(32 << 20)).max(256 << 20)
}

/// The largest cache of CPU 0 (`/sys/devices/system/cpu/cpu0/cache/index*/size`, e.g. "32768K").
fn largest_cache_bytes() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("size")).ok())
        .filter_map(|t| parse_cache_size(&t))
        .max()
}

/// "32768K" / "2M" / "512" -> bytes.
fn parse_cache_size(t: &str) -> Option<usize> {
    let t = t.trim();
    let (num, mul) = match t.as_bytes().last()? {
        b'K' | b'k' => (&t[..t.len() - 1], 1 << 10),
        b'M' | b'm' => (&t[..t.len() - 1], 1 << 20),
        b'G' | b'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mul)
}

/// Bytes of the probe buffer re-read beside each round over a matrix: eight times a 32 MiB
/// last-level cache, so the local probe reads memory, not a cache.
pub const LOCAL_PROBE_BYTES: usize = 256 << 20;

fn time_calls(
    timing: &Timing,
    mut call: impl FnMut() -> Result<(), String>,
) -> Result<f64, String> {
    for _ in 0..timing.warmup {
        call()?;
    }
    let t = Instant::now();
    call()?;
    let one = t.elapsed().as_secs_f64().max(1e-9);
    let per_run = timing.target.as_secs_f64() / timing.runs as f64;
    let iters = ((per_run / one).ceil() as usize).max(1);
    // Calls slower than a whole run's budget: three runs of one call are enough.
    let runs = if one > per_run * 2.0 { 3.min(timing.runs) } else { timing.runs };
    let mut per_call = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        for _ in 0..iters {
            call()?;
        }
        per_call.push(t.elapsed().as_secs_f64() / iters as f64);
    }
    per_call.sort_by(f64::total_cmp);
    Ok(per_call[per_call.len() / 2])
}

/// Deterministic activations in [-1, 1).
fn activations(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Pcg32::new(seed, 7);
    (0..len).map(|_| (rng.uniform() * 2.0 - 1.0) as f32).collect()
}

// ---------------------------------------------------------------- encoders

/// Encoder passes timed per rule; the rate is that of the fastest pass.
const ENCODE_PASSES: usize = 7;

/// Weights per second of `rule` on the rows of `x` (row length `k`), and the bytes of one
/// pass. [`ENCODE_PASSES`] passes, each encoding the whole tensor as many times as needed to
/// last `min / ENCODE_PASSES`; the rate is the fastest pass's, so time stolen by other
/// processes on a shared machine (which only ever slows a pass down) drops out of the
/// fast-against-exhaustive ratio as far as one clean pass per rule allows.
fn encode_rate(
    format: FormatId,
    rule: Rule,
    k: usize,
    x: &[f32],
    min: Duration,
) -> Result<(f64, Vec<u8>), String> {
    let opts = EncodeOptions { rule, importance: None };
    let rb = format.row_bytes(k).map_err(|e| e.to_string())?;
    let mut first = vec![0u8; x.len() / k * rb];
    for (row, out) in x.chunks_exact(k).zip(first.chunks_exact_mut(rb)) {
        lowbit_cpu::fp2_search::encode_row(format, row, &opts, out).map_err(|e| e.to_string())?;
    }
    let mut out = vec![0u8; rb];
    let pass_min = min / ENCODE_PASSES as u32;
    let mut best = 0f64;
    for _ in 0..ENCODE_PASSES {
        let mut done = 0usize;
        let t = Instant::now();
        loop {
            for row in x.chunks_exact(k) {
                lowbit_cpu::fp2_search::encode_row(format, row, &opts, &mut out)
                    .map_err(|e| e.to_string())?;
                done += k;
            }
            if t.elapsed() >= pass_min {
                break;
            }
        }
        best = best.max(done as f64 / t.elapsed().as_secs_f64().max(1e-9));
    }
    Ok((best, first))
}

/// Rounds of the fast-against-exhaustive comparison ([`search_rates`]).
const SEARCH_ROUNDS: usize = 9;

/// Weights per second of the fast (reference) and the exhaustive rule on the same rows,
/// measured so that load on a shared machine drops out of their ratio: the two rules take
/// turns row by row ([`SEARCH_ROUNDS`] rounds over the tensor, each round timing one encode
/// of every row by each rule, back to back), and each rule's time for a row is its fastest
/// of the rounds. A row takes tens of microseconds (fast) to about a millisecond
/// (exhaustive), shorter than a scheduler time slice, so each rule gets clean runs of every
/// row, at the same moments as the other rule; the rate is the rows' weights over the sum
/// of those per-row minima.
fn search_rates(format: FormatId, k: usize, x: &[f32]) -> Result<(f64, f64), String> {
    let rb = format.row_bytes(k).map_err(|e| e.to_string())?;
    let rules = [Rule::Reference, Rule::Exhaustive];
    let rows = x.len() / k;
    let mut best = vec![[f64::INFINITY; 2]; rows];
    let mut out = vec![0u8; rb];
    for _ in 0..SEARCH_ROUNDS {
        for (row, b) in x.chunks_exact(k).zip(best.iter_mut()) {
            for (i, &rule) in rules.iter().enumerate() {
                let opts = EncodeOptions { rule, importance: None };
                let t = Instant::now();
                lowbit_cpu::fp2_search::encode_row(format, row, &opts, &mut out)
                    .map_err(|e| e.to_string())?;
                b[i] = b[i].min(t.elapsed().as_secs_f64());
                std::hint::black_box(&out);
            }
        }
    }
    let total = |i: usize| best.iter().map(|b| b[i]).sum::<f64>().max(1e-12);
    let w = (rows * k) as f64;
    Ok((w / total(0), w / total(1)))
}

// ---------------------------------------------------------------- the run

/// Runs the benchmark; `line` receives each printable line as soon as it is known.
pub fn run(cfg: &BenchConfig, line: &mut dyn FnMut(&str)) -> Result<BenchReport, String> {
    let start = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let loadavg_start = loadavg();
    let isa = match cfg.isa {
        Some(i) => i,
        None => lowbit_cpu::isa::selected().map_err(|e| e.to_string())?,
    };
    let probe = CpuBackend::with_isa(isa).map_err(|e| e.to_string())?;
    let formats: Vec<FormatId> = if cfg.formats.is_empty() {
        FormatId::ALL.into_iter().filter(|&f| probe.supports(f)).collect()
    } else {
        if let Some(f) = cfg.formats.iter().find(|&&f| !probe.supports(f)) {
            return Err(format!("the CPU backend does not support {f}"));
        }
        cfg.formats.clone()
    };
    let mut threads: Vec<usize> = cfg.threads.iter().map(|&t| t.max(1)).collect();
    threads.dedup();
    let mut seen = Vec::new();
    threads.retain(|t| {
        if seen.contains(t) {
            false
        } else {
            seen.push(*t);
            true
        }
    });

    let mut report = BenchReport {
        cpu_model: cpu_model(),
        cores: all_threads(),
        isa: isa.name().to_string(),
        date: utc_string(start),
        command_line: cfg.command_line.clone(),
        loadavg: (loadavg_start.clone(), String::new()),
        bandwidth_buffer_bytes: if cfg.quick { 64 << 20 } else { 1 << 30 },
        bandwidth: Vec::new(),
        matmul: Vec::new(),
        skipped: Vec::new(),
        encode: Vec::new(),
        search: Vec::new(),
    };
    line(&format!(
        "cpu: {} ({} threads), kernels: {}, date {}, load average {}",
        report.cpu_model, report.cores, report.isa, report.date, loadavg_start
    ));

    // Bandwidth first, while nothing else is resident. The buffer stays: each round over a
    // matrix re-reads part of it ([`LOCAL_PROBE_BYTES`]) beside the timings.
    let buf = probe_buffer(report.bandwidth_buffer_bytes, report.cores);
    let words = buf.as_u64s().expect("the probe is whole u64s");
    let local_words = &words[..words.len().min(LOCAL_PROBE_BYTES / 8)];
    let passes = if cfg.quick { 3 } else { 6 };
    for &t in &threads {
        let bw = lowbit_cpu::probe::read_bandwidth(words, t, passes);
        let each: Vec<String> =
            bw.patterns.iter().map(|(p, g)| format!("{} {g:.1}", p.name())).collect();
        line(&format!(
            "read bandwidth, {t} thread(s): {:.1} GB/s (best pattern of: {}; best of {passes} \
             passes, {} MiB buffer)",
            bw.gb_s,
            each.join(", "),
            report.bandwidth_buffer_bytes >> 20
        ));
        report.bandwidth.push(bw);
    }
    // The best read bandwidth seen so far per thread count: the start's, raised by any
    // faster probe beside a matrix.
    let mut ceiling: Vec<f64> = report.bandwidth.iter().map(|b| b.gb_s).collect();

    let backends: Vec<CpuBackend> = threads
        .iter()
        .map(|&t| CpuBackend::with_isa(isa).and_then(|b| b.with_threads(t)))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let timing = if cfg.quick {
        Timing { target: Duration::from_millis(10), runs: 3, warmup: 1 }
    } else {
        Timing { target: Duration::from_millis(200), runs: 5, warmup: 2 }
    };
    let rounds = cfg.rounds.max(1);
    if !cfg.quick {
        line(&format!(
            "weights: each matrix is uploaded in copies spanning >= {} MiB, and the timed calls \
             cycle through them (JSON: weight_copies)",
            stream_footprint() >> 20
        ));
    }
    line(&format!(
        "{rounds} round(s) per matrix: the read ceiling is re-measured beside each round's \
         timings; a row shows its fastest round against the best ceiling of its thread count"
    ));
    line(&format!(
        "{:<10} {:>12} {:>4} {:>3} {:>11} {:>10} {:>8} {:>8} {:>7} {:>6}",
        "format",
        "rows x K",
        "n",
        "thr",
        "us/call",
        "us/column",
        "GB/s",
        "GFLOP/s",
        "ceiling",
        "ratio"
    ));
    for &format in &formats {
        for &(rows, k) in &cfg.shapes {
            let w = match make_weights(format, rows, k, 0x5eed ^ (rows * 31 + k) as u64) {
                Ok(w) => w,
                Err(e) => {
                    let s = format!("{format} {rows}x{k}: {e}");
                    line(&format!("skipped: {s}"));
                    report.skipped.push(s);
                    continue;
                }
            };
            let desc = MatrixDesc { format, rows, cols: k };
            let copies = if cfg.quick { 1 } else { stream_copies(w.len()) };
            let ms = (0..copies)
                .map(|_| probe.upload(desc, &w))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{format} {rows}x{k}: upload: {e}"))?;
            let xs: Vec<Vec<f32>> = cfg.ns.iter().map(|&n| activations(n * k, n as u64)).collect();
            // secs[n index][thread index]: one median per round.
            let mut secs = vec![vec![Vec::with_capacity(rounds); backends.len()]; cfg.ns.len()];
            for _ in 0..rounds {
                for (ti, cpu) in backends.iter().enumerate() {
                    let local = lowbit_cpu::probe::read_bandwidth(local_words, threads[ti], 2);
                    ceiling[ti] = ceiling[ti].max(local.gb_s);
                    for ((&n, x), per_n) in cfg.ns.iter().zip(&xs).zip(secs.iter_mut()) {
                        let mut y = vec![0f32; n * rows];
                        let mut next = 0;
                        // From a worker of the backend's pool, as the engine calls matmul
                        // (`CpuBackend::install` around each forward pass).
                        let t = cpu.install(|| {
                            time_calls(&timing, || {
                                next = (next + 1) % ms.len();
                                cpu.matmul(&ms[next], x, n, &mut y)
                                    .map_err(|e| format!("{format}: {e}"))
                            })
                        })?;
                        std::hint::black_box(&y);
                        per_n[ti].push(t);
                    }
                }
            }
            for (&n, per_n) in cfg.ns.iter().zip(&secs) {
                for (ti, each) in per_n.iter().enumerate() {
                    let best = each.iter().copied().fold(f64::INFINITY, f64::min);
                    let weight_gb_s = w.len() as f64 / best / 1e9;
                    let row = MatmulRow {
                        format,
                        rows,
                        k,
                        n,
                        threads: threads[ti],
                        us_per_call: best * 1e6,
                        us_per_call_rounds: each.iter().map(|s| s * 1e6).collect(),
                        ceiling_gb_s: ceiling[ti],
                        weight_bytes: w.len(),
                        weight_copies: copies,
                        weight_gb_s,
                        gflop_s: 2.0 * (rows * k * n) as f64 / best / 1e9,
                        ratio_to_bandwidth: weight_gb_s / ceiling[ti],
                    };
                    line(&format!(
                        "{:<10} {:>12} {:>4} {:>3} {:>11.1} {:>10.1} {:>8.2} {:>8.2} {:>7.1} {:>6.3}",
                        format.name(),
                        format!("{rows}x{k}"),
                        n,
                        row.threads,
                        row.us_per_call,
                        row.us_per_column(),
                        row.weight_gb_s,
                        row.gflop_s,
                        row.ceiling_gb_s,
                        row.ratio_to_bandwidth
                    ));
                    report.matmul.push(row);
                }
            }
        }
    }
    drop(buf);

    if cfg.encode {
        encode_section(cfg, &formats, &mut report, line);
    }
    report.loadavg.1 = loadavg();
    line(&format!("load average at the end: {}", report.loadavg.1));
    Ok(report)
}

fn encode_section(
    cfg: &BenchConfig,
    formats: &[FormatId],
    report: &mut BenchReport,
    line: &mut dyn FnMut(&str),
) {
    let (rows, k, min) = if cfg.quick {
        (4, 256, Duration::from_millis(5))
    } else {
        (32, 4096, Duration::from_millis(200))
    };
    let x = synthetic_weights(rows, k, 0xe4c0de);
    line(&format!("encode throughput, one thread, {rows}x{k} synthetic tensor (weights/s):"));
    for &format in formats {
        let mut outputs: Vec<(Rule, f64, Vec<u8>)> = Vec::new();
        for rule in offered_rules(format) {
            let r = encode_rate(format, rule, k, &x, min);
            let result = match r {
                Ok((rate, bytes)) => {
                    line(&format!(
                        "  {:<10} {:<10} {:>14.0}",
                        format.name(),
                        rule_name(rule),
                        rate
                    ));
                    outputs.push((rule, rate, bytes));
                    Ok(rate)
                }
                Err(e) => {
                    line(&format!("  {:<10} {:<10} error: {e}", format.name(), rule_name(rule)));
                    Err(e)
                }
            };
            report.encode.push(EncodeRow { format, rule, result });
        }
        let get = |r: Rule| outputs.iter().find(|o| o.0 == r);
        if let (Some(fast), Some(ex)) = (get(Rule::Reference), get(Rule::Exhaustive)) {
            let (fast_w_s, exhaustive_w_s) = match search_rates(format, k, &x) {
                Ok(r) => r,
                Err(e) => {
                    line(&format!("  {}: search comparison failed: {e}", format.name()));
                    continue;
                }
            };
            let s = SearchRatio {
                format,
                weights: x.len(),
                fast_w_s,
                exhaustive_w_s,
                identical: fast.2 == ex.2,
            };
            line(&format!(
                "  {}: fast search {:.1}x the exhaustive one (fastest of {SEARCH_ROUNDS} \
                 interleaved runs per row), identical output: {}",
                format.name(),
                s.fast_w_s / s.exhaustive_w_s,
                if s.identical { "yes" } else { "NO" }
            ));
            report.search.push(s);
        }
    }
}

// ---------------------------------------------------------------- JSON

/// `s` as a JSON string literal.
pub(crate) fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
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
        "null".to_string()
    }
}

impl BenchReport {
    /// The report as JSON: `machine`, `date`, `command_line`, `loadavg`, `bandwidth`,
    /// `matmul` rows, `skipped`, `encode` rows and `search` comparisons.
    pub fn to_json(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{{");
        let _ = writeln!(
            o,
            "  \"machine\": {{\"cpu_model\": {}, \"cores\": {}, \"isa\": {}}},",
            json_str(&self.cpu_model),
            self.cores,
            json_str(&self.isa)
        );
        let _ = writeln!(o, "  \"date\": {},", json_str(&self.date));
        let _ = writeln!(o, "  \"command_line\": {},", json_str(&self.command_line));
        let _ = writeln!(
            o,
            "  \"loadavg\": {{\"start\": {}, \"end\": {}}},",
            json_str(&self.loadavg.0),
            json_str(&self.loadavg.1)
        );
        let bw: Vec<String> = self
            .bandwidth
            .iter()
            .map(|b| {
                let each: Vec<String> = b
                    .patterns
                    .iter()
                    .map(|(p, g)| format!("{}: {}", json_str(p.name()), json_num(*g)))
                    .collect();
                format!(
                    "{{\"threads\": {}, \"gb_s\": {}, \"patterns\": {{{}}}}}",
                    b.threads,
                    json_num(b.gb_s),
                    each.join(", ")
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "  \"bandwidth\": {{\"buffer_bytes\": {}, \"read\": [{}]}},",
            self.bandwidth_buffer_bytes,
            bw.join(", ")
        );
        let rows: Vec<String> = self
            .matmul
            .iter()
            .map(|r| {
                format!(
                    "    {{\"format\": {}, \"rows\": {}, \"k\": {}, \"n\": {}, \"threads\": {}, \
                     \"us_per_call\": {}, \"us_per_column\": {}, \"us_per_call_rounds\": [{}], \
                     \"weight_bytes\": {}, \"weight_copies\": {}, \"weight_gb_s\": {}, \"gflop_s\": {}, \
                     \"ceiling_gb_s\": {}, \"ratio_to_bandwidth\": {}}}",
                    json_str(r.format.name()),
                    r.rows,
                    r.k,
                    r.n,
                    r.threads,
                    json_num(r.us_per_call),
                    json_num(r.us_per_column()),
                    r.us_per_call_rounds.iter().map(|v| json_num(*v)).collect::<Vec<_>>().join(", "),
                    r.weight_bytes,
                    r.weight_copies,
                    json_num(r.weight_gb_s),
                    json_num(r.gflop_s),
                    json_num(r.ceiling_gb_s),
                    json_num(r.ratio_to_bandwidth)
                )
            })
            .collect();
        let _ = writeln!(o, "  \"matmul\": [\n{}\n  ],", rows.join(",\n"));
        let skipped: Vec<String> = self.skipped.iter().map(|s| json_str(s)).collect();
        let _ = writeln!(o, "  \"skipped\": [{}],", skipped.join(", "));
        let enc: Vec<String> = self
            .encode
            .iter()
            .map(|e| {
                let (rate, err) = match &e.result {
                    Ok(r) => (json_num(*r), "null".to_string()),
                    Err(s) => ("null".to_string(), json_str(s)),
                };
                format!(
                    "    {{\"format\": {}, \"rule\": {}, \"weights_per_s\": {rate}, \"error\": {err}}}",
                    json_str(e.format.name()),
                    json_str(rule_name(e.rule))
                )
            })
            .collect();
        let _ = writeln!(o, "  \"encode\": [\n{}\n  ],", enc.join(",\n"));
        let search: Vec<String> = self
            .search
            .iter()
            .map(|s| {
                format!(
                    "    {{\"format\": {}, \"weights\": {}, \"fast_weights_per_s\": {}, \
                     \"exhaustive_weights_per_s\": {}, \"speedup\": {}, \"identical\": {}}}",
                    json_str(s.format.name()),
                    s.weights,
                    json_num(s.fast_w_s),
                    json_num(s.exhaustive_w_s),
                    json_num(s.fast_w_s / s.exhaustive_w_s),
                    s.identical
                )
            })
            .collect();
        let _ = writeln!(o, "  \"search\": [\n{}\n  ]", search.join(",\n"));
        let _ = writeln!(o, "}}");
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_threads_parse() {
        assert_eq!(parse_shape("4096x14336"), Ok((4096, 14336)));
        assert_eq!(parse_shape("576X1536"), Ok((576, 1536)));
        assert!(parse_shape("4096").is_err());
        assert!(parse_shape("0x256").is_err());
        assert_eq!(parse_threads("3"), Ok(3));
        assert_eq!(parse_threads("all"), Ok(all_threads()));
        assert!(parse_threads("0").is_err());
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_string(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_string(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_string(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn cache_sizes_parse_and_copies_span_the_footprint() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("x"), None);
        assert_eq!(parse_cache_size(""), None);
        let f = stream_footprint();
        assert!(f >= 256 << 20);
        for bytes in [1usize, 276_480, 15_138_816, 18_350_080, 124_780_544, usize::MAX / 2] {
            let c = stream_copies(bytes);
            assert!((1..=1024).contains(&c), "{bytes}: {c}");
            assert!(c == 1024 || c == 1 || c.saturating_mul(bytes) >= f, "{bytes}: {c}");
        }
        assert_eq!(stream_copies(0), 1024);
    }

    #[test]
    fn probe_buffer_holds_its_pattern() {
        for (bytes, threads) in [(8 * 1003 + 5, 3), (64, 1), (8 * 4096, 2)] {
            let buf = probe_buffer(bytes, threads);
            let v = buf.as_u64s().expect("whole u64s");
            assert_eq!(v.len(), bytes / 8);
            for (j, &x) in v.iter().enumerate() {
                assert_eq!(x, (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15), "word {j}");
            }
        }
    }
}
