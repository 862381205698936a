//! Large randomized identity test of the ROCmFPX fast searches: `Rule::Reference` (ROCmFP2's
//! envelope search, ROCmFP3's window search) must give the same bytes as `Rule::Exhaustive` on
//! every block, across distributions (Gaussian, heavy-tailed, all-equal halves, exact grid ties,
//! values on the code thresholds, zeros, subnormal and huge magnitudes, mixtures), with and
//! without importance weights (including zero and extreme weights).
//!
//! The default runs 131,072 blocks per format; `LOWBIT_SEARCH_BLOCKS=N` runs `N` (e.g.
//! 2,000,000 for a long run; the exhaustive rule costs about 10 µs per block).

use lowbit::{codec, EncodeOptions, FormatId, Rule};

/// xorshift64* (deterministic).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
    fn sign(&mut self) -> f64 {
        if self.next_u64() & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    }
}

/// The UE4M3-b8 scale of byte `b` (FORMATS.md: `m / 1024` for exponent 0, else
/// `(8 + m) 2^(e - 11)`), written out independently of the library.
fn scale(b: u64) -> f64 {
    let (e, m) = ((b >> 3) as i32, (b & 7) as f64);
    if e == 0 {
        m / 1024.0
    } else {
        (8.0 + m) * 2f64.powi(e - 11)
    }
}

/// One 16-value half drawn from distribution `kind`.
fn half(r: &mut Rng, kind: u64, out: &mut [f32]) {
    let sigma = 10f64.powf(-4.0 + 5.0 * r.uniform()); // 1e-4 .. 10
    match kind {
        0 => out.iter_mut().for_each(|v| *v = (sigma * r.normal()) as f32),
        1 => out.iter_mut().for_each(|v| {
            // Student-t with 1 or 2 degrees of freedom
            let df = 1.0 + r.below(2) as f64;
            let chi: f64 = (0..df as usize).map(|_| r.normal().powi(2)).sum();
            *v = (sigma * r.normal() / (chi / df).sqrt()) as f32;
        }),
        2 => {
            // all equal (exact ties between s, s/4 and 4s), with random signs
            let v = (sigma * r.normal()) as f32;
            out.iter_mut().for_each(|o| *o = v * r.sign() as f32);
        }
        3 => {
            // exact grid values c * s for one or two legal scales
            let (b0, b1) = (r.below(127), r.below(127));
            out.iter_mut().for_each(|o| {
                let s = if r.below(2) == 0 { scale(b0) } else { scale(b1) };
                let c = [0.0, 1.0, 2.0, 4.0, 0.25, 16.0][r.below(6) as usize];
                *o = (c * s * r.sign()) as f32;
            });
        }
        4 => {
            // on the thresholds 2.5 s (FP2) and 0.5 s, 1.5 s, 3 s (FP3)
            let b = r.below(127);
            out.iter_mut().for_each(|o| {
                let t = [2.5, 0.5, 1.5, 3.0, 1.0, 4.0][r.below(6) as usize];
                let bb = (b + r.below(3)).min(126);
                *o = (t * scale(bb) * r.sign()) as f32;
            });
        }
        5 => out.iter_mut().for_each(|v| {
            // subnormal and tiny
            *v = (r.normal() * 2f64.powi(-(120 + r.below(30) as i32))) as f32;
        }),
        6 => out.iter_mut().for_each(|v| {
            // huge: beyond the largest code (896) up to ~1e38
            *v = (r.normal() * 10f64.powf(2.0 + 36.0 * r.uniform())) as f32;
        }),
        7 => out.iter_mut().for_each(|v| {
            // mixture: zeros of both signs, duplicates, outliers
            *v = match r.below(5) {
                0 => 0.0,
                1 => -0.0,
                2 => (sigma * r.normal()) as f32,
                3 => (sigma * 30.0 * r.normal()) as f32,
                _ => (sigma * r.below(4) as f64) as f32,
            };
        }),
        _ => {
            // few distinct magnitudes with a wide dynamic range
            let big = sigma * (1.0 + 1e3 * r.uniform());
            out.iter_mut().for_each(|v| {
                *v = if r.below(8) == 0 { big } else { sigma * 1e-3 * r.normal() } as f32;
            });
        }
    }
}

fn importance(r: &mut Rng, out: &mut [f32]) {
    let kind = r.below(4);
    for w in out.iter_mut() {
        *w = match kind {
            0 => (0.1 - r.uniform().ln()) as f32,
            1 => [0.0, 1.0, 1e-3, 1e3][r.below(4) as usize],
            2 => (10f64.powf(-30.0 + 60.0 * r.uniform())) as f32,
            _ => 1.0,
        };
    }
}

fn check(format: FormatId, blocks: usize, seed: u64) {
    const ROW: usize = 256; // 8 blocks per row: one sigma2 per row for the weighted objective
    let rows = blocks.div_ceil(ROW / 32);
    let mut r = Rng(seed);
    let mut x = vec![0f32; ROW];
    let mut w = vec![0f32; ROW];
    let mut checked = 0usize;
    for row in 0..rows {
        for h in x.chunks_exact_mut(16) {
            let kind = r.below(9);
            half(&mut r, kind, h);
            // the generators can overflow f32: keep the largest finite magnitude instead
            h.iter_mut().filter(|v| !v.is_finite()).for_each(|v| *v = f32::MAX.copysign(*v));
        }
        let imp = if row % 3 == 0 {
            importance(&mut r, &mut w);
            Some(&w[..])
        } else {
            None
        };
        let enc = |rule| {
            codec::encode_to_vec(format, ROW, &x, &EncodeOptions { rule, importance: imp })
                .expect("encode")
        };
        let (fast, slow) = (enc(Rule::Reference), enc(Rule::Exhaustive));
        if fast != slow {
            let bb = format.geometry().block_bytes;
            let blk = (0..ROW / 32).find(|&i| fast[i * bb..][..bb] != slow[i * bb..][..bb]);
            let i = blk.unwrap_or(0);
            panic!(
                "{format}: row {row} block {i}: fast {:02x?} exhaustive {:02x?}\nx = {:?}\nw = {:?}",
                &fast[i * bb..][..bb],
                &slow[i * bb..][..bb],
                &x[32 * i..32 * i + 32],
                imp.map(|w| &w[32 * i..32 * i + 32]),
            );
        }
        checked += ROW / 32;
    }
    assert!(checked >= blocks);
}

fn blocks() -> usize {
    std::env::var("LOWBIT_SEARCH_BLOCKS").ok().and_then(|v| v.parse().ok()).unwrap_or(131_072)
}

#[test]
fn fp2_fast_equals_exhaustive_on_many_blocks() {
    check(FormatId::RocmFp2, blocks(), 0x00F2_5EA2_C400_0001);
}

#[test]
fn fp3_fast_equals_exhaustive_on_many_blocks() {
    check(FormatId::RocmFp3, blocks(), 0x00F3_5EA2_C400_0002);
}
