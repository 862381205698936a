//! Property tests for the basic ggml block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q8_K):
//! round-trip error bounds, canonical re-encoding where the format is canonical, and the
//! reference dot products against an f64 computation within their documented bound.
//!
//! Canonicality (`encode(decode(b)) == b` for blocks `b` the reference encoder produced):
//! * Q8_0, Q4_0, Q5_0: canonical whenever the stored f16 `d` is non-zero. The decoded values
//!   are exact multiples `q·d16`; the extreme element always has code ±127 / 0, so re-encoding
//!   finds `max' = ±127·d16` (resp. `-8·d16`, `-16·d16`), `d' = d16` exactly, and
//!   `x'·(1/d16)` is within `127·2^-24` of the code. With `d16 == 0` (inputs below f16's
//!   range) the codes are lost on decode.
//! * Q8_1: `d` and `qs` are canonical as for Q8_0; `s` is not, because the encoder computes
//!   it from the f32 `d` before rounding, and re-encoding uses `d16` (checked exactly).
//! * Q4_1, Q5_1: not canonical in general (decode adds `m` in f32, which loses the low bits of
//!   `q·d` when |m| ≫ d); canonical when the block minimum is 0 (then `m = 0` and decode is
//!   exact), which is what is tested.
//! * Q8_K: not canonical: `d = 1/iscale` is an unrounded f32 and decode rounds `d·q`; when an
//!   opposite-signed element also reaches |q| = 127 before the extreme one, re-encoding
//!   flips every sign. Tested: codes equal up to a global sign, `d` within 4 ulp (same sign
//!   flip), and `bsums` consistent.

use lowbit::codec::{self, ActRow};
use lowbit::format::ggml::q4_0::BlockQ4_0;
use lowbit::format::ggml::q4_1::BlockQ4_1;
use lowbit::format::ggml::q5_0::BlockQ5_0;
use lowbit::format::ggml::q5_1::BlockQ5_1;
use lowbit::format::ggml::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use lowbit::{Block, EncodeOptions, Error, FormatId};
use proptest::prelude::*;

const OPTS: EncodeOptions<'static> =
    EncodeOptions { rule: lowbit::Rule::Reference, importance: None };

fn enc(format: FormatId, x: &[f32]) -> Vec<u8> {
    codec::encode_to_vec(format, x.len(), x, &OPTS).unwrap()
}

fn dec(format: FormatId, b: &[u8]) -> Vec<f32> {
    let k = b.len() / format.geometry().block_bytes * format.geometry().block_elems;
    codec::decode_to_vec(format, k, b).unwrap()
}

/// Largest error of rounding a positive f32 scale `v` to f16 (relative 2^-11, or half the
/// subnormal spacing 2^-25).
fn f16_err(v: f32) -> f32 {
    (v.abs() * 2f32.powi(-11)).max(2f32.powi(-25))
}

