//! AVX2 kernel body for Q3_K, Q4_K, Q5_K and Q6_K weights against Q8_K activations,
//! bit-identical to the core's reference (`format::ggml::kquant`), which follows ggml's generic
//! 8-lane order: per row, eight f32 lane sums `sums[l] += (d_w * d_a) * (lane_l as f32)` with
//! `lane_l` the exact i32 sum of `scale * q * a` over the elements `e` with `e % 8 == l`,
//! a separate `sumf -= (dmin_w * d_a) * (Σ_j bsums[j] * min[j / 2] as f32)`, and at the end
//! `sumf + sums[0] + ... + sums[7]` (Q6_K, Q3_K: no min term, a signed scale per 16
//! elements; Q5_K: Q4_K's scales and mins with a fifth quant bit). Bound: the reference's
//! (per the core's docs c = 2 for Q4_K and Q6_K, c = 1 for Q3_K and Q5_K).
//!
//! Q6_K quants `q` (-32..=31) enter `maddubs` as `q + 32` (0..=63), Q3_K quants (-4..=3) as
//! `q + 4` (0..=7: the 2 low bits plus 4 times the `hmask` bit), and the pair sums are
//! corrected by `32 * (a_e + a_e')` or `4 * (a_e + a_e')` (one shift of `maddubs(1, a)`, once
//! per column): every step stays inside i16 (|pair| <= 2 * 63 * 128, corrected |pair| <=
//! 2 * 32 * 128). Q5_K quants are 0..=31 (|pair| <= 2 * 31 * 128). The high bits of Q3_K and
//! Q5_K (bit `sb` of byte `e % 32` for sub-block `sb`) are in the same byte positions as the
//! low bits, so they go through the same lane shuffle once per row and block.
//!
//! Shape: rows in groups of 8, one row per vector lane for the f32 state (9 accumulators per
//! column). Integer part per row and column: each 32-element sub-block of weights and of
//! activations is put in *lane order* ([`to_lanes`]: dword `l` holds elements `l, l + 8,
//! l + 16, l + 24`, one `vpermd` and one `vpshufb` per 32 bytes; weights once per row and
//! block, activations once per column, block and row group), so `maddubs` pairs two elements
//! of lane `l` (no saturation: 2 * 15 * 128 < 2^15) and one `madd` by the sub-block's i16
//! scale vector (Q6_K: its two 16-element scales alternating) adds the dword's two pairs,
//! giving sub-block `sb`'s scaled lane-`l` sum exactly in dword `l`; eight such terms added
//! are the row's eight i32 lane sums. (Until session 12 the order was `0, 8, 1, 9, ..., 7,
//! 15` within each 16 elements, and two sub-blocks' pair sums were interleaved by
//! `punpck{l,h}wd` to meet their scales in one `madd`, then the 128-bit halves added: 8
//! unpacks and 3 more operations per row, column and block.) Q4_K's scales and mins are
//! unpacked with vector operations ([`scales_mins_k4_vec`]), not per byte.
//! An 8x8 transpose then turns 8 rows' lane vectors into 8 vectors (one per lane `l`) across
//! rows.
//!
//! Loop order per block and row group (session 13): the columns' lane-order activations
//! first, then each row's block decoded and met at once by every column, so a one-column tile
//! keeps the decoded block in registers. Until then all 8 rows were decoded into arrays first
//! and read back per column: 128 vectors spilled to the stack and reloaded per block, which
//! held Q4_K and Q6_K at 0.32-0.42 of the one-thread read ceiling at n = 1 on the Zen 3 VM
//! (4096x14336 and 14336x4096; now 0.60-0.72, docs/BENCHMARKS.md session 13 (kq)).
//!
//! What must not live here: length checks and entry points (`ext.rs` for Q4_K and Q6_K,
//! `kquant_avx2.rs` for Q3_K and Q5_K), other formats.

use std::arch::x86_64::*;
use std::ops::Range;

use super::ext::{
    f16x8, geometry, hsum8, row_ptrs, store_rows, ActSlice, Shape, W_Q3K, W_Q4K, W_Q5K, W_Q6K,
};
use super::Prefetch;

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

/// The lane order of a 32-element sub-block, as [`to_lanes`] makes it: dword `l` holds
/// elements `l, l + 8, l + 16, l + 24` (byte `4l + t` = element `l + 8t`), the elements of
/// ggml's lane `l`. `vpermd` first gathers source dwords 0, 2, 4, 6 into the low and 1, 3, 5, 7
/// into the high 128 bits; this `vpshufb` index then transposes each 4x4 byte block.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn lane_shuffle() -> (__m256i, __m256i) {
    // SAFETY: register-only AVX operations.
    unsafe {
        #[rustfmt::skip]
        let t = _mm256_setr_epi8(
            0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
            0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
        );
        (_mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7), t)
    }
}

