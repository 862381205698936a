//! The CPU backend against the core's `ReferenceBackend`: every supported format x every
//! instruction set this machine has, odd shapes and column counts; bad uploads; NaN inputs.
//!
//! The scalar kernel is the core's reference dot product, so its results are compared bit for
//! bit. SIMD kernels accumulate in f32 vector lanes in a different order, so they are checked
//! against the DESIGN.md bound `|y - y_exact| <= c * K * 2^-24 * sum|w_i a_i|` with c = 1 (see
//! `x86/avx2.rs`), where `y_exact` is the f64 dot product of the decoded weights and the decoded
//! prepared (rotated, quantized) activations; the reference must satisfy the same bound.

mod common;

use common::{random_acts, random_matrix, Rng};
use lowbit_core::backend::{Backend, MatrixDesc, PreparedActivations, ReferenceBackend};
use lowbit_core::codec::{self, ActRow};
use lowbit_core::registry::Rotation;
use lowbit_core::{Error, FormatId};
use lowbit_cpu::{CpuBackend, CpuError, Isa};

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// The bound constant `c` each SIMD kernel states in its module doc (one arm per kernel family;
/// a kernel family edits only its own arm).
fn simd_c(format: FormatId) -> f64 {
    match format {
        // x86/avx2.rs, x86/avx512.rs: Q8_0, Q4_0 (AVX-512 Q4_0: x86/z512.rs, also c = 1).
        FormatId::Q8_0 | FormatId::Q4_0 => 1.0,
        // ROCmFP2 and ROCmFP3: x86/rocmfpx/body.rs (exact half-block sums, one rounding per
        // 8-block group and lane, then a 16-lane tree: c = 1).
        FormatId::RocmFp2 | FormatId::RocmFp3 => 1.0,
        // HFP4 family kernels (x86/hfp4.rs, x86/hfp4_512.rs: c = 0.5; aarch64/hfp4.rs keeps the
        // reference's order and its c = 2).
        FormatId::Hfp4G32 | FormatId::Mfp4G32 | FormatId::Mfp4G32P => {
            if cfg!(target_arch = "aarch64") {
                2.0
            } else {
                0.5
            }
        }
        // K-quants (AVX2: x86/kquant.rs, reference order; AVX-512: x86/z512.rs, c = 1).
        FormatId::Q4K | FormatId::Q6K => 1.0,
        // Ternary kernels (AVX2: x86/ternary.rs, reference order; AVX-512: x86/z512.rs, c = 1).
        FormatId::Tq2_0 | FormatId::Pq2_0 => 1.0,
        // AVX-512 MXFP4 / IQ4_NL / Q2_K / Q5_K (x86/z512.rs).
        FormatId::Mxfp4 | FormatId::Iq4Nl | FormatId::Q2K | FormatId::Q5K => 1.0,
        // AVX-512 Q4_1 / Q5_0 / Q5_1 / Q8_1 (x86/legacy512.rs), AVX2 Q4_1 (x86/legacy2.rs).
        FormatId::Q4_1 | FormatId::Q5_0 | FormatId::Q5_1 | FormatId::Q8_1 => 1.0,
        // AVX2 and AVX-512 Ternary68 (x86/ternary68.rs).
        FormatId::Ternary68 => 1.0,
        // AVX-512 F32 / F16 / BF16 (x86/float.rs).
        FormatId::F32 | FormatId::F16 | FormatId::Bf16 => 1.0,
        // Anything else (NEON kernels, new kernels): the default.
        _ => 1.0,
    }
}

/// The decoded prepared activations of one column (rotated and quantized as the format needs).
fn decoded_acts(format: FormatId, x: &[f32]) -> Vec<f64> {
    let p = PreparedActivations::new(format, x).unwrap();
    match p.row() {
        ActRow::F32(v) => v.iter().map(|&v| f64::from(v)).collect(),
        ActRow::Q8_0(b) => {
            b.iter().flat_map(|b| b.qs.map(|q| f64::from(b.d.to_f32()) * f64::from(q))).collect()
        }
        ActRow::Q8_1(b) => {
            b.iter().flat_map(|b| b.qs.map(|q| f64::from(b.d.to_f32()) * f64::from(q))).collect()
        }
        ActRow::Q8K(b) => {
            b.iter().flat_map(|b| b.qs.map(|q| f64::from(b.d) * f64::from(q))).collect()
        }
    }
}

/// `(exact dot, sum |terms|)` in f64 of every (column, row) pair, column-major like `y`.
fn exact_dots(format: FormatId, w: &[u8], rows: usize, k: usize, x: &[f32]) -> Vec<(f64, f64)> {
    let rb = format.row_bytes(k).unwrap();
    let mut wd = vec![0f32; rows * k];
    if format.info().rotation == Rotation::None {
        codec::decode_rows(format, k, &w[..rows * rb], &mut wd).unwrap();
    } else {
        // Rotated formats: the kernels multiply the stored (rotated) weights with rotated
        // activations, so the exact sum is taken in the rotated domain too.
        for (src, dst) in w[..rows * rb].chunks_exact(rb).zip(wd.chunks_exact_mut(k)) {
            lowbit_core::format::hipfire::decode_row_stored(format, src, dst).unwrap();
        }
    }
    let mut out = Vec::new();
    for xc in x.chunks_exact(k) {
        let a = decoded_acts(format, xc);
        for (wr, wb) in wd.chunks_exact(k).zip(w.chunks_exact(rb)) {
            let (mut y, mut s) = (0f64, 0f64);
            for (wi, ai) in wr.iter().zip(&a) {
                let t = f64::from(*wi) * ai;
                y += t;
                s += t.abs();
            }
            let c = min_times_stored_sum(format, wb, xc);
            out.push((y + c, s + c.abs()));
        }
    }
    out
}

