//! GPTQ-style error-compensating encoders that write plain ROCmFP2, ROCmFP3, HFP4G32 and MFP4G32
//! rows: the bytes are ordinary blocks of those formats (every decoder reads them unchanged); only the choice of
//! scales and codes takes the calibration inputs' covariance into account.
//!
//! The algorithm is GPTQ's (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
//! Generative Pre-trained Transformers", 2022, Algorithm 1; itself Optimal Brain Quantization's
//! update in a fixed column order). With `H = sum x x^T` over calibration inputs (the
//! importance matrix's `W.in_cov`, [`super::imatrix`]) and `U` the upper Cholesky factor of
//! `(H + lambda I)^-1`, each row `w` of a weight matrix is quantized column by column in natural
//! order; after column `j` is quantized to `q_j`, the error `e = (w_j - q_j) / U_jj` is
//! propagated to the columns not yet quantized: `w_t -= e * U_jt` for `t > j`. This minimises
//! greedily the output error `sum over inputs (x^T w - x^T q)^2` instead of the weight error.
//!
//! Facts of this implementation:
//! * Dampening: `lambda = damp` times the mean of `diag(H)` (GPTQ's `percdamp`, default
//!   [`DAMP_FRACTION`] = 0.01 as GPTQ's; a recipe rule's `gptq_damp` changes it); a column
//!   whose input was always zero (`H_jj = 0`) gets `H_jj = 1` first, as GPTQ does.
//! * `U` comes from one Cholesky factorisation and one triangular inverse in f64: with `J` the
//!   reversal permutation, `J H J = L L^T` gives `H = R R^T` with `R = J L J` upper, so
//!   `H^-1 = R^-T R^-1` and `U = R^-1 = J L^-1 J`. A pivot that is not positive and finite is
//!   the error "not positive definite after dampening".
//! * Natural column order only: the formats store no permutation, so act-order would need the
//!   group scales fixed before the columns are visited (GPTQ's "static groups"); not done.
//! * Grouped formats: when a group's first column is reached, its scale is chosen from the
//!   error-updated values of the whole group by the same exact weighted search the per-block
//!   encoders run, each column weighted by `1 / U_jj^2` (the factor GPTQ's loss puts on that
//!   column's squared error once the columns before it are quantized; on SmolLM2 it scored a
//!   little below `diag(H)`, docs/QUALITY.md 4.5); then the group's columns are quantized to
//!   the nearest level of that scale one at a time, each error propagated before the next
//!   column is rounded. ROCmFP2 / ROCmFP3: every one of the 127 UE4M3-b8 scales of each
//!   16-weight half (ties to the lower byte), codes nearest (the rules of lowbit's `fp2_code`
//!   / `fp3_code`: ROCmFP2's outer level iff strictly closer; ROCmFP3's thresholds 0.5 s,
//!   1.5 s, 3 s, ties to the smaller level, zero magnitude unsigned). HFP4G32: the f16 row
//!   scale is fixed first by lowbit's improved HFP4 encoder on the original row with `diag(H)`
//!   (the importance matrix) as importance; each 32-weight block's UE8M0 exponent is then
//!   searched in the improved encoder's window `e0-2 ..= e0+1`, codes by hipfire's
//!   nearest-E2M1 rounding.
//! * MFP4G32 (HFP4G32's blocks on rows rotated by hipfire's FWHT-256 per 256-segment,
//!   [`lowbit_core::rotate::fwht256`]): GPTQ in the rotated basis, as QuaRot (Ashkboos et al.,
//!   2024) and SpinQuant (Liu et al., 2024) run it. With `R` the block-diagonal rotation
//!   (each 256 x 256 block `diag(signs2) Hadamard diag(signs1) / 16`, orthogonal, entries
//!   ±1/16), the output error `x^T (w - q)` equals `(R x)^T (R w - R q)`, so the rotated row
//!   `R w` (computed by the core's f32 `fwht256`, exactly as its MFP4 encoders do) is quantized
//!   by the HFP4G32 path above against `H_rot = R H R^T` ([`prepare_for`]: computed in f64 by
//!   the same signed butterflies, exact up to f64 rounding), and the header flags are MFP4's.
//!   The row scale comes from the improved HFP4G32 search on the rotated row weighted by
//!   `diag(H_rot)` (the improved MFP4 encoder's segment-mean weights approximate that
//!   diagonal). MFP4G32P (E4M3 block scales) has no GPTQ encoder.
//! * GPTQ's "lazy batch" updates are a memory-traffic device with the same arithmetic; here rows
//!   are processed [`ROWS_PER_BATCH`] at a time, so each row of `U` is read once per batch.
//!   Every row's arithmetic is the same whatever its batch, so output is byte-identical across
//!   thread counts.
//!
//! What must not live here: collecting `H` ([`super::imatrix_collect`]), reading it
//! ([`super::imatrix`]), choosing which tensors use it ([`super::pipeline`]).

