//! Activation preparation: every column of `x` rotated (for rotated formats) and quantized into
//! the format's activation format once per matmul call, then shared by every row and thread.
//!
//! Quantization calls the core's reference encoders ([`codec::encode_row`]), so the bytes are
//! exactly those [`lowbit_core::backend::PreparedActivations`] holds (a test checks this);
//! the cost is K values per column, negligible next to the weights. For Q8_0 the block scales
//! are also widened to f32 once here, so kernels do not convert f16 per row.
//!
//! What must not live here: kernels, threads beyond the per-column split.

use bytemuck::Zeroable;
use lowbit_core::codec::{self, ActRow, EncodeOptions};
use lowbit_core::format::ggml::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use lowbit_core::registry::{ActFormat, Rotation};
use lowbit_core::{Error, FormatId};
use rayon::prelude::*;

/// Prepared activations of `n` columns of `k` elements each.
#[derive(Clone, Debug)]
pub struct Acts {
    /// Elements per column.
    pub k: usize,
    /// Columns.
    pub n: usize,
    /// The data, column after column.
    pub data: ActData,
    /// A kernel's own layout of `data` for every column, built once per matmul call by the
    /// kernel's `PrepFn` (`kernels::Extras`); kernels that find none build their own.
    pub(crate) layout: Option<Layout>,
}

/// A kernel-specific activation layout (type-erased; the kernel that built it downcasts it).
#[derive(Clone)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct Layout(pub std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Layout(..)")
    }
}

/// The prepared data, one variant per activation format.
#[derive(Clone, Debug)]
pub enum ActData {
    /// f32 (rotated where the format needs it).
    F32(Vec<f32>),
    /// Q8_0 blocks and their scales as f32.
    Q8_0 {
        /// Blocks, `k / 32` per column.
        blocks: Vec<BlockQ8_0>,
        /// `blocks[i].d` widened to f32.
        d: Vec<f32>,
    },
    /// Q8_1 blocks.
    Q8_1(Vec<BlockQ8_1>),
    /// Q8_K blocks.
    Q8K(Vec<BlockQ8K>),
}

fn first_error(results: Vec<Result<(), Error>>) -> Result<(), Error> {
    results.into_iter().collect()
}

/// Quantizes every column of `src` (columns of `k`) into `dst` (`per` blocks per column) with
/// the core's reference encoder for `act`; the first failing column (lowest index) wins, its
/// element index shifted to a position in `src`.
fn encode_cols<B: bytemuck::Pod + Send>(
    act: FormatId,
    src: &[f32],
    k: usize,
    per: usize,
    dst: &mut [B],
) -> Result<(), Error> {
    let opts = EncodeOptions::default();
    let res: Vec<Result<(), Error>> = src
        .par_chunks_exact(k)
        .zip(dst.par_chunks_exact_mut(per))
        .enumerate()
        .map(|(j, (x, out))| {
            let out: &mut [u8] = bytemuck::cast_slice_mut(out);
            let fast = fast_bodies();
            if act == FormatId::Q8_0 && (fast.q8_0)(x, bytemuck::cast_slice_mut(out)) {
                return Ok(());
            }
            if act == FormatId::Q8K && (fast.q8_k)(x, bytemuck::cast_slice_mut(out)) {
                return Ok(());
            }
            if act == FormatId::Q8_1 && (fast.q8_1)(x, bytemuck::cast_slice_mut(out)) {
                return Ok(());
            }
            codec::encode_row(act, x, &opts, out).map_err(|e| e.at_element(j * k))
        })
        .collect();
    first_error(res)
}

/// The fast Q8_0 / Q8_1 column encoders: [`q8_0_fast`] and [`q8_1_fast`] compiled for the
/// selected instruction set (the same operations, so the same bytes; wider vectors), chosen
/// once per process like `crate::vecops`.
pub(crate) struct FastBodies {
    pub q8_0: fn(&[f32], &mut [BlockQ8_0]) -> bool,
    pub q8_1: fn(&[f32], &mut [BlockQ8_1]) -> bool,
    pub q8_k: fn(&[f32], &mut [BlockQ8K]) -> bool,
}

static FAST: std::sync::OnceLock<FastBodies> = std::sync::OnceLock::new();

fn fast_bodies() -> &'static FastBodies {
    FAST.get_or_init(|| {
        let isa = crate::isa::selected().unwrap_or(crate::isa::Isa::Scalar);
        #[cfg(target_arch = "x86_64")]
        if let Some(b) = crate::x86::vecops::act_bodies(isa) {
            return b;
        }
        let _ = isa;
        FastBodies { q8_0: q8_0_fast, q8_1: q8_1_fast, q8_k: q8_k_fast }
    })
}