/// Q4_1 and Q5_1 (minimum `m` at byte 2 of every block, Q8_1 activations): the reference
/// multiplies `m` by the activation block's stored `s = f16(d * sum q)`, as ggml does, not by
/// the exact `d * sum q`; this is the per-row difference, added to the exact dot product.
fn min_times_stored_sum(format: FormatId, wrow: &[u8], x: &[f32]) -> f64 {
    let bb = match format {
        FormatId::Q4_1 => 20,
        FormatId::Q5_1 => 24,
        _ => return 0.0,
    };
    let p = PreparedActivations::new(format, x).unwrap();
    let ActRow::Q8_1(ab) = p.row() else { return 0.0 };
    let mut c = 0f64;
    for (wb, a) in wrow.chunks_exact(bb).zip(ab) {
        let m = f64::from(half::f16::from_le_bytes([wb[2], wb[3]]).to_f32());
        let sq: f64 = a.qs.iter().map(|&q| f64::from(q)).sum();
        c += m * (f64::from(a.s.to_f32()) - f64::from(a.d.to_f32()) * sq);
    }
    c
}

fn check_case(cpu: &CpuBackend, format: FormatId, rows: usize, k: usize, ns: &[usize], seed: u64) {
    let mut rng = Rng(seed);
    let w = random_matrix(&mut rng, format, rows, k);
    let desc = MatrixDesc { format, rows, cols: k };
    let rm = ReferenceBackend.upload(desc, &w).unwrap();
    let cm = cpu.upload(desc, &w).unwrap();
    let exact_only = cpu.table().kernel_name(format) == Some("scalar-reference");
    for &n in ns {
        let x = random_acts(&mut rng, n, k);
        let mut yr = vec![0f32; n * rows];
        let mut yc = vec![1f32; n * rows];
        ReferenceBackend.matmul(&rm, &x, n, &mut yr).unwrap();
        cpu.matmul(&cm, &x, n, &mut yc).unwrap();
        if exact_only {
            for (i, (a, b)) in yc.iter().zip(&yr).enumerate() {
                assert!(
                    same(*a, *b),
                    "{} {format} rows={rows} k={k} n={n}: y[{i}] (col {}, row {}) = {a} vs reference {b}",
                    cpu.name(),
                    i / rows,
                    i % rows
                );
            }
            continue;
        }
        let ex = exact_dots(format, &w, rows, k, &x);
        for (i, ((a, b), (e, s))) in yc.iter().zip(&yr).zip(&ex).enumerate() {
            if !e.is_finite() {
                // Non-finite weights (random F16/BF16/F32 bytes): an inf term cannot be
                // cancelled by finite ones, so any order gives the same inf or NaN.
                assert!(same(*a, *e as f32), "{} {format}: y[{i}] = {a}, exact {e}", cpu.name());
                continue;
            }
            if *s > f64::from(f32::MAX) && !a.is_finite() {
                // sum|terms| is past f32 (MXFP4's 2^127 scales): a reordered sum may overflow
                // in some lane, so a non-finite result is accepted; a finite one must still
                // meet the bound below.
                continue;
            }
            let bound = simd_c(format) * k as f64 * 2f64.powi(-24) * s;
            let err = (f64::from(*a) - e).abs();
            assert!(
                err <= bound,
                "{} {format} rows={rows} k={k} n={n}: y[{i}] (col {}, row {}) = {a}, exact {e}, \
                 error {err:e} > bound {bound:e} (reference {b})",
                cpu.name(),
                i / rows,
                i % rows
            );
            // The reference satisfies its own (c <= 2) bound against the same exact value.
            assert!((f64::from(*b) - e).abs() <= 2.0 * bound, "reference {b} vs exact {e}");
        }
    }
}

fn backends() -> Vec<CpuBackend> {
    Isa::available_all().into_iter().map(|i| CpuBackend::with_isa(i).unwrap()).collect()
}

#[test]
fn every_format_every_isa_matches_reference() {
    let mut tested = 0;
    for cpu in backends() {
        for format in FormatId::ALL {
            if !cpu.supports(format) {
                continue;
            }
            let kmin = format.geometry().row_multiple;
            let seed = 1000 + format as u64;
            // 1 row at the smallest K; rows not a multiple of 8 nor of the chunk.
            check_case(&cpu, format, 1, kmin, &[1, 3], seed);
            check_case(&cpu, format, 37, kmin * 2, &[1, 3, 16], seed + 1);
            check_case(&cpu, format, 19, kmin * 3, &[40], seed + 2);
            tested += 1;
        }
    }
    assert!(tested >= 30, "only {tested} (format, isa) pairs tested");
}

/// Every format with a SIMD kernel on x86 (AVX2 and AVX-512).
const SIMD_FORMATS: [FormatId; 13] = [
    FormatId::Q8_0,
    FormatId::Q4_0,
    FormatId::RocmFp2,
    FormatId::Tq2_0,
    FormatId::Tq1_0,
    FormatId::Ptq1_0,
    FormatId::Pq2_0,
    FormatId::RocmFp3,
    FormatId::Hfp4G32,
    FormatId::Mfp4G32,
    FormatId::Mfp4G32P,
    FormatId::Q4K,
    FormatId::Q6K,
];

/// The older ggml formats with AVX-512 kernels in groups of 4 blocks (Q4_1 repacked): larger
/// shapes exercise whole groups, which the smallest-K cases of
/// `every_format_every_isa_matches_reference` never reach.
const LEGACY_FORMATS: [FormatId; 4] =
    [FormatId::Q4_1, FormatId::Q5_0, FormatId::Q5_1, FormatId::Q8_1];

/// Every format with a NEON kernel (aarch64).
const NEON_FORMATS: [FormatId; 10] = [
    FormatId::Q8_0,
    FormatId::Q4_0,
    FormatId::RocmFp2,
    FormatId::Tq2_0,
    FormatId::Tq1_0,
    FormatId::Pq2_0,
    FormatId::Ptq1_0,
    FormatId::Hfp4G32,
    FormatId::Mfp4G32,
    FormatId::Mfp4G32P,
];

/// The formats `isa` has SIMD kernels for (the scalar backend runs the x86 list, as a check of
/// the fallback on the same shapes).
fn simd_formats(isa: Isa) -> &'static [FormatId] {
    match isa {
        Isa::Neon | Isa::NeonDot => &NEON_FORMATS,
        _ => &SIMD_FORMATS,
    }
}

