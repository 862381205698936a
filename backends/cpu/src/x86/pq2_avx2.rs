//! AVX2 PQ2_0 rows against Q8_0 columns on canonical rows, with the activations rearranged
//! once per matmul call into the weights' 2-bit plane order ([`Planes`], built by [`layout`]
//! through the table's `prep` hook, or by the kernel itself when the call has none).
//!
//! Why. `super::ternary::pq2` (until session 12) expanded every row's codes into element order
//! (a broadcast, two byte shuffles, an OR, two ANDs and a shift per 32 codes) and recomputed
//! each activation block's sum for every group of 8 rows: about 42 256-bit operations per row
//! and 128 weights at n = 1, 0.17 of the read ceiling on the session-12 Zen 3 VM. Here a
//! block's 32 code bytes are one load; plane `r` = `(x >> 2r) & 3` (three shifts, four ANDs);
//! byte `j` of plane `r` is element `4j + r`, which the rearranged activations meet in the
//! same byte. Four `vpmaddubsw` summed in i16 and one `vpmaddwd` by ones give i32 lane `m`
//! the exact sum over bytes `4m..4m+4` of every plane, all in activation block `m / 2`; a
//! `vphaddd` per row pair and a transpose make one vector per activation block `k` whose lane
//! `i` is row `i`'s `sum(c * a)` over block `k`; the stored `sum(a)` is subtracted.
//!
//! Layout (PQ2_0, PrismML-Eng/llama.cpp `block_pq2_0`, as in the core's `format::prism`:
//! `d` f16, then 32 code bytes; element `j` is bits `2 * (j % 4)` of byte `j / 4`, value
//! `c - 1`). Record of weight block `b` and one column ([`Rec`]): plane `r`'s activation
//! bytes `A_r[j] = a[4b + j / 8].qs[4 (j % 8) + r]` (`j < 32`), the four activation blocks'
//! `sum(qs)` and their scales.
//!
//! Arithmetic. Exact i32 sums (i16 lanes: four pairs of at most `2 * 3 * 128`, < 2^15), then
//! per block and row the reference's f32 expression as `super::ternary::pq2` evaluated it:
//! `s = 0; s += d_a[k] * (sumi_k as f32)` for k = 0..4, `acc += d_w * s` (no FMA), blocks in
//! order, lanes = 8 rows: bit-identical to the core's reference dot product (c = 1).
//!
//! What must not live here: length checks and the kernel registry (`super::ext`), other
//! formats.

use std::arch::x86_64::*;
use std::ops::Range;

use super::ext::{f16x8, row_ptrs, store_rows, ActSlice, Shape};
use crate::act::{ActData, Acts, Layout};

/// One weight block's activations of one column in plane order (see the module doc).
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct Rec {
    /// `a[r][j]` = activation of element `4j + r` of the weight block.
    a: [[i8; 32]; 4],
    /// `sum(qs)` of activation block `4b + k`.
    s: [i32; 4],
    /// Scale of activation block `4b + k`.
    d: [f32; 4],
}

const ZERO: Rec = Rec { a: [[0; 32]; 4], s: [0; 4], d: [0.0; 4] };

/// The records of every column of one call: `nb` per column, column after column.
pub(crate) struct Planes {
    nb: usize,
    n: usize,
    v: Vec<Rec>,
}

/// The records of weight block `b` of the column whose activation blocks are `a` and scales
/// `d` (4 each).
fn rec(a: &[lowbit_core::format::ggml::BlockQ8_0], d: &[f32]) -> Rec {
    let mut r = ZERO;
    for k in 0..4 {
        let q = &a[k].qs;
        for t in 0..8 {
            for p in 0..4 {
                r.a[p][8 * k + t] = q[4 * t + p];
            }
        }
        r.s[k] = q.iter().map(|&v| i32::from(v)).sum();
        r.d[k] = d[k];
    }
    r
}

