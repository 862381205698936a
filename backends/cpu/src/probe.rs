//! The machine's read bandwidth: the ceiling that benchmarks divide a kernel's weight GB/s by.
//!
//! A probe that reads memory worse than the kernels do makes every ratio look better than it
//! is. The first probe of this project (four interleaved streams, summed by the compiler's
//! vectorization of a portable loop, [`ReadPattern::Streams4`]) read 12-13 GB/s on one thread
//! of the project's EPYC where one linear pass of 64-byte loads read 23-26 GB/s (2026-12-01,
//! 512 MiB on huge pages, best of 8), so one-thread kernels appeared to stream at up to 1.5x
//! "the bandwidth". [`read_bandwidth`] therefore times several ways of reading the same buffer,
//! interleaved pass by pass so that each meets the same moments of a shared machine, and
//! reports the best of them as the ceiling, with every pattern's figure beside it.
//!
//! The buffer should live where weights live ([`crate::weights::Arena`]: 2 MiB-aligned, advised
//! for huge pages) and be far larger than the last-level cache.
//!
//! Vector loops live in `x86/stream.rs`; what must not live here: anything about formats.

use std::time::Instant;

use crate::isa::{self, Isa};

/// One way of reading a buffer once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPattern {
    /// Four streams (the buffer's quarters) summed in step, by a portable loop the compiler
    /// vectorizes: the project's first probe.
    Streams4,
    /// One linear pass with the widest vector loads of the selected ISA (a portable loop where
    /// there is no x86 SIMD).
    Linear,
    /// [`ReadPattern::Linear`] with a software prefetch into L2 8 KiB ahead, the default of the
    /// matmul drivers (x86-64 with AVX2 or AVX-512 only).
    LinearPrefetchL2,
    /// [`ReadPattern::Linear`] with a software prefetch into L1 2 KiB ahead, NVFP4's driver
    /// policy (x86-64 with AVX2 or AVX-512 only).
    LinearPrefetchL1,
}

impl ReadPattern {
    /// Every pattern, in the order they are timed.
    pub const ALL: [ReadPattern; 4] = [
        ReadPattern::Streams4,
        ReadPattern::Linear,
        ReadPattern::LinearPrefetchL2,
        ReadPattern::LinearPrefetchL1,
    ];

    /// A short name for reports and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            ReadPattern::Streams4 => "streams4",
            ReadPattern::Linear => "linear",
            ReadPattern::LinearPrefetchL2 => "linear-prefetch-l2-8k",
            ReadPattern::LinearPrefetchL1 => "linear-prefetch-l1-2k",
        }
    }

    /// Whether this build and CPU run the pattern as described (the prefetching ones need x86
    /// SIMD).
    pub fn available(self) -> bool {
        match self {
            ReadPattern::Streams4 | ReadPattern::Linear => true,
            ReadPattern::LinearPrefetchL2 | ReadPattern::LinearPrefetchL1 => {
                matches!(simd(), Some(Isa::Avx2 | Isa::Avx512 | Isa::Avx512Vnni))
            }
        }
    }
}

/// The x86 ISA the vector loops may use: the process-wide selection ([`isa::selected`]).
fn simd() -> Option<Isa> {
    isa::selected().ok().filter(|i| matches!(i, Isa::Avx2 | Isa::Avx512 | Isa::Avx512Vnni))
}

/// The wrapping sum of every word of `buf`, read by `pattern`; the same value for every
/// pattern (which is how the tests know each reads everything). A pattern that is not
/// [`ReadPattern::available`] reads as [`ReadPattern::Linear`] does.
pub fn read_sum(buf: &[u64], pattern: ReadPattern) -> u64 {
    match pattern {
        ReadPattern::Streams4 => streams4(buf),
        ReadPattern::Linear => linear(buf, None),
        ReadPattern::LinearPrefetchL2 => linear(buf, Some(false)),
        ReadPattern::LinearPrefetchL1 => linear(buf, Some(true)),
    }
}

/// Four quarters in step, eight lanes each (the compiler vectorizes the lane loop).
fn streams4(buf: &[u64]) -> u64 {
    let q = buf.len() / 4 / 8 * 8;
    let (a, rest) = buf.split_at(q);
    let (b, rest) = rest.split_at(q);
    let (c, rest) = rest.split_at(q);
    let (d, tail) = rest.split_at(q);
    let mut acc = [0u64; 8];
    for (((x, y), z), w) in
        a.chunks_exact(8).zip(b.chunks_exact(8)).zip(c.chunks_exact(8)).zip(d.chunks_exact(8))
    {
        for j in 0..8 {
            acc[j] =
                acc[j].wrapping_add(x[j]).wrapping_add(y[j]).wrapping_add(z[j]).wrapping_add(w[j]);
        }
    }
    let t = tail.iter().fold(0u64, |s, v| s.wrapping_add(*v));
    acc.iter().fold(t, |s, v| s.wrapping_add(*v))
}