#[test]
fn simd_formats_larger_shapes() {
    for cpu in backends() {
        for &format in simd_formats(cpu.isa()).iter().chain(&LEGACY_FORMATS) {
            let kmin = format.geometry().row_multiple;
            check_case(
                &cpu,
                format,
                203,
                kmin.max(1024),
                &[1, 2, 4, 5, 16, 17, 40],
                77 + format as u64,
            );
            check_case(&cpu, format, 8, kmin, &[1, 16], 5);
            check_case(&cpu, format, 9, kmin, &[1, 7], 6);
            // Whole groups of blocks and a partial last one in the same row.
            check_case(&cpu, format, 13, kmin * 33, &[1, 3, 20], 7);
        }
    }
}

/// Every AVX2 kernel of a format outside `SIMD_FORMATS` and `LEGACY_FORMATS` (which
/// `simd_formats_larger_shapes` runs): larger shapes, every column-tile width, rows past any
/// row group, whole and partial groups of blocks. The list follows the AVX2 table, so a kernel
/// added there is covered here without editing this test; the count checks the table did not
/// silently lose the session-12 kernels (MXFP4, IQ4_NL). (MXFP4 is left to the smallest K, as
/// in `gemm_prefill_shapes`: random 2^127 scales overflow the f32 decode the exact sum starts
/// from; the float formats, whose random bytes make sums near `f32::MAX` at this K, stay with
/// `every_format_every_isa_matches_reference`.)
#[test]
fn avx2_kernels_larger_shapes() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx2) else { return };
    let mut ran = 0;
    for format in FormatId::ALL {
        let Some(name) = cpu.table().kernel_name(format) else { continue };
        let listed = SIMD_FORMATS.contains(&format) || LEGACY_FORMATS.contains(&format);
        let float = matches!(format, FormatId::F32 | FormatId::F16 | FormatId::Bf16);
        if listed || float || !name.starts_with("avx2-") {
            continue;
        }
        let kmin = format.geometry().row_multiple;
        if format != FormatId::Mxfp4 {
            let ns = [1, 2, 3, 4, 5, 16, 17, 40];
            check_case(&cpu, format, 203, kmin.max(1024), &ns, 131 + format as u64);
            check_case(&cpu, format, 13, kmin * 33, &[1, 3, 20], 132 + format as u64);
        }
        check_case(&cpu, format, 9, kmin, &[1, 7, 16], 133 + format as u64);
        ran += 1;
    }
    assert!(ran >= 2, "only {ran} AVX2 kernels outside the listed formats");
}

/// Formats whose AVX-512 kernels live in `z512`'s layout only (x86/z512.rs, x86/iq512.rs,
/// x86/q3k512.rs, x86/nvfp4_512.rs; their AVX2 kernels, added in session 13, are covered by
/// `avx2_kernels_larger_shapes`): larger shapes, every column-tile path (1, 2, 3..4, 5..16
/// columns, prefill), rows past the 2-row group.
/// (MXFP4 is left to the smaller shapes: random 2^127 scales overflow the f32 decode the exact
/// sum starts from.)
const Z512_FORMATS: [FormatId; 13] = [
    FormatId::Iq1M,
    FormatId::Iq1S,
    FormatId::Iq4Xs,
    FormatId::Nvfp4,
    FormatId::Q2K,
    FormatId::Q3K,
    FormatId::Q5K,
    FormatId::Iq4Nl,
    FormatId::Iq2Xxs,
    FormatId::Iq2Xs,
    FormatId::Iq2S,
    FormatId::Iq3Xxs,
    FormatId::Iq3S,
];

/// The formats with a `vpdpbusd` form (x86/z512.rs `kernel_vnni`, x86/legacy512.rs
/// `kernel_vnni`).
const VNNI_FORMATS: [FormatId; 14] = [
    FormatId::RocmFp2,
    FormatId::Iq4Nl,
    FormatId::RocmFp3,
    FormatId::Q4_0,
    FormatId::Q8_0,
    FormatId::Q4_1,
    FormatId::Q5_0,
    FormatId::Q5_1,
    FormatId::Mxfp4,
    FormatId::Nvfp4,
    FormatId::Tq2_0,
    FormatId::Pq2_0,
    FormatId::Tq1_0,
    FormatId::Ptq1_0,
];

/// The VNNI kernels are selected, and give bit for bit the AVX-512 kernels' results (the same
/// exact lane integers, z512.rs). Calls of more than 16 columns of a format with a VNNI
/// prefill GEMM run that instead (x86/gemm512.rs, checked against the reference bound by
/// the other tests), so they are compared only where no GEMM runs.
#[test]
fn vnni_kernels_are_selected_and_identical() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx512Vnni) else { return };
    let plain = CpuBackend::with_isa(Isa::Avx512).unwrap();
    for format in VNNI_FORMATS {
        let name = cpu.table().kernel_name(format).unwrap();
        assert!(name.starts_with("avx512-vnni-"), "{format}: {name}");
        let mut rng = Rng(300 + format as u64);
        let (rows, k) = (37, 4 * format.geometry().row_multiple.max(64));
        let w = random_matrix(&mut rng, format, rows, k);
        let desc = MatrixDesc { format, rows, cols: k };
        let (mv, mp) = (cpu.upload(desc, &w).unwrap(), plain.upload(desc, &w).unwrap());
        for n in [1, 2, 3, 4, 9, 16, 40] {
            let x = random_acts(&mut rng, n, k);
            if n > 16 && cpu.table().gemm_name(format).is_some() {
                continue;
            }
            let (mut yv, mut yp) = (vec![0f32; n * rows], vec![1f32; n * rows]);
            cpu.matmul(&mv, &x, n, &mut yv).unwrap();
            plain.matmul(&mp, &x, n, &mut yp).unwrap();
            for (i, (a, b)) in yv.iter().zip(&yp).enumerate() {
                assert!(same(*a, *b), "{format} n={n}: y[{i}] = {a} (vnni) vs {b}");
            }
        }
    }
}

