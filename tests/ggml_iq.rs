//! Property and reference tests for the ggml IQ types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
//! IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS).
//!
//! * Decode never panics on arbitrary bytes; it fails only with `NonFiniteScale`, exactly when
//!   a block's scale is NaN/inf, at that block's scale field.
//! * The reference dot products match an f64 `sum(decode(w) * decode(act))` within the bound
//!   each format documents (`|y - ref| <= c * n * 2^-24 * sum|terms|`, c = 4, n = number of f32
//!   additions into the running sum: blocks, or sub-blocks for IQ4_XS).
//! * The dot products equal, bit for bit, the oracle's model of ggml's generic C order
//!   (`tests/fixtures/ggml_iq/dots.tsv`, written by `tools/oracle_ggml_iq.py`).
//!
//! Decode bit-exactness against gguf-py is checked by the fixtures (`tests/fixtures.rs`,
//! `ggml_iq`); the f64 references here use that (fixture-verified) decoder.

use half::f16;
use lowbit::codec::{self, ActRow};
use lowbit::format::ggml::{BlockQ8K, BlockQ8_0};
use lowbit::{Error, FormatId};
use proptest::prelude::*;

/// (format, elements per block, bytes per block, offset of the f16 scale; None = IQ1_M)
const IQ: [(FormatId, usize, usize, Option<usize>); 9] = [
    (FormatId::Iq2Xxs, 256, 66, Some(0)),
    (FormatId::Iq2Xs, 256, 74, Some(0)),
    (FormatId::Iq2S, 256, 82, Some(0)),
    (FormatId::Iq3Xxs, 256, 98, Some(0)),
    (FormatId::Iq3S, 256, 110, Some(0)),
    (FormatId::Iq1S, 256, 50, Some(0)),
    (FormatId::Iq1M, 256, 56, None),
    (FormatId::Iq4Nl, 32, 18, Some(0)),
    (FormatId::Iq4Xs, 256, 136, Some(0)),
];

/// Offset of IQ1_M's `scales` field, which holds its f16 scale in four nibbles.
const IQ1M_SCALES: usize = 48;

/// The f16 bits of a block's scale.
fn scale_bits(fi: usize, b: &[u8]) -> u16 {
    match IQ[fi].3 {
        Some(o) => u16::from_le_bytes([b[o], b[o + 1]]),
        None => {
            let sc: Vec<u16> = (0..4)
                .map(|k| u16::from_le_bytes([b[IQ1M_SCALES + 2 * k], b[IQ1M_SCALES + 2 * k + 1]]))
                .collect();
            (sc[0] >> 12) | ((sc[1] >> 8) & 0xf0) | ((sc[2] >> 4) & 0xf00) | (sc[3] & 0xf000)
        }
    }
}

/// Stores f16 bits as a block's scale (IQ1_M: into the top nibbles of its four scale words).
fn set_scale(fi: usize, b: &mut [u8], bits: u16) {
    match IQ[fi].3 {
        Some(o) => b[o..o + 2].copy_from_slice(&bits.to_le_bytes()),
        None => {
            for k in 0..4 {
                let hi = IQ1M_SCALES + 2 * k + 1;
                b[hi] = (b[hi] & 0x0f) | (((bits >> (4 * k)) as u8 & 0x0f) << 4);
            }
        }
    }
    assert_eq!(scale_bits(fi, b), bits);
}

/// Offset of the scale field inside the block (what NonFiniteScale reports).
fn scale_field(fi: usize) -> usize {
    IQ[fi].3.unwrap_or(IQ1M_SCALES)
}

/// Makes every block's scale finite (clears one exponent bit where it is all ones).
fn make_finite(fi: usize, w: &mut [u8]) {
    let bs = IQ[fi].2;
    for b in w.chunks_exact_mut(bs) {
        if !f16::from_bits(scale_bits(fi, b)).is_finite() {
            // exponent bit 10 of the f16: byte 1 bit 2 (plain), or bit 6 of scales[5] (IQ1_M:
            // f16 bits 8..11 are the top nibble of scale word 2)
            match IQ[fi].3 {
                Some(o) => b[o + 1] &= !0x04,
                None => b[IQ1M_SCALES + 5] &= !0x40,
            }
        }
        assert!(f16::from_bits(scale_bits(fi, b)).is_finite());
    }
}

/// A Q8_K block with the given quants and scale and consistent `bsums`.
fn q8k(d: f32, qs: [i8; 256]) -> BlockQ8K {
    let mut bsums = [0i16; 16];
    for (s, g) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
        *s = g.iter().map(|&x| i16::from(x)).sum();
    }
    BlockQ8K { d, qs, bsums }
}

