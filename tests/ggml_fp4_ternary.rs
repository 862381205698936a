//! ggml MXFP4, NVFP4, TQ1_0, TQ2_0: reference dot products against an f64 sum of decoded
//! products, and property tests (round-trip error bounds, encode(decode(b)) == b for canonical
//! blocks, improved-encoder validity). The byte-exact oracle fixtures run in `tests/fixtures.rs`.

use half::f16;
use lowbit::codec::{self, ActRow, EncodeOptions, Rule};
use lowbit::format::ggml::{
    mxfp4::{self, BlockMxfp4},
    nvfp4::BlockNvfp4,
    tq1_0, tq2_0, BlockQ8K, BlockQ8_0,
};
use lowbit::{Error, FormatId};
use proptest::prelude::*;

/// A small deterministic generator (xorshift64*), so the dot tests need no proptest shrinking.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn byte(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (a, b) = (self.unit().max(1e-12), self.unit());
        ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
    }
}

fn q8_0_blocks(r: &mut Rng, n: usize) -> Vec<BlockQ8_0> {
    (0..n)
        .map(|_| {
            let mut qs = [0i8; 32];
            qs.iter_mut().for_each(|q| *q = r.byte() as i8);
            let d = f16::from_f32((r.unit() as f32 + 0.01) * 10f32.powi((r.next() % 7) as i32 - 4));
            BlockQ8_0 { d, qs }
        })
        .collect()
}

fn q8_k_blocks(r: &mut Rng, n: usize) -> Vec<BlockQ8K> {
    (0..n)
        .map(|_| {
            let mut qs = [0i8; 256];
            qs.iter_mut().for_each(|q| *q = r.byte() as i8);
            let mut bsums = [0i16; 16];
            for (s, c) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
                *s = c.iter().map(|q| i16::from(*q)).sum();
            }
            let d = (r.unit() as f32 + 0.01) * 10f32.powi((r.next() % 7) as i32 - 4);
            BlockQ8K { d, qs, bsums }
        })
        .collect()
}

fn act_values_q8_0(a: &[BlockQ8_0]) -> Vec<f64> {
    a.iter()
        .flat_map(|b| b.qs.iter().map(move |q| f64::from(*q) * f64::from(b.d.to_f32())))
        .collect()
}

fn act_values_q8k(a: &[BlockQ8K]) -> Vec<f64> {
    a.iter().flat_map(|b| b.qs.iter().map(move |q| f64::from(*q) * f64::from(b.d))).collect()
}

/// Checks `y` against the f64 sum of decoded products within `c * n_groups * 2^-24 * Σ|terms|`.
fn check_dot(format: FormatId, w: &[u8], act: ActRow<'_>, a: &[f64], c: f64, group: usize) {
    let k = a.len();
    let wd = codec::decode_to_vec(format, k, w).unwrap();
    let terms: Vec<f64> = wd.iter().zip(a).map(|(x, y)| f64::from(*x) * y).collect();
    let exact: f64 = terms.iter().sum();
    let abs: f64 = terms.iter().map(|t| t.abs()).sum();
    let y = codec::dot_row(format, w, act).unwrap();
    let bound = c * (k / group) as f64 * 2f64.powi(-24) * abs;
    assert!(
        (f64::from(y) - exact).abs() <= bound,
        "{format}: y = {y}, exact = {exact}, |diff| = {}, bound = {bound}",
        (f64::from(y) - exact).abs()
    );
}

#[test]
fn mxfp4_dot_q8_0() {
    let mut r = Rng(0x5eed_0001);
    for _ in 0..200 {
        let nb = 1 + (r.next() % 16) as usize;
        let mut w = vec![0u8; nb * 17];
        w.iter_mut().for_each(|b| *b = r.byte());
        for b in 0..nb {
            w[b * 17] = 100 + (r.next() % 50) as u8;
        }
        let a = q8_0_blocks(&mut r, nb);
        check_dot(FormatId::Mxfp4, &w, ActRow::Q8_0(&a), &act_values_q8_0(&a), 2.0, 32);
    }
}