/// One linear pass; `l1` = `Some(true)` prefetches into L1, `Some(false)` into L2.
fn linear(buf: &[u64], l1: Option<bool>) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::x86::{stream, Prefetch};
        let pf = l1.map(|l1| if l1 { Prefetch::L1(2 << 10) } else { Prefetch::DEFAULT });
        if let Some(s) = simd().and_then(|isa| stream::linear_sum(buf, isa, pf)) {
            return s;
        }
    }
    let _ = l1;
    let mut acc = [0u64; 8];
    let mut chunks = buf.chunks_exact(8);
    for c in &mut chunks {
        for j in 0..8 {
            acc[j] = acc[j].wrapping_add(c[j]);
        }
    }
    let t = chunks.remainder().iter().fold(0u64, |s, v| s.wrapping_add(*v));
    acc.iter().fold(t, |s, v| s.wrapping_add(*v))
}

/// What [`read_bandwidth`] measured at one thread count.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadBandwidth {
    /// Threads, each reading one contiguous part of the buffer.
    pub threads: usize,
    /// The best pattern's GB/s (1e9 bytes/s): the ceiling to compare kernels with.
    pub gb_s: f64,
    /// Every available pattern's best GB/s over the passes.
    pub patterns: Vec<(ReadPattern, f64)>,
}

impl ReadBandwidth {
    /// The pattern that gave [`ReadBandwidth::gb_s`].
    pub fn best_pattern(&self) -> Option<ReadPattern> {
        self.patterns.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|p| p.0)
    }
}

/// Times every available [`ReadPattern`] over `buf` with `threads` threads (one contiguous part
/// each), `passes` rounds in which each pattern reads the whole buffer once; each pattern's
/// figure is its fastest round.
pub fn read_bandwidth(buf: &[u64], threads: usize, passes: usize) -> ReadBandwidth {
    let patterns: Vec<ReadPattern> =
        ReadPattern::ALL.into_iter().filter(|p| p.available()).collect();
    let bytes = std::mem::size_of_val(buf) as f64;
    let chunk = buf.len().div_ceil(threads.max(1)).max(1);
    let mut best = vec![f64::MAX; patterns.len()];
    let mut sink = 0u64;
    for _ in 0..passes.max(1) {
        for (i, &p) in patterns.iter().enumerate() {
            let t = Instant::now();
            let s = std::thread::scope(|s| {
                let hs: Vec<_> = buf
                    .chunks(chunk)
                    .map(|part| s.spawn(move || read_sum(std::hint::black_box(part), p)))
                    .collect();
                hs.into_iter().fold(0u64, |a, h| {
                    a.wrapping_add(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                })
            });
            best[i] = best[i].min(t.elapsed().as_secs_f64());
            sink = sink.wrapping_add(s);
        }
    }
    std::hint::black_box(sink);
    let patterns: Vec<(ReadPattern, f64)> =
        patterns.into_iter().zip(best).map(|(p, t)| (p, bytes / t.max(1e-9) / 1e9)).collect();
    let gb_s = patterns.iter().map(|p| p.1).fold(0.0, f64::max);
    ReadBandwidth { threads, gb_s, patterns }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_reads_every_word() {
        for len in [0usize, 1, 7, 31, 32, 33, 255, 1003, 4096 + 17] {
            let buf: Vec<u64> =
                (0..len as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
            let want = buf.iter().fold(0u64, |s, v| s.wrapping_add(*v));
            for p in ReadPattern::ALL {
                assert_eq!(read_sum(&buf, p), want, "{} over {len} words", p.name());
            }
        }
    }

    #[test]
    fn bandwidth_reports_the_best_pattern() {
        let buf = vec![3u64; 1 << 16];
        let r = read_bandwidth(&buf, 2, 2);
        assert_eq!(r.threads, 2);
        assert!(r.patterns.iter().any(|p| p.0 == ReadPattern::Linear));
        let best = r.patterns.iter().map(|p| p.1).fold(0.0, f64::max);
        assert!(r.gb_s > 0.0 && r.gb_s == best, "{r:?}");
        assert!(r.patterns.iter().all(|p| p.1.is_finite() && p.1 > 0.0), "{r:?}");
        assert_eq!(r.patterns.iter().find(|p| p.1 == best).map(|p| p.0), r.best_pattern());
    }
}