use lowbit_core::format::hipfire::block::{e2m1_round, pack_codes, ue8m0};
use lowbit_core::format::hipfire::header::{expected_flags, HEADER_BYTES};
use lowbit_core::format::hipfire::RowHeader;
use lowbit_core::registry::Rotation;
use lowbit_core::rotate::{butterflies, fwht256, FWHT_SIGNS1, FWHT_SIGNS2};
use lowbit_core::scalar::{ue4m3_b8_table, E2M1_VALUES};
use lowbit_core::{codec, EncodeOptions, FormatId, Rule};

/// GPTQ's dampening: this fraction of the mean diagonal is added to the diagonal.
pub const DAMP_FRACTION: f64 = 0.01;

/// Rows quantized together (each row of `U` is read once per batch).
pub const ROWS_PER_BATCH: usize = 16;

/// Bytes of one HFP4G32 block (scale byte + 16 bytes of nibbles).
const HFP4_BLOCK_BYTES: usize = 17;

/// Offset of `format_flags` in the hipfire row header.
const FLAGS_OFFSET: usize = 6;

/// Whether a GPTQ encoder exists for `format`.
pub fn supports(format: FormatId) -> bool {
    matches!(format, FormatId::RocmFp2 | FormatId::RocmFp3 | FormatId::Hfp4G32 | FormatId::Mfp4G32)
}

/// Whether `format` stores its rows FWHT-256-rotated (so its covariance must be rotated too).
fn is_rotated(format: FormatId) -> bool {
    format.info().rotation == Rotation::Fwht256
}

/// The factored covariance of one matrix's inputs.
#[derive(Clone, Debug)]
pub struct Prepared {
    k: usize,
    /// Upper Cholesky factor of the damped `H^-1`, row-major `k x k` (lower part zero).
    u: Vec<f64>,
    /// `diag(H)` before dampening (dead columns: 1): HFP4's row-scale search weights.
    diag: Vec<f64>,
    /// Whether `H` was rotated into the FWHT-256 basis ([`prepare_for`] a rotated format).
    rotated: bool,
}

impl Prepared {
    /// The row length.
    pub fn k(&self) -> usize {
        self.k
    }
}

/// Factors `h` (`k x k`, row-major, symmetric: the lower triangle is read) for GPTQ, dampened
/// by `damp` times its mean diagonal. Errors
/// name what is wrong: a length that is not `k * k`, a non-finite entry (with its row and
/// column), a matrix that is not positive definite after dampening (with the pivot).
pub fn prepare(h: &[f32], k: usize, damp: f64) -> Result<Prepared, String> {
    check_cov(h, k)?;
    factor(|i, j| f64::from(h[i * k + j]), k, damp, false)
}

/// [`prepare`] for the format the rows will be written in: for a rotated format (MFP4G32) the
/// covariance is first taken into the rotated basis, `H_rot = R H R^T` in f64 (`R` the
/// core's FWHT-256 per segment; `k` must be a multiple of 256); for the others it is
/// [`prepare`].
pub fn prepare_for(format: FormatId, h: &[f32], k: usize, damp: f64) -> Result<Prepared, String> {
    if !is_rotated(format) {
        return prepare(h, k, damp);
    }
    check_cov(h, k)?;
    if k % 256 != 0 {
        return Err(format!("{format} rows of {k} are not whole 256-segments"));
    }
    let hr = rotate_cov(h, k);
    factor(|i, j| hr[i * k + j], k, damp, true)
}

fn check_cov(h: &[f32], k: usize) -> Result<(), String> {
    if k == 0 || h.len() != k * k {
        return Err(format!(
            "covariance has {} values, rows of {k} need {} (a {k} x {k} matrix)",
            h.len(),
            k * k
        ));
    }
    if let Some(i) = h.iter().position(|v| !v.is_finite()) {
        return Err(format!("covariance entry ({}, {}) is {}", i / k, i % k, h[i]));
    }
    Ok(())
}

/// hipfire's forward FWHT-256 ([`fwht256`]: `x *= signs1`, butterflies, `x *= signs2 / 16`)
/// in f64, in place.
fn fwht256_f64(x: &mut [f64; 256]) {
    for (v, s) in x.iter_mut().zip(&FWHT_SIGNS1) {
        *v *= f64::from(*s);
    }
    butterflies(x);
    for (v, s) in x.iter_mut().zip(&FWHT_SIGNS2) {
        *v *= 0.0625 * f64::from(*s);
    }
}

/// `R H R^T` in f64 (row-major `k x k`) for `R` the block-diagonal FWHT-256 of every
/// 256-segment (`k % 256 == 0`): every row of `H` rotated (`H R^T`), transposed (`R H`),
/// every row rotated again (`R H R^T`).
fn rotate_cov(h: &[f32], k: usize) -> Vec<f64> {
    let mut m: Vec<f64> = h.iter().map(|&v| f64::from(v)).collect();
    let rotate_rows = |m: &mut [f64]| {
        for seg in m.chunks_exact_mut(256) {
            // `chunks_exact_mut(256)` yields only whole 256-segments.
            if let Ok(seg) = <&mut [f64; 256]>::try_from(seg) {
                fwht256_f64(seg);
            }
        }
    };
    rotate_rows(&mut m);
    for i in 0..k {
        for j in i + 1..k {
            m.swap(i * k + j, j * k + i);
        }
    }
    rotate_rows(&mut m);
    m
}