/// Fills `out` (`nb` records) for column `j` of Q8_0 activations `a`, `d` (`4 nb` blocks per
/// column).
fn column(
    a: &[lowbit_core::format::ggml::BlockQ8_0],
    d: &[f32],
    nb: usize,
    j: usize,
    out: &mut [Rec],
) {
    let (a, d) = (&a[4 * nb * j..4 * nb * (j + 1)], &d[4 * nb * j..4 * nb * (j + 1)]);
    for (b, r) in out.iter_mut().enumerate() {
        *r = rec(&a[4 * b..4 * b + 4], &d[4 * b..4 * b + 4]);
    }
}

/// The once-per-call hook (`Extras::prep` of the AVX2 table): [`Planes`] for every column, or
/// `None` for activations that are not Q8_0 of whole 128-element blocks.
pub(crate) fn layout(acts: &Acts) -> Option<Layout> {
    use rayon::prelude::*;
    let ActData::Q8_0 { blocks, d } = &acts.data else { return None };
    if acts.k == 0 || acts.k % 128 != 0 || blocks.len() != d.len() {
        return None;
    }
    let nb = acts.k / 128;
    if blocks.len() != acts.n * 4 * nb {
        return None;
    }
    let mut v = vec![ZERO; acts.n * nb];
    v.par_chunks_mut(nb).enumerate().for_each(|(j, out)| column(blocks, d, nb, j, out));
    Some(Layout(std::sync::Arc::new(Planes { nb, n: acts.n, v })))
}

/// The records of columns `cols` from the call's layout when it holds [`Planes`] for `nb`
/// blocks and every column, else built here.
fn records<'a>(
    acts: &'a Acts,
    s: &Shape<'_>,
    cols: &Range<usize>,
    local: &'a mut Vec<Rec>,
) -> &'a [Rec] {
    let nb = s.nb;
    if let Some(p) = acts.layout.as_ref().and_then(|l| l.0.downcast_ref::<Planes>()) {
        if p.nb == nb && p.n == acts.n && p.v.len() == acts.n * nb && cols.end <= acts.n {
            return &p.v[cols.start * nb..cols.end * nb];
        }
    }
    let ActSlice::Q8_0(a, d) = s.act else { return &[] };
    *local = vec![ZERO; cols.len() * nb];
    for (c, j) in cols.clone().enumerate() {
        column(a, d, nb, j, &mut local[c * nb..(c + 1) * nb]);
    }
    local
}

/// Runs the body on a checked call (`s` from `super::ext::check` for PQ2_0).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold.
#[inline(always)]
pub(crate) unsafe fn run<const MAXC: usize>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let mut local = Vec::new();
    let recs = records(acts, &s, &cols, &mut local);
    if recs.len() != cols.len() * s.nb {
        return;
    }
    // SAFETY: forwarded from the caller; `recs` holds `nb` records per column of the tile.
    unsafe { body::<MAXC>(w, rb, s.nb, recs, cols.len(), out) }
}

/// The four planes (codes 0..=3 as bytes) of the 32 code bytes at `p`.
///
/// # Safety
/// AVX2 is available; `p .. p + 32` is readable.
#[inline(always)]
unsafe fn planes(p: *const u8) -> [__m256i; 4] {
    // SAFETY: reads 32 bytes at `p` (caller); register-only AVX2 operations.
    unsafe {
        let x = _mm256_loadu_si256(p.cast());
        let m = _mm256_set1_epi8(3);
        [
            _mm256_and_si256(x, m),
            _mm256_and_si256(_mm256_srli_epi16::<2>(x), m),
            _mm256_and_si256(_mm256_srli_epi16::<4>(x), m),
            _mm256_and_si256(_mm256_srli_epi16::<6>(x), m),
        ]
    }
}