/// Q4_0's and Q8_0's VNNI tiles of 2..=16 columns (x86/q4_0x16.rs `tile8_vnni`, shared by
/// x86/q8x16.rs: the (row, column) pairs of a tile interleaved) give bit for bit the plain
/// AVX-512 kernels' results (pair by pair), on long rows (the segmented driver: full groups
/// and a partial last one) and short rows (the one-pass driver), with row counts that leave a
/// partial row pair and column counts that leave partial sub-tiles.
#[test]
fn q4_0_q8_0_vnni_tiles_are_the_avx512_ones_bit_for_bit() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx512Vnni) else { return };
    let plain = CpuBackend::with_isa(Isa::Avx512).unwrap();
    for (format, name) in
        [(FormatId::Q4_0, "avx512-vnni-q4_0"), (FormatId::Q8_0, "avx512-vnni-q8_0")]
    {
        assert_eq!(cpu.table().kernel_name(format), Some(name));
        for (rows, k) in [(37, 14336 + 96), (21, 4096 + 32), (5, 512)] {
            let mut rng = Rng(1200 + k as u64 + format as u64);
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let (mv, mp) = (cpu.upload(desc, &w).unwrap(), plain.upload(desc, &w).unwrap());
            for n in [2, 3, 4, 5, 8, 13, 16] {
                let x = random_acts(&mut rng, n, k);
                let (mut yv, mut yp) = (vec![0f32; n * rows], vec![1f32; n * rows]);
                cpu.matmul(&mv, &x, n, &mut yv).unwrap();
                plain.matmul(&mp, &x, n, &mut yp).unwrap();
                for (i, (a, b)) in yv.iter().zip(&yp).enumerate() {
                    assert!(same(*a, *b), "{format} k={k} n={n}: y[{i}] = {a} (vnni) vs {b}");
                }
            }
        }
    }
}

/// The formats with a prefill GEMM (x86/gemm512.rs) against the reference bound on the
/// prefill shapes of `tests/prefill.rs` (several L2-sized row chunks, a ragged last chunk,
/// rows not a multiple of the 4-row block, a ragged last 16-column group) and at the
/// smallest K, on every ISA that has the GEMM.
#[test]
fn gemm_prefill_shapes() {
    let mut ran = 0;
    for cpu in backends() {
        for format in FormatId::ALL {
            if cpu.table().gemm_name(format).is_none() {
                continue;
            }
            let kmin = format.geometry().row_multiple;
            // (MXFP4 only at the smallest K: random 2^127 scales overflow the f32 decode the
            // exact sum starts from, as in `Z512_FORMATS`.)
            if format != FormatId::Mxfp4 {
                check_case(&cpu, format, 301, 2048usize.next_multiple_of(kmin), &[17, 37, 64], 900);
            }
            check_case(&cpu, format, 7, kmin, &[33], 901 + format as u64);
            // A panel over 512 KiB (K = 8192, 10 column groups): the GEMM runs K in blocks,
            // carrying the accumulators across them.
            if format != FormatId::Mxfp4 {
                check_case(&cpu, format, 9, 8192usize.next_multiple_of(kmin), &[160], 902);
            }
            ran += 1;
        }
    }
    if CpuBackend::with_isa(Isa::Avx512Vnni).is_ok() {
        assert!(ran >= 5, "the VNNI table has {ran} GEMM formats");
    }
}

#[test]
fn z512_formats_larger_shapes() {
    for isa in [Isa::Avx512, Isa::Avx512Vnni] {
        let Ok(cpu) = CpuBackend::with_isa(isa) else { continue };
        z512_formats_on(&cpu);
    }
}

fn z512_formats_on(cpu: &CpuBackend) {
    for format in Z512_FORMATS {
        let name = cpu.table().kernel_name(format).unwrap();
        assert!(name.starts_with("avx512-"), "{format}: {name}");
        let kmin = format.geometry().row_multiple;
        check_case(
            cpu,
            format,
            203,
            kmin.max(1024),
            &[1, 2, 3, 4, 5, 16, 17, 40],
            91 + format as u64,
        );
        check_case(cpu, format, 9, kmin, &[1, 7], 6);
    }
}

#[test]
fn simd_kernels_are_selected() {
    for isa in Isa::available_all() {
        let cpu = CpuBackend::with_isa(isa).unwrap();
        for &format in simd_formats(isa) {
            let name = cpu.table().kernel_name(format).unwrap();
            match isa {
                Isa::Scalar => assert_eq!(name, "scalar-reference"),
                // Formats without a VNNI form keep their AVX-512 kernel.
                Isa::Avx512Vnni => assert!(name.starts_with("avx512-"), "{isa:?} {format}: {name}"),
                _ => assert!(name.starts_with(isa.name()), "{isa:?} {format}: {name}"),
            }
        }
        assert_eq!(cpu.table().kernel_name(FormatId::Q8K), Some("scalar-reference"));
    }
    // On aarch64 the NEON kernels must be among those tested.
    if cfg!(target_arch = "aarch64") {
        assert!(Isa::available_all().contains(&Isa::Neon), "NEON not detected on aarch64");
    }
}

/// The AVX2 TQ1_0 and PTQ1_0 kernels (x86/ternary.rs) evaluate the reference's expression per
/// block and row, so they give the reference's results bit for bit: odd row counts (a partial
/// group of 8), one to many blocks, every column-tile width.
#[test]
fn avx2_base3_ternary_is_the_reference_bit_for_bit() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx2) else { return };
    for (format, name) in [(FormatId::Tq1_0, "avx2-tq1_0"), (FormatId::Ptq1_0, "avx2-ptq1_0")] {
        assert_eq!(cpu.table().kernel_name(format), Some(name));
        avx2_bit_for_bit(&cpu, format);
    }
}

/// The AVX2 TQ2_0 and PQ2_0 kernels (x86/ternary.rs, x86/pq2_avx2.rs; PQ2_0 with and without
/// the once-per-call plane-order activations) likewise: the reference's results bit for bit,
/// for every tile width 1..=16 (and 19), one block per row (the smallest K) to many, row
/// counts that leave a partial group of 8.
#[test]
fn avx2_two_bit_ternary_is_the_reference_bit_for_bit() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx2) else { return };
    for (format, name) in [(FormatId::Tq2_0, "avx2-tq2_0"), (FormatId::Pq2_0, "avx2-pq2_0")] {
        assert_eq!(cpu.table().kernel_name(format), Some(name));
        avx2_bit_for_bit(&cpu, format);
    }
}