/// Dampens and factors the covariance `h(i, j)` (checked finite; the lower triangle is read).
fn factor(
    h: impl Fn(usize, usize) -> f64,
    k: usize,
    damp: f64,
    rotated: bool,
) -> Result<Prepared, String> {
    // A = J H J (reversed), lower triangle, f64.
    let mut a = vec![0f64; k * k];
    for i in 0..k {
        for j in 0..=i {
            a[i * k + j] = h(k - 1 - i, k - 1 - j);
        }
    }
    let mut diag = vec![0f64; k];
    for (j, d) in diag.iter_mut().enumerate() {
        let v = h(j, j);
        *d = if v > 0.0 { v } else { 1.0 };
    }
    let mean = diag.iter().sum::<f64>() / k as f64;
    let damp = damp * mean;
    for i in 0..k {
        let v = a[i * k + i];
        a[i * k + i] = if v > 0.0 { v } else { 1.0 } + damp;
    }
    // Cholesky A = L L^T in place (row by row; dots over contiguous prefixes).
    for i in 0..k {
        for j in 0..=i {
            let (ri, rj) = (i * k, j * k);
            let s = dot(&a[ri..ri + j], &a[rj..rj + j]);
            let v = a[ri + j] - s;
            if i == j {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(format!(
                        "covariance is not positive definite after dampening by {damp:e} \
                         (pivot {} is {v:e})",
                        k - 1 - i
                    ));
                }
                a[ri + i] = v.sqrt();
            } else {
                a[ri + j] = v / a[rj + j];
            }
        }
    }
    // M = L^-1 (lower), row by row: m_i = (e_i - sum_{t<i} L_it m_t) / L_ii.
    let mut m = vec![0f64; k * k];
    let mut row = vec![0f64; k];
    for i in 0..k {
        row[..=i].iter_mut().for_each(|v| *v = 0.0);
        row[i] = 1.0;
        for t in 0..i {
            let l = a[i * k + t];
            if l != 0.0 {
                let mt = &m[t * k..t * k + t + 1];
                for (r, &v) in row[..=t].iter_mut().zip(mt) {
                    *r -= l * v;
                }
            }
        }
        let inv = 1.0 / a[i * k + i];
        for (dst, &v) in m[i * k..i * k + i + 1].iter_mut().zip(&row[..=i]) {
            *dst = v * inv;
        }
    }
    // U = J M J.
    let mut u = vec![0f64; k * k];
    for i in 0..k {
        for j in i..k {
            u[i * k + j] = m[(k - 1 - i) * k + (k - 1 - j)];
        }
    }
    if let Some(i) = u.iter().position(|v| !v.is_finite()) {
        return Err(format!(
            "inverse covariance factor entry ({}, {}) is not finite",
            i / k,
            i % k
        ));
    }
    Ok(Prepared { k, u, diag, rotated })
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..4 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// What a format's group quantizer does, row by row.
trait GroupQuant {
    /// Columns per group.
    const GROUP: usize;
    /// Chooses the group's scale from its current values and weights.
    fn start_group(&mut self, row: usize, group: usize, x: &[f64], w: &[f64]);
    /// Quantizes column `j` (value `x`) of `row` under the current group's scale; returns the
    /// decoded value.
    fn quantize(&mut self, row: usize, j: usize, x: f64) -> f64;
}

/// Runs GPTQ over `rows` rows of `k` (row-major `src`), calling `q` for groups and columns.
fn run_rows<Q: GroupQuant>(p: &Prepared, src: &[f32], q: &mut Q) -> Result<(), String> {
    let k = p.k;
    let n = src.len() / k;
    // Column-major working copy: w[t * n + r].
    let mut w = vec![0f64; k * n];
    for (r, row) in src.chunks_exact(k).enumerate() {
        for (t, &v) in row.iter().enumerate() {
            w[t * n + r] = f64::from(v);
        }
    }
    let mut err = vec![0f64; n];
    let mut gx = vec![0f64; Q::GROUP];
    // GPTQ's loss for column j is (w_j - q_j)^2 / U_jj^2: the group-scale search's weights.
    let cond: Vec<f64> = (0..k).map(|j| 1.0 / (p.u[j * k + j] * p.u[j * k + j])).collect();
    for j in 0..k {
        if j % Q::GROUP == 0 {
            let g = j / Q::GROUP;
            let wg = &cond[j..j + Q::GROUP];
            for r in 0..n {
                for (c, x) in gx.iter_mut().enumerate() {
                    *x = w[(j + c) * n + r];
                }
                if let Some(c) = gx.iter().position(|v| !v.is_finite()) {
                    return Err(format!(
                        "row {r} element {} became {} while updating",
                        j + c,
                        gx[c]
                    ));
                }
                q.start_group(r, g, &gx, wg);
            }
        }
        let ujj = p.u[j * k + j];
        for r in 0..n {
            let x = w[j * n + r];
            let qv = q.quantize(r, j, x);
            err[r] = (x - qv) / ujj;
        }
        let urow = &p.u[j * k..(j + 1) * k];
        for t in j + 1..k {
            let ujt = urow[t];
            if ujt == 0.0 {
                continue;
            }
            for (v, &e) in w[t * n..(t + 1) * n].iter_mut().zip(&err) {
                *v -= e * ujt;
            }
        }
    }
    Ok(())
}

