//! The HIP backend against the core's ReferenceBackend: every supported format, odd row
//! counts, every column-count shape (n = 1, 2..16, > 16), within the accumulation bound; the
//! device Q8_0 quantizer bit for bit; errors identical to the reference's.
//!
//! Without a GPU runtime or device these tests print why and pass; `LOWBIT_REQUIRE_HIP=1`
//! makes them fail instead (set it wherever a device is expected).

// The CPU backend's test helpers (deterministic RNG, random valid matrices), shared as is.
#[path = "../../cpu/tests/common/mod.rs"]
mod common;

use bytemuck::Zeroable;
use common::{random_acts, random_matrix, Rng};
use lowbit_core::backend::{Backend, MatrixDesc, PreparedActivations, ReferenceBackend};
use lowbit_core::codec::{self, EncodeOptions};
use lowbit_core::format::ggml::kquant::scales::get_scale_min_k4;
use lowbit_core::format::ggml::kquant::BlockQ4K;
use lowbit_core::format::ggml::q4_1::BlockQ4_1;
use lowbit_core::format::ggml::{BlockQ8K, BlockQ8_1};
use lowbit_core::FormatId;
use lowbit_hip::HipBackend;

fn backend() -> Option<HipBackend> {
    match HipBackend::new() {
        Ok(b) => Some(b),
        Err(e) if e.is_unavailable() => {
            if std::env::var("LOWBIT_REQUIRE_HIP").is_ok_and(|v| v == "1") {
                panic!("LOWBIT_REQUIRE_HIP=1 but: {e}");
            }
            eprintln!("skipping HIP tests: {e}");
            None
        }
        Err(e) => panic!("HIP backend failed to start: {e}"),
    }
}

const FORMATS: [FormatId; 15] = [
    FormatId::Q8_0,
    FormatId::Q4_0,
    FormatId::Q4_1,
    FormatId::Mxfp4,
    FormatId::Nvfp4,
    FormatId::RocmFp2,
    FormatId::RocmFp3,
    FormatId::Pq2_0,
    FormatId::Ptq1_0,
    FormatId::Tq2_0,
    FormatId::Q4K,
    FormatId::Q6K,
    FormatId::Hfp4G32,
    FormatId::Mfp4G32,
    FormatId::Mfp4G32P,
];

/// Per element, the magnitudes of the separately rounded parts of the decoded weight: the
/// scaled quant and, for formats with a minimum (Q4_1, Q4_K), the minimum term, as the core's
/// dot products state their bounds (`terms` counted separately).
fn weight_parts(format: FormatId, w: &[u8], rows: usize, k: usize) -> Vec<f64> {
    match format {
        FormatId::Q4_1 => w
            .chunks_exact(20)
            .flat_map(|blk| {
                let b: BlockQ4_1 = bytemuck::pod_read_unaligned(blk);
                let (d, m) = (f64::from(b.d.to_f32()), f64::from(b.m.to_f32()));
                (0..32).map(move |j| (f64::from(b.code(j)) * d).abs() + m.abs())
            })
            .collect(),
        FormatId::Q4K => w
            .chunks_exact(144)
            .flat_map(|blk| {
                let b: BlockQ4K = bytemuck::pod_read_unaligned(blk);
                let (d, dmin) = (f64::from(b.d.to_f32()), f64::from(b.dmin.to_f32()));
                let q = b.quants();
                (0..256).map(move |e| {
                    let (sc, m) = get_scale_min_k4(e / 32, &b.scales);
                    (d * f64::from(sc) * f64::from(q[e])).abs() + (dmin * f64::from(m)).abs()
                })
            })
            .collect(),
        _ => {
            let wd = codec::decode_to_vec(format, k, w).unwrap();
            assert_eq!(wd.len(), rows * k);
            wd.iter().map(|v| f64::from(v.abs())).collect()
        }
    }
}