/// Row `i`'s `sum(c * a)` per activation block: from `v[i]` (lane `m` = the part of block
/// `m / 2`), vector `k` lane `i` = `v[i][2k] + v[i][2k + 1]`.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn per_block(v: &[__m256i; 8]) -> [__m256i; 4] {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        // h(2q) = [r2q k0, r2q k1, r2q+1 k0, r2q+1 k1 | the same for k2, k3].
        let h = [
            _mm256_hadd_epi32(v[0], v[1]),
            _mm256_hadd_epi32(v[2], v[3]),
            _mm256_hadd_epi32(v[4], v[5]),
            _mm256_hadd_epi32(v[6], v[7]),
        ];
        let mut u = [_mm256_setzero_si256(); 4];
        for q in 0..2 {
            let t0 = _mm256_unpacklo_epi32(h[2 * q], h[2 * q + 1]);
            let t1 = _mm256_unpackhi_epi32(h[2 * q], h[2 * q + 1]);
            // Rows 4q..4q+4: [k0 | k2] and [k1 | k3].
            u[2 * q] = _mm256_unpacklo_epi32(t0, t1);
            u[2 * q + 1] = _mm256_unpackhi_epi32(t0, t1);
        }
        [
            _mm256_permute2x128_si256::<0x20>(u[0], u[2]),
            _mm256_permute2x128_si256::<0x20>(u[1], u[3]),
            _mm256_permute2x128_si256::<0x31>(u[0], u[2]),
            _mm256_permute2x128_si256::<0x31>(u[1], u[3]),
        ]
    }
}

/// The four plane vectors of a record.
///
/// # Safety
/// AVX is available.
#[inline(always)]
unsafe fn load_rec(r: &Rec) -> [__m256i; 4] {
    // SAFETY: aligned 32-byte loads inside `r` (`Rec` is 32-byte aligned).
    unsafe {
        [
            _mm256_load_si256(r.a[0].as_ptr().cast()),
            _mm256_load_si256(r.a[1].as_ptr().cast()),
            _mm256_load_si256(r.a[2].as_ptr().cast()),
            _mm256_load_si256(r.a[3].as_ptr().cast()),
        ]
    }
}

/// One row's i32 lanes `sum(c * a)` over bytes `4m .. 4m + 4` of the four planes (i16 sums of
/// four `vpmaddubsw`, exact: < 2^15).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn dot4(c: &[__m256i; 4], a: &[__m256i; 4], ones: __m256i) -> __m256i {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        let p01 =
            _mm256_add_epi16(_mm256_maddubs_epi16(c[0], a[0]), _mm256_maddubs_epi16(c[1], a[1]));
        let p23 =
            _mm256_add_epi16(_mm256_maddubs_epi16(c[2], a[2]), _mm256_maddubs_epi16(c[3], a[3]));
        _mm256_madd_epi16(_mm256_add_epi16(p01, p23), ones)
    }
}

/// The reference's `s = 0; s += d_a[k] * ((ks[k] - sum_a[k]) as f32)` for k = 0..4, per lane.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn scale(ks: &[__m256i; 4], r: &Rec) -> __m256 {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        let mut sf = _mm256_setzero_ps();
        for ((&kv, &sa), &da) in ks.iter().zip(&r.s).zip(&r.d) {
            let sumi = _mm256_sub_epi32(kv, _mm256_set1_epi32(sa));
            sf = _mm256_add_ps(sf, _mm256_mul_ps(_mm256_set1_ps(da), _mm256_cvtepi32_ps(sumi)));
        }
        sf
    }
}

