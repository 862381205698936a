//! AVX2 kernel body for Q4_K and Q6_K weights against Q8_K activations, bit-identical to the
//! core's reference (`format::ggml::kquant`), which follows ggml's generic 8-lane order: per row,
//! eight f32 lane sums `sums[l] += (d_w * d_a) * (lane_l as f32)` with `lane_l` the exact i32
//! sum of `scale * q * a` over the elements `e` with `e % 8 == l`, a separate
//! `sumf -= (dmin_w * d_a) * (Σ_j bsums[j] * min[j / 2] as f32)`, and at the end
//! `sumf + sums[0] + ... + sums[7]` (Q6_K: no min term, signed 8-bit scale per 16 elements).
//! Bound: the reference's (c = 2 per the core's docs).
//!
//! Q6_K quants `q` (-32..=31) enter `maddubs` as `q + 32` (0..=63) and the pair sums are
//! corrected by `32 * (a_e + a_e')` (one shift of `maddubs(1, a)`, once per column): every
//! step stays inside i16 (|pair| <= 2 * 63 * 128, corrected |pair| <= 2 * 32 * 128).//!
//! Shape: rows in groups of 8, one row per vector lane for the f32 state (9 accumulators per
//! column). Integer part per row and column: within each 16-element group, weights and
//! activations are permuted to the order `0, 8, 1, 9, ..., 7, 15` (weights once per row and
//! block, activations once per column and block), so `maddubs` pairs two elements of the
//! same lane `l` (no saturation: 2 * 15 * 128 < 2^15); two sub-blocks' pair sums interleaved
//! by `punpck{l,h}wd` meet their two 6-bit scales in one `madd`, giving i32 lane sums exactly.
//! An 8x8 transpose then turns 8 rows' lane vectors into 8 vectors (one per lane `l`) across
//! rows.
//!
//! What must not live here: length checks and entry points (`ext.rs`), other formats.

use std::arch::x86_64::*;
use std::ops::Range;

use lowbit_core::format::ggml::kquant::scales::scales_mins_k4;

use super::ext::{f16x8, hsum8, row_ptrs, store_rows, ActSlice, Shape};

/// Block bytes of Q4_K.
const BS4: usize = 144;
/// Block bytes of Q6_K.
const BS6: usize = 210;

/// Transposes 8 vectors of 8 i32 (`v[i]` lane `l` -> result `l` lane `i`).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn transpose8(v: &[__m256i; 8]) -> [__m256i; 8] {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        let t: [__m256i; 8] = core::array::from_fn(|i| {
            let (a, b) = (v[2 * (i / 2)], v[2 * (i / 2) + 1]);
            if i % 2 == 0 {
                _mm256_unpacklo_epi32(a, b)
            } else {
                _mm256_unpackhi_epi32(a, b)
            }
        });
        // u[4h + m]: lanes m (low 128) and m + 4 (high 128) of rows 4h..4h+4.
        let mut u = [_mm256_setzero_si256(); 8];
        for h in 0..2 {
            let (t0, t1, t2, t3) = (t[4 * h], t[4 * h + 1], t[4 * h + 2], t[4 * h + 3]);
            u[4 * h] = _mm256_unpacklo_epi64(t0, t2);
            u[4 * h + 1] = _mm256_unpackhi_epi64(t0, t2);
            u[4 * h + 2] = _mm256_unpacklo_epi64(t1, t3);
            u[4 * h + 3] = _mm256_unpackhi_epi64(t1, t3);
        }
        let mut r = [_mm256_setzero_si256(); 8];
        for m in 0..4 {
            r[m] = _mm256_permute2x128_si256::<0x20>(u[m], u[4 + m]);
            r[m + 4] = _mm256_permute2x128_si256::<0x31>(u[m], u[4 + m]);
        }
        r
    }
}

/// The in-group permutation `0, 8, 1, 9, ..., 7, 15` of both 16-byte lanes.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn perm() -> __m256i {
    // SAFETY: register-only AVX operation.
    unsafe {
        #[rustfmt::skip]
        let p = _mm256_setr_epi8(
            0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,
            0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,
        );
        p
    }
}