/// The AVX2 Q3_K, Q4_K, Q5_K and Q6_K kernels (x86/kquant.rs) form ggml's eight exact lane
/// sums per block and row and accumulate them in the reference's order, and the AVX2 Q2_K
/// kernel (x86/q2k_avx2.rs) the exact block sums and the reference's f32 expression per block,
/// so they give the reference's results bit for bit: odd row counts (a partial group of 8), one
/// to many blocks, every column-tile width (1, 2..=4, wider).
#[test]
fn avx2_kquants_are_the_reference_bit_for_bit() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx2) else { return };
    for (format, name) in [
        (FormatId::Q2K, "avx2-q2_k"),
        (FormatId::Q3K, "avx2-q3_k"),
        (FormatId::Q4K, "avx2-q4_k"),
        (FormatId::Q5K, "avx2-q5_k"),
        (FormatId::Q6K, "avx2-q6_k"),
    ] {
        assert_eq!(cpu.table().kernel_name(format), Some(name));
        avx2_bit_for_bit(&cpu, format);
    }
}

fn avx2_bit_for_bit(cpu: &CpuBackend, format: FormatId) {
    let qk = format.geometry().row_multiple;
    for (rows, nb, seed) in [(1, 1, 1u64), (13, 3, 2), (37, 16, 3), (9, 1, 4), (20, 7, 5)] {
        let k = qk * nb;
        let mut rng = Rng(900 + seed);
        let w = random_matrix(&mut rng, format, rows, k);
        let desc = MatrixDesc { format, rows, cols: k };
        let (rm, cm) = (ReferenceBackend.upload(desc, &w).unwrap(), cpu.upload(desc, &w).unwrap());
        for n in (1..=16).chain([19]) {
            let x = random_acts(&mut rng, n, k);
            let (mut yr, mut yc) = (vec![0f32; n * rows], vec![1f32; n * rows]);
            ReferenceBackend.matmul(&rm, &x, n, &mut yr).unwrap();
            cpu.matmul(&cm, &x, n, &mut yc).unwrap();
            for (i, (a, b)) in yc.iter().zip(&yr).enumerate() {
                assert!(same(*a, *b), "rows={rows} k={k} n={n}: y[{i}] = {a} vs reference {b}");
            }
        }
    }
}

