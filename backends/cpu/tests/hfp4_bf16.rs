//! The `vdpbf16ps` HFP4-family kernel (x86/hfp4_bf16.rs, `Isa::Avx512Vnni` on CPUs with
//! AVX512_BF16) on edge data: extreme block exponents (subnormal and near-overflow weights,
//! which must take the f32 fallback row by row), all-zero blocks with any exponent, the
//! largest E2M1 codes, tiny, huge, NaN and infinite activations, activations whose bf16 split
//! leaves the largest residual, and K on both sides of the two-part threshold (1024). Each
//! result is checked against an f64 dot product of the decoded stored weights and the prepared
//! (rotated) activations with the kernel's bound (c = 0.5), and NaN/inf against the reference.
//! Skipped where the CPU lacks AVX-512 VNNI or AVX512_BF16.

mod common;

use common::{random_matrix, Rng};
use lowbit_core::backend::{Backend, MatrixDesc, PreparedActivations, ReferenceBackend};
use lowbit_core::codec::ActRow;
use lowbit_core::FormatId;
use lowbit_cpu::{CpuBackend, Isa};

/// `hfp4` for HFP4G32; the rotated formats (K a multiple of 256, so no partial group of 4
/// blocks) run 256, 768 (three parts) and 1024, 1280 (two).
fn ks<const N: usize>(format: FormatId, hfp4: [usize; N]) -> Vec<usize> {
    if format.geometry().row_multiple == 32 {
        hfp4.to_vec()
    } else {
        vec![256, 768, 1024, 1280]
    }
}

const FAMILY: [FormatId; 3] = [FormatId::Hfp4G32, FormatId::Mfp4G32, FormatId::Mfp4G32P];

fn bf16_backend() -> Option<CpuBackend> {
    if !lowbit_cpu::isa::has_avx512_bf16() {
        return None;
    }
    CpuBackend::with_isa(Isa::Avx512Vnni).ok()
}

/// `(exact, sum |terms|)` of every (column, row), column-major, in f64.
fn exact(format: FormatId, w: &[u8], rows: usize, k: usize, x: &[f32]) -> Vec<(f64, f64)> {
    let rb = format.row_bytes(k).unwrap();
    let mut wd = vec![0f32; k];
    let mut out = Vec::new();
    for xc in x.chunks_exact(k) {
        let p = PreparedActivations::new(format, xc).unwrap();
        let ActRow::F32(a) = p.row() else { panic!("{format}: f32 activations expected") };
        for r in 0..rows {
            lowbit_core::format::hipfire::decode_row_stored(format, &w[r * rb..][..rb], &mut wd)
                .unwrap();
            let (mut y, mut s) = (0f64, 0f64);
            for (wi, ai) in wd.iter().zip(a.iter()) {
                let t = f64::from(*wi) * f64::from(*ai);
                y += t;
                s += t.abs();
            }
            out.push((y, s));
        }
    }
    out
}

/// Runs `w` x `x` on the bf16 backend and the reference; checks the bound, or NaN/inf
/// agreement with the reference.
fn check(
    cpu: &CpuBackend,
    format: FormatId,
    w: &[u8],
    rows: usize,
    k: usize,
    x: &[f32],
    what: &str,
) {
    let n = x.len() / k;
    let desc = MatrixDesc { format, rows, cols: k };
    let m = cpu.upload(desc, w).unwrap();
    assert!(m.repacked_for().is_some_and(|n| n.starts_with("avx512-bf16-")), "{format}");
    let rm = ReferenceBackend.upload(desc, w).unwrap();
    let rb = format.row_bytes(k).unwrap();
    let (mut y, mut yr) = (vec![0f32; n * rows], vec![0f32; n * rows]);
    cpu.matmul(&m, x, n, &mut y).unwrap();
    ReferenceBackend.matmul(&rm, x, n, &mut yr).unwrap();
    for (i, ((a, b), (e, s))) in y.iter().zip(&yr).zip(exact(format, w, rows, k, x)).enumerate() {
        let row = &w[(i % rows) * rb..][..2];
        let rs = f64::from(half::f16::from_le_bytes([row[0], row[1]]).to_f32());
        if s / rs > f64::from(f32::MAX) && !a.is_finite() {
            // The f32 kernels (the fallback) multiply by the row scale last, so a sum past f32
            // before that multiply may overflow in some lane (as `tests/matmul.rs` accepts).
            continue;
        }
        if !b.is_finite() || !e.is_finite() {
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{format} {what} k={k}: y[{i}] = {a}, reference {b}"
            );
            continue;
        }
        // The bound, plus what gradual underflow may cost the f32 kernel that rows and calls
        // outside the bf16 range fall back to (its bound holds only without underflow).
        let bound = 0.5 * k as f64 * 2f64.powi(-24) * s + k as f64 * 2f64.powi(-140);
        let err = (f64::from(*a) - e).abs();
        assert!(
            err <= bound,
            "{format} {what} k={k} n={n}: y[{i}] (col {}, row {}) = {a}, exact {e}, error \
             {err:e} > bound {bound:e}",
            i / rows,
            i % rows
        );
    }
}

