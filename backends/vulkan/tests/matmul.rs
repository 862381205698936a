//! The Vulkan backend against the core: device-side Q8_0 quantization byte for byte, every
//! kernel against the exact product within the accumulation bound on odd shapes and column
//! counts (both dot-product paths where the device has both), matrices split over several
//! buffers, which kernel serves which column count, and errors. Skips with a message when no
//! Vulkan device exists, unless LOWBIT_REQUIRE_VULKAN=1.

mod common;

use common::*;
use lowbit_core::backend::{Backend, MatrixDesc, ReferenceBackend};
use lowbit_core::codec::{self, EncodeOptions};
use lowbit_core::{Error, FormatId};
use lowbit_vulkan::{VulkanError, VulkanOptions, FORMATS, MAX_PIPELINES};

#[test]
fn device_q8_quantization_is_the_core_encoder_byte_for_byte() {
    for b in backends() {
        let mut rng = Rng(7);
        let k = 32 * 37;
        let n = 5;
        let mut x = rng.values(n * k);
        // Edge blocks: all zero, tiny values (f16 scale 0, Q8_1 s not 0), exact ties of
        // x * id, a scale near f16's largest (Q8_0 only: Q8_1's s would overflow).
        x[32..64].iter_mut().for_each(|v| *v = 0.0);
        x[64..96].iter_mut().for_each(|v| *v = 1e-30);
        x[96..128].iter_mut().for_each(|v| *v = 3e-6);
        for (i, v) in x[128..160].iter_mut().enumerate() {
            *v = (i as f32 - 16.0) * 0.5 + 0.25;
        }
        let mut big = x.clone();
        big[160] = 65504.0 * 127.0 * 0.999;
        let opts = EncodeOptions::default();
        for (act, x) in [(FormatId::Q8_0, &big), (FormatId::Q8_1, &x)] {
            let got = ok(b.quantize_q8(act, x, k), "quantize");
            let mut want = vec![0u8; act.row_bytes(k).unwrap() * n];
            let rb = act.row_bytes(k).unwrap();
            for (col, out) in x.chunks_exact(k).zip(want.chunks_exact_mut(rb)) {
                codec::encode_row(act, col, &opts, out).unwrap();
            }
            let bb = act.geometry().block_bytes;
            for (i, (g, w)) in got.chunks_exact(bb).zip(want.chunks_exact(bb)).enumerate() {
                assert_eq!(g, w, "{} {act}: block {i}", b.name());
            }
        }
    }
}

#[test]
fn device_q8_k_quantization_is_the_core_encoder_byte_for_byte() {
    let Some(b) = backend(VulkanOptions::default()) else { return };
    let mut rng = Rng(17);
    let k = 256 * 5;
    let n = 3;
    let mut x = rng.values(n * k);
    // Edge blocks: all zero, tiny (iscale overflows: q = 0, d = -0 * sign), a negative
    // maximum, exact ties of iscale * x (x = max * (j + 0.5) / 127), a repeated largest |x|
    // with both signs (the first one sets the sign), huge values.
    x[256..512].iter_mut().for_each(|v| *v = 0.0);
    x[512..768].iter_mut().for_each(|v| *v = 1e-38);
    x[600] = -3e-37;
    for (j, v) in x[768..1024].iter_mut().enumerate() {
        *v = -((j % 127) as f32 + 0.5) / 127.0;
    }
    x[768] = -1.0;
    x[k + 3] = -50.0;
    x[k + 9] = 50.0;
    x[k + 300..k + 512].iter_mut().for_each(|v| *v *= 1e30);
    let got = ok(b.quantize_q8(FormatId::Q8K, &x, k), "quantize");
    let rb = FormatId::Q8K.row_bytes(k).unwrap();
    let mut want = vec![0u8; rb * n];
    for (col, out) in x.chunks_exact(k).zip(want.chunks_exact_mut(rb)) {
        codec::encode_row(FormatId::Q8K, col, &EncodeOptions::default(), out).unwrap();
    }
    for (i, (g, w)) in got.chunks_exact(292).zip(want.chunks_exact(292)).enumerate() {
        assert_eq!(g, w, "Q8_K block {i}");
    }
}