/// Decoded activations as f64 (`d * q`, exact).
fn act_f64(act: &Act) -> Vec<f64> {
    match act {
        Act::K(b) => b
            .iter()
            .flat_map(|b| b.qs.iter().map(move |&q| f64::from(b.d) * f64::from(q)))
            .collect(),
        Act::Z(b) => b
            .iter()
            .flat_map(|b| b.qs.iter().map(move |&q| f64::from(b.d.to_f32()) * f64::from(q)))
            .collect(),
    }
}

enum Act {
    K(Vec<BlockQ8K>),
    Z(Vec<BlockQ8_0>),
}

impl Act {
    fn row(&self) -> ActRow<'_> {
        match self {
            Act::K(b) => ActRow::Q8K(b),
            Act::Z(b) => ActRow::Q8_0(b),
        }
    }
}

/// Checks the dot product against the f64 reference within c = 4.
fn check_dot(fi: usize, w: &[u8], act: &Act) -> Result<(), TestCaseError> {
    let (format, elems, bs, _) = IQ[fi];
    let k = w.len() / bs * elems;
    let got = codec::dot_row(format, w, act.row()).unwrap();
    let wd = codec::decode_to_vec(format, k, w).unwrap();
    let a = act_f64(act);
    prop_assert_eq!(a.len(), k);
    let (mut y, mut mag) = (0f64, 0f64);
    for (&x, &v) in wd.iter().zip(&a) {
        y += f64::from(x) * v;
        mag += (f64::from(x) * v).abs();
    }
    // n = additions into the running f32 sum: sub-blocks of 32 for IQ4_XS, blocks otherwise.
    let n = if format == FormatId::Iq4Xs { k / 32 } else { k / elems } as f64;
    let bound = 4.0 * n * 2f64.powi(-24) * mag;
    prop_assert!(
        (f64::from(got) - y).abs() <= bound,
        "{:?}: got {} ref {} bound {}",
        format,
        got,
        y,
        bound
    );
    Ok(())
}

fn arb_q8k(n: usize) -> impl Strategy<Value = Vec<BlockQ8K>> {
    prop::collection::vec(
        (prop_oneof![1e-3f32..10.0, -10.0f32..-1e-3], prop::collection::vec(any::<i8>(), 256))
            .prop_map(|(d, qs)| q8k(d, qs.try_into().unwrap())),
        n,
    )
}