/// ROCmFP2 / ROCmFP3: group = one 16-weight half; state = each row's current scale.
struct RocmQuant<'a> {
    fp3: bool,
    table: [f64; 127],
    scale: Vec<f64>,
    out: &'a mut [u8],
    row_bytes: usize,
}

/// ROCmFP3's magnitude index (levels 0, 1, 2, 4): thresholds `0.5 s`, `1.5 s`, `3 s`, ties to
/// the smaller level (ROCmFPX's `rocmfpx_quantize_fp3_code`, as lowbit's `fp3_index`).
fn fp3_index(m: f64, s: f64) -> u8 {
    u8::from(m > 0.5 * s) + u8::from(m > 1.5 * s) + u8::from(m > 3.0 * s)
}

const FP3_MAG: [f64; 4] = [0.0, 1.0, 2.0, 4.0];

impl RocmQuant<'_> {
    fn block_bytes(&self) -> usize {
        if self.fp3 {
            14
        } else {
            10
        }
    }

    /// The squared error of `x` at its nearest level under scale `s`.
    fn term(&self, x: f64, s: f64) -> f64 {
        let m = x.abs();
        if self.fp3 {
            let d = m - FP3_MAG[fp3_index(m, s) as usize] * s;
            d * d
        } else {
            let (id, od) = (m - s, m - 4.0 * s);
            (od * od).min(id * id)
        }
    }
}

impl GroupQuant for RocmQuant<'_> {
    const GROUP: usize = 16;

    fn start_group(&mut self, row: usize, group: usize, x: &[f64], w: &[f64]) {
        let mut best = (0u8, f64::INFINITY);
        for (b, &s) in self.table.iter().enumerate() {
            let mut e = 0f64;
            for (&xi, &wi) in x.iter().zip(w) {
                e += wi * self.term(xi, s);
            }
            if e < best.1 {
                best = (b as u8, e);
            }
        }
        self.scale[row] = self.table[best.0 as usize];
        // The scale byte of this half follows the block's code bytes.
        let bb = self.block_bytes();
        self.out[row * self.row_bytes + (group / 2) * bb + (bb - 2) + group % 2] = best.0;
    }

    fn quantize(&mut self, row: usize, j: usize, x: f64) -> f64 {
        let s = self.scale[row];
        let neg = x.is_sign_negative();
        let (blk, e) = (j / 32, j % 32);
        let base = row * self.row_bytes + blk * self.block_bytes();
        if self.fp3 {
            // Sign bit 4, magnitude index; zero magnitude is code 0; scale 0 gives code 0.
            let idx = if s == 0.0 { 0 } else { fp3_index(x.abs(), s) };
            let code = if idx != 0 && x < 0.0 { 4 | idx } else { idx };
            // Code e of a block sits at bit 3e of its little-endian 96-bit code stream.
            let bit = 3 * e;
            let v = u16::from(code) << (bit % 8);
            self.out[base + bit / 8] |= v as u8;
            if bit % 8 > 5 {
                self.out[base + bit / 8 + 1] |= (v >> 8) as u8;
            }
            let mag = FP3_MAG[idx as usize] * s;
            if code & 4 != 0 {
                -mag
            } else {
                mag
            }
        } else {
            // Outer level iff strictly closer (ROCmFPX's selector); scale 0 gives code 0.
            let m = x.abs();
            let (id, od) = (m - s, m - 4.0 * s);
            let outer = od * od < id * id;
            let code: u8 = match (s == 0.0, neg, outer) {
                (true, _, _) | (false, true, true) => 0,
                (false, true, false) => 1,
                (false, false, false) => 2,
                (false, false, true) => 3,
            };
            // Weight 4i + p of a block sits in bits 2p of qs[i].
            self.out[base + e / 4] |= code << (2 * (e % 4));
            [-4.0, -1.0, 1.0, 4.0][code as usize] * s
        }
    }
}

/// HFP4G32: the row scale is fixed per row beforehand; group = one 32-weight block.
struct Hfp4Quant<'a> {
    row_scale: Vec<f32>,
    sc: Vec<f32>,
    codes: Vec<[u8; 32]>,
    out: &'a mut [u8],
    row_bytes: usize,
}

