//! Benchmark of the ROCmFP2 / ROCmFP3 scale searches: the fast search (`Rule::Reference`)
//! against the exhaustive one (`Rule::Exhaustive`) on the same rows. For every data set it
//! checks that both rules give identical bytes, then prints weights per second of each and
//! their ratio, and writes the results as JSON.
//!
//! ```text
//! cargo run --release --example rocmfp2_search -- [--n N] [--k K] [--reps R] [--fp3] [OUT.json]
//! ```
//!
//! * `--n`: values per data set (default 1_048_576), encoded as rows of `--k` values
//!   (default 4096).
//! * `--reps`: timed repetitions per rule (default 5). On Linux the time is the thread's CPU
//!   time summed over the repetitions (`/proc/thread-self/schedstat`, steady on a shared
//!   machine); elsewhere the fastest wall-clock repetition.
//! * `--fp3`: also measure ROCmFP3.
//! * `OUT.json`: where to write the JSON (default: standard output, after the table).
//!
//! Data sets (fixed seeds): `gaussian` (N(0, 0.02^2)), `heavy` (Student-t with 2 degrees of
//! freedom, times 0.02), and `gaussian+imatrix` (the Gaussian rows with importance weights
//! drawn from `0.1 + Exp(1)`, one per column). Timing covers `codec::encode_to_vec` as a whole
//! (input checks, weights, search, codes, packing).

use lowbit::{codec, EncodeOptions, FormatId, Rule};
use std::time::Instant;

/// xorshift64* — deterministic, fast, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in (0, 1).
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

struct Case {
    name: &'static str,
    x: Vec<f32>,
    imp: Option<Vec<f32>>,
}

fn cases(n: usize, k: usize) -> Vec<Case> {
    let mut r = Rng(0x5EED_0001);
    let gauss: Vec<f32> = (0..n).map(|_| (0.02 * r.normal()) as f32).collect();
    let mut r = Rng(0x5EED_0002);
    let heavy: Vec<f32> = (0..n)
        .map(|_| {
            // Student-t, df = 2: z / sqrt(chi2_2 / 2), chi2_2 = -2 ln u.
            let z = r.normal();
            let chi = -2.0 * r.uniform().ln();
            (0.02 * z / (chi / 2.0).sqrt()) as f32
        })
        .collect();
    let mut r = Rng(0x5EED_0003);
    let imp: Vec<f32> = (0..k).map(|_| (0.1 - r.uniform().ln()) as f32).collect();
    vec![
        Case { name: "gaussian", x: gauss.clone(), imp: None },
        Case { name: "heavy", x: heavy, imp: None },
        Case { name: "gaussian+imatrix", x: gauss, imp: Some(imp) },
    ]
}

struct Row {
    format: &'static str,
    case: &'static str,
    fast_wps: f64,
    exhaustive_wps: f64,
    identical: bool,
}

/// This thread's CPU time in seconds, where Linux exposes it.
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 * 1e-9)
}

/// Seconds per encode of the whole set (CPU time averaged over `reps`, or the fastest
/// wall-clock run), and the bytes.
fn time_rule(f: FormatId, k: usize, c: &Case, rule: Rule, reps: usize) -> (f64, Vec<u8>) {
    let opts = EncodeOptions { rule, importance: c.imp.as_deref() };
    let mut best = f64::INFINITY;
    let mut out = Vec::new();
    let cpu0 = cpu_seconds();
    for _ in 0..reps {
        let t = Instant::now();
        out = codec::encode_to_vec(f, k, &c.x, &opts).expect("encode");
        best = best.min(t.elapsed().as_secs_f64());
    }
    match (cpu0, cpu_seconds()) {
        (Some(a), Some(b)) if b > a => ((b - a) / reps as f64, out),
        _ => (best, out),
    }
}

fn main() {
    let mut n = 1 << 20;
    let mut k = 4096;
    let mut reps = 5;
    let mut fp3 = false;
    let mut out_path = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |what: &str| -> usize {
            args.next().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or_else(|| {
                eprintln!("{what} needs a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--n" => n = num("--n"),
            "--k" => k = num("--k"),
            "--reps" => reps = num("--reps").max(1),
            "--fp3" => fp3 = true,
            "-h" | "--help" => {
                println!("usage: rocmfp2_search [--n N] [--k K] [--reps R] [--fp3] [OUT.json]");
                return;
            }
            _ => out_path = Some(a),
        }
    }
    k = k.max(32) / 32 * 32;
    n = n.max(k) / k * k;

    let formats: &[(FormatId, &str)] = if fp3 {
        &[(FormatId::RocmFp2, "ROCmFP2"), (FormatId::RocmFp3, "ROCmFP3")]
    } else {
        &[(FormatId::RocmFp2, "ROCmFP2")]
    };
    let data = cases(n, k);
    let mut rows = Vec::new();
    println!(
        "{n} weights per set, rows of {k}, {reps} repetitions ({} time)",
        if cpu_seconds().is_some() { "CPU" } else { "wall-clock" }
    );
    println!(
        "{:<8} {:<18} {:>14} {:>14} {:>8} identical",
        "format", "data", "fast w/s", "exhaust. w/s", "ratio"
    );
    let mut all_identical = true;
    for &(f, fname) in formats {
        for c in &data {
            let (tf, bf) = time_rule(f, k, c, Rule::Reference, reps);
            let (te, be) = time_rule(f, k, c, Rule::Exhaustive, reps);
            let identical = bf == be;
            all_identical &= identical;
            let row = Row {
                format: fname,
                case: c.name,
                fast_wps: n as f64 / tf,
                exhaustive_wps: n as f64 / te,
                identical,
            };
            println!(
                "{:<8} {:<18} {:>14.3e} {:>14.3e} {:>7.1}x {}",
                row.format,
                row.case,
                row.fast_wps,
                row.exhaustive_wps,
                row.fast_wps / row.exhaustive_wps,
                if identical { "yes" } else { "NO" }
            );
            rows.push(row);
        }
    }

    let clock = if cpu_seconds().is_some() { "cpu" } else { "wall" };
    let mut json =
        format!("{{\"n\":{n},\"k\":{k},\"reps\":{reps},\"clock\":\"{clock}\",\"results\":[");
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(
            "{{\"format\":\"{}\",\"data\":\"{}\",\"fast_weights_per_s\":{:.6e},\
             \"exhaustive_weights_per_s\":{:.6e},\"ratio\":{:.3},\"identical\":{}}}",
            r.format,
            r.case,
            r.fast_wps,
            r.exhaustive_wps,
            r.fast_wps / r.exhaustive_wps,
            r.identical
        ));
    }
    json.push_str("]}");
    match out_path {
        Some(p) => std::fs::write(&p, json + "\n").expect("write JSON"),
        None => println!("{json}"),
    }
    if !all_identical {
        eprintln!("fast and exhaustive outputs differ");
        std::process::exit(1);
    }
}