#[test]
fn nvfp4_dot_q8_0() {
    let mut r = Rng(0x5eed_0002);
    for _ in 0..200 {
        let nb = 1 + (r.next() % 8) as usize;
        let mut w = vec![0u8; nb * 36];
        w.iter_mut().for_each(|b| *b = r.byte());
        for b in 0..nb {
            for s in 0..4 {
                w[b * 36 + s] = (r.next() % 0x7f) as u8;
            }
        }
        let a = q8_0_blocks(&mut r, 2 * nb);
        check_dot(FormatId::Nvfp4, &w, ActRow::Q8_0(&a), &act_values_q8_0(&a), 3.0, 16);
    }
}

#[test]
fn tq_dot_q8_k() {
    let mut r = Rng(0x5eed_0003);
    for (format, bb, doff) in [(FormatId::Tq1_0, 54, 52), (FormatId::Tq2_0, 66, 64)] {
        for _ in 0..100 {
            let nb = 1 + (r.next() % 6) as usize;
            let mut w = vec![0u8; nb * bb];
            w.iter_mut().for_each(|b| *b = r.byte());
            for b in 0..nb {
                let d = f16::from_f32(r.normal() * 10f32.powi((r.next() % 6) as i32 - 3));
                w[b * bb + doff..b * bb + doff + 2].copy_from_slice(&d.to_le_bytes());
            }
            let a = q8_k_blocks(&mut r, nb);
            check_dot(format, &w, ActRow::Q8K(&a), &act_values_q8k(&a), 3.0, 256);
        }
    }
}

#[test]
fn dot_errors() {
    let mut r = Rng(7);
    let a0 = q8_0_blocks(&mut r, 2);
    let ak = q8_k_blocks(&mut r, 1);
    let mut w = vec![0x38u8; 36];
    w[17] = 0xff; // second MXFP4 block's exponent
    assert_eq!(
        codec::dot_row(FormatId::Mxfp4, &w[..34], ActRow::Q8_0(&a0)),
        Err(Error::IllegalByte { format: FormatId::Mxfp4, field: "e", offset: 17, byte: 0xff })
    );
    w[2] = 0x7f;
    assert_eq!(
        codec::dot_row(FormatId::Nvfp4, &w, ActRow::Q8_0(&a0)),
        Err(Error::IllegalByte { format: FormatId::Nvfp4, field: "d", offset: 2, byte: 0x7f })
    );
    let mut t = vec![0u8; 66];
    t[64..].copy_from_slice(&f16::INFINITY.to_le_bytes());
    assert_eq!(
        codec::dot_row(FormatId::Tq2_0, &t, ActRow::Q8K(&ak)),
        Err(Error::NonFiniteScale { format: FormatId::Tq2_0, field: "d", offset: 64 })
    );
    assert!(matches!(
        codec::dot_row(FormatId::Tq1_0, &t[..54], ActRow::Q8_0(&a0[..1])),
        Err(Error::WrongActivation { .. })
            | Err(Error::Length { .. })
            | Err(Error::RowLength { .. })
    ));
}

fn enc(format: FormatId, x: &[f32], rule: Rule, imp: Option<&[f32]>) -> Vec<u8> {
    codec::encode_to_vec(format, x.len(), x, &EncodeOptions { rule, importance: imp }).unwrap()
}

fn dec(format: FormatId, b: &[u8], k: usize) -> Vec<f32> {
    codec::decode_to_vec(format, k, b).unwrap()
}