/// C's `roundf` (half away from zero) for `|v| < 2^23`, without libm: `t = trunc(v)` (the
/// cast) and `v - t` are exact there (Sterbenz: `|t|` lies in `[|v| / 2, |v|]` or `t = 0`).
#[inline(always)]
fn round_away(v: f32) -> i32 {
    let t = v as i32;
    let f = v - t as f32;
    t + i32::from(f >= 0.5) - i32::from(f <= -0.5)
}

/// `d = amax / 127` of one block of 32 finite values and `1 / d` (0 when `d = 0`), as ggml's
/// `quantize_row_q8_{0,1}_ref`: the maximum is taken 8 lanes wide (exact, so equal to the
/// sequential one) so the loop vectorizes.
#[inline(always)]
fn q8_scale(xb: &[f32]) -> (f32, f32) {
    let mut m = [0f32; 8];
    for c in xb.chunks_exact(8) {
        for (mi, v) in m.iter_mut().zip(c) {
            let a = v.abs();
            *mi = if *mi > a { *mi } else { a };
        }
    }
    let amax = m.iter().fold(0f32, |a, &v| if a > v { a } else { v });
    let d = amax / 127.0;
    (d, if d != 0.0 { 1.0 / d } else { 0.0 })
}

/// Q8_0 blocks of one column, byte for byte what the core's `BlockQ8_0::encode` (ggml's
/// `quantize_row_q8_0_ref`) gives: `d = amax / 127`, `q = roundf(x * (1 / d))` (0 when
/// `d = 0`), `d` stored as f16 (nearest even). Here `|x * (1 / d)| <= 127 * (1 + 2^-22)`, so
/// [`round_away`] is exact. Returns `false` (and the caller runs the core encoder, which
/// reports the error) when an element is not finite or a scale overflows f16.
#[inline(always)]
pub(crate) fn q8_0_fast(x: &[f32], out: &mut [BlockQ8_0]) -> bool {
    // Branch-free loops (they vectorize): a finite check over all of `x`, then per block an
    // 8-way maximum (exact, so equal to the sequential one), the scale and the rounding.
    if x.len() != out.len() * 32 || !x.iter().fold(true, |ok, v| ok & v.is_finite()) {
        return false;
    }
    for (xb, ob) in x.chunks_exact(32).zip(out) {
        let (d, id) = q8_scale(xb);
        let h = half::f16::from_f32(d);
        if !h.is_finite() {
            return false;
        }
        ob.d = h;
        for (q, v) in ob.qs.iter_mut().zip(xb) {
            *q = round_away(v * id) as i8;
        }
    }
    true
}