fn arb_q8_0(n: usize) -> impl Strategy<Value = Vec<BlockQ8_0>> {
    prop::collection::vec(
        (prop_oneof![1e-3f32..10.0, -10.0f32..-1e-3], prop::collection::vec(-127i8..=127, 32))
            .prop_map(|(d, qs)| BlockQ8_0 { d: f16::from_f32(d), qs: qs.try_into().unwrap() }),
        n,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decode_arbitrary_bytes(fi in 0..IQ.len(), nb in 1usize..4, seed in any::<u64>(),
                              raw in prop::collection::vec(any::<u8>(), 4 * 136)) {
        let (format, elems, bs, _) = IQ[fi];
        // seed % 3: 0 = bytes as drawn, 1 = scales made finite, 2 = one NaN/inf scale injected.
        let mut w: Vec<u8> = raw[..nb * bs].to_vec();
        if seed % 3 != 0 {
            make_finite(fi, &mut w);
        }
        if seed % 3 == 2 {
            let bad = [0x7C00u16, 0xFC00, 0x7E00, 0xFFFF, 0x7C01][(seed / 3 % 5) as usize];
            let b = (seed / 15) as usize % nb;
            set_scale(fi, &mut w[b * bs..(b + 1) * bs], bad);
        }
        let first_bad =
            w.chunks_exact(bs).position(|b| !f16::from_bits(scale_bits(fi, b)).is_finite());
        match codec::decode_to_vec(format, nb * elems, &w) {
            Ok(v) => {
                prop_assert!(first_bad.is_none());
                prop_assert_eq!(v.len(), nb * elems);
                prop_assert!(v.iter().all(|x| x.is_finite()));
            }
            Err(Error::NonFiniteScale { offset, .. }) => {
                let b = first_bad.expect("error without a non-finite scale");
                prop_assert_eq!(offset, b * bs + scale_field(fi));
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
        // The dot product must not panic either, and must fail the same way.
        let act = if format == FormatId::Iq4Nl {
            Act::Z(vec![BlockQ8_0 { d: f16::ONE, qs: [1; 32] }; nb])
        } else {
            Act::K(vec![q8k(1.0, [1; 256]); nb])
        };
        let r = codec::dot_row(format, &w, act.row());
        prop_assert_eq!(r.is_err(), first_bad.is_some());
    }

    #[test]
    fn dot_k_matches_f64(fi in 0..IQ.len() - 2, raw in prop::collection::vec(any::<u8>(), 3 * 110),
                         act in arb_q8k(3)) {
        let bs = IQ[fi].2;
        let mut w = raw[..3 * bs].to_vec();
        make_finite(fi, &mut w);
        check_dot(fi, &w, &Act::K(act))?;
    }

    #[test]
    fn dot_iq4_xs_matches_f64(raw in prop::collection::vec(any::<u8>(), 2 * 136),
                              act in arb_q8k(2)) {
        let mut w = raw;
        make_finite(8, &mut w);
        check_dot(8, &w, &Act::K(act))?;
    }

    #[test]
    fn dot_iq4_nl_matches_f64(raw in prop::collection::vec(any::<u8>(), 8 * 18),
                              act in arb_q8_0(8)) {
        let mut w = raw;
        make_finite(7, &mut w);
        check_dot(7, &w, &Act::Z(act))?;
    }
}

/// Extreme activations (all +127 / -128) with all-0xFF weights: the integer sums at their
/// largest, still within the bound.
#[test]
fn dot_extremes() {
    for (fi, &(format, elems, bs, _)) in IQ.iter().enumerate() {
        let nb = 256 / elems * 2;
        let mut w = vec![0xFFu8; nb * bs];
        make_finite(fi, &mut w);
        let act = if format == FormatId::Iq4Nl {
            Act::Z(vec![BlockQ8_0 { d: f16::from_f32(0.5), qs: [-127; 32] }; 512 / 32])
        } else {
            Act::K(vec![q8k(0.5, [-128; 256]), q8k(0.25, [127; 256])])
        };
        check_dot(fi, &w, &act).unwrap();
    }
}

#[test]
fn wrong_activation_is_refused() {
    let w = vec![0u8; 66];
    let act = [BlockQ8_0 { d: f16::ONE, qs: [0; 32] }; 8];
    let e = codec::dot_row(FormatId::Iq2Xxs, &w, ActRow::Q8_0(&act)).unwrap_err();
    assert!(matches!(e, Error::WrongActivation { .. }), "{e:?}");
}

#[test]
fn encode_is_unsupported() {
    for (format, elems, bs, _) in IQ {
        let mut dst = vec![0u8; bs];
        let e = codec::encode_row(format, &vec![0.0; elems], &Default::default(), &mut dst);
        assert!(matches!(e, Err(Error::Unsupported { .. })), "{format:?}: {e:?}");
    }
}

/// Bit-exact against the oracle's model of ggml's generic dot order.
#[test]
fn dot_fixtures_bit_exact() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ggml_iq");
    let text = std::fs::read_to_string(dir.join("dots.tsv")).unwrap();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let format = FormatId::from_name(f[0]).unwrap();
        let w = std::fs::read(dir.join(f[2])).unwrap();
        let a = std::fs::read(dir.join(f[3])).unwrap();
        let want = u32::from_str_radix(f[4], 16).unwrap();
        let got = if format == FormatId::Iq4Nl {
            let blocks: Vec<BlockQ8_0> = a
                .chunks_exact(34)
                .map(|c| BlockQ8_0 {
                    d: f16::from_le_bytes([c[0], c[1]]),
                    qs: std::array::from_fn(|j| c[2 + j] as i8),
                })
                .collect();
            codec::dot_row(format, &w, ActRow::Q8_0(&blocks)).unwrap()
        } else {
            let blocks: Vec<BlockQ8K> = a
                .chunks_exact(292)
                .map(|c| BlockQ8K {
                    d: f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                    qs: std::array::from_fn(|j| c[4 + j] as i8),
                    bsums: std::array::from_fn(|j| {
                        i16::from_le_bytes([c[260 + 2 * j], c[261 + 2 * j]])
                    }),
                })
                .collect();
            codec::dot_row(format, &w, ActRow::Q8K(&blocks)).unwrap()
        };
        assert_eq!(got.to_bits(), want, "{}: got {got}, want {}", f[0], f32::from_bits(want));
        n += 1;
    }
    assert_eq!(n, 9);
}