/// Values with a random magnitude per 16 between 2^-20 and 2^emax.
fn blocks_strategy(n: usize, emax: i32) -> impl Strategy<Value = Vec<f32>> {
    (prop::collection::vec(-1.0f32..1.0, n), prop::collection::vec(-20i32..emax, n / 16))
        .prop_map(|(v, e)| v.iter().enumerate().map(|(i, x)| x * 2f32.powi(e[i / 16])).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// MXFP4: every value within half a grid step (unit 2^(e-127) * 1.0 at most), except the
    /// saturated tail above 6 units; exactly zero inputs stay +0.
    #[test]
    fn mxfp4_round_trip_error(x in blocks_strategy(128, 20)) {
        let b = enc(FormatId::Mxfp4, &x, Rule::Reference, None);
        let y = dec(FormatId::Mxfp4, &b, 128);
        for (blk, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
            let unit = lowbit::scalar::ue8m0_to_f32(b[blk * 17]);
            for (xv, yv) in xs.iter().zip(ys) {
                let lim = if xv.abs() <= 6.0 * unit { unit } else { xv.abs() - 6.0 * unit };
                prop_assert!((xv - yv).abs() <= lim * (1.0 + 1e-6), "{xv} -> {yv} (unit {unit})");
                prop_assert!(yv.to_bits() != 0x8000_0000);
            }
        }
    }

    /// MXFP4: a block of exact grid values with a top code (4 or 6 units), no -0 code and
    /// e <= 252 re-encodes to the same bytes.
    #[test]
    fn mxfp4_canonical_round_trip(e in 0u8..=252, codes in prop::collection::vec(0u8..16, 32), top in 6u8..8, at in 0usize..32) {
        let mut codes = codes;
        codes.iter_mut().for_each(|c| if *c == 8 { *c = 0 });
        codes[at] = top;
        let mut blk = BlockMxfp4 { e, qs: [0; 16] };
        for j in 0..16 {
            blk.qs[j] = codes[j] | (codes[j + 16] << 4);
        }
        let bytes: Vec<u8> = [blk.e].iter().chain(&blk.qs).copied().collect();
        let v = dec(FormatId::Mxfp4, &bytes, 32);
        prop_assert_eq!(enc(FormatId::Mxfp4, &v, Rule::Reference, None), bytes);
        prop_assert_eq!(mxfp4::encode_block_reference(&v.try_into().unwrap()), blk);
    }

    /// NVFP4: within half a grid step of the sub-block's scale, or the saturation excess.
    #[test]
    fn nvfp4_round_trip_error(x in blocks_strategy(128, 20)) {
        let b = enc(FormatId::Nvfp4, &x, Rule::Reference, None);
        let y = dec(FormatId::Nvfp4, &b, 128);
        for (sub, (xs, ys)) in x.chunks(16).zip(y.chunks(16)).enumerate() {
            let byte = b[(sub / 4) * 36 + sub % 4];
            let s = lowbit::scalar::try_ue4m3_to_f32(byte).unwrap();
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (xv, yv) in xs.iter().zip(ys) {
                let lim = if byte == 0 { xv.abs() } else { s.max(amax - 6.0 * s) };
                prop_assert!((xv - yv).abs() <= lim * (1.0 + 1e-6), "{xv} -> {yv} (scale {s})");
            }
        }
    }

    /// NVFP4: grid values with a ±6 code in each sub-block, scale bytes ggml's encoder can
    /// produce (0x01..=0x77 or 0x7E), no -0 code: re-encoding gives the same bytes.
    #[test]
    fn nvfp4_canonical_round_trip(d in prop::collection::vec(prop_oneof![1u8..=0x77, Just(0x7e)], 4), codes in prop::collection::vec(0u8..16, 64), at in prop::collection::vec(0usize..16, 4)) {
        let mut codes = codes;
        codes.iter_mut().for_each(|c| if *c == 8 { *c = 0 });
        let mut blk = BlockNvfp4 { d: [0; 4], qs: [0; 32] };
        for s in 0..4 {
            blk.d[s] = d[s];
            codes[16 * s + at[s]] = 7 | (codes[16 * s + at[s]] & 8);
            for j in 0..8 {
                blk.qs[8 * s + j] = codes[16 * s + j] | (codes[16 * s + j + 8] << 4);
            }
        }
        let bytes: Vec<u8> = blk.d.iter().chain(&blk.qs).copied().collect();
        let v = dec(FormatId::Nvfp4, &bytes, 64);
        prop_assert_eq!(enc(FormatId::Nvfp4, &v, Rule::Reference, None), bytes);
    }

    /// TQ reference: every value within amax/2 (+ the f16 rounding of d); the improved encoder
    /// gives valid blocks whose (weighted) squared error is no worse than the reference's.
    #[test]
    fn tq_round_trip_and_improved(x in blocks_strategy(512, 15), w in prop::collection::vec(0.0f32..4.0, 512)) {
        for format in [FormatId::Tq1_0, FormatId::Tq2_0] {
            let b = enc(format, &x, Rule::Reference, None);
            let y = dec(format, &b, 512);
            for (xs, ys) in x.chunks(256).zip(y.chunks(256)) {
                let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (xv, yv) in xs.iter().zip(ys) {
                    prop_assert!((xv - yv).abs() <= amax * (0.5 + 2f32.powi(-11)) * (1.0 + 1e-6));
                }
            }
            for imp in [None, Some(&w[..])] {
                let bi = enc(format, &x, Rule::Improved, imp);
                let yi = dec(format, &bi, 512);
                for (blk, (xs, (yr, yi))) in x.chunks(256).zip(y.chunks(256).zip(yi.chunks(256))).enumerate() {
                    let d = yi.iter().fold(0f32, |m, v| m.max(v.abs()));
                    prop_assert!(yi.iter().all(|v| *v == 0.0 || v.abs() == d));
                    let wt = |i: usize| imp.map_or(1.0, |w| f64::from(w[256 * blk + i]));
                    let sse = |ys: &[f32]| -> f64 {
                        xs.iter().zip(ys).enumerate().map(|(i, (a, b))| wt(i) * f64::from(a - b).powi(2)).sum()
                    };
                    let (er, ei) = (sse(yr), sse(yi));
                    prop_assert!(ei <= er * (1.0 + 1e-3) + 1e-30, "{format}: improved {ei} > reference {er}");
                }
            }
        }
    }

    /// TQ: blocks built from codes 0..=2 with at least one ±1 and a positive finite f16 d
    /// re-encode (reference rule) to the same bytes.
    #[test]
    fn tq_canonical_round_trip(codes in prop::collection::vec(0u8..3, 256), at in 0usize..256, dbits in 0x0001u16..0x7c00) {
        let mut c = [0u8; 256];
        c.copy_from_slice(&codes);
        c[at] = 2;
        let d = f16::from_bits(dbits);
        let (p1, p2) = (tq1_0::pack(&c, d), tq2_0::pack(&c, d));
        let b1: Vec<u8> = p1.qs.iter().chain(&p1.qh).chain(&d.to_le_bytes()).copied().collect();
        let b2: Vec<u8> = p2.qs.iter().chain(&d.to_le_bytes()).copied().collect();
        let v1 = dec(FormatId::Tq1_0, &b1, 256);
        let v2 = dec(FormatId::Tq2_0, &b2, 256);
        prop_assert_eq!(&v1, &v2);
        prop_assert_eq!(enc(FormatId::Tq1_0, &v1, Rule::Reference, None), b1);
        prop_assert_eq!(enc(FormatId::Tq2_0, &v2, Rule::Reference, None), b2);
    }

    /// Arbitrary bytes never panic: decode either succeeds or names an error.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 36 * 66)) {
        for (format, k) in [(FormatId::Mxfp4, 32 * 36 * 66 / 17 / 32 * 32), (FormatId::Nvfp4, 64 * 66), (FormatId::Tq1_0, 256 * 44), (FormatId::Tq2_0, 256 * 36)] {
            let n = format.row_bytes(k).unwrap();
            let _ = codec::decode_to_vec(format, k, &bytes[..n]);
        }
    }
}