/// Q8_K blocks of one column, byte for byte what the core's `BlockQ8K::encode` (ggml's
/// `quantize_row_q8_K_ref`) gives: `max` = the first element of largest magnitude, `iscale =
/// -127 / max`, `q = min(127, nearest_int(iscale * x))` (ggml's magic-number rounding, ties to
/// even), `bsums` per 16, `d = 1 / iscale`; an all-zero block stays zero. The largest
/// magnitude is taken 8 lanes wide (exact), then the first element reaching it is found, so
/// the loops vectorize. Returns `false` (and the caller runs the core encoder, which reports
/// the error or handles the case) when an element is not finite or `iscale` overflows.
#[inline(always)]
pub(crate) fn q8_k_fast(x: &[f32], out: &mut [BlockQ8K]) -> bool {
    if x.len() != out.len() * 256 || !x.iter().fold(true, |ok, v| ok & v.is_finite()) {
        return false;
    }
    for (xb, ob) in x.chunks_exact(256).zip(out) {
        let mut m = [0f32; 8];
        for c in xb.chunks_exact(8) {
            for (mi, v) in m.iter_mut().zip(c) {
                let a = v.abs();
                *mi = if *mi > a { *mi } else { a };
            }
        }
        let amax = m.iter().fold(0f32, |a, &v| if a > v { a } else { v });
        *ob = BlockQ8K::zeroed();
        if amax == 0.0 {
            continue;
        }
        let Some(&max) = xb.iter().find(|v| v.abs() == amax) else { return false };
        let iscale = -127.0 / max;
        if !iscale.is_finite() {
            return false;
        }
        for (q, &v) in ob.qs.iter_mut().zip(xb) {
            let t = iscale * v + 12_582_912.0;
            let n = (t.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000;
            *q = n.min(127) as i8;
        }
        for (s, qs) in ob.bsums.iter_mut().zip(ob.qs.chunks_exact(16)) {
            *s = qs.iter().map(|&q| i16::from(q)).sum();
        }
        ob.d = 1.0 / iscale;
    }
    true
}

/// Q8_1 blocks of one column, byte for byte what the core's `BlockQ8_1::encode` (ggml's
/// `quantize_row_q8_1_ref`) gives: the Q8_0 rule for `d` and `q` (see [`q8_0_fast`]), plus
/// `s = f16((float)sum(q) * d)` with the exact integer sum and the f32 `d` before rounding.
/// Returns `false` (and the caller runs the core encoder, which reports the error) when an
/// element is not finite or `d` or `s` overflows f16.
#[inline(always)]
pub(crate) fn q8_1_fast(x: &[f32], out: &mut [BlockQ8_1]) -> bool {
    if x.len() != out.len() * 32 || !x.iter().fold(true, |ok, v| ok & v.is_finite()) {
        return false;
    }
    for (xb, ob) in x.chunks_exact(32).zip(out) {
        let (d, id) = q8_scale(xb);
        let mut sum = 0i32;
        for (q, v) in ob.qs.iter_mut().zip(xb) {
            let r = round_away(v * id);
            *q = r as i8;
            sum += r;
        }
        let (hd, hs) = (half::f16::from_f32(d), half::f16::from_f32(sum as f32 * d));
        if !hd.is_finite() || !hs.is_finite() {
            return false;
        }
        ob.d = hd;
        ob.s = hs;
    }
    true
}

impl Acts {
    /// Rotates and quantizes the `n` columns of `x` (`x.len() == n * k`) for `format`.
    /// Errors: [`Error::BadInput`] for a NaN/inf element (index into `x`),
    /// [`Error::OutOfRange`] for a block whose scale overflows f16 (Q8_0/Q8_1).
    pub fn prepare(format: FormatId, x: &[f32], n: usize, k: usize) -> Result<Self, Error> {
        let info = format.info();
        let rotated;
        let src: &[f32] = if info.rotation == Rotation::Fwht256 {
            if k % 256 != 0 {
                return Err(Error::RowLength { format, k, multiple_of: 256 });
            }
            let mut v = x.to_vec();
            v.par_chunks_exact_mut(256).for_each(|seg| {
                if let Ok(seg) = <&mut [f32; 256]>::try_from(seg) {
                    lowbit_core::rotate::fwht256(seg);
                }
            });
            rotated = v;
            &rotated
        } else {
            x
        };
        let data = match info.activation {
            ActFormat::F32 => ActData::F32(src.to_vec()),
            ActFormat::Q8_0 => {
                let per = k / 32;
                let mut blocks = vec![BlockQ8_0::zeroed(); per * n];
                encode_cols(FormatId::Q8_0, src, k, per, &mut blocks)?;
                let d = blocks.iter().map(|b| b.d.to_f32()).collect();
                ActData::Q8_0 { blocks, d }
            }
            ActFormat::Q8_1 => {
                let per = k / 32;
                let mut blocks = vec![BlockQ8_1::zeroed(); per * n];
                encode_cols(FormatId::Q8_1, src, k, per, &mut blocks)?;
                ActData::Q8_1(blocks)
            }
            ActFormat::Q8K => {
                let per = k / 256;
                let mut blocks = vec![BlockQ8K::zeroed(); per * n];
                encode_cols(FormatId::Q8K, src, k, per, &mut blocks)?;
                ActData::Q8K(blocks)
            }
        };
        Ok(Acts { k, n, data, layout: None })
    }

    /// Column `j` as the core's [`ActRow`].
    pub fn row(&self, j: usize) -> ActRow<'_> {
        let k = self.k;
        match &self.data {
            ActData::F32(v) => ActRow::F32(&v[j * k..(j + 1) * k]),
            ActData::Q8_0 { blocks, .. } => ActRow::Q8_0(&blocks[j * k / 32..(j + 1) * k / 32]),
            ActData::Q8_1(b) => ActRow::Q8_1(&b[j * k / 32..(j + 1) * k / 32]),
            ActData::Q8K(b) => ActRow::Q8K(&b[j * k / 256..(j + 1) * k / 256]),
        }
    }
}

#[cfg(test)]
mod tests {
    use lowbit_core::backend::PreparedActivations;

    use super::*;