/// The body: rows in groups of 8 (one per lane), up to `MAXC` columns.
///
/// # Safety
/// AVX2, FMA and F16C are available; `w` is whole rows of `rb = 34 nb` bytes; `recs` holds
/// `nb` records for each of `nc` (`1..=MAXC`) columns; `out.len() == rows * nc`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // rows and planes index several arrays at once
unsafe fn body<const MAXC: usize>(
    w: &[u8],
    rb: usize,
    nb: usize,
    recs: &[Rec],
    nc: usize,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let nc = nc.min(MAXC);
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (block `b < nb`, bytes
    // `34 b .. 34 b + 34`); record indices `jj * nb + b < nc * nb`; AVX2/FMA/F16C available;
    // prefetch hints never fault.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let pfx = super::Prefetch::DEFAULT.one_group_ahead(8 * rb);
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<8>(w, rb, nrows, r0);
            let mut acc = [_mm256_setzero_ps(); MAXC];
            for b in 0..nb {
                let mut bp = rp;
                for i in 0..8 {
                    bp[i] = rp[i].add(34 * b);
                    pfx.span(bp[i], 34);
                }
                let dw = f16x8(&bp, 0);
                if MAXC == 1 {
                    // One column: each row's planes go straight into its dot (no 32-register
                    // array of every row's planes kept across the columns).
                    let r = &recs[b];
                    let av = load_rec(r);
                    let mut v = [_mm256_setzero_si256(); 8];
                    for i in 0..8 {
                        v[i] = dot4(&planes(bp[i].add(2)), &av, ones);
                    }
                    acc[0] = _mm256_add_ps(acc[0], _mm256_mul_ps(dw, scale(&per_block(&v), r)));
                    continue;
                }
                let mut cv = [[_mm256_setzero_si256(); 4]; 8];
                for i in 0..8 {
                    cv[i] = planes(bp[i].add(2));
                }
                for jj in 0..nc {
                    let r = &recs[jj * nb + b];
                    let av = load_rec(r);
                    let mut v = [_mm256_setzero_si256(); 8];
                    for i in 0..8 {
                        v[i] = dot4(&cv[i], &av, ones);
                    }
                    acc[jj] = _mm256_add_ps(acc[jj], _mm256_mul_ps(dw, scale(&per_block(&v), r)));
                }
            }
            store_rows(&acc, nc, r0, here, out);
            r0 += 8;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::act::Acts;
    use crate::isa::Isa;
    use lowbit_core::FormatId;

    /// The kernel gives the same bits with the once-per-call records ([`super::layout`]) as
    /// with its own (no layout: what a caller without the `prep` hook gets), for whole tiles and
    /// column sub-ranges. (Against the reference: tests/matmul.rs,
    /// `avx2_two_bit_ternary_is_the_reference_bit_for_bit`.)
    #[test]
    fn shared_and_local_records_agree() {
        if !Isa::Avx2.available() {
            return;
        }
        let f = super::super::ext::kernel_avx2(FormatId::Pq2_0).unwrap().f;
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let (rows, k) = (11, 384);
        let rb = k / 128 * 34;
        let mut w = vec![0u8; rows * rb];
        for b in w.chunks_exact_mut(34) {
            let d = half::f16::from_f32((next() % 1000) as f32 * 1e-5 + 1e-4);
            b[..2].copy_from_slice(&d.to_bits().to_le_bytes());
            b[2..].iter_mut().for_each(|q| *q = next() as u8);
        }
        for n in [1, 3, 16] {
            let x: Vec<f32> = (0..n * k).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect();
            let mut acts = Acts::prepare(FormatId::Pq2_0, &x, n, k).unwrap();
            for cols in [0..n, n / 2..n] {
                let m = cols.len();
                let (mut y0, mut y1) = (vec![0f32; rows * m], vec![1f32; rows * m]);
                acts.layout = None;
                f(FormatId::Pq2_0, &w, rb, &acts, cols.clone(), &mut y0).unwrap();
                acts.layout = super::layout(&acts);
                assert!(acts.layout.is_some());
                f(FormatId::Pq2_0, &w, rb, &acts, cols.clone(), &mut y1).unwrap();
                for (i, (a, b)) in y0.iter().zip(&y1).enumerate() {
                    assert_eq!(a.to_bits(), b.to_bits(), "n={n} cols={cols:?} y[{i}]: {a} vs {b}");
                }
            }
        }
    }
}
