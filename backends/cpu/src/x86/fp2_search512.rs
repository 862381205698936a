//! AVX-512 ROCmFP2 scale search: the core's fast search (`lowbit-core`,
//! `format/rocmfpx/quad_fp2.rs`, unit weights) run on 8 halves at once, one half per f64 lane.
//! Only the search lives here (no code choice or packing: the core's
//! `codec::encode_rocmfp2_row_with_scales` does those); the safe driver is `crate::fp2_search`.
//!
//! # Why it returns the core's byte
//!
//! Every lane performs the scalar search's f64 operations on the same values in the same order
//! (no FMA: the scalar code has none, and these intrinsics are never contracted): the 16 keys
//! `|x| bits | index` sorted by the same comparator network (`vpmaxuq`/`vpminuq`), `A` summed
//! in the same four lanes, the prefix sums in the same blocks, `B_k = P + 3 P_k`,
//! `v_k = B_k (1 / C_k)`, `m_k = A - B_k v_k`, the same comparison tree for the smallest `m_k`
//! (values and `k` carried with it), the same window of four bytes around each vertex, `T_E`,
//! `T'`, the survivors and the marked bytes. A lane is decided here only where the scalar
//! search would return directly from that state: exactly one marked byte and no walk beyond
//! a window (or `A = 0`: byte 0). Every other lane (index bits in the low four bits of a key,
//! a walk, several or no marked bytes) is handed back to the driver, which runs the core's
//! scalar search on that half. The constants below are the core's (same values; the tests
//! compare the bytes with the core's scalar and exhaustive searches on every ISA).
//!
//! The AVX-512 intrinsics are stable since Rust 1.89 (the workspace MSRV says 1.85, as for the
//! other AVX-512 modules here), hence the `incompatible_msrv` allowance.

#![allow(clippy::incompatible_msrv)]

use core::arch::x86_64::*;

/// Legal scale bytes 0x00..=0x7E.
const NB: i64 = 127;

// The scalar search's constants, so both run the same operations on the same values.
use lowbit_core::codec::rocmfp2_search_consts::{EPS_M, EPS_Q, GROW46, RC, VHI, VLO};

/// Transposes 8 vectors of 8 f64 in place (`r[i]` lane `l` <- `r[l]` lane `i`): for each bit
/// `s` of the index, the entries whose row and lane indices differ in bit `s` swap that bit.
/// A macro so that it is expanded inside the `#[target_feature]` function.
macro_rules! transpose8 {
    ($r:expr) => {
        for s in [1usize, 2, 4] {
            // x' lane l = l & s ? y[l - s] : x[l];  y' lane l = l & s ? y[l] : x[l + s]
            let ix: [i64; 8] =
                core::array::from_fn(|l| if l & s != 0 { (8 + l - s) as i64 } else { l as i64 });
            let iy: [i64; 8] =
                core::array::from_fn(|l| if l & s != 0 { (8 + l) as i64 } else { (l + s) as i64 });
            // SAFETY: reads 8 i64 from each local array (64 bytes); unaligned loads.
            let (ix, iy) = unsafe {
                (_mm512_loadu_si512(ix.as_ptr().cast()), _mm512_loadu_si512(iy.as_ptr().cast()))
            };
            for i in 0..8 {
                if i & s == 0 {
                    let (x, y) = ($r[i], $r[i + s]);
                    $r[i] = _mm512_permutex2var_pd(x, ix, y);
                    $r[i + s] = _mm512_permutex2var_pd(x, iy, y);
                }
            }
        }
    };
}

/// What the vector search found for 8 halves.
pub(crate) struct Found {
    /// The byte of each lane decided here.
    pub bytes: [u8; 8],
    /// Lanes (bit `l`) the vector search did not decide: the caller runs the scalar search.
    pub undecided: u8,
}

/// [`search8`] where the CPU has AVX-512 F/BW/VL (`None` otherwise): the safe entry point.
pub(crate) fn search8_checked(x: &[f32; 128]) -> Option<Found> {
    if !crate::isa::Isa::Avx512.available() {
        return None;
    }
    // SAFETY: `Isa::Avx512.available()` confirmed AVX-512 F/BW/VL and AVX2 on this CPU.
    Some(unsafe { search8(x) })
}

