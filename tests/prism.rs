//! Prism (PQ2_0, PTQ1_0), 1bit Ternary68 and the shared ternary fit: worked examples, the Q4_0
//! repack against the numpy oracle's bytes, reference dot products against f64, and properties.
//!
//! The oracle manifests themselves run in `tests/fixtures.rs` (`prism`, `onebit`).

mod common;

use half::f16;
use lowbit::format::ggml::BlockQ8_0;
use lowbit::format::onebit::repack_q4_0;
use lowbit::format::prism::{BlockPq2_0, BlockPtq1_0};
use lowbit::quantize::ternary::fit_ternary;
use lowbit::{codec, ActRow, EncodeOptions, Error, FormatId, Rule};
use proptest::prelude::*;

const REF: EncodeOptions<'static> = EncodeOptions { rule: Rule::Reference, importance: None };

// ------------------------------------------------------------------ helpers

struct Rng(u64);

impl Rng {
    fn u32(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }
    fn unit(&mut self) -> f64 {
        (f64::from(self.u32()) + 0.5) / 4_294_967_296.0
    }
    fn normal(&mut self) -> f64 {
        (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
    /// Student-t with 2 degrees of freedom (heavy-tailed).
    fn student2(&mut self) -> f64 {
        self.normal() / (-self.unit().ln()).sqrt()
    }
}

fn enc(format: FormatId, x: &[f32], opts: &EncodeOptions<'_>) -> Vec<u8> {
    codec::encode_to_vec(format, x.len(), x, opts).unwrap()
}

fn dec(format: FormatId, b: &[u8], k: usize) -> Vec<f32> {
    codec::decode_to_vec(format, k, b).unwrap()
}

/// Σ w (x - y)² in f64, in index order.
fn sq_err(x: &[f32], y: &[f32], w: Option<&[f32]>) -> f64 {
    x.iter()
        .zip(y)
        .enumerate()
        .map(|(i, (&a, &b))| {
            let r = f64::from(a) - f64::from(b);
            w.map_or(1.0, |w| f64::from(w[i])) * r * r
        })
        .sum()
}

fn pq_bytes(b: &BlockPq2_0) -> Vec<u8> {
    let mut v = b.d.to_le_bytes().to_vec();
    v.extend_from_slice(&b.qs);
    v
}

fn ptq_bytes(b: &BlockPtq1_0) -> Vec<u8> {
    let mut v = b.qs.to_vec();
    v.extend_from_slice(&b.qh);
    v.extend_from_slice(&b.d.to_le_bytes());
    v
}

fn q8_block(rng: &mut Rng, d: f32) -> BlockQ8_0 {
    BlockQ8_0 { d: f16::from_f32(d), qs: std::array::from_fn(|_| (rng.u32() % 255) as i8) }
}

// ------------------------------------------------------------------ worked examples

#[test]
fn formats_md_examples() {
    let mut x = [0f32; 128];
    x[..4].copy_from_slice(&[0.5, -0.5, 0.0, 0.2]);
    let b = enc(FormatId::Pq2_0, &x, &REF);
    assert_eq!(&b[..5], &[0x00, 0x38, 0x52, 0x55, 0x55]);
    assert!(b[5..].iter().all(|&v| v == 0x55));

    let mut x = [0f32; 128];
    x[0] = 1.0;
    x[1] = 0.6;
    x[16] = -1.0;
    x[127] = -0.9;
    let b = enc(FormatId::Ptq1_0, &x, &REF);
    assert_eq!(&b[..3], &[0xb9, 0xd5, 0x80]);
    assert!(b[3..24].iter().all(|&v| v == 0x80));
    assert_eq!(&b[24..], &[0x7f, 0x7c, 0x00, 0x3c]);
    let y = dec(FormatId::Ptq1_0, &b, 128);
    assert_eq!((y[0], y[1], y[16], y[127], y[2]), (1.0, 1.0, -1.0, -1.0, 0.0));
}

#[test]
fn pq2_0_code3_decodes_as_two_d() {
    let blk = BlockPq2_0 { d: f16::from_f32(0.25), qs: [0xFF; 32] };
    let y = dec(FormatId::Pq2_0, &pq_bytes(&blk), 128);
    assert!(y.iter().all(|&v| v == 0.5));
}

#[test]
fn reference_refuses_f16_overflow_and_reference_with_importance() {
    let mut x = [0f32; 256];
    x[200] = -65520.0;
    let e = codec::encode_to_vec(FormatId::Pq2_0, 256, &x, &REF).unwrap_err();
    assert_eq!(e, Error::OutOfRange { format: FormatId::Pq2_0, index: 200 });
    x[200] = 65519.0; // rounds to 65504
    assert!(codec::encode_to_vec(FormatId::Ptq1_0, 256, &x, &REF).is_ok());
    let w = [1f32; 256];
    let opts = EncodeOptions { rule: Rule::Reference, importance: Some(&w) };
    assert!(matches!(
        codec::encode_to_vec(FormatId::Pq2_0, 256, &x, &opts),
        Err(Error::Unsupported { .. })
    ));
    // The improved rule saturates the scale instead (65504) and takes the weights.
    x[200] = 1e6;
    let opts = EncodeOptions { rule: Rule::Improved, importance: Some(&w) };
    let b = codec::encode_to_vec(FormatId::Pq2_0, 256, &x, &opts).unwrap();
    assert_eq!(dec(FormatId::Pq2_0, &b, 256)[200], 65504.0);
}

// ------------------------------------------------------------------ 1bit repack

#[test]
fn repack_matches_numpy_oracle() {
    let dir = common::fixtures_dir().join("onebit");
    let list = std::fs::read_to_string(dir.join("repack.tsv")).unwrap();
    let (mut ok, mut rejects) = (0, 0);
    for line in list.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let src = std::fs::read(dir.join(f[1])).unwrap();
        let mut dst = vec![0xAAu8; src.len() / 144 * 68];
        let r = repack_q4_0(&src, &mut dst);
        match f[0] {
            "ok" => {
                r.unwrap_or_else(|e| panic!("{}: {e}", f[1]));
                assert_eq!(dst, std::fs::read(dir.join(f[2])).unwrap(), "{}", f[1]);
                ok += 1;
            }
            "reject" => {
                let e = r.expect_err(f[1]);
                let tag = match e {
                    Error::NotRepresentable { offset, .. } => format!("NotRepresentable@{offset}"),
                    Error::NonFiniteScale { offset, .. } => format!("NonFiniteScale@{offset}"),
                    other => format!("{other:?}"),
                };
                assert_eq!(tag, f[2], "{}", f[1]);
                assert!(dst.iter().all(|&b| b == 0), "{}: dst not cleared", f[1]);
                rejects += 1;
            }
            other => panic!("bad op {other}"),
        }
    }
    assert!(ok >= 4 && rejects >= 7, "{ok} ok, {rejects} rejects");
}

#[test]
fn repack_length_errors() {
    let mut dst = [0u8; 68];
    assert!(matches!(repack_q4_0(&[7u8; 143], &mut dst), Err(Error::Length { .. })));
    assert!(matches!(repack_q4_0(&[0u8; 144], &mut [0u8; 67]), Err(Error::Length { .. })));
    assert!(repack_q4_0(&[], &mut []).is_ok());
}

// ------------------------------------------------------------------ dots

/// f64 reference Σ decode(w) decode(a) and Σ |terms|.
fn f64_dot(w: &[f32], a: &[f32]) -> (f64, f64) {
    w.iter().zip(a).fold((0.0, 0.0), |(s, m), (&x, &y)| {
        let t = f64::from(x) * f64::from(y);
        (s + t, m + t.abs())
    })
}

fn q8_values(a: &[BlockQ8_0]) -> Vec<f32> {
    a.iter().flat_map(|b| b.qs.iter().map(move |&q| f32::from(q) * b.d.to_f32())).collect()
}

#[test]
fn prism_dots_against_f64() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for format in [FormatId::Pq2_0, FormatId::Ptq1_0] {
        for case in 0..20 {
            let k = 128 * (1 + case % 6);
            let x: Vec<f32> = (0..k).map(|_| rng.student2() as f32).collect();
            let mut w = enc(format, &x, &REF);
            if format == FormatId::Pq2_0 && case % 2 == 1 {
                // include code 3 (+2 d) in the mix
                for b in w.iter_mut().skip(2).step_by(7) {
                    *b |= 0xC0;
                }
                for blk in 0..k / 128 {
                    let (lo, hi) = (blk * 34, blk * 34 + 2);
                    w[lo..hi].copy_from_slice(&f16::from_f32(0.75).to_le_bytes());
                }
            }
            let a: Vec<BlockQ8_0> =
                (0..k / 32).map(|i| q8_block(&mut rng, 0.001 * (1 + i % 5) as f32)).collect();
            let y = codec::dot_row(format, &w, ActRow::Q8_0(&a)).unwrap();
            let (r, m) = f64_dot(&dec(format, &w, k), &q8_values(&a));
            let bound = 1.0 * k as f64 * 2f64.powi(-24) * m;
            assert!((f64::from(y) - r).abs() <= bound, "{format} case {case}: {y} vs {r}");
        }
    }
}