    /// The libm-free rounding equals `f32::round` (half away from zero) on every tie, its
    /// neighbours and a dense sweep of the Q8_0 range.
    #[test]
    fn round_away_is_roundf() {
        let mut vals = Vec::new();
        for i in -300..=300 {
            let t = i as f32 * 0.5;
            vals.extend([
                t,
                f32::from_bits(t.to_bits().wrapping_add(1)),
                f32::from_bits(t.to_bits().wrapping_sub(1)),
            ]);
            if t == 0.0 {
                vals.extend([f32::from_bits(1), -f32::from_bits(1)]);
            }
        }
        vals.extend((0..200_000).map(|i| (i as f32 - 100_000.0) * 0.00129));
        for v in vals {
            if v.is_finite() && v.abs() < 200.0 {
                assert_eq!(round_away(v), v.round() as i32, "{v:e}");
            }
        }
    }

    /// The fast Q8_0 path against the core encoder on blocks with exact ties (`x * id` = k +
    /// 0.5), zero blocks, tiny and huge scales; and its refusals (NaN, f16 overflow).
    #[test]
    fn q8_0_fast_matches_core() {
        let mut x = Vec::new();
        // amax 127 -> id 1: every x.5 is a tie.
        x.extend((0..32).map(|i| if i == 0 { 127.0 } else { (i as f32 - 16.0) + 0.5 }));
        x.extend([0.0f32; 32]);
        x.extend((0..32).map(|i| (i as f32 - 15.5) * 1e-6));
        x.extend((0..32).map(|i| (i as f32 - 15.5) * 1e3));
        x.extend((0..32).map(|i| ((i * 37 % 64) as f32 - 31.0) * 0.3173));
        let mut fast = vec![BlockQ8_0::zeroed(); x.len() / 32];
        assert!(q8_0_fast(&x, &mut fast));
        let mut core = vec![0u8; x.len() / 32 * 34];
        codec::encode_row(FormatId::Q8_0, &x, &EncodeOptions::default(), &mut core).unwrap();
        assert_eq!(bytemuck::cast_slice::<_, u8>(&fast), &core[..]);
        // The body compiled for the selected instruction set gives the same bytes.
        let mut simd = vec![BlockQ8_0::zeroed(); x.len() / 32];
        assert!((fast_bodies().q8_0)(&x, &mut simd));
        assert_eq!(bytemuck::cast_slice::<_, u8>(&simd), &core[..]);
        let mut bad = x.clone();
        bad[40] = f32::NAN;
        assert!(!q8_0_fast(&bad, &mut fast));
        let mut big = x.clone();
        big[70] = 1e9;
        assert!(!q8_0_fast(&big, &mut fast));
    }