/// Rows of `nb` blocks of `be` elements, values in ±1 times 10^e, with a few exact zeros.
fn rows(be: usize, max_blocks: usize) -> impl Strategy<Value = Vec<f32>> {
    (1..=max_blocks)
        .prop_flat_map(move |nb| {
            (
                prop::collection::vec(prop_oneof![9 => -1f32..1f32, 1 => Just(0f32)], nb * be),
                -4i32..4,
            )
        })
        .prop_map(|(v, e)| {
            let s = 10f32.powi(e);
            v.into_iter().map(|x| x * s).collect()
        })
}

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |a, v| a.max(v.abs()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Q8_0 / Q8_1: |x - x̂| <= d/2 + 127·|d - d16| + ε, d = amax/127.
    #[test]
    fn q8_round_trip_bound(x in rows(32, 6)) {
        for f in [FormatId::Q8_0, FormatId::Q8_1] {
            let y = dec(f, &enc(f, &x));
            for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
                let d = amax(xb) / 127.0;
                let bound = d * 0.5 * (1.0 + 1e-6) + 127.0 * f16_err(d) + 1e-30;
                for (a, b) in xb.iter().zip(yb) {
                    prop_assert!((a - b).abs() <= bound, "{f}: {a} -> {b}, bound {bound}");
                }
            }
        }
    }

    /// Q4_0 / Q5_0: codes clamp at the top, so |x - x̂| <= |d| + n·|d - d16| + ε,
    /// d = max/-8 (resp. -16); away from the clamp the error is <= |d|/2.
    #[test]
    fn q4_0_q5_0_round_trip_bound(x in rows(32, 6)) {
        for (f, n) in [(FormatId::Q4_0, 8.0f32), (FormatId::Q5_0, 16.0)] {
            let y = dec(f, &enc(f, &x));
            for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
                let d = amax(xb) / n;
                let err = n * f16_err(d) + 1e-30;
                for (a, b) in xb.iter().zip(yb) {
                    // x on the side of the extreme element: half-step; opposite side: clamp.
                    let bound = d * (1.0 + 1e-6) + err;
                    prop_assert!((a - b).abs() <= bound, "{f}: {a} -> {b}, bound {bound}");
                    if a.abs() <= (n - 1.0) * d {
                        prop_assert!((a - b).abs() <= d * 0.5 * (1.0 + 1e-5) + err);
                    }
                }
            }
        }
    }

    /// Q4_1 / Q5_1: |x - x̂| <= d/2 + levels·|d - d16| + |min - m16| + ε, d = (max-min)/levels.
    #[test]
    fn q4_1_q5_1_round_trip_bound(x in rows(32, 6)) {
        for (f, levels) in [(FormatId::Q4_1, 15.0f32), (FormatId::Q5_1, 31.0)] {
            let y = dec(f, &enc(f, &x));
            for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
                let min = xb.iter().fold(f32::MAX, |a, v| a.min(*v));
                let max = xb.iter().fold(-f32::MAX, |a, v| a.max(*v));
                let d = (max - min) / levels;
                let bound = d * 0.5 * (1.0 + 1e-5)
                    + levels * f16_err(d)
                    + f16_err(min)
                    + (max.abs() + min.abs()) * 2f32.powi(-23);
                for (a, b) in xb.iter().zip(yb) {
                    prop_assert!((a - b).abs() <= bound, "{f}: {a} -> {b}, bound {bound}");
                }
            }
        }
    }

    /// Q8_K: |x - x̂| <= |d|/2 (d exact in f32) plus a few f32 roundings.
    #[test]
    fn q8_k_round_trip_bound(x in rows(256, 3)) {
        let y = dec(FormatId::Q8K, &enc(FormatId::Q8K, &x));
        for (xb, yb) in x.chunks(256).zip(y.chunks(256)) {
            let d = amax(xb) / 127.0;
            let bound = d * 0.5 + amax(xb) * 2f32.powi(-20) + 1e-30;
            for (a, b) in xb.iter().zip(yb) {
                prop_assert!((a - b).abs() <= bound, "{a} -> {b}, bound {bound}");
            }
        }
    }

    /// Q8_0 / Q4_0 / Q5_0 are canonical (blocks with a non-zero f16 scale).
    #[test]
    fn symmetric_formats_are_canonical(x in rows(32, 6)) {
        for f in [FormatId::Q8_0, FormatId::Q4_0, FormatId::Q5_0] {
            let b = enc(f, &x);
            let bb = f.geometry().block_bytes;
            let b2 = enc(f, &dec(f, &b));
            for (blk, blk2) in b.chunks(bb).zip(b2.chunks(bb)) {
                if blk[0] & 0x7F != 0 || blk[1] & 0x7F != 0 {
                    prop_assert_eq!(blk, blk2, "{}", f);
                }
            }
        }
    }

    /// Q8_1: d and qs canonical; s = f16(sum(q) · d16) after re-encoding.
    #[test]
    fn q8_1_canonical_but_s(x in rows(32, 6)) {
        let b = enc(FormatId::Q8_1, &x);
        let b2 = enc(FormatId::Q8_1, &dec(FormatId::Q8_1, &b));
        let blocks: Vec<BlockQ8_1> = b.chunks(36).map(q8_1_from_bytes).collect();
        let blocks2: Vec<BlockQ8_1> = b2.chunks(36).map(q8_1_from_bytes).collect();
        for (p, q) in blocks.iter().zip(&blocks2) {
            if p.d.to_f32() == 0.0 {
                continue;
            }
            prop_assert_eq!(p.d, q.d);
            prop_assert_eq!(p.qs, q.qs);
            let sum: i32 = p.qs.iter().map(|&v| i32::from(v)).sum();
            prop_assert_eq!(q.s, half::f16::from_f32(sum as f32 * p.d.to_f32()));
        }
    }

    /// Q4_1 / Q5_1 re-encode to themselves when the block minimum is 0 (m = 0).
    #[test]
    fn asymmetric_formats_canonical_with_zero_min(x in rows(32, 6)) {
        let x: Vec<f32> = x.chunks(32).flat_map(|b| {
            let min = b.iter().fold(f32::MAX, |a, v| a.min(*v));
            b.iter().map(move |v| v - min).collect::<Vec<_>>()
        }).collect();
        for f in [FormatId::Q4_1, FormatId::Q5_1] {
            let b = enc(f, &x);
            let bb = f.geometry().block_bytes;
            let b2 = enc(f, &dec(f, &b));
            for (blk, blk2) in b.chunks(bb).zip(b2.chunks(bb)) {
                // m must be +0 and d non-zero
                if blk[2] == 0 && blk[3] == 0 && (blk[0] != 0 || blk[1] != 0) {
                    prop_assert_eq!(blk, blk2, "{}", f);
                }
            }
        }
    }

    /// Q8_K re-encodes to the same codes up to a global sign, `d` within 4 ulp.
    #[test]
    fn q8_k_nearly_canonical(x in rows(256, 3)) {
        let b = enc(FormatId::Q8K, &x);
        let b2 = enc(FormatId::Q8K, &dec(FormatId::Q8K, &b));
        let p: Vec<BlockQ8K> = b.chunks(292).map(q8_k_from_bytes).collect();
        let q: Vec<BlockQ8K> = b2.chunks(292).map(q8_k_from_bytes).collect();
        for (p, q) in p.iter().zip(&q) {
            if p.d == 0.0 {
                continue;
            }
            let sign: i8 = if (p.d < 0.0) == (q.d < 0.0) { 1 } else { -1 };
            for (a, c) in p.qs.iter().zip(&q.qs) {
                prop_assert_eq!(*a, sign * *c);
            }
            let ulps = (p.d.abs().to_bits() as i64 - q.d.abs().to_bits() as i64).abs();
            prop_assert!(ulps <= 4, "d {} vs {}", p.d, q.d);
            for (s, g) in q.bsums.iter().zip(q.qs.chunks(16)) {
                prop_assert_eq!(*s, g.iter().map(|&v| i16::from(v)).sum::<i16>());
            }
        }
    }

    /// Arbitrary bytes never panic: decode and dot either both succeed or both report the same
    /// non-finite scale at an offset inside the buffer.
    #[test]
    fn arbitrary_bytes_never_panic(raw in prop::collection::vec(any::<u8>(), 292 * 2)) {
        let a = [BlockQ8_0::encode(&[1.0; 32]).unwrap(); 16];
        let a1 = [BlockQ8_1::encode(&[1.0; 32]).unwrap(); 16];
        let ak = [BlockQ8K::encode(&[1.0; 256]).unwrap(); 2];
        for f in [FormatId::Q4_0, FormatId::Q4_1, FormatId::Q5_0, FormatId::Q5_1, FormatId::Q8_0,
                  FormatId::Q8_1, FormatId::Q8K] {
            let g = f.geometry();
            let nb = if g.block_elems == 256 { 2 } else { 16 };
            let w = &raw[..nb * g.block_bytes];
            let act = match f.info().activation {
                lowbit::ActFormat::Q8_0 => ActRow::Q8_0(&a),
                lowbit::ActFormat::Q8_1 => ActRow::Q8_1(&a1),
                _ => ActRow::Q8K(&ak),
            };
            let d = codec::decode_to_vec(f, nb * g.block_elems, w);
            let y = codec::dot_row(f, w, act);
            match (d, y) {
                // Q8_K's f32 d can be so large that d·q overflows (ggml gives ±inf too); every
                // f16-scaled block decodes to finite values.
                (Ok(v), Ok(_)) => {
                    prop_assert!(f == FormatId::Q8K || v.iter().all(|x| x.is_finite()))
                }
                (Err(Error::NonFiniteScale { offset, .. }), Err(e2)) => {
                    prop_assert!(offset < w.len());
                    prop_assert_eq!(e2, Error::NonFiniteScale { format: f, field: match e2 {
                        Error::NonFiniteScale { field, .. } => field,
                        _ => "",
                    }, offset });
                }
                other => prop_assert!(false, "{f}: {other:?}"),
            }
        }
    }

    /// Every dot product against f64 within |y - y_ref| <= 2·k·2^-24·Σ|terms|.
    #[test]
    fn dots_within_bound(w in rows(256, 2), a in rows(256, 2)) {
        let k = w.len().min(a.len());
        let (w, a) = (&w[..k], &a[..k]);
        let a0: Vec<BlockQ8_0> = a.chunks(32).map(|c| BlockQ8_0::encode(c).unwrap()).collect();
        let a1: Vec<BlockQ8_1> = a.chunks(32).map(|c| BlockQ8_1::encode(c).unwrap()).collect();
        let ak: Vec<BlockQ8K> = a.chunks(256).map(|c| BlockQ8K::encode(c).unwrap()).collect();
        let act_dec = |f: lowbit::ActFormat| -> Vec<f64> {
            match f {
                lowbit::ActFormat::Q8_0 => decode_blocks(&a0),
                lowbit::ActFormat::Q8_1 => decode_blocks(&a1),
                _ => decode_blocks(&ak),
            }
        };
        for f in [FormatId::Q4_0, FormatId::Q5_0, FormatId::Q8_0, FormatId::Q4_1, FormatId::Q5_1,
                  FormatId::Q8_1, FormatId::Q8K] {
            let wb = enc(f, w);
            let wd: Vec<f64> = dec(f, &wb).into_iter().map(f64::from).collect();
            let act = match f.info().activation {
                lowbit::ActFormat::Q8_0 => ActRow::Q8_0(&a0),
                lowbit::ActFormat::Q8_1 => ActRow::Q8_1(&a1),
                _ => ActRow::Q8K(&ak),
            };
            let ad = act_dec(f.info().activation);
            let y = f64::from(codec::dot_row(f, &wb, act).unwrap());
            let mut y_ref: f64 = wd.iter().zip(&ad).map(|(p, q)| p * q).sum();
            let mut abs: f64 = wd.iter().zip(&ad).map(|(p, q)| (p * q).abs()).sum();
            if matches!(f, FormatId::Q4_1 | FormatId::Q5_1) {
                // ggml's min term uses the activation's stored s instead of da·Σqa.
                let bb = f.geometry().block_bytes;
                for (i, blk) in wb.chunks(bb).enumerate() {
                    let m = f64::from(half::f16::from_le_bytes([blk[2], blk[3]]).to_f32());
                    let s = f64::from(a1[i].s.to_f32());
                    let exact: f64 = ad[i * 32..i * 32 + 32].iter().sum();
                    y_ref += m * (s - exact);
                    abs += (m * s).abs();
                }
            }
            let bound = 2.0 * k as f64 * 2f64.powi(-24) * abs + 1e-30;
            prop_assert!((y - y_ref).abs() <= bound, "{f}: {y} vs {y_ref} (bound {bound})");
        }
    }
}