/// The UE8M0 exponent `clamp(ceil(log2(bmn / 6)) + 127)`: the centre of the searched window
/// (std's `log2`; where it differs from hipfire's libm `log2f` in the last ulp the window moves
/// by one, which only changes which four exponents are compared).
fn ue8m0_ceil(bmn: f32) -> i32 {
    if bmn > 0.0 {
        let c = (bmn / 6.0).log2().ceil();
        (c as i32).saturating_add(127).clamp(0, 254)
    } else {
        0
    }
}

impl Hfp4Quant<'_> {
    fn flush(&mut self, row: usize, block: usize) {
        let off = row * self.row_bytes + HEADER_BYTES + block * HFP4_BLOCK_BYTES;
        self.out[off + 1..off + HFP4_BLOCK_BYTES].copy_from_slice(&pack_codes(&self.codes[row]));
    }
}

impl GroupQuant for Hfp4Quant<'_> {
    const GROUP: usize = 32;

    fn start_group(&mut self, row: usize, group: usize, x: &[f64], w: &[f64]) {
        let r = self.row_scale[row];
        let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let bmax = xf.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut best = (0u8, 0f32, f64::INFINITY);
        if bmax > 0.0 {
            let e0 = ue8m0_ceil(bmax / r);
            for e in (e0 - 2).max(0)..=(e0 + 1).min(254) {
                let sc = r * ue8m0(e as u8).unwrap_or(f32::NAN);
                if !(sc * 6.0).is_finite() || sc == 0.0 {
                    continue;
                }
                let mut err = 0f64;
                for (&xi, &wi) in xf.iter().zip(w) {
                    let d =
                        f64::from(xi) - f64::from(sc * E2M1_VALUES[e2m1_round(xi / sc) as usize]);
                    err += wi * d * d;
                }
                if err < best.2 {
                    best = (e as u8, sc, err);
                }
            }
        }
        // A zero block (or no usable exponent): e = 0 with +0 codes.
        self.sc[row] = best.1;
        self.codes[row] = [0; 32];
        let off = row * self.row_bytes + HEADER_BYTES + group * HFP4_BLOCK_BYTES;
        self.out[off] = best.0;
    }

    fn quantize(&mut self, row: usize, j: usize, x: f64) -> f64 {
        let sc = self.sc[row];
        let (c, q) = if sc == 0.0 {
            (0u8, 0f32)
        } else {
            let c = e2m1_round(x as f32 / sc);
            (c, sc * E2M1_VALUES[c as usize])
        };
        self.codes[row][j % 32] = c;
        if j % 32 == 31 {
            self.flush(row, j / 32);
        }
        f64::from(q)
    }
}

/// The HFP4G32 path on `src` (already rotated for MFP4G32) into HFP4G32 rows of `dst`.
fn encode_hfp4(p: &Prepared, src: &[f32], dst: &mut [u8]) -> Result<(), String> {
    let (k, format) = (p.k, FormatId::Hfp4G32);
    let rb = format.row_bytes(k).map_err(|e| e.to_string())?;
    let n = src.len() / k;
    // Row scale (and header) from the improved encoder on the (rotated) row.
    let imp: Vec<f32> = p.diag.iter().map(|&d| d as f32).collect();
    let opts = EncodeOptions { rule: Rule::Improved, importance: Some(&imp) };
    let mut row_scale = vec![0f32; n];
    for (r, (row, out)) in src.chunks_exact(k).zip(dst.chunks_exact_mut(rb)).enumerate() {
        codec::encode_row(format, row, &opts, out).map_err(|e| format!("row {r}: {e}"))?;
        row_scale[r] = RowHeader::read(out).row_scale().to_f32();
    }
    let mut q =
        Hfp4Quant { row_scale, sc: vec![0.0; n], codes: vec![[0; 32]; n], out: dst, row_bytes: rb };
    run_rows(p, src, &mut q)
}

