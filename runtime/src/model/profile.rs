//! Where a forward pass spends its time ([`Profile`]): wall-clock time, calls and weight bytes
//! per [`Stage`] of the llama forward pass, accumulated while a profile is attached to the
//! model ([`super::Llama::set_profile`]) and read out as a [`ProfileReport`]. `lowbit run
//! --profile` prints the report for the prompt and for the decode separately.
//!
//! The clock is read twice per stage (about 50 ns each); with no profile attached the forward
//! pass reads no clock at all.
//!
//! What must not live here: the forward pass itself, printing (the command does that).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A stage of the llama forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Token embedding lookups (one row decoded per token).
    Embed,
    /// RMSNorm before attention and before the feed-forward network.
    Norm,
    /// The `attn_q`, `attn_k`, `attn_v` matmuls (one when stacked).
    Qkv,
    /// RoPE on queries and keys, and the KV-cache store.
    Rope,
    /// Attention over the cache (scores, softmax, weighted values).
    Attention,
    /// The `attn_output` matmul.
    AttnOutput,
    /// The `ffn_gate`, `ffn_up` matmuls (one when stacked).
    GateUp,
    /// SwiGLU (`silu(gate) * up`).
    Swiglu,
    /// The `ffn_down` matmul.
    Down,
    /// A mixture-of-experts feed-forward network (router, routing and experts).
    Moe,
    /// Residual additions.
    Residual,
    /// The final norm and the output (vocabulary) matmul.
    Output,
}

impl Stage {
    /// Every stage, in forward-pass order.
    pub const ALL: [Stage; 12] = [
        Stage::Embed,
        Stage::Norm,
        Stage::Qkv,
        Stage::Rope,
        Stage::Attention,
        Stage::AttnOutput,
        Stage::GateUp,
        Stage::Swiglu,
        Stage::Down,
        Stage::Moe,
        Stage::Residual,
        Stage::Output,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Embed => "embed",
            Stage::Norm => "rmsnorm",
            Stage::Qkv => "matmul attn_qkv",
            Stage::Rope => "rope + kv store",
            Stage::Attention => "attention",
            Stage::AttnOutput => "matmul attn_output",
            Stage::GateUp => "matmul ffn_gate+up",
            Stage::Swiglu => "swiglu",
            Stage::Down => "matmul ffn_down",
            Stage::Moe => "moe ffn",
            Stage::Residual => "residual add",
            Stage::Output => "norm + matmul output",
        }
    }

    fn index(self) -> usize {
        Stage::ALL.iter().position(|&s| s == self).unwrap_or(0)
    }
}

#[derive(Debug, Default)]
struct Slot {
    nanos: AtomicU64,
    calls: AtomicU64,
    bytes: AtomicU64,
}

/// Accumulated time, calls and weight bytes per stage (shared, lock-free).
#[derive(Debug, Default)]
pub struct Profile {
    slots: [Slot; 12],
    tokens: AtomicU64,
}

impl Profile {
    /// An empty profile.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one call of `stage` that took `elapsed` and streamed `bytes` weight bytes.
    pub fn add(&self, stage: Stage, elapsed: Duration, bytes: u64) {
        let s = &self.slots[stage.index()];
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        s.nanos.fetch_add(ns, Ordering::Relaxed);
        s.calls.fetch_add(1, Ordering::Relaxed);
        s.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts `n` tokens run through the model.
    pub fn add_tokens(&self, n: u64) {
        self.tokens.fetch_add(n, Ordering::Relaxed);
    }

    /// The report so far, and the counters reset to zero.
    pub fn take(&self) -> ProfileReport {
        let rows = Stage::ALL
            .iter()
            .map(|&stage| {
                let s = &self.slots[stage.index()];
                StageTime {
                    stage,
                    time: Duration::from_nanos(s.nanos.swap(0, Ordering::Relaxed)),
                    calls: s.calls.swap(0, Ordering::Relaxed),
                    bytes: s.bytes.swap(0, Ordering::Relaxed),
                }
            })
            .collect();
        ProfileReport { tokens: self.tokens.swap(0, Ordering::Relaxed), rows }
    }
}

/// One stage's totals.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTime {
    /// The stage.
    pub stage: Stage,
    /// Wall-clock time spent in it.
    pub time: Duration,
    /// Times it ran.
    pub calls: u64,
    /// Weight bytes its matmuls streamed (0 for stages without weights).
    pub bytes: u64,
}

/// Where the time of some forward passes went.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileReport {
    /// Tokens run.
    pub tokens: u64,
    /// One row per stage, in forward-pass order.
    pub rows: Vec<StageTime>,
}

impl ProfileReport {
    /// The time of every stage together.
    pub fn total(&self) -> Duration {
        self.rows.iter().map(|r| r.time).sum()
    }
}

impl fmt::Display for ProfileReport {
    /// A table: per stage, time per token, share of the total, calls per token, and weight
    /// GB/s for the matmul stages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total().as_secs_f64();
        let tokens = self.tokens.max(1) as f64;
        writeln!(
            f,
            "{:<22} {:>11} {:>7} {:>10} {:>9}",
            "stage", "us/token", "share", "calls/tok", "GB/s"
        )?;
        for r in self.rows.iter().filter(|r| r.calls > 0) {
            let secs = r.time.as_secs_f64();
            let gbs = if r.bytes > 0 && secs > 0.0 {
                format!("{:.1}", r.bytes as f64 / secs / 1e9)
            } else {
                "-".to_owned()
            };
            writeln!(
                f,
                "{:<22} {:>11.1} {:>6.1}% {:>10.1} {:>9}",
                r.stage.name(),
                secs / tokens * 1e6,
                if total > 0.0 { 100.0 * secs / total } else { 0.0 },
                r.calls as f64 / tokens,
                gbs
            )?;
        }
        write!(f, "{:<22} {:>11.1} {:>6.1}%", "total", total / tokens * 1e6, 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_reports_and_resets() {
        let p = Profile::new();
        p.add(Stage::Qkv, Duration::from_micros(30), 1000);
        p.add(Stage::Qkv, Duration::from_micros(10), 1000);
        p.add(Stage::Attention, Duration::from_micros(60), 0);
        p.add_tokens(2);
        let r = p.take();
        assert_eq!(r.tokens, 2);
        assert_eq!(r.total(), Duration::from_micros(100));
        let qkv = &r.rows[Stage::Qkv.index()];
        assert_eq!((qkv.calls, qkv.bytes, qkv.time), (2, 2000, Duration::from_micros(40)));
        let text = r.to_string();
        assert!(text.contains("matmul attn_qkv"), "{text}");
        assert!(text.contains("40.0%"), "{text}");
        assert!(!text.contains("swiglu"), "stages that never ran are left out: {text}");
        let again = p.take();
        assert_eq!((again.tokens, again.total()), (0, Duration::ZERO));
    }
}