/// 32 bytes in element order to the lane order of [`lane_shuffle`] (`(d, t)` its result).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn to_lanes(x: __m256i, (d, t): (__m256i, __m256i)) -> __m256i {
    // SAFETY: register-only AVX2 operations.
    unsafe { _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(x, d), t) }
}

/// Q4_K's 12 packed scale/min bytes (block bytes 4..16) unpacked as
/// `[sc0..3, m0..3, sc4..7, m4..7]` (ggml's `get_scale_min_k4`, as the core's
/// `scales_mins_k4`): with `a = q[0..8]` and `u = q[8..12]`, `sc0..3 = a[0..4] & 63`,
/// `m0..3 = a[4..8] & 63`, `sc4..7 = (u & 15) | (a[0..4] >> 6) << 4`,
/// `m4..7 = (u >> 4) | (a[4..8] >> 6) << 4`.
///
/// # Safety
/// `q .. q + 16` is readable; AVX2 is available.
#[inline(always)]
unsafe fn scales_mins_k4_vec(q: *const u8) -> __m128i {
    // SAFETY: reads bytes 0..16 at `q` (caller); register-only operations.
    unsafe {
        let h = _mm_loadu_si128(q.cast());
        let y = _mm_shuffle_epi8(
            h,
            _mm_setr_epi8(4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 12, 13, 14, 15),
        );
        let lo = _mm_and_si128(
            _mm_srlv_epi32(y, _mm_setr_epi32(0, 0, 0, 4)),
            _mm_set_epi64x(0x0F0F_0F0F_0F0F_0F0F, 0x3F3F_3F3F_3F3F_3F3F),
        );
        let hi = _mm_and_si128(
            _mm_srli_epi16::<2>(_mm_unpacklo_epi64(y, y)),
            _mm_set_epi64x(0x3030_3030_3030_3030, 0),
        );
        _mm_or_si128(lo, hi)
    }
}

/// Q4_K (`K6 = false`) or Q6_K (`K6 = true`) rows against Q8_K columns: [`lanes`] for
/// `ext.rs`'s entry points.
///
/// # Safety
/// As [`lanes`].
#[inline(always)]
pub(crate) unsafe fn kq<const K6: bool, const MAXC: usize>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        if K6 {
            lanes::<W_Q6K, MAXC>(w, rb, s, cols, out)
        } else {
            lanes::<W_Q4K, MAXC>(w, rb, s, cols, out)
        }
    }
}

/// Whether weight code `f` has a signed scale per 16 elements and no mins (Q3_K, Q6_K), its
/// quants entering `maddubs` offset to unsigned (Q6_K + 32, Q3_K + 4); else (Q4_K, Q5_K) an
/// unsigned scale and a min per 32 elements and unsigned quants.
const fn sub16(f: u8) -> bool {
    matches!(f, W_Q3K | W_Q6K)
}

/// Byte offset of the f16 `d` in a block of weight code `f` (`dmin`, where the format has one,
/// follows at `+ 2`).
const fn d_offset(f: u8) -> usize {
    match f {
        W_Q6K => 208,
        W_Q3K => 108,
        _ => 0,
    }
}

/// One row's block decoded for [`lanes`]: per 32-element sub-block the quants in lane order
/// (unsigned, offset for [`sub16`] formats), the i16 scale vector that `madd` meets them with,
/// and (Q4_K, Q5_K) the mins, each repeated for the two bsums of its sub-block.
type Decoded = ([__m256i; 8], [__m256i; 8], __m256i);