/// Encodes `src` (whole rows of `p.k()`, row-major) into `dst` (the same rows in `format`)
/// with GPTQ. `format` must be one [`supports`] accepts and `p` must come from
/// [`prepare_for`] with the same format (or [`prepare`] for an unrotated one).
pub fn encode_rows(
    format: FormatId,
    p: &Prepared,
    src: &[f32],
    dst: &mut [u8],
) -> Result<(), String> {
    let k = p.k;
    let rb = format.row_bytes(k).map_err(|e| e.to_string())?;
    let n = src.len() / k;
    if src.len() != n * k || dst.len() != n * rb {
        return Err(format!(
            "{} values and {} bytes are not whole rows of {k} ({rb} bytes each)",
            src.len(),
            dst.len()
        ));
    }
    if let Some(i) = src.iter().position(|v| !v.is_finite()) {
        return Err(format!("row {} element {} is {}", i / k, i % k, src[i]));
    }
    if p.rotated != is_rotated(format) {
        return Err(format!(
            "the covariance was prepared for {} rows, not for {format} (use prepare_for)",
            if p.rotated { "rotated" } else { "unrotated" }
        ));
    }
    match format {
        FormatId::RocmFp2 | FormatId::RocmFp3 => {
            dst.fill(0);
            let table = ue4m3_b8_table().map(f64::from);
            let fp3 = format == FormatId::RocmFp3;
            let mut q = RocmQuant { fp3, table, scale: vec![0.0; n], out: dst, row_bytes: rb };
            run_rows(p, src, &mut q)
        }
        FormatId::Hfp4G32 => encode_hfp4(p, src, dst),
        FormatId::Mfp4G32 => {
            // The rotated rows, by the core's f32 FWHT-256 (as its MFP4 encoders rotate).
            let mut rot = src.to_vec();
            for seg in rot.chunks_exact_mut(256) {
                if let Ok(a) = <&mut [f32; 256]>::try_from(seg) {
                    fwht256(a);
                }
            }
            if let Some(i) = rot.iter().position(|v| !v.is_finite()) {
                return Err(format!(
                    "row {} rotated element {} is {} (the FWHT-256 overflows f32)",
                    i / k,
                    i % k,
                    rot[i]
                ));
            }
            encode_hfp4(p, &rot, dst)?;
            // The blocks are HFP4G32's; only the header's flags say "rotated".
            for out in dst.chunks_exact_mut(rb) {
                out[FLAGS_OFFSET] = expected_flags(format);
            }
            Ok(())
        }
        _ => Err(format!("no GPTQ encoder for {format}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64) / ((1u64 << 53) as f64) - 0.5
        }
        fn gauss(&mut self) -> f64 {
            (0..12).map(|_| self.next()).sum()
        }
    }

    /// `n` correlated inputs of `k`: a few shared factors plus noise, some channels 20x larger
    /// (as `ffn_down`'s SwiGLU inputs have); returns (x row-major n x k, H = X^T X row-major).
    fn correlated(k: usize, n: usize, seed: u64) -> (Vec<f64>, Vec<f32>) {
        let mut g = Lcg(seed);
        let f = 6;
        let mix: Vec<f64> = (0..k * f).map(|_| g.gauss()).collect();
        let gain: Vec<f64> = (0..k).map(|i| if i % 13 == 5 { 20.0 } else { 1.0 }).collect();
        let mut x = vec![0f64; n * k];
        for t in 0..n {
            let z: Vec<f64> = (0..f).map(|_| g.gauss()).collect();
            for i in 0..k {
                let s: f64 = (0..f).map(|a| mix[i * f + a] * z[a]).sum();
                x[t * k + i] = ((s + 0.3 * g.gauss()) * gain[i]) as f32 as f64;
            }
        }
        let mut h = vec![0f32; k * k];
        for i in 0..k {
            for j in 0..k {
                h[i * k + j] = (0..n).map(|t| x[t * k + i] * x[t * k + j]).sum::<f64>() as f32;
            }
        }
        (x, h)
    }

    fn weights(rows: usize, k: usize, seed: u64) -> Vec<f32> {
        let mut g = Lcg(seed);
        (0..rows * k).map(|_| (0.05 * g.gauss()) as f32).collect()
    }

    /// Output error sum over the calibration inputs of (x^T w - x^T q)^2, per standard decode.
    fn output_err(format: FormatId, x: &[f64], k: usize, w: &[f32], enc: &[u8]) -> f64 {
        let rb = format.row_bytes(k).unwrap();
        let mut total = 0.0;
        for (row, bytes) in w.chunks_exact(k).zip(enc.chunks_exact(rb)) {
            let mut q = vec![0f32; k];
            codec::decode_row(format, bytes, &mut q).unwrap();
            for xt in x.chunks_exact(k) {
                let d: f64 =
                    xt.iter().zip(row.iter().zip(&q)).map(|(a, (b, c))| a * f64::from(b - c)).sum();
                total += d * d;
            }
        }
        total
    }

    #[test]
    fn gptq_beats_the_per_block_encoders_on_correlated_inputs() {
        let (k, n, rows) = (128, 1024, 24);
        let (x, h) = correlated(k, n, 11);
        let w = weights(rows, k, 12);
        let p = prepare(&h, k, DAMP_FRACTION).unwrap();
        let imp: Vec<f32> = (0..k).map(|i| h[i * k + i] / n as f32).collect();
        for (format, rule) in [
            (FormatId::RocmFp2, Rule::Reference),
            (FormatId::RocmFp3, Rule::Reference),
            (FormatId::Hfp4G32, Rule::Improved),
        ] {
            let rb = format.row_bytes(k).unwrap();
            let mut base = vec![0u8; rows * rb];
            let opts = EncodeOptions { rule, importance: Some(&imp) };
            for (row, out) in w.chunks_exact(k).zip(base.chunks_exact_mut(rb)) {
                codec::encode_row(format, row, &opts, out).unwrap();
            }
            let mut g = vec![0u8; rows * rb];
            encode_rows(format, &p, &w, &mut g).unwrap();
            let (eb, eg) =
                (output_err(format, &x, k, &w, &base), output_err(format, &x, k, &w, &g));
            assert!(eg < 0.8 * eb, "{format}: gptq {eg} per-block {eb}");
        }
    }

    #[test]
    fn uncorrelated_inputs_give_the_reference_bytes() {
        // H = I: no error is propagated and every column weighs 1, so the search is ROCmFPX's
        // plain one and the bytes must be the reference encoder's (codes, packing, scale bytes).
        let (k, rows) = (96, 9);
        let mut h = vec![0f32; k * k];
        (0..k).for_each(|i| h[i * (k + 1)] = 1.0);
        let p = prepare(&h, k, DAMP_FRACTION).unwrap();
        let w = weights(rows, k, 8);
        for format in [FormatId::RocmFp2, FormatId::RocmFp3] {
            let rb = format.row_bytes(k).unwrap();
            let mut g = vec![0u8; rows * rb];
            encode_rows(format, &p, &w, &mut g).unwrap();
            let mut r = vec![0u8; rows * rb];
            let opts = EncodeOptions { rule: Rule::Reference, importance: None };
            for (row, out) in w.chunks_exact(k).zip(r.chunks_exact_mut(rb)) {
                codec::encode_row(format, row, &opts, out).unwrap();
            }
            assert_eq!(g, r, "{format}");
        }
    }

    #[test]
    fn mfp4_gptq_beats_the_improved_encoder_on_correlated_inputs() {
        let (k, n, rows) = (512, 1024, 16);
        let (x, h) = correlated(k, n, 21);
        let w = weights(rows, k, 22);
        let format = FormatId::Mfp4G32;
        let p = prepare_for(format, &h, k, DAMP_FRACTION).unwrap();
        let imp: Vec<f32> = (0..k).map(|i| h[i * k + i] / n as f32).collect();
        let rb = format.row_bytes(k).unwrap();
        let mut base = vec![0u8; rows * rb];
        let opts = EncodeOptions { rule: Rule::Improved, importance: Some(&imp) };
        for (row, out) in w.chunks_exact(k).zip(base.chunks_exact_mut(rb)) {
            codec::encode_row(format, row, &opts, out).unwrap();
        }
        let mut g = vec![0u8; rows * rb];
        encode_rows(format, &p, &w, &mut g).unwrap();
        // output_err decodes with the standard MFP4G32 decoder (header checked, inverse FWHT).
        let (eb, eg) = (output_err(format, &x, k, &w, &base), output_err(format, &x, k, &w, &g));
        assert!(eg < 0.8 * eb, "{format}: gptq {eg} improved {eb}");
        assert!(g.chunks_exact(rb).all(|r| r[FLAGS_OFFSET] == 0x05));
    }

    #[test]
    fn rotated_covariance_is_r_h_rt() {
        // R from the core's f32 FWHT-256 on unit vectors (exact: entries ±1/16), then R H R^T
        // by dense products, against rotate_cov's f64 butterflies.
        let k = 512;
        let (_, h) = correlated(k, 64, 9);
        let mut r = vec![0f64; 256 * 256]; // r[a * 256 + b] = R_ab
        for b in 0..256 {
            let mut e = [0f32; 256];
            e[b] = 1.0;
            fwht256(&mut e);
            for a in 0..256 {
                assert_eq!(e[a].abs(), 0.0625);
                r[a * 256 + b] = f64::from(e[a]);
            }
        }
        let got = rotate_cov(&h, k);
        let scale = h.iter().fold(0f64, |m, v| m.max(f64::from(v.abs())));
        for (si, sj) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            // T = H_ij R^T, then R T.
            let mut t = vec![0f64; 256 * 256];
            for i in 0..256 {
                for a in 0..256 {
                    t[i * 256 + a] = (0..256)
                        .map(|b| f64::from(h[(si * 256 + i) * k + sj * 256 + b]) * r[a * 256 + b])
                        .sum();
                }
            }
            for a in 0..256 {
                for c in 0..256 {
                    let want: f64 = (0..256).map(|i| r[a * 256 + i] * t[i * 256 + c]).sum();
                    let have = got[(si * 256 + a) * k + sj * 256 + c];
                    assert!((have - want).abs() <= 1e-12 * scale, "({si},{sj}) {a} {c}");
                }
            }
        }
    }

    #[test]
    fn uncorrelated_inputs_give_the_improved_bytes() {
        // H = I (and so H_rot = I exactly): no error is propagated and every column weighs 1,
        // so HFP4G32 / MFP4G32 gptq must write the improved encoder's bytes (no importance).
        let (k, rows) = (512, 12);
        let mut h = vec![0f32; k * k];
        (0..k).for_each(|i| h[i * (k + 1)] = 1.0);
        let w = weights(rows, k, 31);
        for format in [FormatId::Hfp4G32, FormatId::Mfp4G32] {
            let p = prepare_for(format, &h, k, DAMP_FRACTION).unwrap();
            let rb = format.row_bytes(k).unwrap();
            let mut g = vec![0u8; rows * rb];
            encode_rows(format, &p, &w, &mut g).unwrap();
            let mut r = vec![0u8; rows * rb];
            let opts = EncodeOptions { rule: Rule::Improved, importance: None };
            for (row, out) in w.chunks_exact(k).zip(r.chunks_exact_mut(rb)) {
                codec::encode_row(format, row, &opts, out).unwrap();
            }
            assert_eq!(g, r, "{format}");
        }
    }

    #[test]
    fn bytes_do_not_depend_on_the_batch() {
        for format in [FormatId::RocmFp2, FormatId::RocmFp3, FormatId::Hfp4G32, FormatId::Mfp4G32] {
            let (k, rows) = if format == FormatId::Mfp4G32 { (256, 21) } else { (64, 21) };
            let (_, h) = correlated(k, 256, 3);
            let w = weights(rows, k, 4);
            let p = prepare_for(format, &h, k, DAMP_FRACTION).unwrap();
            let rb = format.row_bytes(k).unwrap();
            let mut all = vec![0u8; rows * rb];
            encode_rows(format, &p, &w, &mut all).unwrap();
            let mut one = vec![0u8; rb];
            for r in 0..rows {
                encode_rows(format, &p, &w[r * k..(r + 1) * k], &mut one).unwrap();
                assert_eq!(&all[r * rb..(r + 1) * rb], &one[..], "{format} row {r}");
            }
        }
    }

    #[test]
    fn factor_is_the_damped_inverse() {
        let k = 40;
        let (_, h) = correlated(k, 100, 5);
        let p = prepare(&h, k, DAMP_FRACTION).unwrap();
        let mean = (0..k).map(|i| f64::from(h[i * k + i])).sum::<f64>() / k as f64;
        // (U^T U) (H + lambda I) = I
        for i in 0..k {
            for j in 0..k {
                let mut s = 0.0;
                for t in 0..k {
                    let inv: f64 = (0..k).map(|a| p.u[a * k + i] * p.u[a * k + t]).sum();
                    let hd =
                        f64::from(h[t * k + j]) + if t == j { DAMP_FRACTION * mean } else { 0.0 };
                    s += inv * hd;
                }
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((s - want).abs() < 1e-6, "({i},{j}) {s}");
            }
        }
    }

    #[test]
    fn bad_covariances_are_clear_errors() {
        let e = prepare(&[1.0; 6], 2, DAMP_FRACTION).unwrap_err();
        assert!(e.contains("6 values") && e.contains("need 4"), "{e}");
        let mut h = vec![0f32; 9];
        (0..3).for_each(|i| h[i * 4] = 1.0);
        h[5] = f32::NAN;
        let e = prepare(&h, 3, DAMP_FRACTION).unwrap_err();
        assert!(e.contains("(1, 2) is NaN"), "{e}");
        // Eigenvalues 3 and -1: dampening by 1% of the mean diagonal cannot fix it.
        let e = prepare(&[1.0, 2.0, 2.0, 1.0], 2, DAMP_FRACTION).unwrap_err();
        assert!(e.contains("not positive definite"), "{e}");
        // A dead column (never any input) is fine.
        assert!(prepare(&[0.0, 0.0, 0.0, 2.0], 2, DAMP_FRACTION).is_ok());
        let mut id = vec![0f32; 32 * 32];
        (0..32).for_each(|i| id[i * 33] = 1.0);
        let p = prepare(&id, 32, DAMP_FRACTION).unwrap();
        let e = encode_rows(FormatId::RocmFp2, &p, &[0.0; 40], &mut [0u8; 10]).unwrap_err();
        assert!(e.contains("not whole rows of 32"), "{e}");
        let e = encode_rows(FormatId::Q4_0, &p, &[0.0; 32], &mut [0u8; 18]).unwrap_err();
        assert!(e.contains("no GPTQ encoder"), "{e}");
        let e = encode_rows(FormatId::RocmFp2, &p, &[f32::NAN; 32], &mut [0u8; 10]).unwrap_err();
        assert!(e.contains("row 0 element 0 is NaN"), "{e}");
        // A rotated format needs the rotated covariance, and whole 256-segments.
        let mut id = vec![0f32; 256 * 256];
        (0..256).for_each(|i| id[i * 257] = 1.0);
        let plain = prepare(&id, 256, DAMP_FRACTION).unwrap();
        let mut out = vec![0u8; FormatId::Mfp4G32.row_bytes(256).unwrap()];
        let e = encode_rows(FormatId::Mfp4G32, &plain, &[0.0; 256], &mut out).unwrap_err();
        assert!(e.contains("prepared for unrotated rows"), "{e}");
        let rot = prepare_for(FormatId::Mfp4G32, &id, 256, DAMP_FRACTION).unwrap();
        let e = encode_rows(FormatId::Hfp4G32, &rot, &[0.0; 256], &mut out).unwrap_err();
        assert!(e.contains("prepared for rotated rows"), "{e}");
        let mut id = vec![0f32; 96 * 96];
        (0..96).for_each(|i| id[i * 97] = 1.0);
        let e = prepare_for(FormatId::Mfp4G32, &id, 96, DAMP_FRACTION).unwrap_err();
        assert!(e.contains("not whole 256-segments"), "{e}");
    }
}
