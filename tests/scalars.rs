//! Scalar conversions against the oracle fixtures of `tools/oracle_scalars.py`
//! (ml_dtypes, numpy, gguf-py, and independent numpy definitions), plus exhaustive sweeps.
//!
//! Fixture files are raw little-endian arrays in `tests/fixtures/scalars/` (see the script's
//! docstring for the list).

use std::path::PathBuf;

use lowbit::scalar::{self, bf16, f16};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scalars")
}

fn read(name: &str) -> Vec<u8> {
    let p = dir().join(name);
    std::fs::read(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (run tools/oracle_scalars.py)", p.display()))
}

fn read_f32(name: &str) -> Vec<f32> {
    read(name).chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn read_u16(name: &str) -> Vec<u16> {
    read(name).chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// The encode inputs, checked to be a non-trivial set.
fn inputs() -> Vec<f32> {
    let x = read_f32("enc_in.f32");
    assert!(x.len() > 10_000, "too few encode inputs");
    x
}

fn report(what: &str, bad: Vec<String>, n: usize) {
    assert!(
        bad.is_empty(),
        "{what}: {} of {n} mismatches, first: {:?}",
        bad.len(),
        &bad[..bad.len().min(8)]
    );
}

#[test]
fn e4m3_decode_every_byte() {
    let want = read_f32("decode_e4m3.f32");
    assert_eq!(want.len(), 256);
    for b in 0..=255u8 {
        let got = scalar::e4m3_to_f32(b);
        assert!(same(got, want[b as usize]), "byte {b:#04x}: {got} vs {}", want[b as usize]);
        assert_eq!(scalar::try_e4m3_to_f32(b).is_none(), want[b as usize].is_nan());
    }
}

#[test]
fn e8m0_decode_every_byte() {
    let want = read_f32("decode_e8m0.f32");
    for b in 0..=255u8 {
        let got = scalar::ue8m0_to_f32(b);
        assert!(same(got, want[b as usize]), "byte {b:#04x}: {got} vs {}", want[b as usize]);
        assert_eq!(scalar::try_ue8m0_to_f32(b).is_none(), b == 0xff);
        // The halved decode (ggml MXFP4) is exactly half of the full one.
        if let Some(h) = scalar::try_ue8m0_to_f32_half(b) {
            assert_eq!(h.to_bits(), (want[b as usize] * 0.5).to_bits(), "half of {b:#04x}");
        }
    }
}

#[test]
fn e2m1_decode_every_code() {
    let want = read_f32("decode_e2m1.f32");
    assert_eq!(want.len(), 16);
    for c in 0..16u8 {
        assert!(same(scalar::e2m1_to_f32(c), want[c as usize]), "code {c}");
        assert!(same(scalar::E2M1_VALUES[c as usize], want[c as usize]));
        // High bits are ignored.
        assert!(same(scalar::e2m1_to_f32(c | 0xf0), want[c as usize]));
    }
}

#[test]
fn ue4m3_b8_decode_every_byte_and_worked_values() {
    let want = read_f32("decode_ue4m3_b8.f32");
    assert_eq!(want.len(), 127);
    let table = scalar::ue4m3_b8_table();
    for b in 0..=255u8 {
        match scalar::try_ue4m3_b8_to_f32(b) {
            Some(v) => {
                assert!(b <= 0x7e, "byte {b:#04x} must be illegal");
                assert_eq!(v.to_bits(), want[b as usize].to_bits(), "byte {b:#04x}");
                assert_eq!(table[b as usize].to_bits(), v.to_bits());
            }
            None => assert!(b >= 0x7f, "byte {b:#04x} must be legal"),
        }
    }
    // FORMATS.md worked values.
    assert_eq!(scalar::try_ue4m3_b8_to_f32(0x38), Some(0.5));
    assert_eq!(scalar::try_ue4m3_b8_to_f32(0x7e), Some(224.0));
    assert_eq!(scalar::try_ue4m3_b8_to_f32(0x01), Some(2f32.powi(-10)));
    assert_eq!(scalar::try_ue4m3_b8_to_f32(0x12), Some(0.019_531_25));
    assert_eq!(scalar::try_ue4m3_b8_to_f32(0x7f), None);
    assert_eq!(scalar::try_ue4m3_b8_to_f32(0xff), None);
}

#[test]
fn ue4m3_ggml_decode_every_byte() {
    let want = read_f32("decode_ue4m3_half.f32");
    for b in 0..=255u8 {
        match scalar::try_ue4m3_to_f32_half(b) {
            Some(v) => {
                assert_eq!(v.to_bits(), want[b as usize].to_bits(), "byte {b:#04x}");
                assert_eq!(
                    scalar::try_ue4m3_to_f32(b).map(|f| (f * 0.5).to_bits()),
                    Some(v.to_bits())
                );
            }
            // ggml reads 0x7F as 0 and 0xFF as 240 (half of 480); lowbit rejects both.
            None => assert!(b == 0x7f || b == 0xff, "byte {b:#04x}"),
        }
    }
}

#[test]
fn bf16_decode_every_pattern() {
    for p in 0..=u16::MAX {
        let got = bf16::from_bits(p).to_f32();
        let want = f32::from_bits((p as u32) << 16);
        assert!(same(got, want), "bf16 {p:#06x}");
    }
}

#[test]
fn e4m3_encode_matches_ml_dtypes() {
    let x = inputs();
    let want = read("enc_e4m3.u8");
    let bad: Vec<_> = x
        .iter()
        .zip(&want)
        .filter(|(v, w)| scalar::f32_to_e4m3_rne(**v) != **w)
        .map(|(v, w)| {
            format!(
                "{v:e} ({:08x}): got {:#04x} want {w:#04x}",
                v.to_bits(),
                scalar::f32_to_e4m3_rne(*v)
            )
        })
        .collect();
    report("E4M3FN encode", bad, x.len());
}

#[test]
fn e2m1_encode_matches_ml_dtypes() {
    let x = inputs();
    let want = read("enc_e2m1.u8");
    let mut bad = Vec::new();
    for (v, w) in x.iter().zip(&want) {
        let got = scalar::f32_to_e2m1_rne(*v);
        let ok = if v.is_nan() { got.is_none() } else { got == Some(*w) };
        if !ok {
            bad.push(format!("{v:e}: got {got:?} want {w:#04x}"));
        }
    }
    report("E2M1 encode", bad, x.len());
}

#[test]
fn e2m1_ties_down_index() {
    // Exact midpoints go to the smaller magnitude; anything above goes up.
    let mids = [0.25f32, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0];
    for (i, m) in mids.iter().enumerate() {
        assert_eq!(scalar::e2m1_index_ties_down(*m), i as u8);
        assert_eq!(scalar::e2m1_index_ties_down(-*m), i as u8);
        assert_eq!(scalar::e2m1_index_ties_down(f32::from_bits(m.to_bits() + 1)), i as u8 + 1);
    }
    assert_eq!(scalar::e2m1_index_ties_down(1e30), 7);
    assert_eq!(scalar::e2m1_index_ties_down(0.0), 0);
}

#[test]
fn e8m0_encode_matches_ml_dtypes() {
    let x = inputs();
    let want = read("enc_e8m0.u8");
    let bad: Vec<_> = x
        .iter()
        .zip(&want)
        .filter(|(v, w)| scalar::f32_to_ue8m0(**v) != **w)
        .map(|(v, w)| format!("{v:e}: got {:#04x} want {w:#04x}", scalar::f32_to_ue8m0(*v)))
        .collect();
    report("E8M0 encode", bad, x.len());
}

#[test]
fn bf16_encode_matches_ml_dtypes() {
    let x = inputs();
    let want = read_u16("enc_bf16.u16");
    let mut bad = Vec::new();
    for (v, w) in x.iter().zip(&want) {
        let got = scalar::f32_to_bf16_rne(*v);
        let ok = if v.is_nan() {
            got.is_nan() && bf16::from_bits(*w).is_nan()
        } else {
            got.to_bits() == *w
        };
        if !ok {
            bad.push(format!("{v:e}: got {:#06x} want {w:#06x}", got.to_bits()));
        }
    }
    report("bf16 encode", bad, x.len());
}

#[test]
fn f16_encode_matches_numpy() {
    let x = inputs();
    let want = read_u16("enc_f16.u16");
    let mut bad = Vec::new();
    for (v, w) in x.iter().zip(&want) {
        let got = scalar::f32_to_f16_rne(*v);
        let ok = if v.is_nan() {
            got.is_nan() && f16::from_bits(*w).is_nan()
        } else {
            got.to_bits() == *w
        };
        if !ok {
            bad.push(format!("{v:e}: got {:#06x} want {w:#06x}", got.to_bits()));
        }
    }
    report("f16 encode", bad, x.len());
}

#[test]
fn f16_truncate_matches_table_search() {
    let x = inputs();
    let want = read_u16("enc_f16_trunc.u16");
    let bad: Vec<_> = x
        .iter()
        .zip(&want)
        .filter(|(v, w)| scalar::f32_to_f16_truncate(**v).to_bits() != **w)
        .map(|(v, w)| {
            format!(
                "{v:e} ({:08x}): got {:#06x} want {w:#06x}",
                v.to_bits(),
                scalar::f32_to_f16_truncate(*v).to_bits()
            )
        })
        .collect();
    report("f16 truncate", bad, x.len());
}

/// Exhaustive over a stride of every f32 pattern: the truncation never exceeds |x| (finite
/// results), and is the RNE result or one ulp toward zero from it.
#[test]
fn f16_truncate_sweep_is_round_toward_zero() {
    let mut n = 0;
    for hi in (0..=u32::MAX).step_by(997) {
        let x = f32::from_bits(hi);
        if !x.is_finite() {
            continue;
        }
        n += 1;
        let t = scalar::f32_to_f16_truncate(x);
        if x.abs() >= 65536.0 {
            assert!(t.is_infinite() && t.is_sign_negative() == x.is_sign_negative(), "{x:e}");
            continue;
        }
        let tv = t.to_f32();
        assert!(tv.abs() <= x.abs(), "{x:e} -> {tv:e}");
        assert_eq!(t.is_sign_negative(), x.is_sign_negative(), "{x:e}");
        // The next f16 away from zero must exceed |x|.
        let next = f16::from_bits((t.to_bits() & 0x7fff) + 1).to_f32();
        assert!(next > x.abs(), "{x:e} -> {tv:e} (next {next:e})");
    }
    assert!(n > 4_000_000);
}

#[test]
fn ue4m3_encode_matches_gguf_py() {
    let x = inputs();
    let want = read("enc_ue4m3.u8");
    let bad: Vec<_> = x
        .iter()
        .zip(&want)
        .filter(|(v, _)| !v.is_nan())
        .filter(|(v, w)| scalar::f32_to_ue4m3(**v) != **w)
        .map(|(v, w)| format!("{v:e}: got {:#04x} want {w:#04x}", scalar::f32_to_ue4m3(*v)))
        .collect();
    report("UE4M3 encode", bad, x.len());
    assert_eq!(scalar::f32_to_ue4m3(f32::NAN), 0);
}

/// Every E4M3 code decodes and re-encodes to itself (except the NaNs, and -0 -> 0x80).
#[test]
fn e4m3_round_trip() {
    for b in 0..=255u8 {
        if let Some(v) = scalar::try_e4m3_to_f32(b) {
            assert_eq!(scalar::f32_to_e4m3_rne(v), b, "byte {b:#04x}");
        }
    }
    for b in 0..=254u8 {
        let v = scalar::ue8m0_to_f32(b);
        assert_eq!(scalar::f32_to_ue8m0(v), b);
    }
    for c in 0..16u8 {
        assert_eq!(scalar::f32_to_e2m1_rne(scalar::e2m1_to_f32(c)), Some(c));
    }
}
