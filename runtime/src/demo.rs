//! The built-in demo behind `lowbit` (no subcommand) and `lowbit demo`: a deterministic synthetic
//! weight tensor, encoded with every format that has an encoder and every rule it offers,
//! decoded, and measured (bits per weight, NRMSE, max abs error, encode throughput).
//!
//! The tensor: `rows x cols` Gaussian weights with a per-row standard deviation around 0.02
//! (typical of LLM projection matrices), about 1% of the columns scaled by 8..32x (the
//! outlier channels that make low-bit quantization hard), and a sparse Pareto(alpha = 2) tail
//! on every element with probability 1/1000 (capped at 64x). The generator is PCG32
//! (O'Neill's XSH-RR output on a 64-bit LCG) with Box-Muller normals, so the tensor depends on
//! the seed only.
//!
//! A format whose codec answers `Unsupported` shows as "unsupported"; any other error, or a
//! panic inside a codec, shows as "FAILED" and makes [`DemoReport::failures`] non-zero.
//! What must not live here: codec logic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use lowbit_core::{codec, EncodeOptions, Error as CoreError, FormatId, Rule};

use crate::formats::render;
use crate::rawcodec::{error_stats, ErrorStats};

/// PCG32 (64-bit state LCG, XSH-RR output): small, fast, and fully specified, so the demo
/// tensor is the same on every machine.
#[derive(Clone, Debug)]
pub struct Pcg32 {
    state: u64,
    inc: u64,
}

impl Pcg32 {
    const MUL: u64 = 6_364_136_223_846_793_005;

    /// A generator for `seed` on stream `stream`.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut g = Pcg32 { state: 0, inc: (stream << 1) | 1 };
        g.next_u32();
        g.state = g.state.wrapping_add(seed);
        g.next_u32();
        g
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old.wrapping_mul(Self::MUL).wrapping_add(self.inc);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        let rot = (old >> 59) as u32;
        xorshifted.rotate_right(rot)
    }

    /// Uniform in (0, 1]: never 0, so `ln` is safe.
    pub fn uniform(&mut self) -> f64 {
        let hi = u64::from(self.next_u32()) << 21;
        let lo = u64::from(self.next_u32() >> 11);
        ((hi | lo) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller, one of the pair).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// The demo's default shape and seed.
pub const DEFAULT_ROWS: usize = 64;
/// Default columns (K): a multiple of every format's row multiple (256 covers them all).
pub const DEFAULT_COLS: usize = 4096;
/// Default seed.
pub const DEFAULT_SEED: u64 = 0x10b1_7000;

/// A row-major synthetic weight tensor (see the module documentation for its distribution).
pub fn synthetic_weights(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut col_rng = Pcg32::new(seed, 1);
    let gains: Vec<f64> = (0..cols)
        .map(|_| if col_rng.uniform() < 0.01 { 8.0 + 24.0 * col_rng.uniform() } else { 1.0 })
        .collect();
    let mut rng = Pcg32::new(seed, 2);
    let mut out = Vec::with_capacity(rows * cols);
    for _ in 0..rows {
        let sigma = 0.02 * (0.5 + rng.uniform());
        for &g in &gains {
            let mut v = rng.normal() * sigma * g;
            if rng.uniform() < 1e-3 {
                // Pareto(alpha = 2) multiplier: u^(-1/2), capped.
                v *= rng.uniform().powf(-0.5).min(64.0);
            }
            out.push(v as f32);
        }
    }
    out
}

/// The rules a format offers, in table order.
pub fn offered_rules(format: FormatId) -> Vec<Rule> {
    let e = format.info().encoders;
    [(e.reference, Rule::Reference), (e.exhaustive, Rule::Exhaustive), (e.improved, Rule::Improved)]
        .into_iter()
        .filter_map(|(on, r)| on.then_some(r))
        .collect()
}

/// The `--rule` spelling of a rule.
pub fn rule_name(r: Rule) -> &'static str {
    match r {
        Rule::Reference => "reference",
        Rule::Exhaustive => "exhaustive",
        Rule::Improved => "improved",
    }
}

/// How one (format, rule) went.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Encoded and decoded.
    Ok {
        /// Error of the round trip.
        stats: ErrorStats,
        /// Encode throughput in millions of elements per second.
        melem_per_s: f64,
    },
    /// The codec answered `Unsupported` (not implemented in this build).
    Unsupported(String),
    /// Any other error, or a panic: a bug.
    Failed(String),
}

/// One line of the demo table.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoRow {
    /// The format.
    pub format: FormatId,
    /// The rule.
    pub rule: Rule,
    /// Bits per weight at this K, row headers included.
    pub bpw: f64,
    /// What happened.
    pub outcome: Outcome,
}

/// The whole demo result.
#[derive(Clone, Debug)]
pub struct DemoReport {
    /// Rows of the tensor.
    pub rows: usize,
    /// Columns (K).
    pub cols: usize,
    /// Seed.
    pub seed: u64,
    /// One line per (format, rule).
    pub lines: Vec<DemoRow>,
}

impl DemoReport {
    /// Lines that failed (errors other than `Unsupported`, or panics).
    pub fn failures(&self) -> usize {
        self.lines.iter().filter(|l| matches!(l.outcome, Outcome::Failed(_))).count()
    }

    /// Lines that were unsupported in this build.
    pub fn unsupported(&self) -> usize {
        self.lines.iter().filter(|l| matches!(l.outcome, Outcome::Unsupported(_))).count()
    }
}