/// Q4_K (`K6 = false`) or Q6_K (`K6 = true`) rows against Q8_K columns (see the module doc).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold for the format
/// (`s.act` is Q8_K with `nb` blocks per column, `1 <= cols.len() <= MAXC`).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // row and sub-block indices address several arrays
pub(crate) unsafe fn kq<const K6: bool, const MAXC: usize>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let ActSlice::Q8K(a) = s.act else { return };
    let nb = s.nb;
    let nrows = w.len() / rb;
    let nc = cols.len().min(MAXC);
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (block `b < nb`, bytes
    // `b * bs .. (b + 1) * bs`, bs = 144 or 210); activation blocks are indexed safely and their `qs` (256
    // bytes) and `bsums` (32 bytes) read whole; AVX2/FMA/F16C are available.
    unsafe {
        let p = perm();
        let m4 = _mm256_set1_epi8(0x0F);
        let m2 = _mm256_set1_epi8(3);
        let ones8 = _mm256_set1_epi8(1);
        let bsz = if K6 { BS6 } else { BS4 };
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<8>(w, rb, nrows, r0);
            // Per column: sums[0..8] then sumf.
            let mut acc = [[_mm256_setzero_ps(); 9]; MAXC];
            for b in 0..nb {
                let mut bp = rp;
                // Per row: the 8 sub-blocks' permuted quants, 4 scale-pair vectors, the mins.
                let mut qv = [[_mm256_setzero_si256(); 8]; 8];
                let mut sv = [[_mm256_setzero_si256(); 4]; 8];
                let mut mv = [_mm256_setzero_si256(); 8];
                for i in 0..8 {
                    bp[i] = bp[i].add(b * bsz);
                    if K6 {
                        let q = bp[i];
                        for sb in 0..8 {
                            let (h, r) = (sb / 4, sb % 4);
                            let lo = _mm256_loadu_si256(q.add(64 * h + 32 * (r % 2)).cast());
                            let hi = _mm256_loadu_si256(q.add(128 + 32 * h).cast());
                            let lo = if r < 2 { lo } else { _mm256_srli_epi16::<4>(lo) };
                            let hi = match r {
                                0 => hi,
                                1 => _mm256_srli_epi16::<2>(hi),
                                2 => _mm256_srli_epi16::<4>(hi),
                                _ => _mm256_srli_epi16::<6>(hi),
                            };
                            let u = _mm256_or_si256(
                                _mm256_and_si256(lo, m4),
                                _mm256_slli_epi16::<4>(_mm256_and_si256(hi, m2)),
                            );
                            qv[i][sb] = _mm256_shuffle_epi8(u, p);
                        }
                        let sc: &[i8; 16] = &*q.add(192).cast::<[i8; 16]>();
                        let pair = |x: i8, y: i8| i32::from(x as i16 as u16) | i32::from(y) << 16;
                        for c in 0..4 {
                            sv[i][c] = _mm256_set_m128i(
                                _mm_set1_epi32(pair(sc[4 * c + 1], sc[4 * c + 3])),
                                _mm_set1_epi32(pair(sc[4 * c], sc[4 * c + 2])),
                            );
                        }
                        continue;
                    }
                    let sc_bytes: &[u8; 12] = &*bp[i].add(4).cast::<[u8; 12]>();
                    let (sc, mn) = scales_mins_k4(sc_bytes);
                    for c in 0..4 {
                        let x = _mm256_loadu_si256(bp[i].add(16 + 32 * c).cast());
                        let lo = _mm256_and_si256(x, m4);
                        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4);
                        qv[i][2 * c] = _mm256_shuffle_epi8(lo, p);
                        qv[i][2 * c + 1] = _mm256_shuffle_epi8(hi, p);
                        let pair = i32::from(sc[2 * c]) | i32::from(sc[2 * c + 1]) << 16;
                        sv[i][c] = _mm256_set1_epi32(pair);
                    }
                    let m16: [i16; 16] = core::array::from_fn(|j| i16::from(mn[j / 2]));
                    mv[i] = _mm256_loadu_si256(m16.as_ptr().cast());
                }
                let dw = f16x8(&bp, if K6 { 208 } else { 0 });
                let dmw = f16x8(&bp, 2);
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let blk = &a[(cols.start + jj) * nb + b];
                    let yp = blk.qs.as_ptr();
                    let mut av = [_mm256_setzero_si256(); 8];
                    let mut a32 = [_mm256_setzero_si256(); 8];
                    for (g, v) in av.iter_mut().enumerate() {
                        *v = _mm256_shuffle_epi8(_mm256_loadu_si256(yp.add(32 * g).cast()), p);
                        if K6 {
                            a32[g] = _mm256_slli_epi16::<5>(_mm256_maddubs_epi16(ones8, *v));
                        }
                    }
                    let bs = _mm256_loadu_si256(blk.bsums.as_ptr().cast());
                    let mut lanes = [_mm256_setzero_si256(); 8];
                    let mut mins = [_mm256_setzero_si256(); 8];
                    for i in 0..8 {
                        let mut ua = _mm256_setzero_si256();
                        let mut va = _mm256_setzero_si256();
                        for c in 0..4 {
                            let mut x0 = _mm256_maddubs_epi16(qv[i][2 * c], av[2 * c]);
                            let mut x1 = _mm256_maddubs_epi16(qv[i][2 * c + 1], av[2 * c + 1]);
                            if K6 {
                                x0 = _mm256_sub_epi16(x0, a32[2 * c]);
                                x1 = _mm256_sub_epi16(x1, a32[2 * c + 1]);
                            }
                            let u = _mm256_unpacklo_epi16(x0, x1);
                            let v = _mm256_unpackhi_epi16(x0, x1);
                            ua = _mm256_add_epi32(ua, _mm256_madd_epi16(u, sv[i][c]));
                            va = _mm256_add_epi32(va, _mm256_madd_epi16(v, sv[i][c]));
                        }
                        lanes[i] = _mm256_add_epi32(
                            _mm256_permute2x128_si256::<0x20>(ua, va),
                            _mm256_permute2x128_si256::<0x31>(ua, va),
                        );
                        mins[i] = _mm256_madd_epi16(bs, mv[i]);
                    }
                    let t = transpose8(&lanes);
                    let yd = _mm256_set1_ps(blk.d);
                    let d = _mm256_mul_ps(dw, yd);
                    for l in 0..8 {
                        let v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(t[l]));
                        accj[l] = _mm256_add_ps(accj[l], v);
                    }
                    if K6 {
                        continue;
                    }
                    let (lo, hi) = hsum8(&mins);
                    let mt = _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi));
                    accj[8] = _mm256_sub_ps(accj[8], _mm256_mul_ps(_mm256_mul_ps(dmw, yd), mt));
                }
            }
            let mut res = [_mm256_setzero_ps(); MAXC];
            for (r, a) in res.iter_mut().zip(&acc).take(nc) {
                let mut s = a[8];
                for v in &a[..8] {
                    s = _mm256_add_ps(s, *v);
                }
                *r = s;
            }
            store_rows(&res, nc, r0, here, out);
            r0 += 8;
        }
    }
}