#[test]
fn device_fwht256_is_the_cores_bit_for_bit() {
    let Some(b) = backend(VulkanOptions::default()) else { return };
    let mut rng = Rng(23);
    let mut x = rng.values(256 * 3);
    x[300] = 1e30;
    x[301] = -3.5e-38;
    let got = ok(b.fwht256(&x), "fwht256");
    for (s, (seg, g)) in x.chunks_exact(256).zip(got.chunks_exact(256)).enumerate() {
        let mut want: [f32; 256] = seg.try_into().unwrap();
        lowbit_core::rotate::fwht256(&mut want);
        for (i, (a, w)) in g.iter().zip(&want).enumerate() {
            assert_eq!(a.to_bits(), w.to_bits(), "segment {s} element {i}: {a} vs {w}");
        }
    }
}

fn check_format(
    b: &lowbit_vulkan::VulkanBackend,
    format: FormatId,
    rows: usize,
    k: usize,
    ns: &[usize],
) {
    let mut rng = Rng(rows as u64 * 1000 + k as u64);
    let w = random_matrix(&mut rng, format, rows, k);
    let desc = MatrixDesc { format, rows, cols: k };
    let m = ok(b.upload(desc, &w), "upload");
    let reference = ReferenceBackend;
    let rm = reference.upload(desc, &w).unwrap();
    for &n in ns {
        let mut x = rng.values(n * k);
        if n > 1 {
            x[k..2 * k].iter_mut().for_each(|v| *v = 0.0);
        }
        let mut y = vec![f32::NAN; n * rows];
        ok(b.matmul(&m, &x, n, &mut y), "matmul");
        let what = format!("{} dot4={} {format} {rows}x{k} n={n}", b.name(), b.uses_dot4());
        let ex = exact(format, &w, rows, k, &x, n);
        assert_within(&what, format, &y, &ex, k);
        let mut yr = vec![0f32; n * rows];
        reference.matmul(&rm, &x, n, &mut yr).unwrap();
        // Both within the bound of the exact value, so within twice it of each other.
        let u = (2f64).powi(-24);
        for (i, ((&g, &r), &(_, mag))) in y.iter().zip(&yr).zip(&ex).enumerate() {
            if mag > f64::from(f32::MAX) && !(g.is_finite() && r.is_finite()) {
                continue; // past f32 (MXFP4's random scales): see assert_within
            }
            let tol = 2.0 * bound_c(format) * k as f64 * u * mag;
            assert!(
                (f64::from(g) - f64::from(r)).abs() <= tol,
                "{what}: output {i}: {g} vs reference {r}"
            );
        }
    }
}

#[test]
fn every_kernel_matches_the_exact_product_on_odd_shapes() {
    for b in backends() {
        for format in FORMATS {
            // Rows of 32, 96, 224, 1024 and 4128 elements, rounded up to the format's
            // multiple (1, 3, 7, 32 and 129 blocks of 32; 1, 1, 1, 4 and 17 of 256).
            for (rows, k32) in [(1, 32usize), (7, 96), (33, 224), (130, 1024), (259, 4128)] {
                let k = k32.next_multiple_of(format.geometry().row_multiple);
                check_format(&b, format, rows, k, &[1, 2, 3, 5, 8]);
            }
            check_format(&b, format, 67, 512, &[13, 16, 17, 33]);
        }
    }
}

#[test]
fn matrices_split_over_several_buffers_give_the_same_results() {
    let Some(whole) = backend(VulkanOptions::default()) else { return };
    let Some(split) =
        backend(VulkanOptions { max_weight_buffer_bytes: Some(8192), ..Default::default() })
    else {
        return;
    };
    let mut rng = Rng(3);
    for format in FORMATS {
        let (rows, k, n) = (301, 1024, 3);
        let w = random_matrix(&mut rng, format, rows, k);
        let desc = MatrixDesc { format, rows, cols: k };
        let mw = ok(whole.upload(desc, &w), "upload");
        let ms = ok(split.upload(desc, &w), "upload split");
        assert_eq!(mw.segments(), 1);
        assert!(ms.segments() > 4, "{format}: {} segments", ms.segments());
        let x = rng.values(n * k);
        let (mut yw, mut ys) = (vec![0f32; n * rows], vec![0f32; n * rows]);
        ok(whole.matmul(&mw, &x, n, &mut yw), "matmul");
        ok(split.matmul(&ms, &x, n, &mut ys), "matmul split");
        assert_eq!(
            yw.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            ys.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{format}: split results differ"
        );
    }
}