/// Σ|w_i a_i| per (column, row) over the weights' parts and the reference's prepared
/// activations.
fn abs_terms(format: FormatId, w: &[u8], rows: usize, k: usize, x: &[f32], n: usize) -> Vec<f64> {
    let wd = weight_parts(format, w, rows, k);
    let mut out = vec![0f64; n * rows];
    for c in 0..n {
        let act = PreparedActivations::new(format, &x[c * k..(c + 1) * k]).unwrap();
        let a: Vec<f32> = match &act {
            PreparedActivations::F32(v) => v.clone(),
            PreparedActivations::Q8_0(b) => {
                codec::decode_to_vec(FormatId::Q8_0, k, bytemuck::cast_slice(b)).unwrap()
            }
            PreparedActivations::Q8_1(b) => {
                codec::decode_to_vec(FormatId::Q8_1, k, bytemuck::cast_slice(b)).unwrap()
            }
            PreparedActivations::Q8K(b) => {
                codec::decode_to_vec(FormatId::Q8K, k, bytemuck::cast_slice(b)).unwrap()
            }
        };
        for r in 0..rows {
            out[c * rows + r] = (0..k).map(|i| wd[r * k + i] * f64::from(a[i]).abs()).sum();
        }
    }
    out
}

/// `y` against the reference `yr` (n columns of `rows`): within 4 k 2^-24 Σ|terms| (both sides
/// are within c = 2 of the exact sum), infinities and NaN agreeing.
fn assert_close(what: &str, y: &[f32], yr: &[f32], terms: &[f64], k: usize, rows: usize) {
    for i in 0..y.len() {
        if !terms[i].is_finite() {
            // A decoded weight itself overflows f32 (MXFP4 code 12 at scale 2^127): there is no
            // finite exact value to compare against.
            continue;
        }
        let tol = 4.0 * k as f64 * 2f64.powi(-24) * terms[i];
        let d = (f64::from(y[i]) - f64::from(yr[i])).abs();
        // Where Σ|terms| itself exceeds f32's range (random scales near 2^127), the order of
        // the sum decides whether and how it overflows: one side may be finite and the other
        // an infinity, or one side NaN (inf - inf) where the other is an infinity; then only
        // a non-finite result somewhere is required, as the CPU backend's tests accept.
        let same = y[i] == yr[i] || (y[i].is_nan() && yr[i].is_nan());
        let overflow = terms[i] >= f64::from(f32::MAX) && (!y[i].is_finite() || !yr[i].is_finite());
        assert!(
            same || d <= tol || overflow,
            "{what} col {} row {}: got {} ref {} diff {d:e} > {tol:e}",
            i / rows,
            i % rows,
            y[i],
            yr[i]
        );
    }
}

#[test]
fn matmul_matches_reference_within_the_bound() {
    let Some(hip) = backend() else { return };
    eprintln!("device: {} ({})", hip.name(), hip.arch());
    let mut rng = Rng(7);
    for format in FORMATS {
        assert!(hip.supports(format), "{format}");
        let mult = format.geometry().row_multiple;
        // nu = 8, 24, 64 and 40 units: partial, whole and a partial second chunk of lanes.
        for (rows, k) in [(37usize, 256usize), (130, 768), (5, 2048), (1, 256), (19, 1280)] {
            if k % mult != 0 {
                continue;
            }
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let m = hip.upload(desc, &w).unwrap();
            let rm = ReferenceBackend.upload(desc, &w).unwrap();
            for n in [1usize, 2, 3, 5, 8, 13, 16, 17, 40] {
                let x = random_acts(&mut rng, n, k);
                let mut y = vec![f32::NAN; n * rows];
                let mut yr = vec![0f32; n * rows];
                hip.matmul(&m, &x, n, &mut y).unwrap();
                ReferenceBackend.matmul(&rm, &x, n, &mut yr).unwrap();
                let what = format!("{format} rows {rows} k {k} n {n}");
                assert_close(&what, &y, &yr, &abs_terms(format, &w, rows, k, &x, n), k, rows);
            }
        }
    }
}