/// The scale bytes of the 8 halves `x[16 l..16 l + 16]`, `l = 0..8`, or `undecided` lanes.
/// Any input values are memory-safe (non-finite ones give some byte; the codec rejects them).
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VL (`Isa::Avx512` available).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
unsafe fn search8(x: &[f32; 128]) -> Found {
    // Element j of every half in vector j: each half widened (elements 0..8 and 8..16), then
    // two 8x8 transposes.
    let mut lo8 = [_mm512_setzero_pd(); 8];
    let mut hi8 = [_mm512_setzero_pd(); 8];
    for l in 0..8 {
        // SAFETY: reads x[16 l..16 l + 16], inside `x` (128 values); unaligned load.
        let v = unsafe { _mm512_loadu_ps(x.as_ptr().add(16 * l)) };
        lo8[l] = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        hi8[l] =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))));
    }
    transpose8!(lo8);
    transpose8!(hi8);
    let absm = _mm512_set1_epi64(0x7fff_ffff_ffff_ffff);
    let mut key = [_mm512_setzero_si512(); 16];
    let mut low = _mm512_setzero_si512();
    for (j, kj) in key.iter_mut().enumerate() {
        let v = if j < 8 { lo8[j] } else { hi8[j - 8] };
        let bits = _mm512_and_si512(_mm512_castpd_si512(v), absm);
        low = _mm512_or_si512(low, bits);
        *kj = _mm512_or_si512(bits, _mm512_set1_epi64(j as i64));
    }
    let low = _mm512_test_epi64_mask(low, _mm512_set1_epi64(15));
    macro_rules! cx {
        ($($i:literal $j:literal),*) => {$(
            let (a, b) = (key[$i], key[$j]);
            key[$i] = _mm512_max_epu64(a, b);
            key[$j] = _mm512_min_epu64(a, b);
        )*};
    }
    cx!(0 1, 2 3, 0 2, 1 3, 1 2, 4 5, 6 7, 4 6, 5 7, 5 6, 0 4, 2 6, 2 4, 1 5, 3 7, 3 5, 1 2, 3 4,
        5 6, 8 9, 10 11, 8 10, 9 11, 9 10, 12 13, 14 15, 12 14, 13 15, 13 14, 8 12, 10 14, 10 12,
        9 13, 11 15, 11 13, 9 10, 11 12, 13 14, 0 8, 4 12, 4 8, 2 10, 6 14, 6 10, 2 4, 6 8, 10 12,
        1 9, 5 13, 5 9, 3 11, 7 15, 7 11, 3 5, 7 9, 11 13, 1 2, 3 4, 5 6, 7 8, 9 10, 11 12, 13 14);
    let clear = _mm512_set1_epi64(!15);
    let a: [__m512d; 16] =
        core::array::from_fn(|j| _mm512_castsi512_pd(_mm512_and_si512(key[j], clear)));
    let a2: [__m512d; 16] = core::array::from_fn(|j| _mm512_mul_pd(a[j], a[j]));
    // A: four lanes l_j = ((a2_j + a2_{4+j}) + a2_{8+j}) + a2_{12+j}, then (l0 + l1) + (l2 + l3).
    let l: [__m512d; 4] = core::array::from_fn(|j| {
        _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(a2[j], a2[4 + j]), a2[8 + j]), a2[12 + j])
    });
    let aa = _mm512_add_pd(_mm512_add_pd(l[0], l[1]), _mm512_add_pd(l[2], l[3]));
    let zero_a = _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(aa, _mm512_setzero_pd());
    // Prefix sums of a in four blocks of four, then the block offsets (the core's scan16).
    let mut p = a;
    for b in 0..4 {
        for j in 1..4 {
            p[4 * b + j] = _mm512_add_pd(p[4 * b + j - 1], a[4 * b + j]);
        }
    }
    let o1 = p[3];
    let o2 = _mm512_add_pd(o1, p[7]);
    let o3 = _mm512_add_pd(o2, p[11]);
    for j in 0..4 {
        p[4 + j] = _mm512_add_pd(p[4 + j], o1);
        p[8 + j] = _mm512_add_pd(p[8 + j], o2);
        p[12 + j] = _mm512_add_pd(p[12 + j], o3);
    }
    let pt = p[15];
    let three = _mm512_set1_pd(3.0);
    let mut bk = [_mm512_setzero_pd(); 17];
    let mut vk = [_mm512_setzero_pd(); 17];
    let mut mk = [_mm512_setzero_pd(); 17];
    for k in 0..17 {
        let pk = if k == 0 { _mm512_setzero_pd() } else { p[k - 1] };
        let b = _mm512_add_pd(pt, _mm512_mul_pd(three, pk));
        let v = _mm512_mul_pd(b, _mm512_set1_pd(RC[k]));
        bk[k] = b;
        vk[k] = v;
        mk[k] = _mm512_sub_pd(aa, _mm512_mul_pd(b, v));
    }
    // The core's argmin17 tree, carrying (m, B, v, k).
    let kf: [__m512d; 17] = core::array::from_fn(|k| _mm512_set1_pd(k as f64));
    let pick = |x: (__m512d, __m512d, __m512d, __m512d),
                y: (__m512d, __m512d, __m512d, __m512d)| {
        let lt = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(y.0, x.0);
        (
            _mm512_mask_blend_pd(lt, x.0, y.0),
            _mm512_mask_blend_pd(lt, x.1, y.1),
            _mm512_mask_blend_pd(lt, x.2, y.2),
            _mm512_mask_blend_pd(lt, x.3, y.3),
        )
    };
    let mut t: [(__m512d, __m512d, __m512d, __m512d); 8] = core::array::from_fn(|i| {
        pick(
            (mk[2 * i], bk[2 * i], vk[2 * i], kf[2 * i]),
            (mk[2 * i + 1], bk[2 * i + 1], vk[2 * i + 1], kf[2 * i + 1]),
        )
    });
    let mut n = 8;
    while n > 1 {
        n /= 2;
        for i in 0..n {
            t[i] = pick(t[2 * i], t[2 * i + 1]);
        }
    }
    let (m0, b0, v0, k0) = pick(t[0], (mk[16], bk[16], vk[16], kf[16]));
    let c0 = _mm512_add_pd(_mm512_set1_pd(16.0), _mm512_mul_pd(_mm512_set1_pd(15.0), k0));
    // T_E from the best quadratic's window: its bytes f and min(f + 1, 126).
    let f = floor_byte(v0);
    let w0 = window_start(f);
    let (q, d, s0) = window(aa, b0, c0, w0);
    let eps_q = _mm512_set1_pd(EPS_Q);
    let u: [__m512d; 4] = core::array::from_fn(|i| _mm512_add_pd(q[i], _mm512_mul_pd(eps_q, d[i])));
    let at = |i: __m512i| {
        let mut r = u[0];
        for (j, uj) in u.iter().enumerate().skip(1) {
            let m = _mm512_cmpeq_epi64_mask(i, _mm512_set1_epi64(j as i64));
            r = _mm512_mask_blend_pd(m, r, *uj);
        }
        r
    };
    let inf = _mm512_set1_pd(f64::INFINITY);
    let u0 = at(_mm512_sub_epi64(f, w0));
    let te = _mm512_mask_blend_pd(_mm512_cmp_pd_mask::<_CMP_LT_OQ>(u0, inf), inf, u0);
    let f1 = _mm512_min_epi64(_mm512_add_epi64(f, _mm512_set1_epi64(1)), _mm512_set1_epi64(NB - 1));
    let u1 = at(_mm512_sub_epi64(f1, w0));
    let te = _mm512_mask_blend_pd(_mm512_cmp_pd_mask::<_CMP_LT_OQ>(u1, te), te, u1);
    let tp = _mm512_mul_pd(te, _mm512_set1_pd(GROW46));
    let mcut = _mm512_add_pd(tp, _mm512_mul_pd(_mm512_set1_pd(EPS_M), aa));
    // Survivors and their marked bytes (lanes already settled are skipped): the best
    // quadratic's from its window above, every other survivor's from its own window.
    let settled = low | zero_a;
    let (mut lo, mut hi) = (_mm512_setzero_si512(), _mm512_setzero_si512());
    let live0 = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(m0, mcut) & !settled;
    let mut walk = mark(q, d, s0, w0, v0, tp, live0, &mut lo, &mut hi);
    for k in 0..17 {
        let not_k0 = _mm512_cmp_pd_mask::<_CMP_NEQ_UQ>(k0, kf[k]);
        let live = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(mk[k], mcut) & not_k0 & !settled;
        if live == 0 {
            continue;
        }
        let c = _mm512_set1_pd(16.0 + 15.0 * k as f64);
        let wk = window_start(floor_byte(vk[k]));
        let (q, d, s) = window(aa, bk[k], c, wk);
        walk |= mark(q, d, s, wk, vk[k], tp, live, &mut lo, &mut hi);
    }
    let (mut lo_a, mut hi_a) = ([0u64; 8], [0u64; 8]);
    // SAFETY: each array holds 8 u64 (64 bytes); unaligned stores.
    unsafe {
        _mm512_storeu_si512(lo_a.as_mut_ptr().cast(), lo);
        _mm512_storeu_si512(hi_a.as_mut_ptr().cast(), hi);
    }
    let mut found = Found { bytes: [0; 8], undecided: 0 };
    for l in 0..8 {
        let bit = 1u8 << l;
        if low & bit != 0 || (zero_a & bit == 0 && walk & bit != 0) {
            found.undecided |= bit;
        } else if zero_a & bit != 0 {
            found.bytes[l] = 0;
        } else if lo_a[l].count_ones() + hi_a[l].count_ones() == 1 {
            let pos =
                if lo_a[l] != 0 { lo_a[l].trailing_zeros() } else { 64 + hi_a[l].trailing_zeros() };
            found.bytes[l] = pos as u8;
        } else {
            found.undecided |= bit;
        }
    }
    found
}