#[test]
fn bad_inputs_get_the_cores_errors() {
    let Some(b) = backend(VulkanOptions::default()) else { return };
    let mut rng = Rng(11);
    let (rows, k) = (5, 64);
    let w = random_matrix(&mut rng, FormatId::RocmFp2, rows, k);
    let desc = MatrixDesc { format: FormatId::RocmFp2, rows, cols: k };
    // A bad scale byte in row 3, block 1 (e[0] at byte 8 of the block).
    let mut bad = w.clone();
    let off = 3 * 20 + 10 + 8;
    bad[off] = 0xFF;
    match b.upload(desc, &bad) {
        Err(VulkanError::Core(Error::IllegalByte { offset, .. })) => assert_eq!(offset, off),
        other => panic!("expected IllegalByte at {off}, got {other:?}"),
    }
    assert!(matches!(b.upload(desc, &w[1..]), Err(VulkanError::Core(Error::Length { .. }))));
    let m = ok(b.upload(desc, &w), "upload");
    let mut x = rng.values(2 * k);
    x[k + 17] = f32::NAN;
    let mut y = vec![0f32; 2 * rows];
    let cpu_like = ReferenceBackend.upload(desc, &w).unwrap();
    let want = ReferenceBackend.matmul(&cpu_like, &x[k..], 1, &mut y[..rows]).unwrap_err();
    match b.matmul(&m, &x, 2, &mut y) {
        Err(VulkanError::Core(Error::BadInput { index, .. })) => {
            assert_eq!(index, k + 17, "reference said {want:?}")
        }
        other => panic!("expected BadInput, got {other:?}"),
    }
    // Q8_1's s = f16(sum q * d) overflows for a block of large values: the core's error.
    let w1 = random_matrix(&mut rng, FormatId::Q4_1, rows, k);
    let d1 = MatrixDesc { format: FormatId::Q4_1, rows, cols: k };
    let m1 = ok(b.upload(d1, &w1), "upload Q4_1");
    let mut xb = rng.values(2 * k);
    xb[k + 32..k + 64].iter_mut().for_each(|v| *v = 3000.0);
    let r1 = ReferenceBackend.upload(d1, &w1).unwrap();
    let want = ReferenceBackend.matmul(&r1, &xb[k..], 1, &mut y[..rows]).unwrap_err();
    match (b.matmul(&m1, &xb, 2, &mut y), want) {
        (
            Err(VulkanError::Core(Error::OutOfRange { index, .. })),
            Error::OutOfRange { index: wi, .. },
        ) => assert_eq!(index, k + wi),
        (got, want) => panic!("expected OutOfRange like the reference's {want:?}, got {got:?}"),
    }
    assert!(matches!(
        b.matmul(&m, &x[1..], 2, &mut y),
        Err(VulkanError::Core(Error::Length { .. }))
    ));
    assert!(matches!(
        b.upload(MatrixDesc { format: FormatId::Q2K, rows: 1, cols: 256 }, &[0; 84]),
        Err(VulkanError::Unsupported { .. })
    ));
}

#[test]
fn pipelines_stay_bounded_across_many_column_counts() {
    let Some(b) = backend(VulkanOptions::default()) else { return };
    let mut rng = Rng(5);
    let (rows, k) = (40, 256);
    let w = random_matrix(&mut rng, FormatId::Q8_0, rows, k);
    let m = ok(b.upload(MatrixDesc { format: FormatId::Q8_0, rows, cols: k }, &w), "upload");
    for n in 1..=40 {
        let x = rng.values(n * k);
        let mut y = vec![0f32; n * rows];
        ok(b.matmul(&m, &x, n, &mut y), "matmul");
    }
    let (created, held) = b.pipeline_counts();
    // One quantizer and five column tiers, whatever the column counts were, and the partial
    // sums' adder (sum_parts.wgsl) where Q8_0's tiled default splits K (since session 13).
    let k_split = lowbit_vulkan::kernels::default_tile_shape(FormatId::Q8_0).2 > 1;
    let bound = 6 + u64::from(k_split);
    assert!(created <= bound, "{created} pipelines created, at most {bound} expected");
    assert!(held <= MAX_PIPELINES);
}