/// n = 1 on every staged kernel (weights in shared memory, pipeline codes 33 and 34) for every
/// rows-per-warp value, on shapes where they run (each row of every plane chunk-aligned: nu
/// = 8, 16, 24, 40, 64 units) and partial last steps; the same bound as the defaults.
#[test]
fn staged_n1_matches_reference_within_the_bound() {
    let Some(hip) = backend() else { return };
    let mut rng = Rng(11);
    for format in FORMATS {
        let mult = format.geometry().row_multiple;
        for (rows, k) in [(37usize, 256usize), (19, 512), (130, 768), (5, 2048), (21, 1280)] {
            if k % mult != 0 {
                continue;
            }
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let m = hip.upload(desc, &w).unwrap();
            let rm = ReferenceBackend.upload(desc, &w).unwrap();
            let x = random_acts(&mut rng, 1, k);
            let mut yr = vec![0f32; rows];
            ReferenceBackend.matmul(&rm, &x, 1, &mut yr).unwrap();
            let terms = abs_terms(format, &w, rows, k, &x, 1);
            for r in [1usize, 2, 4] {
                for u in [33usize, 34] {
                    hip.set_rows_per_warp(r);
                    hip.set_units_per_step(u);
                    let mut y = vec![f32::NAN; rows];
                    hip.matmul(&m, &x, 1, &mut y).unwrap();
                    let what = format!("{format} rows {rows} k {k} r {r} u {u}");
                    assert_close(&what, &y, &yr, &terms, k, rows);
                }
            }
            hip.set_rows_per_warp(0);
            hip.set_units_per_step(0);
        }
    }
}

/// Activations with the encoders' corner cases: ties of x * (1/d) at .5, an all-zero block,
/// tiny (f16-subnormal scale) and huge blocks, f32 subnormals.
fn corner_activations(rng: &mut Rng, len: usize, huge: f32) -> Vec<f32> {
    let mut x = rng.values(len);
    for (i, v) in x[..32].iter_mut().enumerate() {
        *v = (i as f32 - 15.5) * 0.25;
    }
    x[32..64].iter_mut().for_each(|v| *v = 0.0);
    x[64..96].iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 - 3.0) * 1e-7);
    x[96..128].iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 - 9.0) * huge);
    x[128..160].iter_mut().enumerate().for_each(|(i, v)| *v = -(i as f32) * 1e-42);
    // A Q8_K block (256..512) whose largest magnitude appears twice with both signs, and one
    // (512..768) of f32 subnormals only (iscale overflows).
    x[300] = -9.0;
    x[301] = 9.0;
    x[512..768].iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 - 100.0) * 1e-44);
    x
}