#[test]
fn extreme_q8_0_weights_do_not_saturate() {
    // Every weight -128 (legal in Q8_0), activations at +-127: maddubs pairs hit 32512.
    // 24 blocks: a full 16-block group of x86/q8x16.rs and a partial one.
    let k = 768;
    let rows = 11;
    let mut w = vec![0u8; rows * 34 * (k / 32)];
    for blk in w.chunks_exact_mut(34) {
        blk[..2].copy_from_slice(&half::f16::from_f32(0.5).to_bits().to_le_bytes());
        blk[2..].iter_mut().for_each(|b| *b = 0x80);
    }
    let x: Vec<f32> = (0..k).map(|i| if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
    for cpu in backends() {
        let desc = MatrixDesc { format: FormatId::Q8_0, rows, cols: k };
        let m = cpu.upload(desc, &w).unwrap();
        let rm = ReferenceBackend.upload(desc, &w).unwrap();
        // n = 4 runs x86/q8x16.rs on AVX-512 (every column the same activations).
        for n in [1, 2, 4] {
            let xn: Vec<f32> = x.iter().copied().cycle().take(n * k).collect();
            let mut y = vec![0f32; n * rows];
            let mut yr = vec![0f32; n * rows];
            cpu.matmul(&m, &xn, n, &mut y).unwrap();
            ReferenceBackend.matmul(&rm, &xn, n, &mut yr).unwrap();
            for j in 0..n {
                let (y, yr) = (&y[j * rows..][..rows], &yr[j * rows..][..rows]);
                assert_within_bound(&cpu, FormatId::Q8_0, &w, rows, k, &x, y, yr);
            }
        }
    }
}

#[test]
fn bad_uploads_are_rejected_like_the_reference() {
    let mut rng = Rng(9);
    let cases: [(FormatId, usize, u8); 3] = [
        // (format, byte offset within row 2 to corrupt, byte)
        (FormatId::Q4_0, 18 + 1, 0x7C), // block 1's f16 d high byte -> inf
        (FormatId::Q8_0, 34 * 3 + 1, 0x7E), // block 3's f16 d -> NaN
        (FormatId::RocmFp2, 10 * 2 + 9, 0x7F), // block 2's e[1] -> illegal
    ];
    for (format, off, byte) in cases {
        let (rows, k) = (5, 128);
        let mut w = random_matrix(&mut rng, format, rows, k);
        let rb = format.row_bytes(k).unwrap();
        w[2 * rb + off] = byte;
        let desc = MatrixDesc { format, rows, cols: k };
        let want = ReferenceBackend.upload(desc, &w).unwrap_err();
        for cpu in backends() {
            let got = cpu.upload(desc, &w).unwrap_err();
            assert_eq!(got, CpuError::Core(want), "{} {format}", cpu.name());
        }
        match want {
            Error::IllegalByte { offset, .. } | Error::NonFiniteScale { offset, .. } => {
                assert!(offset >= 2 * rb && offset < 3 * rb, "{format}: offset {offset}")
            }
            e => panic!("{format}: unexpected {e:?}"),
        }
        // Wrong length.
        let cpu = CpuBackend::with_isa(Isa::Scalar).unwrap();
        assert!(matches!(cpu.upload(desc, &w[1..]), Err(CpuError::Core(Error::Length { .. }))));
    }
}

#[test]
fn bad_shapes_and_lengths() {
    let cpu = CpuBackend::with_isa(Isa::best()).unwrap();
    let desc = MatrixDesc { format: FormatId::Q8_0, rows: 2, cols: 48 };
    assert!(matches!(cpu.upload(desc, &[0; 0]), Err(CpuError::Core(Error::RowLength { .. }))));
    let mut rng = Rng(3);
    let desc = MatrixDesc { format: FormatId::Q8_0, rows: 2, cols: 64 };
    let m = cpu.upload(desc, &random_matrix(&mut rng, FormatId::Q8_0, 2, 64)).unwrap();
    let mut y = vec![0f32; 2];
    assert!(cpu.matmul(&m, &[0.0; 63], 1, &mut y).is_err());
    assert!(cpu.matmul(&m, &[0.0; 64], 1, &mut y[..1]).is_err());
    // n = 0 is a no-op.
    cpu.matmul(&m, &[], 0, &mut []).unwrap();
}

/// NaN / inf activations: quantized-activation formats give `BadInput` (index into `x`, where
/// the reference names the index within the column), f32-activation formats propagate NaN
/// exactly as the reference does.
#[test]
fn nan_activations_match_the_reference() {
    let mut rng = Rng(11);
    let k = 256;
    let rows = 10;
    for cpu in backends() {
        for format in [
            FormatId::Q8_0,
            FormatId::Q4_0,
            FormatId::RocmFp2,
            FormatId::Q4K,
            FormatId::F16,
            FormatId::Hfp4G32,
            FormatId::Mfp4G32,
            FormatId::Tq2_0,
            FormatId::RocmFp3,
        ] {
            if !cpu.supports(format) {
                continue;
            }
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let m = cpu.upload(desc, &w).unwrap();
            let rm = ReferenceBackend.upload(desc, &w).unwrap();
            let n = 3;
            for bad in [f32::NAN, f32::INFINITY] {
                let mut x = random_acts(&mut rng, n, k);
                x[2 * k + 17] = bad;
                let mut y = vec![0f32; n * rows];
                let mut yr = vec![0f32; n * rows];
                let r = ReferenceBackend.matmul(&rm, &x, n, &mut yr);
                let c = cpu.matmul(&m, &x, n, &mut y);
                match r {
                    Err(Error::BadInput { index, .. }) => {
                        assert_eq!(index, 17);
                        assert!(
                            matches!(c, Err(CpuError::Core(Error::BadInput { index, .. })) if index == 2 * k + 17),
                            "{} {format}: {c:?}",
                            cpu.name()
                        );
                    }
                    Ok(()) => {
                        c.unwrap();
                        // The bad column (2) is non-finite exactly where the reference is;
                        // the good columns (0, 1) are within the kernel's bound.
                        for (a, b) in y[2 * rows..].iter().zip(&yr[2 * rows..]) {
                            assert!(same(*a, *b), "{} {format}: {a} vs {b}", cpu.name());
                        }
                        let (x2, y2, r2) = (&x[..2 * k], &y[..2 * rows], &yr[..2 * rows]);
                        assert_within_bound(&cpu, format, &w, rows, k, x2, y2, r2);
                        assert!(y[2 * rows..].iter().any(|v| !v.is_finite()));
                    }
                    Err(e) => panic!("{format}: reference error {e:?}"),
                }
            }
        }
    }
}

#[test]
fn isa_names_parse() {
    for isa in Isa::ALL {
        assert_eq!(Isa::parse(isa.name()), Some(isa));
    }
    assert_eq!(Isa::parse("AVX2"), Some(Isa::Avx2));
    assert_eq!(Isa::parse("NEON"), Some(Isa::Neon));
    assert_eq!(Isa::parse("sve"), None);
    assert_eq!(Isa::Neon.available(), cfg!(target_arch = "aarch64"));
    assert!(Isa::available_all().contains(&Isa::Scalar));
    assert!(lowbit_cpu::isa::selected().is_ok());
}

/// Large block sums with full-mantissa scales: here `(sumi * dw) * da` (Q4_0's ggml order) and
/// `sumi * (dw * da)` round differently, so the scalar kernel must use the reference's
/// association (bit-identity); SIMD kernels must stay within their bound.
#[test]
fn q4_0_association_is_the_references() {
    let mut rng = Rng(21);
    let (rows, k) = (24, 512);
    let mut w = vec![0u8; rows * 18 * (k / 32)];
    for blk in w.chunks_exact_mut(18) {
        let d = half::f16::from_bits(0x3C00 | (rng.next_u64() as u16 & 0x03FF));
        blk[..2].copy_from_slice(&d.to_bits().to_le_bytes());
        // Every weight 7: sumi = 7 * sum(q), ~15 significant bits; times an 11-bit dw that
        // exceeds f32's 24.
        blk[2..].iter_mut().for_each(|b| *b = 0xFF);
    }
    let x: Vec<f32> = (0..k).map(|_| 0.8 + (rng.uniform() as f32) * 0.2).collect();
    let desc = MatrixDesc { format: FormatId::Q4_0, rows, cols: k };
    let rm = ReferenceBackend.upload(desc, &w).unwrap();
    let mut yr = vec![0f32; rows];
    ReferenceBackend.matmul(&rm, &x, 1, &mut yr).unwrap();
    for cpu in backends() {
        let m = cpu.upload(desc, &w).unwrap();
        let mut y = vec![0f32; rows];
        cpu.matmul(&m, &x, 1, &mut y).unwrap();
        assert_within_bound(&cpu, FormatId::Q4_0, &w, rows, k, &x, &y, &yr);
    }
}

/// Scalar kernels: `y` is `yr` bit for bit. SIMD kernels: `y` is within the c = 1 bound of the
/// exact value (and far from what saturated or mis-associated sums would give).
#[allow(clippy::too_many_arguments)]
fn assert_within_bound(
    cpu: &CpuBackend,
    format: FormatId,
    w: &[u8],
    rows: usize,
    k: usize,
    x: &[f32],
    y: &[f32],
    yr: &[f32],
) {
    if cpu.table().kernel_name(format) == Some("scalar-reference") {
        for (a, b) in y.iter().zip(yr) {
            assert!(same(*a, *b), "{}: {a} vs {b}", cpu.name());
        }
        return;
    }
    for ((a, b), (e, s)) in y.iter().zip(yr).zip(exact_dots(format, w, rows, k, x)) {
        if !e.is_finite() {
            // As in `check_case`: NaN and inf do not depend on the order.
            assert!(same(*a, e as f32), "{}: {a} vs exact {e}", cpu.name());
            continue;
        }
        let bound = simd_c(format) * k as f64 * 2f64.powi(-24) * s;
        let err = (f64::from(*a) - e).abs();
        assert!(
            err <= bound,
            "{}: {a} vs exact {e} (reference {b}): {err:e} > {bound:e}",
            cpu.name()
        );
    }
}

/// A matrix repacked at upload for one instruction set's kernel is refused by a backend with
/// another (its bytes would be misread), and accepted by its own.
#[test]
fn repacked_matrices_stay_with_their_kernel() {
    let all = backends();
    let mut rng = Rng(31);
    for format in [FormatId::RocmFp2, FormatId::RocmFp3] {
        stays_with_its_kernel(&all, &mut rng, format);
    }
}

/// [`repacked_matrices_stay_with_their_kernel`] for one format.
fn stays_with_its_kernel(all: &[CpuBackend], rng: &mut Rng, format: FormatId) {
    let (rows, k) = (9, 512);
    let w = random_matrix(rng, format, rows, k);
    let desc = MatrixDesc { format, rows, cols: k };
    let x = random_acts(rng, 1, k);
    for up in all {
        let m = up.upload(desc, &w).unwrap();
        for run in all {
            let mut y = vec![0f32; rows];
            let same_kernel = up.table().kernel_name(format) == run.table().kernel_name(format);
            match (m.repacked_for(), run.matmul(&m, &x, 1, &mut y)) {
                (Some(_), Err(CpuError::ForeignLayout { .. })) => assert!(!same_kernel),
                (_, Ok(())) => assert!(same_kernel || m.repacked_for().is_none()),
                (r, e) => panic!("{} -> {}: {r:?} {e:?}", up.name(), run.name()),
            }
        }
        if up.isa() == Isa::Scalar {
            assert_eq!(m.bytes(), &w[..]);
        }
    }
}

/// Q4_0 is stored in lane order under AVX-512 (x86/q4_0pack.rs: every kernel there, the n = 1
/// and 2..16-column tiles and the prefill GEMM, reads it) and canonical under AVX2 and scalar;
/// a matrix repacked by one AVX-512 table is refused by the other (its kernel has another name).
/// Within the reference bound at n = 1, 4, 16 and 40 (the GEMM), on rows of whole 16-block
/// groups, rows with a partial last group and rows shorter than one group, with row counts that
/// leave partial row groups. (Bit for bit against the canonical-layout kernels:
/// x86/q4_0pack.rs's unit test.)
#[test]
fn q4_0_lane_order_upload() {
    let all = backends();
    let mut rng = Rng(4040);
    let (rows, k) = (13, 32 * 35);
    let w = random_matrix(&mut rng, FormatId::Q4_0, rows, k);
    let desc = MatrixDesc { format: FormatId::Q4_0, rows, cols: k };
    for up in &all {
        let m = up.upload(desc, &w).unwrap();
        let avx512 = matches!(up.isa(), Isa::Avx512 | Isa::Avx512Vnni);
        assert_eq!(m.repacked_for().is_some(), avx512, "{}", up.name());
        assert_eq!(m.bytes() == &w[..], !avx512, "{}", up.name());
        for run in &all {
            let mut y = vec![0f32; rows];
            let x = random_acts(&mut rng, 1, k);
            let ok = run.matmul(&m, &x, 1, &mut y).is_ok();
            let same_kernel =
                up.table().kernel_name(FormatId::Q4_0) == run.table().kernel_name(FormatId::Q4_0);
            assert_eq!(ok, same_kernel || !avx512, "{} -> {}", up.name(), run.name());
        }
        for (i, (rows, k)) in
            [(13, 32 * 35), (6, 512), (9, 14336 + 96), (5, 96)].into_iter().enumerate()
        {
            check_case(up, FormatId::Q4_0, rows, k, &[1, 4, 16, 40], 4100 + i as u64);
        }
    }
}

/// The formats whose 2..16-column tiles take a K-segmented driver on long rows (x86/zseg.rs
/// for the `z512` layout, `body512_seg` in x86/rocmfpx/body.rs).
const SEGMENTED_FORMATS: [FormatId; 16] = [
    FormatId::RocmFp2,
    FormatId::RocmFp3,
    FormatId::Tq2_0,
    FormatId::Pq2_0,
    FormatId::Q4_0,
    FormatId::Q8_0,
    FormatId::Q4K,
    FormatId::Q6K,
    FormatId::Q2K,
    FormatId::Q3K,
    FormatId::Q5K,
    FormatId::Tq1_0,
    FormatId::Ptq1_0,
    FormatId::Iq4Nl,
    FormatId::Nvfp4,
    FormatId::Iq2Xxs,
];

/// Long rows (more activation records per row than the segmented drivers keep in L1, with a
/// partial last weight group where the format allows one) and a row count that leaves a
/// partial row block: every column count is within the bound, and each column of an n-column
/// call is bit for bit the single-column result (the segmented drivers only reorder loops;
/// Q4_0 and Q8_0 run other bodies for one column, 2..=4 (x86/q4_0x16.rs, x86/q8x16.rs) and
/// more, so they are only bound-checked).
#[test]
fn long_rows_segmented_tiles() {
    for cpu in backends() {
        for format in SEGMENTED_FORMATS {
            if !cpu.supports(format) {
                continue;
            }
            let rm = format.geometry().row_multiple;
            // 14336 = 56 * 256 (the long rows); + 96 leaves a partial group of the
            // 32-element formats.
            let k = if rm <= 32 { 14336 + 96 } else { 14336usize.div_ceil(rm) * rm };
            let rows = 37;
            check_case(&cpu, format, rows, k, &[1, 2, 4, 9], 900 + format as u64);
            let mut rng = Rng(950 + format as u64);
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let m = cpu.upload(desc, &w).unwrap();
            if format == FormatId::Q4_0 || format == FormatId::Q8_0 {
                continue;
            }
            for n in [2, 3, 4, 5, 8, 13, 16] {
                let x = random_acts(&mut rng, n, k);
                let mut y = vec![0f32; n * rows];
                cpu.matmul(&m, &x, n, &mut y).unwrap();
                for j in 0..n {
                    let mut y1 = vec![0f32; rows];
                    cpu.matmul(&m, &x[j * k..(j + 1) * k], 1, &mut y1).unwrap();
                    for (r, (a, b)) in y[j * rows..(j + 1) * rows].iter().zip(&y1).enumerate() {
                        assert!(
                            same(*a, *b),
                            "{} {format} k={k} n={n}: col {j} row {r}: {a} vs n = 1 {b}",
                            cpu.name()
                        );
                    }
                }
            }
        }
    }
}

/// The VBMI IQ2 decodes (x86/iq512.rs `Iq2XxsVbmi`, `Iq2SVbmi`, in the `Isa::Avx512Vnni`
/// table when the CPU has AVX-512 VBMI) give bit for bit the plain AVX-512 kernels' results
/// (the same registers and lane integers), at the smallest K, odd row counts and several
/// column counts.
#[test]
fn vbmi_iq2_kernels_are_the_avx512_ones_bit_for_bit() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx512Vnni) else { return };
    let plain = CpuBackend::with_isa(Isa::Avx512).unwrap();
    for format in [FormatId::Iq2Xxs, FormatId::Iq2S] {
        let name = cpu.table().kernel_name(format).unwrap();
        if !name.contains("vbmi") {
            continue;
        }
        for (rows, k) in [(1, 256), (37, 256), (19, 768)] {
            let mut rng = Rng(900 + format as u64 + rows as u64);
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let (mv, mp) = (cpu.upload(desc, &w).unwrap(), plain.upload(desc, &w).unwrap());
            for n in [1, 2, 3, 5, 9] {
                let x = random_acts(&mut rng, n, k);
                let (mut yv, mut yp) = (vec![0f32; n * rows], vec![1f32; n * rows]);
                cpu.matmul(&mv, &x, n, &mut yv).unwrap();
                plain.matmul(&mp, &x, n, &mut yp).unwrap();
                for (i, (a, b)) in yv.iter().zip(&yp).enumerate() {
                    assert!(same(*a, *b), "{format} {name} n={n}: y[{i}] = {a} vs {b}");
                }
            }
        }
    }
}