#[test]
fn every_compiled_kernel_shape_matches_the_exact_product() {
    // The default dot-product path only (the other one is covered on the default shapes).
    if let Some(b) = backend(VulkanOptions::default()) {
        for format in FORMATS {
            let shader = lowbit_vulkan::kernels::matmul_shader(format).unwrap();
            for (ncols, n) in [(1, 1), (2, 2), (4, 3), (8, 7), (16, 13)] {
                for shape in lowbit_vulkan::kernels::shapes(shader, ncols) {
                    ok(b.set_shape(Some(shape)), "set_shape");
                    check_format(&b, format, 37, 5 * format.geometry().row_multiple, &[n]);
                }
            }
            ok(b.set_shape(None), "set_shape");
        }
    }
}

#[test]
fn the_disk_pipeline_cache_is_written_reused_and_survives_corruption() {
    if std::env::var("LOWBIT_VK_PIPELINE_CACHE").as_deref() == Ok("0") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("lowbit-vk-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = || VulkanOptions { pipeline_cache_dir: Some(dir.clone()), ..Default::default() };
    let run = |b: &lowbit_vulkan::VulkanBackend| {
        let mut rng = Rng(9);
        let w = random_matrix(&mut rng, FormatId::Q8_0, 8, 64);
        let m = ok(b.upload(MatrixDesc { format: FormatId::Q8_0, rows: 8, cols: 64 }, &w), "up");
        let x = rng.values(64);
        let mut y = vec![0f32; 8];
        ok(b.matmul(&m, &x, 1, &mut y), "matmul");
        y
    };
    let Some(b) = backend(opts()) else { return };
    assert_eq!(b.pipeline_cache_loaded_bytes(), 0);
    let y0 = run(&b);
    drop(b);
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let b = backend(opts()).unwrap();
    assert!(b.pipeline_cache_loaded_bytes() > 0, "cache file not reused");
    assert_eq!(run(&b), y0);
    drop(b);
    // A corrupt file is ignored, not fed to the driver.
    let mut raw = std::fs::read(&files[0]).unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 0xFF;
    std::fs::write(&files[0], &raw).unwrap();
    let b = backend(opts()).unwrap();
    assert_eq!(b.pipeline_cache_loaded_bytes(), 0);
    assert_eq!(run(&b), y0);
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn staged_kernels_serve_three_or_more_columns_of_their_formats_only() {
    use lowbit_vulkan::kernels::{cols_shader, staged_shader, tile_default, tile_shader};
    let Some(b) = backend(VulkanOptions::default()) else { return };
    let Some(off) = backend(VulkanOptions { staged: Some(false), ..Default::default() }) else {
        return;
    };
    let roomy = b.info().max_shared_bytes >= lowbit_vulkan::kernels::EXTRA_SHARED_BYTES;
    for format in FORMATS {
        for n in [1, 2, 3, 4, 8, 13, 16, 40] {
            let (_, shader) = ok(b.kernel_for(format, n), "kernel_for");
            // The 4-, 8- and 16-column variants: calls of 3 or more columns.
            let want = roomy && n >= 3 && staged_shader(format).is_some();
            // The column-split kernel takes the 8-column variant where the format has one.
            let eight = roomy && (5..=8).contains(&n);
            let tiled = eight && tile_shader(format).is_some() && tile_default(format);
            let split = eight && !tiled && cols_shader(format).is_some();
            assert_eq!(
                shader.ends_with("_s"),
                want && !split && !tiled,
                "{format} n = {n}: {shader}"
            );
            assert_eq!(shader.ends_with("_c"), split, "{format} n = {n}: {shader}");
            assert_eq!(shader.ends_with("_t"), tiled, "{format} n = {n}: {shader}");
            let (_, shader) = ok(off.kernel_for(format, n), "kernel_for");
            assert!(!shader.ends_with("_s"), "{format} n = {n}: {shader} with staging off");
        }
    }
}

#[test]
fn column_split_kernels_match_the_exact_product_on_odd_shapes() {
    use lowbit_vulkan::kernels::{cols_shader, shapes};
    for (cols, dot4) in [(None, None), (Some(true), Some(false)), (Some(false), None)] {
        let opts = VulkanOptions { cols, dot4, tile: Some(false), ..Default::default() };
        let Some(b) = backend(opts) else { return };
        let roomy = b.info().max_shared_bytes >= lowbit_vulkan::kernels::EXTRA_SHARED_BYTES;
        let on = cols != Some(false) && roomy;
        for format in FORMATS {
            for n in [1, 2, 3, 4, 5, 8, 9, 13] {
                let (_, shader) = ok(b.kernel_for(format, n), "kernel_for");
                let want = on && (5..=8).contains(&n) && cols_shader(format).is_some();
                assert_eq!(shader.ends_with("_c"), want, "{format} n = {n}: {shader}");
            }
            let Some(shader) = cols_shader(format).filter(|_| on) else { continue };
            let rm = format.geometry().row_multiple;
            // Every shape on an odd matrix; the default also on longer and shorter rows.
            for shape in shapes(shader, 8) {
                ok(b.set_shape(Some(shape)), "set_shape");
                check_format(&b, format, 37, 5 * rm, &[5, 8]);
            }
            ok(b.set_shape(None), "set_shape");
            for (rows, k32) in [(1, 32usize), (33, 224), (259, 4128)] {
                check_format(&b, format, rows, k32.next_multiple_of(rm), &[6, 7, 8]);
            }
            // A 16-column tile, then a column-split 8-column one from column 16.
            check_format(&b, format, 33, 9 * rm, &[21]);
        }
    }
}

#[test]
fn tiled_kernels_match_the_exact_product_on_odd_shapes() {
    use lowbit_vulkan::kernels::{shapes, tile_shader};
    for (tile, dot4) in [(Some(true), None), (Some(true), Some(false)), (Some(false), None)] {
        let opts = VulkanOptions { tile, dot4, ..Default::default() };
        let Some(b) = backend(opts) else { return };
        let roomy = b.info().max_shared_bytes >= lowbit_vulkan::kernels::EXTRA_SHARED_BYTES;
        let on = tile == Some(true) && roomy;
        for format in FORMATS {
            for n in [1, 2, 3, 4, 5, 8, 9, 13] {
                let (_, shader) = ok(b.kernel_for(format, n), "kernel_for");
                let want = on && (5..=8).contains(&n) && tile_shader(format).is_some();
                assert_eq!(shader.ends_with("_t"), want, "{format} n = {n}: {shader}");
            }
            let Some(shader) = tile_shader(format).filter(|_| on) else { continue };
            let rm = format.geometry().row_multiple;
            // Every shape on an odd matrix (rows not a multiple of a workgroup's, a chunk
            // cut short); the default also on longer and shorter rows.
            for shape in shapes(shader, 8) {
                ok(b.set_shape(Some(shape)), "set_shape");
                check_format(&b, format, 37, 5 * rm, &[5, 8]);
                check_format(&b, format, 70, 41 * rm, &[7]);
            }
            ok(b.set_shape(None), "set_shape");
            for (rows, k32) in [(1, 32usize), (33, 224), (259, 4128)] {
                check_format(&b, format, rows, k32.next_multiple_of(rm), &[6, 7, 8]);
            }
            // A 16-column tile, then an 8-column tiled one from column 16.
            check_format(&b, format, 33, 9 * rm, &[21]);
        }
    }
    // A matrix in several buffers (segments: partial sums at each segment's row offset).
    let opts = VulkanOptions {
        tile: Some(true),
        max_weight_buffer_bytes: Some(8192),
        ..Default::default()
    };
    let Some(b) = backend(opts) else { return };
    if b.info().max_shared_bytes < lowbit_vulkan::kernels::EXTRA_SHARED_BYTES {
        return;
    }
    for format in FORMATS {
        let Some(shader) = lowbit_vulkan::kernels::tile_shader(format) else { continue };
        for shape in lowbit_vulkan::kernels::shapes(shader, 8) {
            ok(b.set_shape(Some(shape)), "set_shape");
            check_format(&b, format, 301, 1024, &[7, 21]);
        }
        ok(b.set_shape(None), "set_shape");
    }
}

#[test]
fn tiled_epilogues_give_the_same_bits() {
    use lowbit_vulkan::kernels::{default_tile_shape, shapes, tile_rolled_shader, tile_shader};
    // The rolled (tile_sum_r.wgsl) and constant-index (tile_sum_c.wgsl) final sums are the
    // same sums in the same order: every shape, both dot product paths, bit for bit.
    for dot4 in [None, Some(false)] {
        let opts = |rolled| VulkanOptions {
            tile: Some(true),
            tile_rolled: Some(rolled),
            dot4,
            ..Default::default()
        };
        let (Some(r), Some(c)) = (backend(opts(true)), backend(opts(false))) else { return };
        if r.info().max_shared_bytes < lowbit_vulkan::kernels::EXTRA_SHARED_BYTES {
            return;
        }
        for format in FORMATS {
            let Some(rolled) = tile_rolled_shader(format) else { continue };
            let constant = tile_shader(format).expect("a rolled tiled kernel has a constant one");
            assert_eq!(ok(r.kernel_for(format, 8), "kernel_for").1, rolled);
            assert_eq!(ok(c.kernel_for(format, 8), "kernel_for").1, constant);
            assert_eq!(shapes(rolled, 8), shapes(constant, 8), "{format}");
            let rm = format.geometry().row_multiple;
            let (rows, k, n) = (37, 41 * rm, 7);
            let mut rng = Rng(rows as u64 * 7 + k as u64);
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let x = rng.values(n * k);
            let (mr, mc) = (ok(r.upload(desc, &w), "upload"), ok(c.upload(desc, &w), "upload"));
            // Every shape on the default path; the default shape on the other.
            let all = shapes(constant, 8);
            let some = if dot4.is_none() { all } else { vec![default_tile_shape(format)] };
            for shape in some {
                ok(r.set_shape(Some(shape)), "set_shape");
                ok(c.set_shape(Some(shape)), "set_shape");
                let (mut yr, mut yc) = (vec![f32::NAN; n * rows], vec![0f32; n * rows]);
                ok(r.matmul(&mr, &x, n, &mut yr), "matmul");
                ok(c.matmul(&mc, &x, n, &mut yc), "matmul");
                for (i, (a, b)) in yr.iter().zip(&yc).enumerate() {
                    assert_eq!(a.to_bits(), b.to_bits(), "{format} {shape:?} output {i}");
                }
            }
        }
    }
}

#[test]
fn rotated_load_kernels_give_the_same_bits() {
    use lowbit_vulkan::kernels::{default_shape, matmul_shader, rotated_shader, shapes};
    // mm_body.wgsl's rotated loads (`*_o`) change when a block's words are loaded, not the
    // sums: every shape, both dot product paths, bit for bit against the plain 1-column
    // kernel, on a matrix whose rows are not a whole number of steps.
    for dot4 in [None, Some(false)] {
        let opts = |rotate| VulkanOptions { rotate: Some(rotate), dot4, ..Default::default() };
        let (Some(o), Some(p)) = (backend(opts(true)), backend(opts(false))) else { return };
        for format in FORMATS {
            let Some(rotated) = rotated_shader(format) else { continue };
            let plain = matmul_shader(format).expect("a rotated kernel has a plain one");
            assert_eq!(ok(o.kernel_for(format, 1), "kernel_for").1, rotated);
            assert_eq!(ok(p.kernel_for(format, 1), "kernel_for").1, plain);
            assert_eq!(shapes(rotated, 1), shapes(plain, 1), "{format}");
            let rm = format.geometry().row_multiple;
            let (rows, k) = (37, 41 * rm);
            let mut rng = Rng(rows as u64 * 11 + k as u64);
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let x = rng.values(k);
            let (mo, mp) = (ok(o.upload(desc, &w), "upload"), ok(p.upload(desc, &w), "upload"));
            // Every shape on the default path; the default shape on the other.
            let all = shapes(plain, 1);
            let some = if dot4.is_none() { all } else { vec![default_shape(format, 1)] };
            for shape in some {
                ok(o.set_shape(Some(shape)), "set_shape");
                ok(p.set_shape(Some(shape)), "set_shape");
                let (mut yo, mut yp) = (vec![f32::NAN; rows], vec![0f32; rows]);
                ok(o.matmul(&mo, &x, 1, &mut yo), "matmul");
                ok(p.matmul(&mp, &x, 1, &mut yp), "matmul");
                for (i, (a, b)) in yo.iter().zip(&yp).enumerate() {
                    assert_eq!(a.to_bits(), b.to_bits(), "{format} {shape:?} output {i}");
                }
            }
            // And within the bound of the exact product on odd shapes.
            ok(o.set_shape(None), "set_shape");
            for (rows, k32) in [(1, 32usize), (33, 224)] {
                check_format(&o, format, rows, k32.next_multiple_of(rm), &[1]);
            }
        }
    }
}