#[test]
fn prism_dot_rejects_nan_scale_and_wrong_activation() {
    let mut w = enc(FormatId::Ptq1_0, &[0.5f32; 256], &REF);
    let a = vec![BlockQ8_0 { d: f16::ONE, qs: [1; 32] }; 8];
    assert_eq!(codec::dot_row(FormatId::Ptq1_0, &w, ActRow::Q8_0(&a)).unwrap(), 128.0);
    w[28 + 26..28 + 28].copy_from_slice(&[0x00, 0x7E]);
    assert!(matches!(
        codec::dot_row(FormatId::Ptq1_0, &w, ActRow::Q8_0(&a)),
        Err(Error::NonFiniteScale { offset: 54, .. })
    ));
    let x = [0f32; 256];
    assert!(matches!(
        codec::dot_row(FormatId::Pq2_0, &[0u8; 68], ActRow::F32(&x)),
        Err(Error::WrongActivation { .. })
    ));
}

#[test]
fn ternary68_dot_against_f64() {
    let dir = common::fixtures_dir().join("onebit");
    let w = std::fs::read(dir.join("mixed.t68.bin")).unwrap();
    let k = w.len() / 68 * 256;
    let mut rng = Rng(42);
    let x: Vec<f32> = (0..k).map(|_| rng.normal() as f32).collect();
    let y = codec::dot_row(FormatId::Ternary68, &w, ActRow::F32(&x)).unwrap();
    let (r, m) = f64_dot(&dec(FormatId::Ternary68, &w, k), &x);
    assert!((f64::from(y) - r).abs() <= 2.0 * k as f64 * 2f64.powi(-24) * m, "{y} vs {r}");
    let a = vec![BlockQ8_0 { d: f16::ONE, qs: [0; 32] }; k / 32];
    assert!(matches!(
        codec::dot_row(FormatId::Ternary68, &w, ActRow::Q8_0(&a)),
        Err(Error::WrongActivation { .. })
    ));
}