/// The core's `mark_bytes` within the window `w0..w0 + 4` (`q`, `D`, scales `s`) of a
/// quadratic with vertex `v`, for the lanes in `live`: the bytes with `q - 2^-45 D <= tp` are
/// set in the 127-bit masks `lo` (bytes 0..64) and `hi` (64..127); returns the lanes whose walk
/// would go on beyond the window (those are left to the scalar search).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
fn mark(
    q: [__m512d; 4],
    d: [__m512d; 4],
    s: [__m512d; 4],
    w0: __m512i,
    v: __m512d,
    tp: __m512d,
    live: __mmask8,
    lo: &mut __m512i,
    hi: &mut __m512i,
) -> __mmask8 {
    let eps_q = _mm512_set1_pd(EPS_Q);
    let mut nib = _mm512_setzero_si512();
    let mut bit = [0u8; 4];
    for i in 0..4 {
        let lhs = _mm512_sub_pd(q[i], _mm512_mul_pd(eps_q, d[i]));
        bit[i] = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(lhs, tp);
        nib = _mm512_mask_or_epi64(nib, bit[i], nib, _mm512_set1_epi64(1 << i));
    }
    let below = _mm512_cmpgt_epi64_mask(w0, _mm512_setzero_si512())
        & (bit[0] | _mm512_cmp_pd_mask::<_CMP_GE_OQ>(s[0], _mm512_mul_pd(v, _mm512_set1_pd(VLO))));
    let above =
        _mm512_cmplt_epi64_mask(_mm512_add_epi64(w0, _mm512_set1_epi64(4)), _mm512_set1_epi64(NB))
            & (bit[3]
                | _mm512_cmp_pd_mask::<_CMP_LE_OQ>(s[3], _mm512_mul_pd(v, _mm512_set1_pd(VHI))));
    // shifts by 64 or more (or "negative" ones, huge as unsigned) give 0
    let lo_k = _mm512_sllv_epi64(nib, w0);
    let hi_k = _mm512_or_si512(
        _mm512_sllv_epi64(nib, _mm512_sub_epi64(w0, _mm512_set1_epi64(64))),
        _mm512_srlv_epi64(nib, _mm512_sub_epi64(_mm512_set1_epi64(64), w0)),
    );
    *lo = _mm512_mask_or_epi64(*lo, live, *lo, lo_k);
    *hi = _mm512_mask_or_epi64(*hi, live, *hi, hi_k);
    live & (below | above)
}

