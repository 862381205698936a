//! Property and reference tests for the ggml K-quants (Q2_K..Q6_K): decode never panics on
//! arbitrary bytes and fails only with the documented errors; the reference dot products against
//! Q8_K match an f64 computation within the documented bound (c = 1).
//!
//! Decode bit-exactness against gguf-py is checked by the fixtures (`tests/fixtures.rs`,
//! `ggml_kquant`); this file uses the (fixture-verified) decoder to build the f64 references, and
//! checks the dot products bit for bit against the oracle's `dots.tsv` (ggml's generic f32 order).

use lowbit::codec::{self, ActRow};
use lowbit::format::ggml::BlockQ8K;
use lowbit::{Error, FormatId};
use proptest::prelude::*;

/// (format, block bytes, offset of d, offset of dmin)
const KQ: [(FormatId, usize, usize, Option<usize>); 5] = [
    (FormatId::Q2K, 84, 80, Some(82)),
    (FormatId::Q3K, 110, 108, None),
    (FormatId::Q4K, 144, 0, Some(2)),
    (FormatId::Q5K, 176, 0, Some(2)),
    (FormatId::Q6K, 210, 208, None),
];

fn f16_at(b: &[u8], off: usize) -> half::f16 {
    half::f16::from_le_bytes([b[off], b[off + 1]])
}

fn set_f16_bits(b: &mut [u8], off: usize, bits: u16) {
    b[off..off + 2].copy_from_slice(&bits.to_le_bytes());
}

/// A Q8_K block with the given quants and scale and consistent `bsums`.
fn q8k(d: f32, qs: [i8; 256]) -> BlockQ8K {
    let mut bsums = [0i16; 16];
    for (s, g) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
        *s = g.iter().map(|&x| i16::from(x)).sum();
    }
    BlockQ8K { d, qs, bsums }
}

/// The f64 reference and the bound's `sum|terms|`: the weight row is decoded three times (as is,
/// with `dmin = 0` giving the scale parts `d1 * q` exactly, with `d = 0` giving `-m1` exactly).
fn reference(fi: usize, w: &[u8], act: &[BlockQ8K]) -> (f64, f64) {
    let (format, bs, d_off, dmin_off) = KQ[fi];
    let k = act.len() * 256;
    let scale_part = {
        let mut v = w.to_vec();
        if let Some(m) = dmin_off {
            for b in v.chunks_exact_mut(bs) {
                set_f16_bits(b, m, 0);
            }
        }
        codec::decode_to_vec(format, k, &v).unwrap()
    };
    let min_part = match dmin_off {
        Some(_) => {
            let mut v = w.to_vec();
            for b in v.chunks_exact_mut(bs) {
                set_f16_bits(b, d_off, 0);
            }
            codec::decode_to_vec(format, k, &v).unwrap()
        }
        None => vec![0.0; k],
    };
    let a: Vec<f64> =
        act.iter().flat_map(|b| b.qs.iter().map(move |&q| f64::from(b.d) * f64::from(q))).collect();
    let mut y = 0f64;
    let mut mag = 0f64;
    for i in 0..k {
        let (s, m) = (f64::from(scale_part[i]), f64::from(min_part[i]));
        y += (s + m) * a[i];
        mag += (s.abs() + m.abs()) * a[i].abs();
    }
    (y, mag)
}

fn check_dot(fi: usize, w: &[u8], act: &[BlockQ8K]) -> Result<(), TestCaseError> {
    let format = KQ[fi].0;
    let got = codec::dot_row(format, w, ActRow::Q8K(act)).unwrap();
    let (y, mag) = reference(fi, w, act);
    let n = (act.len() * 256) as f64;
    let bound = 1.0 * n * 2f64.powi(-24) * mag;
    prop_assert!(
        (f64::from(got) - y).abs() <= bound,
        "{format}: dot {got} vs f64 {y} (bound {bound})"
    );
    // The dot of the decoded row must also be close: sum(decode(w) * decode(a)).
    let dec = codec::decode_to_vec(format, act.len() * 256, w).unwrap();
    let y2: f64 = dec
        .iter()
        .zip(act.iter().flat_map(|b| b.qs.iter().map(move |&q| (b.d, q))))
        .map(|(&x, (d, q))| f64::from(x) * f64::from(d) * f64::from(q))
        .sum();
    prop_assert!((f64::from(got) - y2).abs() <= bound, "{format}: dot {got} vs decoded {y2}");
    Ok(())
}

