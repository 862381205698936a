//! Shared test helpers: the backend or a skip, a deterministic RNG, random valid matrices, and
//! the exact (f64) product with its accumulation bound.

#![allow(dead_code)]

use lowbit_core::backend::PreparedActivations;
use lowbit_core::codec;
use lowbit_core::FormatId;
use lowbit_vulkan::{VulkanBackend, VulkanError, VulkanOptions};

/// The backend with `opts`, or `None` (with a message) when this machine has no usable Vulkan
/// device. With `LOWBIT_REQUIRE_VULKAN=1` (CI) a missing device fails the test instead.
pub fn backend(opts: VulkanOptions) -> Option<VulkanBackend> {
    match VulkanBackend::with_options(opts) {
        Ok(b) => Some(b),
        Err(e) if e.is_unavailable() => {
            if std::env::var("LOWBIT_REQUIRE_VULKAN").as_deref() == Ok("1") {
                panic!("LOWBIT_REQUIRE_VULKAN=1 but {e}");
            }
            eprintln!(
                "skipped: no usable Vulkan device ({e}); LOWBIT_REQUIRE_VULKAN=1 fails instead"
            );
            None
        }
        Err(e) => panic!("Vulkan backend failed to start: {e}"),
    }
}

/// Backends to test: the default (fused 1-column kernels off, staged kernels for 4+ columns,
/// the eight-threads-a-block Q8_0 quantizer), plus one with the fused kernels on, the staged
/// ones off and the one-thread-a-block quantizer, on the other dot-product path where the
/// device has both.
pub fn backends() -> Vec<VulkanBackend> {
    let Some(b) = backend(VulkanOptions::default()) else { return Vec::new() };
    let mut out = Vec::new();
    let other = if b.info().dot4_supported { Some(!b.uses_dot4()) } else { None };
    out.push(b);
    out.extend(backend(VulkanOptions {
        dot4: other,
        fused: Some(true),
        quant_wide: Some(false),
        staged: Some(false),
        ..Default::default()
    }));
    out
}

// The deterministic RNG and the random valid matrices are the CPU backend's test helpers.
#[path = "../../../cpu/tests/common/mod.rs"]
mod cpu_common;
pub use cpu_common::{random_matrix, Rng};

/// The decoded activations a format's dot product sees for one column (rotated and
/// quantized with the core's reference encoder, then decoded; exact).
pub fn decoded_acts(format: FormatId, x: &[f32]) -> Vec<f32> {
    match PreparedActivations::new(format, x).unwrap() {
        PreparedActivations::F32(v) => v,
        PreparedActivations::Q8_0(a) => {
            let mut out = vec![0f32; x.len()];
            codec::decode_row(FormatId::Q8_0, bytemuck::cast_slice(&a), &mut out).unwrap();
            out
        }
        PreparedActivations::Q8_1(a) => {
            let mut out = vec![0f32; x.len()];
            codec::decode_row(FormatId::Q8_1, bytemuck::cast_slice(&a), &mut out).unwrap();
            out
        }
        PreparedActivations::Q8K(a) => {
            let mut out = vec![0f32; x.len()];
            codec::decode_row(FormatId::Q8K, bytemuck::cast_slice(&a), &mut out).unwrap();
            out
        }
    }
}

/// Q4_1 x Q8_1 per ggml: per block `d_w d_a sum(q_w q_a) + m_w s_a` (s_a = the stored
/// f16(d sum q), not m_w times the decoded activations): exact f64 value and magnitude sum.
fn exact_q4_1(w: &[u8], rows: usize, k: usize, x: &[f32], n: usize) -> Vec<(f64, f64)> {
    use lowbit_core::backend::PreparedActivations as P;
    let rb = FormatId::Q4_1.row_bytes(k).unwrap();
    let mut out = Vec::with_capacity(n * rows);
    for j in 0..n {
        let P::Q8_1(a) = P::new(FormatId::Q4_1, &x[j * k..(j + 1) * k]).unwrap() else {
            panic!("Q4_1 takes Q8_1 activations")
        };
        for r in 0..rows {
            let (mut s, mut m) = (0f64, 0f64);
            for (i, ab) in a.iter().enumerate() {
                let blk = &w[r * rb + i * 20..r * rb + i * 20 + 20];
                let dw = f64::from(half::f16::from_le_bytes([blk[0], blk[1]]).to_f32());
                let mw = f64::from(half::f16::from_le_bytes([blk[2], blk[3]]).to_f32());
                let da = f64::from(ab.d.to_f32());
                for (jj, &qa) in ab.qs.iter().enumerate() {
                    let q = f64::from((blk[4 + jj % 16] >> (4 * (jj / 16))) & 15);
                    let t = dw * da * q * f64::from(qa);
                    s += t;
                    m += t.abs();
                }
                let t = mw * f64::from(ab.s.to_f32());
                s += t;
                m += t.abs();
            }
            out.push((s, m));
        }
    }
    out
}