// ------------------------------------------------------------------ improved vs reference

/// Mean relative squared error (Σ err / Σ x²) of both rules on gaussian and student-t(2) rows.
/// Printed with `--nocapture`; the numbers are quoted in docs/FORMAT-NOTES.md.
#[test]
fn improved_beats_reference_on_average() {
    let k = 128 * 256;
    for (name, heavy) in [("gaussian", false), ("student-t2", true)] {
        let mut rng = Rng(if heavy { 2 } else { 1 });
        let x: Vec<f32> =
            (0..k).map(|_| if heavy { rng.student2() } else { rng.normal() } as f32).collect();
        let e2: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        for format in [FormatId::Pq2_0, FormatId::Ptq1_0] {
            let r = sq_err(&x, &dec(format, &enc(format, &x, &REF), k), None) / e2;
            let imp = EncodeOptions { rule: Rule::Improved, importance: None };
            let i = sq_err(&x, &dec(format, &enc(format, &x, &imp), k), None) / e2;
            println!("{format} {name}: relative MSE reference {r:.4}, improved {i:.4}");
            assert!(i < r, "{format} {name}");
        }
    }
}

// ------------------------------------------------------------------ properties

fn row_strategy() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (1usize..=3, any::<u64>(), 0u8..4, -3i32..=4).prop_map(|(blocks, seed, kind, exp)| {
        let mut rng = Rng(seed | 1);
        let scale = 10f64.powi(exp);
        let n = blocks * 128;
        let x = (0..n)
            .map(|i| {
                let v = match kind {
                    0 => rng.normal(),
                    1 => rng.student2(),
                    2 => rng.normal().powi(3),
                    _ => {
                        if i % 3 == 0 {
                            0.5
                        } else {
                            -(rng.unit() * 1.2)
                        }
                    }
                };
                (v * scale).clamp(-6e4, 6e4) as f32
            })
            .collect();
        let w = (0..n).map(|_| rng.unit() as f32 * 4.0).collect();
        (x, w)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Reference rule: every element is within amax/2 of its decode, plus the f16 rounding of the
    /// scale (`|d - amax| <= amax 2^-11`) and the f32 rounding of `x * (1/amax)` (2^-22 amax).
    #[test]
    fn reference_round_trip_bound((x, _w) in row_strategy()) {
        for format in [FormatId::Pq2_0, FormatId::Ptq1_0] {
            let y = dec(format, &enc(format, &x, &REF), x.len());
            for (xb, yb) in x.chunks(128).zip(y.chunks(128)) {
                let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
                if amax < 1e-3 { continue; } // keep d a normal f16
                let bound = f64::from(amax) * (0.5 + 2f64.powi(-11) + 2f64.powi(-22));
                for (&a, &b) in xb.iter().zip(yb) {
                    prop_assert!((f64::from(a) - f64::from(b)).abs() <= bound);
                }
            }
        }
    }

    /// The improved rule (optimal least squares with f16 candidates that include the reference's
    /// scale) never has a larger weighted squared error than the reference rule's bytes. Both
    /// errors are evaluated the same way (f64, index order, from decoded values); the only slack
    /// is a relative 1e-12 for f64 rounding of the sums.
    #[test]
    fn improved_never_worse((x, w) in row_strategy()) {
        for format in [FormatId::Pq2_0, FormatId::Ptq1_0] {
            let r = dec(format, &enc(format, &x, &REF), x.len());
            for imp in [None, Some(&w[..])] {
                let opts = EncodeOptions { rule: Rule::Improved, importance: imp };
                let i = dec(format, &enc(format, &x, &opts), x.len());
                for b in 0..x.len() / 128 {
                    let s = b * 128..(b + 1) * 128;
                    let wb = imp.map(|w| &w[s.clone()]);
                    let er = sq_err(&x[s.clone()], &r[s.clone()], wb);
                    let ei = sq_err(&x[s.clone()], &i[s.clone()], wb);
                    prop_assert!(ei <= er * (1.0 + 1e-12) + 1e-300, "{} block {}: {} > {}", format, b, ei, er);
                }
            }
        }
    }

    /// fit_ternary alone on TQ-sized groups (256) and odd sizes: codes are trits and optimal for
    /// the returned scale (no single trit change lowers the error).
    #[test]
    fn fit_codes_optimal_for_scale(seed in any::<u64>(), n in 1usize..=256) {
        let mut rng = Rng(seed | 1);
        let x: Vec<f32> = (0..n).map(|_| rng.student2() as f32).collect();
        let mut t = vec![0i8; n];
        let d = f64::from(fit_ternary(&x, None, &mut t).to_f32());
        prop_assert!((0.0..=65504.0).contains(&d));
        for (&v, &c) in x.iter().zip(&t) {
            prop_assert!((-1..=1).contains(&c));
            let e = |c: i8| (f64::from(v) - d * f64::from(c)).powi(2);
            prop_assert!(e(c) <= e(-1) && e(c) <= e(0) && e(c) <= e(1));
        }
    }

    /// Canonical blocks (positive f16 scale, trits in {-1,0,1}, at least one nonzero) survive
    /// decode then reference encode byte for byte.
    #[test]
    fn canonical_blocks_round_trip(seed in any::<u64>(), dbits in 0x0001u16..0x7C00) {
        let mut rng = Rng(seed | 1);
        let mut t: [i8; 128] = std::array::from_fn(|_| (rng.u32() % 3) as i8 - 1);
        t[(rng.u32() % 128) as usize] = 1;
        let d = f16::from_bits(dbits);
        let pq = BlockPq2_0::pack(d, &t);
        let ptq = BlockPtq1_0::pack(d, &t);
        for (format, bytes) in [(FormatId::Pq2_0, pq_bytes(&pq)), (FormatId::Ptq1_0, ptq_bytes(&ptq))] {
            let y = dec(format, &bytes, 128);
            prop_assert_eq!(enc(format, &y, &REF), bytes);
        }
    }

    /// Repacking exact-ternary Q4_0 decodes to exactly the Q4_0 values (nibble - 8) * d.
    #[test]
    fn repack_preserves_q4_0_values(seed in any::<u64>(), units in 1usize..4) {
        let mut rng = Rng(seed | 1);
        let mut src = Vec::new();
        for _ in 0..units * 2 {
            let d = (rng.u32() as u16 % 0x7C00) | if rng.u32() % 2 == 0 { 0x8000 } else { 0 };
            for _ in 0..4 {
                src.extend_from_slice(&d.to_le_bytes());
                for _ in 0..16 {
                    let lo = 7 + (rng.u32() % 3) as u8;
                    let hi = 7 + (rng.u32() % 3) as u8;
                    src.push(lo | hi << 4);
                }
            }
        }
        let want: Vec<f32> = src.chunks(18).flat_map(|b| {
            let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
            let q = &b[2..];
            let lo = q.iter().map(move |&v| ((v & 15) as i32 - 8) as f32 * d);
            let hi = q.iter().map(move |&v| ((v >> 4) as i32 - 8) as f32 * d);
            lo.chain(hi).collect::<Vec<_>>()
        }).collect();
        let mut dst = vec![0u8; units * 68];
        repack_q4_0(&src, &mut dst).unwrap();
        let got = dec(FormatId::Ternary68, &dst, units * 256);
        prop_assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }

    /// No byte pattern makes a decoder or dot panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 68 * 7)) {
        for (format, k) in [(FormatId::Pq2_0, 128 * 14), (FormatId::Ptq1_0, 128 * 17), (FormatId::Ternary68, 256 * 7)] {
            let n = format.row_bytes(k).unwrap();
            let _ = codec::decode_to_vec(format, k, &bytes[..n]);
            if format == FormatId::Ternary68 {
                let x = vec![1f32; k];
                let _ = codec::dot_row(format, &bytes[..n], ActRow::F32(&x));
            } else {
                let a = vec![BlockQ8_0 { d: f16::ONE, qs: [3; 32] }; k / 32];
                let _ = codec::dot_row(format, &bytes[..n], ActRow::Q8_0(&a));
            }
        }
        let mut dst = vec![0u8; bytes.len() / 144 * 68];
        let _ = repack_q4_0(&bytes[..bytes.len() / 144 * 144], &mut dst);
    }
}