fn classify(e: CoreError, stage: &str) -> Outcome {
    match e {
        CoreError::Unsupported { .. } => Outcome::Unsupported(format!("{stage}: {e}")),
        other => Outcome::Failed(format!("{stage}: {other}")),
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

/// Encodes and decodes `x` (rows of `k`) with one format and rule.
pub fn measure(format: FormatId, rule: Rule, k: usize, x: &[f32]) -> Outcome {
    let run = || -> Outcome {
        let opts = EncodeOptions { rule, importance: None };
        let t = Instant::now();
        let bytes = match codec::encode_to_vec(format, k, x, &opts) {
            Ok(b) => b,
            Err(e) => return classify(e, "encode"),
        };
        let secs = t.elapsed().as_secs_f64().max(1e-9);
        match codec::decode_to_vec(format, k, &bytes) {
            Ok(y) if y.len() == x.len() => {
                Outcome::Ok { stats: error_stats(x, &y), melem_per_s: x.len() as f64 / secs / 1e6 }
            }
            Ok(y) => Outcome::Failed(format!("decode gave {} values for {}", y.len(), x.len())),
            Err(e) => classify(e, "decode"),
        }
    };
    catch_unwind(AssertUnwindSafe(run))
        .unwrap_or_else(|p| Outcome::Failed(format!("panicked: {}", panic_text(&*p))))
}

/// Runs the demo on a `rows x cols` tensor for every format with an encoder, or only those in
/// `only` when it is non-empty.
pub fn run(rows: usize, cols: usize, seed: u64, only: &[FormatId]) -> DemoReport {
    let x = synthetic_weights(rows, cols, seed);
    let mut lines = Vec::new();
    for format in FormatId::ALL {
        if !only.is_empty() && !only.contains(&format) {
            continue;
        }
        let bpw = format.bits_per_weight(cols).unwrap_or(f64::NAN);
        for rule in offered_rules(format) {
            let outcome = if bpw.is_nan() {
                Outcome::Failed(format!("K = {cols} is not a valid row length for {format}"))
            } else {
                measure(format, rule, cols, &x)
            };
            lines.push(DemoRow { format, rule, bpw, outcome });
        }
    }
    DemoReport { rows, cols, seed, lines }
}

/// Renders the report as a text table with a header paragraph and a closing summary line.
pub fn render_report(r: &DemoReport) -> String {
    let x = synthetic_weights(r.rows, r.cols, r.seed);
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let rms =
        (x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len() as f64).sqrt();
    let mut out = format!(
        "lowbit demo: synthetic weights {} x {} (seed {:#x}): Gaussian rows (sigma ~0.02), ~1% \
         outlier columns x8..x32, Pareto(2) tail; rms {rms:.4}, max |x| {amax:.4}\n\
         Each row of the tensor is one row of K = {} for the codec.\n\n",
        r.rows, r.cols, r.seed, r.cols
    );
    let mut cells =
        vec![["format", "rule", "bpw", "NRMSE", "max_abs_err", "encode_Melem/s", "note"]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()];
    for l in &r.lines {
        let (nrmse, maxe, speed, note) = match &l.outcome {
            Outcome::Ok { stats, melem_per_s } => (
                format!("{:.6}", stats.nrmse),
                format!("{:.6}", stats.max_abs),
                format!("{melem_per_s:.1}"),
                String::new(),
            ),
            Outcome::Unsupported(_) => {
                ("unsupported".into(), "-".into(), "-".into(), "not in this build".into())
            }
            Outcome::Failed(msg) => ("FAILED".into(), "-".into(), "-".into(), msg.clone()),
        };
        cells.push(vec![
            l.format.name().to_string(),
            rule_name(l.rule).to_string(),
            format!("{:.4}", l.bpw),
            nrmse,
            maxe,
            speed,
            note,
        ]);
    }
    out.push_str(&render(&cells, 2));
    let ok = r.lines.len() - r.failures() - r.unsupported();
    out.push_str(&format!(
        "\n{ok} encoded, {} unsupported, {} failed (format x rule)\n",
        r.unsupported(),
        r.failures()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcg32_is_the_published_generator() {
        // First outputs of the PCG32 reference demo (pcg32-demo, seed 42, stream 54).
        let mut g = Pcg32::new(42, 54);
        let got: Vec<u32> = (0..6).map(|_| g.next_u32()).collect();
        assert_eq!(got, [0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e]);
    }

    #[test]
    fn tensor_is_deterministic_and_heavy_tailed() {
        let a = synthetic_weights(4, 1024, 7);
        assert_eq!(a, synthetic_weights(4, 1024, 7));
        assert_ne!(a, synthetic_weights(4, 1024, 8));
        let rms = (a.iter().map(|v| v * v).sum::<f32>() / a.len() as f32).sqrt();
        let amax = a.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(amax > 8.0 * rms, "amax {amax} rms {rms}");
    }

    #[test]
    fn float_formats_round_trip_in_the_demo() {
        let r = run(2, 256, 1, &[FormatId::F32, FormatId::F16]);
        assert_eq!(r.lines.len(), 2);
        assert!(matches!(r.lines[0].outcome, Outcome::Ok { stats, .. } if stats.nrmse == 0.0));
        assert!(
            matches!(r.lines[1].outcome, Outcome::Ok { stats, .. } if stats.nrmse < 1e-3 && stats.nrmse > 0.0)
        );
        let text = render_report(&r);
        assert!(
            text.contains("F16") && text.contains("2 encoded, 0 unsupported, 0 failed"),
            "{text}"
        );
    }
}