    /// The selected ISA's Q8_0 body (x86: AVX-512 written out) against the core encoder on
    /// 4000 random blocks whose magnitudes span 2^-40 .. 2^15 (f16-subnormal, normal and
    /// near-overflow scales), with a few exact ties per block.
    #[test]
    fn q8_0_simd_body_matches_core_on_random_blocks() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            s
        };
        let mut x = Vec::new();
        for b in 0..4000 {
            let e = (next() % 56) as i32 - 40;
            let scale = 2f32.powi(e);
            for i in 0..32 {
                let u = ((next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
                // Element 0 fixes amax = 127 * scale for some blocks, so i + 0.5 is a tie.
                let v = if b % 3 == 0 && i == 0 {
                    127.0
                } else if b % 3 == 0 && i < 6 {
                    (i as f32 - 3.0) + 0.5
                } else {
                    u * 127.0
                };
                x.push(v * scale);
            }
        }
        let mut core = vec![0u8; x.len() / 32 * 34];
        codec::encode_row(FormatId::Q8_0, &x, &EncodeOptions::default(), &mut core).unwrap();
        let mut simd = vec![BlockQ8_0::zeroed(); x.len() / 32];
        assert!((fast_bodies().q8_0)(&x, &mut simd));
        assert_eq!(bytemuck::cast_slice::<_, u8>(&simd), &core[..]);
        let mut inf = x.clone();
        inf[33] = f32::INFINITY;
        assert!(!(fast_bodies().q8_0)(&inf, &mut simd));
        let mut nan = x;
        nan[31] = f32::NAN;
        assert!(!(fast_bodies().q8_0)(&nan, &mut simd));
    }

    /// The fast Q8_1 path against the core encoder (ties, zero, tiny and huge blocks, sums
    /// that round in `s`), and its refusals (NaN, f16 overflow of `d`).
    #[test]
    fn q8_k_fast_matches_core() {
        let mut x = Vec::new();
        // max -127/127 exact: ties (x.5 after scaling) round to even as ggml's nearest_int.
        x.extend((0..256).map(|i| if i == 3 { -127.0 } else { ((i % 255) as f32 - 127.0) + 0.5 }));
        x.extend([0.0f32; 256]);
        x.extend((0..256).map(|i| ((i * 37 % 256) as f32 - 128.0) * 1e-3));
        // Both signs of the largest magnitude: the first one decides the scale's sign.
        x.extend((0..256).map(|i| {
            if i == 10 {
                5.0
            } else if i == 20 {
                -5.0
            } else {
                i as f32 * 0.01
            }
        }));
        x.extend((0..256).map(|i| ((i * 101 % 256) as f32 - 128.0) * 31.7));
        let mut fast = vec![BlockQ8K::zeroed(); x.len() / 256];
        assert!(q8_k_fast(&x, &mut fast));
        let mut simd = vec![BlockQ8K::zeroed(); x.len() / 256];
        assert!((fast_bodies().q8_k)(&x, &mut simd));
        let mut core = vec![0u8; x.len() / 256 * std::mem::size_of::<BlockQ8K>()];
        codec::encode_row(FormatId::Q8K, &x, &EncodeOptions::default(), &mut core).unwrap();
        assert_eq!(bytemuck::cast_slice::<_, u8>(&fast), &core[..]);
        assert_eq!(bytemuck::cast_slice::<_, u8>(&simd), &core[..]);
        let mut bad = x.clone();
        bad[300] = f32::INFINITY;
        assert!(!q8_k_fast(&bad, &mut fast));
    }

    #[test]
    fn q8_1_fast_matches_core() {
        let mut x = Vec::new();
        x.extend((0..32).map(|i| if i == 0 { 127.0 } else { (i as f32 - 16.0) + 0.5 }));
        x.extend([0.0f32; 32]);
        x.extend((0..32).map(|i| (i as f32 - 15.5) * 1e-6));
        x.extend((0..32).map(|i| (i as f32 - 15.5) * 1e3));
        x.extend((0..32).map(|i| ((i * 37 % 64) as f32 - 31.0) * 0.3173));
        x.extend((0..32).map(|i| 0.9 + (i as f32) * 0.01));
        let mut fast = vec![BlockQ8_1::zeroed(); x.len() / 32];
        assert!(q8_1_fast(&x, &mut fast));
        let mut core = vec![0u8; x.len() / 32 * 36];
        codec::encode_row(FormatId::Q8_1, &x, &EncodeOptions::default(), &mut core).unwrap();
        assert_eq!(bytemuck::cast_slice::<_, u8>(&fast), &core[..]);
        let mut bad = x.clone();
        bad[40] = f32::INFINITY;
        assert!(!q8_1_fast(&bad, &mut fast));
        let mut big = x.clone();
        big[70] = 1e9;
        assert!(!q8_1_fast(&big, &mut fast));
    }

    /// The prepared bytes are exactly the reference backend's, for every activation format
    /// (Q8_0 via ROCmFP2, Q8_1 via Q4_1, Q8_K via Q4_K, f32 via F16), column by column.
    #[test]
    fn bytes_match_prepared_activations() {
        let k = 512;
        let n = 3;
        let x: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 1000) as f32 * 0.013 - 6.1).collect();
        for format in [FormatId::RocmFp2, FormatId::Q4_1, FormatId::Q4K, FormatId::F16] {
            let acts = Acts::prepare(format, &x, n, k).unwrap();
            for j in 0..n {
                let want = PreparedActivations::new(format, &x[j * k..(j + 1) * k]).unwrap();
                let ok = match (acts.row(j), want.row()) {
                    (ActRow::F32(a), ActRow::F32(b)) => a == b,
                    (ActRow::Q8_0(a), ActRow::Q8_0(b)) => {
                        bytemuck::cast_slice::<_, u8>(a) == bytemuck::cast_slice::<_, u8>(b)
                    }
                    (ActRow::Q8_1(a), ActRow::Q8_1(b)) => {
                        bytemuck::cast_slice::<_, u8>(a) == bytemuck::cast_slice::<_, u8>(b)
                    }
                    (ActRow::Q8K(a), ActRow::Q8K(b)) => {
                        bytemuck::cast_slice::<_, u8>(a) == bytemuck::cast_slice::<_, u8>(b)
                    }
                    _ => false,
                };
                assert!(ok, "{format} column {j}");
            }
            if let ActData::Q8_0 { blocks, d } = &acts.data {
                assert!(blocks.iter().zip(d).all(|(b, d)| b.d.to_f32() == *d));
            }
        }
    }
}