fn decode_blocks<B: Block>(blocks: &[B]) -> Vec<f64> {
    let mut out = vec![0f32; blocks.len() * B::ELEMS];
    for (b, o) in blocks.iter().zip(out.chunks_mut(B::ELEMS)) {
        b.decode(o).unwrap();
    }
    out.into_iter().map(f64::from).collect()
}

fn q8_1_from_bytes(b: &[u8]) -> BlockQ8_1 {
    BlockQ8_1 {
        d: half::f16::from_le_bytes([b[0], b[1]]),
        s: half::f16::from_le_bytes([b[2], b[3]]),
        qs: core::array::from_fn(|i| b[4 + i] as i8),
    }
}

fn q8_k_from_bytes(b: &[u8]) -> BlockQ8K {
    BlockQ8K {
        d: f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        qs: core::array::from_fn(|i| b[4 + i] as i8),
        bsums: core::array::from_fn(|i| i16::from_le_bytes([b[260 + 2 * i], b[261 + 2 * i]])),
    }
}

/// Nibble order and 5th-bit packing against hand-built blocks (all formats agree on
/// "element j low nibble of qs[j], element j+16 high nibble, bit j of qh").
#[test]
fn layouts_by_hand() {
    let mut qs = [0u8; 16];
    qs[3] = 0x5A; // element 3: 0xA, element 19: 0x5
    let b = BlockQ4_0 { d: half::f16::ONE, qs };
    let mut out = [0f32; 32];
    b.decode(&mut out).unwrap();
    assert_eq!((out[3], out[19], out[0]), (2.0, -3.0, -8.0));

    let b = BlockQ4_1 { d: half::f16::from_f32(0.5), m: half::f16::from_f32(-1.0), qs };
    b.decode(&mut out).unwrap();
    assert_eq!((out[3], out[19], out[0]), (4.0, 1.5, -1.0));

    let qh = ((1u32 << 3) | (1u32 << 20)).to_le_bytes();
    let b = BlockQ5_0 { d: half::f16::ONE, qh, qs };
    b.decode(&mut out).unwrap();
    assert_eq!((out[3], out[19], out[20], out[0]), (10.0, -11.0, 0.0, -16.0));

    let b = BlockQ5_1 { d: half::f16::ONE, m: half::f16::ZERO, qh, qs };
    b.decode(&mut out).unwrap();
    assert_eq!((out[3], out[19], out[20], out[4]), (26.0, 5.0, 16.0, 0.0));
}