/// MXFP4's exponent rule on amax values just below and above every power of two (where the
/// rounded log2f matters), against gguf-py's numpy expression.
#[test]
fn mxfp4_exponent_near_powers_of_two() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ggml_fp4_ternary");
    let x = std::fs::read(dir.join("mx_exponent.in.f32")).unwrap();
    let want = std::fs::read(dir.join("mx_exponent.u8")).unwrap();
    assert_eq!(x.len(), 4 * want.len());
    assert!(want.len() > 10_000);
    for (c, w) in x.chunks_exact(4).zip(&want) {
        let a = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        assert_eq!(mxfp4::mxfp4_exponent(a), *w, "amax {a:e} ({:08x})", a.to_bits());
    }
}

#[test]
fn encode_edge_cases() {
    // MXFP4: blocks too small for ggml's exponent rule clamp to e = 0 (ggml: undefined).
    let x = [1e-40f32; 32];
    let b = enc(FormatId::Mxfp4, &x, Rule::Reference, None);
    assert_eq!(b[0], 0);
    // TQ: amax beyond f16 range is out of range, naming the element in the row.
    let mut x = vec![0f32; 512];
    x[300] = 70000.0;
    for format in [FormatId::Tq1_0, FormatId::Tq2_0] {
        assert_eq!(
            codec::encode_to_vec(format, 512, &x, &EncodeOptions::default()),
            Err(Error::OutOfRange { format, index: 300 })
        );
    }
    // TQ: a scale whose reciprocal overflows f32 still gives a valid (all-zero) block.
    let x = [1e-39f32; 256];
    for format in [FormatId::Tq1_0, FormatId::Tq2_0] {
        let b = enc(format, &x, Rule::Reference, None);
        assert!(dec(format, &b, 256).iter().all(|v| *v == 0.0));
    }
}