#[test]
fn device_quantizers_are_bit_exact() {
    let Some(hip) = backend() else { return };
    let mut rng = Rng(11);
    let opts = EncodeOptions::default();
    // Q8_0 (element and codebook order), Q8_1, Q8_K (element and codebook order).
    for format in
        [FormatId::Q4_0, FormatId::RocmFp2, FormatId::Q4_1, FormatId::Q4K, FormatId::Tq2_0]
    {
        // Q8_1's s = sum(q) * d must fit f16: a smaller "huge" block there.
        let huge = if format == FormatId::Q4_1 { 30.0 } else { 3.0e5 };
        let x = corner_activations(&mut rng, 256 * 8, huge);
        let (q, d, e) = hip.device_quantize(format, &x).unwrap();
        match format.info().activation {
            lowbit_core::registry::ActFormat::Q8_0 => {
                let mut want = vec![0u8; x.len() / 32 * 34];
                codec::encode_row(FormatId::Q8_0, &x, &opts, &mut want).unwrap();
                for (b, blk) in want.chunks_exact(34).enumerate() {
                    let wd = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
                    assert_eq!(d[b].to_bits(), wd.to_bits(), "{format} block {b} scale");
                    for j in 0..32 {
                        assert_eq!(q[b * 32 + j], blk[2 + j] as i8, "{format} block {b} elem {j}");
                    }
                    // The ternary kernels' transposed order also carries the quant sum.
                    if matches!(format, FormatId::Pq2_0 | FormatId::Ptq1_0) {
                        let sum: i32 = blk[2..].iter().map(|&v| i32::from(v as i8)).sum();
                        assert_eq!(e[b] as i32, sum, "{format} block {b} quant sum");
                    }
                }
            }
            lowbit_core::registry::ActFormat::Q8_1 => {
                let mut want = vec![BlockQ8_1::zeroed(); x.len() / 32];
                codec::encode_row(FormatId::Q8_1, &x, &opts, bytemuck::cast_slice_mut(&mut want))
                    .unwrap();
                for (b, blk) in want.iter().enumerate() {
                    assert_eq!(d[b].to_bits(), blk.d.to_f32().to_bits(), "Q8_1 block {b} d");
                    assert_eq!(e[b], blk.s.to_f32().to_bits(), "Q8_1 block {b} s");
                    assert_eq!(&q[b * 32..b * 32 + 32], &blk.qs, "Q8_1 block {b}");
                }
            }
            _ => {
                let mut want = vec![BlockQ8K::zeroed(); x.len() / 256];
                codec::encode_row(FormatId::Q8K, &x, &opts, bytemuck::cast_slice_mut(&mut want))
                    .unwrap();
                for (b, blk) in want.iter().enumerate() {
                    for u in 0..8 {
                        let i = 8 * b + u;
                        assert_eq!(d[i].to_bits(), blk.d.to_bits(), "{format} block {b} d");
                        let (lo, hi) = (e[i] as u16 as i16, (e[i] >> 16) as u16 as i16);
                        assert_eq!(
                            (lo, hi),
                            (blk.bsums[2 * u], blk.bsums[2 * u + 1]),
                            "{format} {b}"
                        );
                    }
                    assert_eq!(&q[b * 256..b * 256 + 256], &blk.qs, "{format} block {b}");
                }
            }
        }
    }
}

#[test]
fn errors_match_the_reference() {
    let Some(hip) = backend() else { return };
    let mut rng = Rng(3);
    for format in FORMATS {
        let k = 256;
        let w = random_matrix(&mut rng, format, 3, k);
        let desc = MatrixDesc { format, rows: 3, cols: k };
        // Wrong length.
        let e1 = hip.upload(desc, &w[1..]).err().unwrap().to_string();
        let e2 = ReferenceBackend.upload(desc, &w[1..]).err().unwrap().to_string();
        assert_eq!(e1, e2);
        // A broken block scale in row 2 (every format here has a checked scale field).
        let rb = format.row_bytes(k).unwrap();
        let mut bad = w.clone();
        let off = 2 * rb
            + match format {
                // An f16 scale's high byte (0xFF: NaN) or an illegal scale byte.
                FormatId::Q8_0 | FormatId::Q4_0 | FormatId::Q4_1 | FormatId::Q4K => 1,
                FormatId::Pq2_0 => 1,
                FormatId::Mxfp4 | FormatId::Nvfp4 => 0,
                FormatId::RocmFp2 => 8,
                FormatId::RocmFp3 => 12,
                FormatId::Ptq1_0 => 27,
                FormatId::Tq2_0 => 65,
                FormatId::Q6K => 209,
                _ => 16, // HFP4 family: the first block's scale byte
            };
        bad[off] = 0xFF;
        let e1 = hip.upload(desc, &bad).err().map(|e| e.to_string());
        let e2 = ReferenceBackend.upload(desc, &bad).err().map(|e| e.to_string());
        assert_eq!(e1, e2, "{format}");
        // Non-finite activations.
        let m = hip.upload(desc, &w).unwrap();
        let rm = ReferenceBackend.upload(desc, &w).unwrap();
        let mut x = random_acts(&mut rng, 2, k);
        x[k + 17] = f32::NAN;
        let (mut y, mut yr) = (vec![0f32; 6], vec![0f32; 6]);
        let r1 = hip.matmul(&m, &x, 2, &mut y).map_err(|e| e.to_string());
        let r2 = ReferenceBackend.matmul(&rm, &x, 2, &mut yr).map_err(|e| e.to_string());
        assert_eq!(r1.is_err(), r2.is_err(), "{format}");
        if let (Err(a), Err(b)) = (&r1, &r2) {
            assert_eq!(a, b, "{format}");
        } else {
            for (a, b) in y.iter().zip(&yr) {
                assert_eq!(a.is_nan(), b.is_nan(), "{format}");
            }
        }
    }
}