/// A NaN weight scale in the second block is an error at its byte offset, in dot and decode.
#[test]
fn dot_rejects_bad_weight_scale() {
    let x: Vec<f32> = (0..64).map(|i| (i as f32 * 0.3).sin()).collect();
    let a1: Vec<BlockQ8_1> = x.chunks(32).map(|c| BlockQ8_1::encode(c).unwrap()).collect();
    let mut w = enc(FormatId::Q4_1, &x);
    w[20 + 2..20 + 4].copy_from_slice(&half::f16::NAN.to_le_bytes());
    let want = Error::NonFiniteScale { format: FormatId::Q4_1, field: "m", offset: 22 };
    assert_eq!(codec::dot_row(FormatId::Q4_1, &w, ActRow::Q8_1(&a1)), Err(want));
    assert_eq!(codec::decode_to_vec(FormatId::Q4_1, 64, &w), Err(want));
}

/// Encoders refuse values whose f16 scale would overflow instead of writing inf.
#[test]
fn encoders_refuse_scale_overflow() {
    let mut x = vec![0.5f32; 64];
    x[40] = 6e5; // Q4_0: d = 75000 > 65504
    assert_eq!(
        codec::encode_to_vec(FormatId::Q4_0, 64, &x, &OPTS),
        Err(Error::OutOfRange { format: FormatId::Q4_0, index: 40 })
    );
    x[40] = -7e4; // Q4_1: m = -70000
    assert!(matches!(
        codec::encode_to_vec(FormatId::Q4_1, 64, &x, &OPTS),
        Err(Error::OutOfRange { index: 40, .. })
    ));
    assert!(codec::encode_to_vec(FormatId::Q4_0, 64, &x, &OPTS).is_ok());
}