/// The core's `floor_byte` per lane, as i64 in 0..=126 (the clamp at 0 only matters for
/// values the codec rejects).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
fn floor_byte(t: __m512d) -> __m512i {
    let normal =
        _mm512_sub_epi64(_mm512_srli_epi64::<49>(_mm512_castpd_si512(t)), _mm512_set1_epi64(8120));
    let sh = _mm512_add_pd(t, _mm512_set1_pd(1.0 / 128.0));
    let linear =
        _mm512_sub_epi64(_mm512_srli_epi64::<49>(_mm512_castpd_si512(sh)), _mm512_set1_epi64(8128));
    let small = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(t, _mm512_set1_pd(1.0 / 128.0));
    let b = _mm512_mask_blend_epi64(small, normal, linear);
    _mm512_max_epi64(_mm512_min_epi64(b, _mm512_set1_epi64(NB - 1)), _mm512_setzero_si512())
}

/// The first of the four window bytes around a vertex whose floor byte is `f`:
/// `clamp(f, 1, 124) - 1`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
fn window_start(f: __m512i) -> __m512i {
    let c = _mm512_max_epi64(_mm512_min_epi64(f, _mm512_set1_epi64(NB - 3)), _mm512_set1_epi64(1));
    _mm512_sub_epi64(c, _mm512_set1_epi64(1))
}