/// The kernels' NVIDIA branch compiled for the CPU with the system C++ compiler (`CXX`, else
/// `c++`; tests/host_shim.h stands in for NVRTC, one lane per warp) and run over the grid, for
/// every format, every (rows per warp, pipeline depth) and column tile, against the reference
/// on odd shapes. Activations come from the core's encoders (the device quantizers are checked
/// bit for bit on a GPU by `device_quantizers_are_bit_exact`). No compiler: prints why and
/// passes, unless `LOWBIT_REQUIRE_HOST_EMULATION=1`.
#[test]
fn host_emulation_matches_reference() {
    let Some(lib) = host_kernels() else { return };
    // SAFETY: lb_host_block is defined by tests/host_shim.h with this signature.
    let set_block: libloading::Symbol<unsafe extern "C" fn(u32, u32, u32)> =
        unsafe { lib.get(b"lb_host_block") }.unwrap();
    type Kernel = unsafe extern "C" fn(
        *const u8,
        *const u8,
        *const u8,
        *const u8,
        *const i8,
        *const f32,
        *const u32,
        *const f32,
        *mut f32,
        u32,
        u32,
        u32,
    );
    type Acts = unsafe extern "C" fn(*const i8, *const f32, *mut u32, *mut f32, u32, u32, u32, u32);
    // SAFETY: lb_mma_acts is defined by kernels/lowbit_mma.h with this signature.
    let acts: libloading::Symbol<Acts> = unsafe { lib.get(b"lb_mma_acts") }.unwrap();
    let pos = |e: usize| 4 * ((if e >= 8 { 2 } else { 0 }) + (e & 1)) + ((e & 7) >> 1);
    let mut rng = Rng(17);
    for format in FORMATS {
        for (rows, k) in [(13usize, 256usize), (5, 1280)] {
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let planes = lowbit_hip::testing::planes(desc, &w).unwrap();
            let rm = ReferenceBackend.upload(desc, &w).unwrap();
            for n in [1usize, 2, 3, 8, 13, 17] {
                let x = random_acts(&mut rng, n, k);
                let mut yr = vec![0f32; n * rows];
                ReferenceBackend.matmul(&rm, &x, n, &mut yr).unwrap();
                let terms = abs_terms(format, &w, rows, k, &x, n);
                let units: &[usize] = if n == 1 { &[1, 2, 4, 12, 14, 33, 34] } else { &[1] };
                // The defaults, every tensor-core variant (n >= 5, where a format has them),
                // then every forced (rows per warp, pipeline).
                let forced =
                    [1usize, 2, 4].iter().flat_map(|&r| units.iter().map(move |&u| (r, u)));
                let mma = lowbit_hip::testing::mma_variant_codes().into_iter().map(|r| (r, 0));
                for (r, u) in [(0, 0)].into_iter().chain(mma).chain(forced) {
                    // Every kernel grid-strides its rows, so any grid is correct; one emulated
                    // warp per block covers a block's rows with this one.
                    let (name, nc, rpb, order) =
                        lowbit_hip::testing::kernel(format, n, k, (r, u)).unwrap();
                    let (aq, ad, ae, xt) =
                        lowbit_hip::testing::activations(format, &x, k, pos, order.is_some())
                            .unwrap();
                    // A tensor-core kernel reads the activations as lb_mma_acts reorders them
                    // (run here over its grid like any kernel); the others as prepared.
                    let (af, adf) = match order {
                        Some(order) => {
                            let tiles = n.div_ceil(nc) * nc / 8;
                            let threads = tiles * (k / 32) * 32;
                            let (mut af, mut adf) =
                                (vec![0u32; threads * 2], vec![0f32; threads / 4]);
                            for bx in 0..threads {
                                // SAFETY: lb_mma_acts has this signature (kernels/lowbit_mma.h);
                                // aq / ad hold n columns of k, af / adf `tiles` tiles of k / 32
                                // units; one emulated thread per block, `threads` blocks.
                                unsafe {
                                    set_block(bx as u32, 0, threads as u32);
                                    acts(
                                        aq.as_ptr(),
                                        ad.as_ptr(),
                                        af.as_mut_ptr(),
                                        adf.as_mut_ptr(),
                                        (k / 32) as u32,
                                        n as u32,
                                        tiles as u32,
                                        order,
                                    );
                                }
                            }
                            (af, adf)
                        }
                        None => (vec![], vec![]),
                    };
                    let (qp, dp) = match order {
                        Some(_) => (af.as_ptr() as *const i8, adf.as_ptr()),
                        None => (aq.as_ptr(), ad.as_ptr()),
                    };
                    // SAFETY: every lb_mv kernel has the Kernel signature (kernels/lowbit_kernels.hip).
                    let f: libloading::Symbol<Kernel> =
                        unsafe { lib.get(name.as_bytes()) }.unwrap();
                    let mut y = vec![f32::NAN; n * rows];
                    let (gx, gy) = (rows.div_ceil(rpb), n.div_ceil(nc));
                    for by in 0..gy {
                        for bx in 0..gx {
                            // SAFETY: the planes and activations are laid out as the kernel
                            // reads them (the same code as the upload and prepare paths) for
                            // `rows` x `k` and `n` columns; y holds n * rows values.
                            unsafe {
                                set_block(bx as u32, by as u32, gx as u32);
                                f(
                                    planes[0].as_ptr(),
                                    planes[1].as_ptr(),
                                    planes[2].as_ptr(),
                                    planes[3].as_ptr(),
                                    qp,
                                    dp,
                                    ae.as_ptr(),
                                    xt.as_ptr(),
                                    y.as_mut_ptr(),
                                    rows as u32,
                                    (k / 32) as u32,
                                    n as u32,
                                );
                            }
                        }
                    }
                    assert_close(
                        &format!("host {name} rows {rows} k {k} n {n}"),
                        &y,
                        &yr,
                        &terms,
                        k,
                        rows,
                    );
                }
            }
        }
    }
}

/// Compiles the kernels for the CPU into a temporary shared library, or None (with the reason
/// printed) when no C++ compiler is usable.
fn host_kernels() -> Option<libloading::Library> {
    let required = std::env::var("LOWBIT_REQUIRE_HOST_EMULATION").is_ok_and(|v| v == "1");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let dir = std::env::temp_dir().join(format!("lowbit-hip-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libkernels.so");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = std::process::Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-shared", "-fPIC", "-w", "-x", "c++", "-include"])
        .arg(root.join("tests/host_shim.h"))
        .arg("-I")
        .arg(root.join("kernels"))
        .arg(root.join("kernels/lowbit_kernels.hip"))
        .arg("-o")
        .arg(&lib)
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => {
            assert!(!required, "LOWBIT_REQUIRE_HOST_EMULATION=1 but {cxx} failed: {other:?}");
            eprintln!("skipping the host emulation: {cxx}: {other:?}");
            return None;
        }
    }
    // SAFETY: the library was just built from our kernel source; loading runs no constructors
    // beyond the C++ runtime's.
    let l = unsafe { libloading::Library::new(&lib) }.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(l)
}