/// Decodes the block at `q` of weight code `F` (see [`Decoded`]; the bit layouts are the
/// core's `format::ggml::kquant`, from ggml's `block_q*_K` / `dequantize_row_q*_K`).
///
/// # Safety
/// The block's bytes at `q` are readable; AVX2 is available.
#[inline(always)]
unsafe fn decode<const F: u8>(q: *const u8, ls: (__m256i, __m256i)) -> Decoded {
    // SAFETY: every load reads inside the block (Q4_K 144, Q5_K 176, Q6_K 210, Q3_K 110
    // bytes); register-only operations otherwise.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let m2 = _mm256_set1_epi8(3);
        let mut qv = [_mm256_setzero_si256(); 8];
        let mut sv = [_mm256_setzero_si256(); 8];
        let mut mv = _mm256_setzero_si256();
        match F {
            W_Q6K => {
                let ql: [__m256i; 4] = core::array::from_fn(|c| {
                    to_lanes(_mm256_loadu_si256(q.add(32 * c).cast()), ls)
                });
                let qh: [__m256i; 2] = core::array::from_fn(|h| {
                    to_lanes(_mm256_loadu_si256(q.add(128 + 32 * h).cast()), ls)
                });
                for (sb, v) in qv.iter_mut().enumerate() {
                    let (h, r) = (sb / 4, sb % 4);
                    let lo = ql[2 * h + r % 2];
                    let lo = if r < 2 { lo } else { _mm256_srli_epi16::<4>(lo) };
                    let hi = match r {
                        0 => qh[h],
                        1 => _mm256_srli_epi16::<2>(qh[h]),
                        2 => _mm256_srli_epi16::<4>(qh[h]),
                        _ => _mm256_srli_epi16::<6>(qh[h]),
                    };
                    *v = _mm256_or_si256(
                        _mm256_and_si256(lo, m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(hi, m2)),
                    );
                }
                // The 16 i8 scales as i16.
                let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(q.add(192).cast()));
                spread16(sc16, &mut sv);
            }
            W_Q3K => {
                // Low bits: plane `sb % 4` of `qs[32 (sb / 4)..]` (bytes 32..96); high bit:
                // bit `sb` of `hmask` (bytes 0..32), moved to bit 2 (every shift below keeps
                // the bit inside its byte): `u = low + 4 high = q + 4` in 0..=7.
                let hm = to_lanes(_mm256_loadu_si256(q.cast()), ls);
                let ql: [__m256i; 2] = core::array::from_fn(|h| {
                    to_lanes(_mm256_loadu_si256(q.add(32 + 32 * h).cast()), ls)
                });
                let b2 = _mm256_set1_epi8(4);
                for sb in 0..8 {
                    let x = ql[sb / 4];
                    let lo = match sb % 4 {
                        0 => x,
                        1 => _mm256_srli_epi16::<2>(x),
                        2 => _mm256_srli_epi16::<4>(x),
                        _ => _mm256_srli_epi16::<6>(x),
                    };
                    let hb = match sb {
                        0 => _mm256_slli_epi16::<2>(hm),
                        1 => _mm256_slli_epi16::<1>(hm),
                        2 => hm,
                        3 => _mm256_srli_epi16::<1>(hm),
                        4 => _mm256_srli_epi16::<2>(hm),
                        5 => _mm256_srli_epi16::<3>(hm),
                        6 => _mm256_srli_epi16::<4>(hm),
                        _ => _mm256_srli_epi16::<5>(hm),
                    };
                    qv[sb] = _mm256_or_si256(_mm256_and_si256(lo, m2), _mm256_and_si256(hb, b2));
                }
                spread16(super::q3k512::scales(q.add(96)), &mut sv);
            }
            _ => {
                let sm = _mm256_broadcastsi128_si256(scales_mins_k4_vec(q));
                for (s, v) in sv.iter_mut().enumerate() {
                    // Byte of scale `s` in `[sc0..3, m0..3, sc4..7, m4..7]`, zero-extended.
                    let at = if s < 4 { s } else { s + 4 } as i16;
                    *v = _mm256_shuffle_epi8(sm, _mm256_set1_epi16(at | -0x8000));
                }
                #[rustfmt::skip]
                let mi = _mm256_setr_epi8(
                    4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1,
                    12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1,
                );
                mv = _mm256_shuffle_epi8(sm, mi);
                // Q5_K: nibbles at 48, high bits (`qh`, bit `sb` of byte `e % 32`) at 16.
                let (qs, hm) = if F == W_Q5K {
                    (q.add(48), to_lanes(_mm256_loadu_si256(q.add(16).cast()), ls))
                } else {
                    (q.add(16), _mm256_setzero_si256())
                };
                let b4 = _mm256_set1_epi8(16);
                for c in 0..4 {
                    let x = to_lanes(_mm256_loadu_si256(qs.add(32 * c).cast()), ls);
                    qv[2 * c] = _mm256_and_si256(x, m4);
                    qv[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4);
                }
                if F == W_Q5K {
                    for (sb, v) in qv.iter_mut().enumerate() {
                        // Bit `sb` of each byte to bit 4 (inside the byte for these shifts).
                        let hb = match sb {
                            0 => _mm256_slli_epi16::<4>(hm),
                            1 => _mm256_slli_epi16::<3>(hm),
                            2 => _mm256_slli_epi16::<2>(hm),
                            3 => _mm256_slli_epi16::<1>(hm),
                            4 => hm,
                            5 => _mm256_srli_epi16::<1>(hm),
                            6 => _mm256_srli_epi16::<2>(hm),
                            _ => _mm256_srli_epi16::<3>(hm),
                        };
                        *v = _mm256_or_si256(*v, _mm256_and_si256(hb, b4));
                    }
                }
            }
        }
        (qv, sv, mv)
    }
}

/// Spreads 16 i16 scales (one per 16 elements) into the 8 sub-blocks' `madd` vectors: dword
/// `sb` = (scale `2 sb`, scale `2 sb + 1`) in every dword, word 0 meeting elements `l, l + 8`
/// and word 1 elements `l + 16, l + 24` of lane `l`.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn spread16(sc16: __m256i, sv: &mut [__m256i; 8]) {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        for (sb, v) in sv.iter_mut().enumerate() {
            *v = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(sb as i32));
        }
    }
}