/// A valid matrix of `format` whose rows have the block-scale bytes `scales(row, block)` and,
/// for the UE8M0 formats, row scale 2^-14 (so that e = 254 is still legal); codes random,
/// except row 1 (all 7 / 15, the largest magnitudes) and row 2 (all zero).
fn crafted(
    rng: &mut Rng,
    format: FormatId,
    rows: usize,
    k: usize,
    scales: impl Fn(usize, usize) -> u8,
) -> Vec<u8> {
    let mut w = random_matrix(rng, format, rows, k);
    let rb = format.row_bytes(k).unwrap();
    for r in 0..rows {
        let row = &mut w[r * rb..(r + 1) * rb];
        if format != FormatId::Mfp4G32P {
            row[..2].copy_from_slice(&0x0400u16.to_le_bytes());
        }
        for b in 0..k / 32 {
            let blk = &mut row[16 + 17 * b..16 + 17 * (b + 1)];
            blk[0] = scales(r, b);
            for c in &mut blk[1..] {
                *c = match r {
                    1 => 0x7f | (rng.next_u64() as u8 & 0x88),
                    2 => 0,
                    _ => rng.next_u64() as u8,
                };
            }
        }
    }
    w
}

#[test]
fn extreme_block_scales_take_the_fallback_and_stay_in_bound() {
    let Some(cpu) = bf16_backend() else { return };
    let mut rng = Rng(9001);
    for format in FAMILY {
        for k in ks(format, [32, 128, 992, 1024, 1056]) {
            let rows = 12;
            let e4m3 = format == FormatId::Mfp4G32P;
            let w = crafted(&mut rng, format, rows, k, |r, b| {
                if e4m3 {
                    // Every legal E4M3 byte, subnormals included.
                    return ((r * 31 + b * 7) % 0x7f) as u8;
                }
                match r {
                    0 => 0,                               // subnormal f32 weights
                    3 => 254,                             // beyond bf16
                    4 => [1, 2, 252, 253][b % 4],         // both edges in one row
                    5 => 2 + (b % 2) as u8,               // smallest normal bf16 weights
                    6 => 252,                             // largest finite bf16 weights
                    2 => [0, 254][b % 2],                 // zero codes under any exponent
                    _ => 100 + ((r * 13 + b) % 40) as u8, // ordinary
                }
            });
            for n in [1, 3] {
                let x: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
                check(&cpu, format, &w, rows, k, &x, "normal acts");
            }
        }
    }
}