/// For every output: the exact f64 value and `sum |w_i a_i|` over the decoded data (Q4_1:
/// see [`exact_q4_1`]).
pub fn exact(
    format: FormatId,
    w: &[u8],
    rows: usize,
    k: usize,
    x: &[f32],
    n: usize,
) -> Vec<(f64, f64)> {
    if format == FormatId::Q4_1 {
        return exact_q4_1(w, rows, k, x, n);
    }
    let rb = format.row_bytes(k).unwrap();
    let mut wd = vec![0f64; rows * k];
    for r in 0..rows {
        decode_f64(format, &w[r * rb..(r + 1) * rb], &mut wd[r * k..(r + 1) * k]);
    }
    let mut out = Vec::with_capacity(n * rows);
    for j in 0..n {
        let a = decoded_acts(format, &x[j * k..(j + 1) * k]);
        for r in 0..rows {
            let (mut s, mut m) = (0f64, 0f64);
            for (wi, ai) in wd[r * k..(r + 1) * k].iter().zip(&a) {
                let t = *wi * f64::from(*ai);
                s += t;
                m += t.abs();
            }
            out.push((s, m));
        }
    }
    out
}

/// One row decoded exactly: with the core's f32 decoder (the stored, rotated weights for
/// MFP4G32 / MFP4G32P), except MXFP4, whose random scales
/// (up to 2^126, times 12) pass f32 and are decoded in f64 here (kvalues * 2^(e - 128), as
/// ggml's `kvalues_mxfp4` and halved UE8M0 scale).
fn decode_f64(format: FormatId, row: &[u8], out: &mut [f64]) {
    if format == FormatId::Mxfp4 {
        const KV: [f64; 16] =
            [0., 1., 2., 3., 4., 6., 8., 12., 0., -1., -2., -3., -4., -6., -8., -12.];
        for (blk, o) in row.chunks_exact(17).zip(out.chunks_exact_mut(32)) {
            let d = 2f64.powi(i32::from(blk[0]) - 128);
            for j in 0..16 {
                o[j] = KV[usize::from(blk[1 + j] & 15)] * d;
                o[j + 16] = KV[usize::from(blk[1 + j] >> 4)] * d;
            }
        }
        return;
    }
    let mut f = vec![0f32; out.len()];
    if format.info().rotation == lowbit_core::registry::Rotation::None {
        codec::decode_row(format, row, &mut f).unwrap();
    } else {
        // Rotated formats: the kernels multiply the stored (rotated) weights with rotated
        // activations, so the exact sum is taken in the rotated domain too.
        lowbit_core::format::hipfire::decode_row_stored(format, row, &mut f).unwrap();
    }
    out.iter_mut().zip(&f).for_each(|(o, v)| *o = f64::from(*v));
}

/// The accumulation-bound constant c of the backend's kernels for `format` (lib.rs).
pub fn bound_c(format: FormatId) -> f64 {
    if matches!(format, FormatId::Hfp4G32 | FormatId::Mfp4G32 | FormatId::Mfp4G32P) {
        2.0
    } else {
        1.0
    }
}

/// Asserts that `y` is within `c * k * 2^-24 * sum|w a|` of the exact products.
pub fn assert_within(what: &str, format: FormatId, y: &[f32], ex: &[(f64, f64)], k: usize) {
    let u = (2f64).powi(-24);
    for (i, (&g, &(e, m))) in y.iter().zip(ex).enumerate() {
        if m > f64::from(f32::MAX) && !g.is_finite() {
            // sum|terms| is past f32 (MXFP4's random 2^126 scales): a partial sum may
            // overflow, so a non-finite result is accepted; a finite one must meet the bound.
            continue;
        }
        let tol = bound_c(format) * k as f64 * u * m;
        assert!(
            (f64::from(g) - e).abs() <= tol,
            "{what}: output {i}: got {g}, exact {e}, |diff| {} > bound {tol}",
            (f64::from(g) - e).abs()
        );
    }
}

/// Unwraps a result, turning a device error into a clear panic.
pub fn ok<T>(r: Result<T, VulkanError>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}