/// Q3_K, Q4_K, Q5_K or Q6_K (weight code `F`) rows against Q8_K columns (see the module doc).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold for the format
/// (`s.act` is Q8_K with `nb` blocks per column, `1 <= cols.len() <= MAXC`).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // row and sub-block indices address several arrays
pub(crate) unsafe fn lanes<const F: u8, const MAXC: usize>(
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
    // `b * bs .. (b + 1) * bs`, bs the format's block bytes); activation blocks are indexed
    // safely and their `qs` (256 bytes) and `bsums` (32 bytes) read whole; prefetch hints
    // never fault; AVX2/FMA/F16C are available.
    unsafe {
        let ls = lane_shuffle();
        let ones8 = _mm256_set1_epi8(1);
        let bsz = geometry(F).0;
        // Each row stream prefetched into L2 one row group ahead, as `super::z512`'s drivers
        // do ([`Prefetch::one_group_ahead`]): until session 12 this body left the eight
        // streams to the hardware prefetcher.
        let pfx = Prefetch::DEFAULT.one_group_ahead(8 * rb);
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<8>(w, rb, nrows, r0);
            // Per column: sums[0..8] then sumf.
            let mut acc = [[_mm256_setzero_ps(); 9]; MAXC];
            for b in 0..nb {
                let mut bp = rp;
                // Per column: the activations in lane order and (Q3_K, Q6_K) their offset
                // corrections, made once per block and row group.
                let mut av = [[_mm256_setzero_si256(); 8]; MAXC];
                let mut aoff = [[_mm256_setzero_si256(); 8]; MAXC];
                for jj in 0..nc {
                    let yp = a[(cols.start + jj) * nb + b].qs.as_ptr();
                    for g in 0..8 {
                        let v = to_lanes(_mm256_loadu_si256(yp.add(32 * g).cast()), ls);
                        av[jj][g] = v;
                        if sub16(F) {
                            let p = _mm256_maddubs_epi16(ones8, v);
                            aoff[jj][g] = if F == W_Q6K {
                                _mm256_slli_epi16::<5>(p)
                            } else {
                                _mm256_slli_epi16::<2>(p)
                            };
                        }
                    }
                }
                // Per column: the 8 rows' lane sums and (Q4_K, Q5_K) min-term partials.
                let mut lanes = [[_mm256_setzero_si256(); 8]; MAXC];
                let mut mins = [[_mm256_setzero_si256(); 8]; MAXC];
                for i in 0..8 {
                    // Row `i`'s block decoded and met at once by every column, so a
                    // one-column tile keeps it in registers.
                    bp[i] = bp[i].add(b * bsz);
                    pfx.span(bp[i], bsz);
                    let (qv, sv, mv) = decode::<F>(bp[i], ls);
                    for jj in 0..nc {
                        // Dword `l` of each term: the scaled exact sum of sub-block `sb`'s
                        // four lane-`l` elements (word pairs `l, l + 8` and `l + 16, l + 24`).
                        let t = |sb: usize| {
                            let mut x = _mm256_maddubs_epi16(qv[sb], av[jj][sb]);
                            if sub16(F) {
                                x = _mm256_sub_epi16(x, aoff[jj][sb]);
                            }
                            _mm256_madd_epi16(x, sv[sb])
                        };
                        let s01 = _mm256_add_epi32(t(0), t(1));
                        let s23 = _mm256_add_epi32(t(2), t(3));
                        let s45 = _mm256_add_epi32(t(4), t(5));
                        let s67 = _mm256_add_epi32(t(6), t(7));
                        lanes[jj][i] = _mm256_add_epi32(
                            _mm256_add_epi32(s01, s23),
                            _mm256_add_epi32(s45, s67),
                        );
                        if !sub16(F) {
                            let blk = &a[(cols.start + jj) * nb + b];
                            let bs = _mm256_loadu_si256(blk.bsums.as_ptr().cast());
                            mins[jj][i] = _mm256_madd_epi16(bs, mv);
                        }
                    }
                }
                let dw = f16x8(&bp, d_offset(F));
                let dmw = f16x8(&bp, 2);
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let blk = &a[(cols.start + jj) * nb + b];
                    let t = transpose8(&lanes[jj]);
                    let yd = _mm256_set1_ps(blk.d);
                    let d = _mm256_mul_ps(dw, yd);
                    for l in 0..8 {
                        let v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(t[l]));
                        accj[l] = _mm256_add_ps(accj[l], v);
                    }
                    if sub16(F) {
                        continue;
                    }
                    let (lo, hi) = hsum8(&mins[jj]);
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