#[test]
fn activation_ranges() {
    let Some(cpu) = bf16_backend() else { return };
    let mut rng = Rng(4242);
    for format in FAMILY {
        for k in ks(format, [64, 992, 1024, 2048, 4096]) {
            let rows = 7;
            let e4m3 = format == FormatId::Mfp4G32P;
            let w = crafted(&mut rng, format, rows, k, |r, b| {
                if e4m3 {
                    (0x38 + (r + b) % 16) as u8
                } else {
                    [10, 60, 127, 127, 160, 200, 240][r] + (b % 3) as u8
                }
            });
            let base: Vec<f32> = (0..k).map(|_| rng.normal()).collect();
            let mut cases: Vec<(&str, Vec<f32>)> = Vec::new();
            // Largest split residual: significands 1.0000000_1_0000000_0111.. patterns.
            cases.push((
                "split residual",
                base.iter()
                    .map(|v| f32::from_bits((v.to_bits() & 0xff80_0000) | 0x0040_807f))
                    .collect(),
            ));
            // One tiny value (its parts would be bf16 subnormals): the call falls back.
            let mut t = base.clone();
            t[k / 2] = 1e-33;
            cases.push(("one tiny", t));
            // Small values: some rows' products would underflow, others not.
            cases.push(("small", base.iter().map(|v| v * 2f32.powi(-60)).collect()));
            cases.push(("subnormal", base.iter().map(|v| v * 2f32.powi(-135)).collect()));
            // Huge values: some rows' sums could overflow.
            cases.push(("huge", base.iter().map(|v| v * 2f32.powi(90)).collect()));
            cases.push(("zeros", vec![0.0; k]));
            let mut nan = base.clone();
            nan[3] = f32::NAN;
            cases.push(("nan", nan));
            let mut inf = base.clone();
            inf[k - 1] = f32::NEG_INFINITY;
            cases.push(("inf", inf));
            for (what, x) in &cases {
                check(&cpu, format, &w, rows, k, x, what);
                // The same column next to an ordinary one (the range is taken per call).
                let mut x2 = base.clone();
                x2.extend_from_slice(x);
                check(&cpu, format, &w, rows, k, &x2, what);
            }
        }
    }
}

/// Every tile width 1..=16 on a shape with a partial last group of 4 blocks and rows that
/// leave partial row groups, against the f32 AVX-512 kernel's bound.
#[test]
fn every_tile_width_with_a_tail_group() {
    let Some(cpu) = bf16_backend() else { return };
    let mut rng = Rng(77);
    for format in FAMILY {
        for k in ks(format, [32 * 7, 32 * 37]) {
            let rows = 11;
            let w = random_matrix(&mut rng, format, rows, k);
            for n in 1..=17 {
                let x: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
                check(&cpu, format, &w, rows, k, &x, "tiles");
            }
        }
    }
}

/// One column with two parts and whole groups of 4 blocks (`one_col8`: rows in groups of 8,
/// the rest by the general body): row counts that fill groups of 8 exactly, leave 1..7 rows
/// over, and span several range-check runs (64 rows), with some rows forced onto the f32
/// fallback (huge block exponents) between runs of good ones.
#[test]
fn one_column_in_groups_of_eight() {
    let Some(cpu) = bf16_backend() else { return };
    let mut rng = Rng(91);
    for format in FAMILY {
        for k in ks(format, [1024, 2048]) {
            if k < 1024 {
                continue;
            }
            for rows in [8, 15, 27, 70, 137] {
                let w = random_matrix(&mut rng, format, rows, k);
                let x: Vec<f32> = (0..k).map(|_| rng.normal()).collect();
                check(&cpu, format, &w, rows, k, &x, "groups of 8");
            }
            // UE8M0: rows 3, 20 and 66 hold a block exponent beyond bf16 (the fallback);
            // E4M3: every legal byte, subnormals included.
            let rows = 75;
            let w = crafted(&mut rng, format, rows, k, |r, b| {
                if format == FormatId::Mfp4G32P {
                    ((r * 31 + b * 7) % 0x7f) as u8
                } else if (r == 3 || r == 20 || r == 66) && b == 1 {
                    254
                } else {
                    100 + ((r * 13 + b) % 40) as u8
                }
            });
            let x: Vec<f32> = (0..k).map(|_| rng.normal()).collect();
            check(&cpu, format, &w, rows, k, &x, "groups of 8, fallback rows");
        }
    }
}

#[test]
fn the_bf16_kernel_is_selected_only_under_vnni() {
    let Some(cpu) = bf16_backend() else { return };
    let plain = CpuBackend::with_isa(Isa::Avx512).unwrap();
    for format in FAMILY {
        let name = cpu.table().kernel_name(format).unwrap();
        assert!(name.starts_with("avx512-bf16-"), "{format}: {name}");
        let name = plain.table().kernel_name(format).unwrap();
        assert!(!name.contains("bf16"), "{format}: {name}");
    }
}