/// The UE4M3-b8 scale of byte `b` (0..=126) per lane, exactly, without a table: bytes
/// `>= 8` are `(8 + m) 2^(e - 11) = (1 + m/8) 2^(e - 8)` with `e = b >> 3`, `m = b & 7`, whose
/// f64 bits are `(e + 1015) << 52 | m << 49 = (b + 8120) << 49`; bytes `< 8` are `b / 1024`
/// (an exact conversion and an exact product).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
fn scale_of(b: __m512i) -> __m512d {
    let normal =
        _mm512_castsi512_pd(_mm512_slli_epi64::<49>(_mm512_add_epi64(b, _mm512_set1_epi64(8120))));
    let sub =
        _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_cvtepi64_epi32(b)), _mm512_set1_pd(1.0 / 1024.0));
    let small = _mm512_cmplt_epi64_mask(b, _mm512_set1_epi64(8));
    _mm512_mask_blend_pd(small, normal, sub)
}

/// `(q, D, s)` of the quadratic `(aa, b, c)` at the four bytes `w0..w0 + 4`: the core's
/// `quad`, `x = A + (s s) C`, `y = (2 s) B`, `q = x - y`, `D = x + y`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
fn window(
    aa: __m512d,
    b: __m512d,
    c: __m512d,
    w0: __m512i,
) -> ([__m512d; 4], [__m512d; 4], [__m512d; 4]) {
    let two = _mm512_set1_pd(2.0);
    let mut q = [_mm512_setzero_pd(); 4];
    let mut d = [_mm512_setzero_pd(); 4];
    let mut s = [_mm512_setzero_pd(); 4];
    for i in 0..4 {
        let si = scale_of(_mm512_add_epi64(w0, _mm512_set1_epi64(i as i64)));
        let x = _mm512_add_pd(aa, _mm512_mul_pd(_mm512_mul_pd(si, si), c));
        let y = _mm512_mul_pd(_mm512_mul_pd(two, si), b);
        q[i] = _mm512_sub_pd(x, y);
        d[i] = _mm512_add_pd(x, y);
        s[i] = si;
    }
    (q, d, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_of_is_the_formats_scale() {
        if !crate::isa::Isa::Avx512.available() {
            return;
        }
        let mut got = [0f64; 128];
        for c in 0..16 {
            let b: [i64; 8] = core::array::from_fn(|l| (8 * c + l).min(126) as i64);
            // SAFETY: AVX-512 F/BW/VL confirmed above; 8 i64 read from `b`, 8 f64 written
            // into `got[8 c..8 c + 8]`.
            unsafe {
                let v = scale_of(_mm512_loadu_si512(b.as_ptr().cast()));
                _mm512_storeu_pd(got.as_mut_ptr().add(8 * c), v);
            }
        }
        for b in 0..127u8 {
            // the scale as the format decodes it (a block whose two scale bytes are `b`)
            let blk = lowbit_core::format::rocmfpx::BlockRocmFp2 { qs: [0; 8], e: [b, b] };
            assert_eq!(got[b as usize], f64::from(blk.scales().unwrap()[0]), "byte {b}");
        }
    }
}