/// Any f16 bit pattern that is finite (normal, subnormal or zero, either sign).
fn finite_f16_bits() -> impl Strategy<Value = u16> {
    (any::<bool>(), 0u16..31, 0u16..1024).prop_map(|(s, e, m)| (u16::from(s) << 15) | (e << 10) | m)
}

fn weights(max_blocks: usize) -> impl Strategy<Value = (usize, Vec<u8>)> {
    (0..5usize, 1..=max_blocks).prop_flat_map(|(fi, nb)| {
        let bs = KQ[fi].1;
        (
            Just(fi),
            proptest::collection::vec(any::<u8>(), nb * bs),
            proptest::collection::vec((finite_f16_bits(), finite_f16_bits()), nb),
        )
            .prop_map(move |(fi, mut w, scales)| {
                let (_, bs, d_off, dmin_off) = KQ[fi];
                for (b, (d, m)) in w.chunks_exact_mut(bs).zip(scales) {
                    set_f16_bits(b, d_off, d);
                    if let Some(o) = dmin_off {
                        set_f16_bits(b, o, m);
                    }
                }
                (fi, w)
            })
    })
}

fn act_block() -> impl Strategy<Value = BlockQ8K> {
    (-10i32..=2, 0.5f32..1.0, proptest::collection::vec(any::<i8>(), 256)).prop_map(|(e, f, q)| {
        let mut qs = [0i8; 256];
        qs.copy_from_slice(&q);
        q8k(f * 2f32.powi(e), qs)
    })
}