/// The grid i-quants with an AVX2 kernel (x86/iq_avx2) and the kernel names they must select.
const AVX2_IQ: [(FormatId, &str); 7] = [
    (FormatId::Iq2Xxs, "avx2-iq2_xxs"),
    (FormatId::Iq2Xs, "avx2-iq2_xs"),
    (FormatId::Iq2S, "avx2-iq2_s"),
    (FormatId::Iq3Xxs, "avx2-iq3_xxs"),
    (FormatId::Iq3S, "avx2-iq3_s"),
    (FormatId::Iq1S, "avx2-iq1_s"),
    (FormatId::Iq1M, "avx2-iq1_m"),
];

/// Every byte of block `b` set to `fill`, then a finite `d` (1.0) put back where `format`
/// keeps it (IQ1_M: the top nibbles of its four scale words).
fn edge_block(format: FormatId, blk: &mut [u8], fill: u8) {
    blk.iter_mut().for_each(|v| *v = fill);
    if format == FormatId::Iq1M {
        // d = 0x3C00: nibbles 0x0, 0x0, 0xC, 0x3 from the low end.
        for (w, nib) in [0u8, 0x0, 0xC, 0x3].into_iter().enumerate() {
            blk[49 + 2 * w] = (blk[49 + 2 * w] & 0x0F) | nib << 4;
        }
    } else {
        blk[..2].copy_from_slice(&half::f16::from_f32(1.0).to_bits().to_le_bytes());
    }
}