proptest! {
    /// Decoding arbitrary bytes never panics; it fails only with NonFiniteScale pointing at the
    /// first non-finite d/dmin field, and succeeds with finite values otherwise.
    #[test]
    fn decode_arbitrary_bytes(fi in 0..5usize, nb in 1..4usize, seed in proptest::collection::vec(any::<u8>(), 4 * 210)) {
        let (format, bs, d_off, dmin_off) = KQ[fi];
        let bytes = &seed[..nb * bs];
        let first_bad = (0..nb).find_map(|i| {
            let b = &bytes[i * bs..(i + 1) * bs];
            if !f16_at(b, d_off).is_finite() {
                return Some(i * bs + d_off);
            }
            dmin_off.filter(|&o| !f16_at(b, o).is_finite()).map(|o| i * bs + o)
        });
        match codec::decode_to_vec(format, 256, bytes) {
            Ok(v) => {
                prop_assert!(first_bad.is_none());
                prop_assert_eq!(v.len(), nb * 256);
                prop_assert!(v.iter().all(|x| x.is_finite()));
            }
            Err(Error::NonFiniteScale { offset, .. }) => prop_assert_eq!(Some(offset), first_bad),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    /// Wrong buffer lengths fail cleanly (no panic).
    #[test]
    fn decode_any_length(fi in 0..5usize, len in 0..700usize) {
        let (format, bs, _, _) = KQ[fi];
        let bytes = vec![0u8; len];
        let r = codec::decode_to_vec(format, 256, &bytes);
        if len % bs == 0 {
            prop_assert!(r.is_ok());
        } else {
            prop_assert!(matches!(r, Err(Error::Length { .. })), "{r:?}");
        }
    }

    /// The reference dot product matches the f64 computation within c = 1.
    #[test]
    fn dot_matches_f64((fi, w) in weights(4), acts in proptest::collection::vec(act_block(), 4)) {
        let nb = w.len() / KQ[fi].1;
        check_dot(fi, &w, &acts[..nb])?;
    }
}

/// With d_w = 1, dmin_w = 1/2, d_a = 1/4 every product and partial sum is exactly
/// representable, so the dot must equal the f64 value exactly.
#[test]
fn dot_exact_when_representable() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for (fi, &(format, bs, d_off, dmin_off)) in KQ.iter().enumerate() {
        let nb = 3;
        let mut w: Vec<u8> = (0..nb * bs).map(|_| next() as u8).collect();
        for b in w.chunks_exact_mut(bs) {
            set_f16_bits(b, d_off, half::f16::from_f32(1.0).to_bits());
            if let Some(o) = dmin_off {
                set_f16_bits(b, o, half::f16::from_f32(0.5).to_bits());
            }
        }
        let acts: Vec<BlockQ8K> = (0..nb)
            .map(|_| {
                let mut qs = [0i8; 256];
                qs.iter_mut().for_each(|q| *q = next() as i8);
                q8k(0.25, qs)
            })
            .collect();
        let got = codec::dot_row(format, &w, ActRow::Q8K(&acts)).unwrap();
        let (y, _) = reference(fi, &w, &acts);
        assert_eq!(f64::from(got), y, "{format}");
        assert_ne!(y, 0.0, "{format}: degenerate test data");
    }
}

#[test]
fn dot_rejects_nonfinite_weight_scales_and_wrong_inputs() {
    for &(format, bs, d_off, dmin_off) in &KQ {
        let acts = vec![q8k(1.0, [1; 256]); 2];
        let mut w = vec![0u8; 2 * bs];
        set_f16_bits(&mut w[bs..], d_off, 0x7E00);
        assert_eq!(
            codec::dot_row(format, &w, ActRow::Q8K(&acts)),
            Err(Error::NonFiniteScale { format, field: "d", offset: bs + d_off })
        );
        if let Some(o) = dmin_off {
            let mut w = vec![0u8; 2 * bs];
            set_f16_bits(&mut w, o, 0xFC00);
            assert_eq!(
                codec::dot_row(format, &w, ActRow::Q8K(&acts)),
                Err(Error::NonFiniteScale { format, field: "dmin", offset: o })
            );
        }
        let w = vec![0u8; 2 * bs];
        assert!(matches!(
            codec::dot_row(format, &w[..bs], ActRow::Q8K(&acts)),
            Err(Error::Length { .. })
        ));
        assert!(matches!(
            codec::dot_row(format, &w, ActRow::F32(&[0.0; 512])),
            Err(Error::WrongActivation { .. })
        ));
        assert_eq!(codec::dot_row(format, &w, ActRow::Q8K(&acts)), Ok(0.0));
    }
}

/// ggml's Q2_K/Q4_K/Q5_K min term uses the activation's stored `bsums`; Q3_K/Q6_K ignore them.
#[test]
fn dot_min_term_uses_bsums() {
    for &(format, bs, d_off, dmin_off) in &KQ {
        let mut w = vec![0xFFu8; bs];
        set_f16_bits(&mut w, d_off, 0);
        if let Some(o) = dmin_off {
            set_f16_bits(&mut w, o, half::f16::from_f32(1.0).to_bits());
        }
        let a = q8k(1.0, [1; 256]);
        let mut a_bad = a;
        a_bad.bsums[0] += 1;
        let y = codec::dot_row(format, &w, ActRow::Q8K(&[a])).unwrap();
        let y_bad = codec::dot_row(format, &w, ActRow::Q8K(&[a_bad])).unwrap();
        if dmin_off.is_some() {
            // All mins are 15 (Q2_K) or 63 (Q4_K/Q5_K): the bsums change shifts the result.
            let m = if format == FormatId::Q2K { 15.0 } else { 63.0 };
            assert_eq!(y, -m * 256.0, "{format}");
            assert_eq!(y_bad, y - m, "{format}");
        } else {
            assert_eq!(y, y_bad, "{format}");
        }
    }
}

/// The oracle's dot products (`tests/fixtures/ggml_kquant/dots.tsv`, numpy in ggml's generic f32
/// order, unpacking through gguf-py) must be reproduced bit for bit.
#[test]
fn dot_fixtures_bit_exact() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ggml_kquant");
    let text = std::fs::read_to_string(dir.join("dots.tsv")).unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let format = FormatId::from_name(f[0]).unwrap();
        let k: usize = f[1].parse().unwrap();
        let w = std::fs::read(dir.join(f[2])).unwrap();
        let a = std::fs::read(dir.join(f[3])).unwrap();
        let want: Vec<u32> = std::fs::read(dir.join(f[4]))
            .unwrap()
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let acts: Vec<BlockQ8K> = a
            .chunks_exact(292)
            .map(|b| {
                let mut qs = [0i8; 256];
                qs.iter_mut().zip(&b[4..260]).for_each(|(q, &x)| *q = x as i8);
                let mut bsums = [0i16; 16];
                for (j, s) in bsums.iter_mut().enumerate() {
                    *s = i16::from_le_bytes([b[260 + 2 * j], b[261 + 2 * j]]);
                }
                BlockQ8K { d: f32::from_le_bytes([b[0], b[1], b[2], b[3]]), qs, bsums }
            })
            .collect();
        let rb = format.row_bytes(k).unwrap();
        let nbr = k / 256;
        assert_eq!(w.len(), want.len() * rb);
        for (r, &bits) in want.iter().enumerate() {
            let got = codec::dot_row(
                format,
                &w[r * rb..(r + 1) * rb],
                ActRow::Q8K(&acts[r * nbr..(r + 1) * nbr]),
            )
            .unwrap();
            assert_eq!(
                got.to_bits(),
                bits,
                "{format} row {r}: got {got}, want {}",
                f32::from_bits(bits)
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 5 * 48);
}