/// The AVX2 grid i-quant kernels are bit-identical to the reference (x86/iq_avx2/mod.rs):
/// random blocks and edge blocks (every byte 0xFF: the largest indices, every sign and the
/// largest scales; every byte 0x00), activation columns of all +-127 quants, odd row counts
/// (groups of 8 with a partial last one), every column count 1..=17 and 40, K from one block.
#[test]
fn avx2_iq_kernels_match_reference_bit_for_bit() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx2) else { return };
    for (format, name) in AVX2_IQ {
        assert_eq!(cpu.table().kernel_name(format), Some(name), "{format}");
        let bb = format.geometry().block_bytes;
        for (rows, nblk, seed) in
            [(1, 1, 1u64), (7, 1, 2), (9, 2, 3), (37, 3, 4), (203, 16, 5), (13, 33, 6)]
        {
            let k = 256 * nblk;
            let mut rng = Rng(seed * 100 + format as u64);
            let mut w = random_matrix(&mut rng, format, rows, k);
            // Edge blocks: the first block of row 0 all 0xFF, of the last row all 0x00.
            edge_block(format, &mut w[..bb], 0xFF);
            let last = w.len() - format.row_bytes(k).unwrap();
            edge_block(format, &mut w[last..last + bb], 0x00);
            let desc = MatrixDesc { format, rows, cols: k };
            let rm = ReferenceBackend.upload(desc, &w).unwrap();
            let cm = cpu.upload(desc, &w).unwrap();
            for n in (1..=17).chain([40]) {
                let mut x = random_acts(&mut rng, n, k);
                // Column 0: every quant +-127 (the largest products).
                for (i, v) in x[..k].iter_mut().enumerate() {
                    *v = if i % 3 == 0 { -2.5 } else { 2.5 };
                }
                let mut yr = vec![0f32; n * rows];
                let mut yc = vec![1f32; n * rows];
                ReferenceBackend.matmul(&rm, &x, n, &mut yr).unwrap();
                cpu.matmul(&cm, &x, n, &mut yc).unwrap();
                for (i, (a, b)) in yc.iter().zip(&yr).enumerate() {
                    assert!(
                        same(*a, *b),
                        "{name} rows={rows} k={k} n={n}: y[{i}] (col {}, row {}) = {a} vs \
                         reference {b}",
                        i / rows,
                        i % rows
                    );
                }
            }
        }
    }
}

/// The AVX2 table has a SIMD kernel for every format but the two activation types Q8_1 and
/// Q8_K (as weights they run the scalar reference): a format added to the core without an AVX2
/// kernel, or a kernel dropped from the table, fails here by name.
#[test]
fn avx2_covers_every_format() {
    let Ok(cpu) = CpuBackend::with_isa(Isa::Avx2) else { return };
    let scalar_only = [FormatId::Q8_1, FormatId::Q8K];
    for format in FormatId::ALL {
        let name = cpu.table().kernel_name(format).unwrap_or("none");
        if scalar_only.contains(&format) {
            assert_eq!(name, "scalar-reference", "{format}");
        } else {
            assert!(name.starts_with("avx2-"), "{format} runs {name} on AVX2");
        }
    }
}
