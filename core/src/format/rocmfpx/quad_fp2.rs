//! prototype: piecewise-quadratic envelope search for ROCmFP2.

use super::fast_fp2::{floor_byte, NB, SCALE};
use super::scale_search::{objective, search_exhaustive, Codebook, Half};

/// Sorts 16 keys in descending order (Batcher's odd-even merge sort, 63 comparators).
#[inline(always)]
fn sort16_desc(k: &mut [u64; 16]) {
    macro_rules! cx {
        ($($i:literal $j:literal),*) => {$(
            let (x, y) = (k[$i], k[$j]);
            k[$i] = x.max(y);
            k[$j] = x.min(y);
        )*};
    }
    cx!(0 1, 2 3, 0 2, 1 3, 1 2, 4 5, 6 7, 4 6, 5 7, 5 6, 0 4, 2 6, 2 4, 1 5, 3 7, 3 5, 1 2, 3 4,
        5 6, 8 9, 10 11, 8 10, 9 11, 9 10, 12 13, 14 15, 12 14, 13 15, 13 14, 8 12, 10 14, 10 12,
        9 13, 11 15, 11 13, 9 10, 11 12, 13 14, 0 8, 4 12, 4 8, 2 10, 6 14, 6 10, 2 4, 6 8, 10 12,
        1 9, 5 13, 5 9, 3 11, 7 15, 7 11, 3 5, 7 9, 11 13, 1 2, 3 4, 5 6, 7 8, 9 10, 11 12, 13 14);
}

const EPS_Q: f64 = 1.0 / 35_184_372_088_832.0; // 2^-45
const EPS_M: f64 = 1.0 / 17_592_186_044_416.0; // 2^-44
const GROW46: f64 = 1.0 + 1.0 / 70_368_744_177_664.0; // 1 + 2^-46
const GROW47: f64 = 1.0 + 1.0 / 140_737_488_355_328.0; // 1 + 2^-47
const VLO: f64 = 1.0 - 1.0 / 1_073_741_824.0; // 1 - 2^-30
const VHI: f64 = 1.0 + 1.0 / 1_073_741_824.0;

/// `(q, D)`: the quadratic `A - 2sB + s^2 C` and its error scale `A + 2sB + s^2 C`.
#[inline(always)]
fn quad(a: f64, b: f64, c: f64, s: f64) -> (f64, f64) {
    let x = a + s * s * c;
    let y = 2.0 * s * b;
    (x - y, x + y)
}

pub(crate) fn search_fp2_quad(h: &Half, table: &[f64; NB]) -> u8 {
    let mut key = [0u64; 16];
    let mut low = 0u64;
    for i in 0..16 {
        let bits = h.x[i].abs().to_bits();
        low |= bits & 15;
        key[i] = bits | i as u64;
    }
    if low != 0 {
        return search_exhaustive(Codebook::Fp2, h, table);
    }
    sort16_desc(&mut key);
    // prefix sums over the descending order
    let mut p = [0f64; 17];
    let mut q = [0f64; 17];
    let mut aa = 0f64;
    for j in 0..16 {
        let bits = key[j];
        let a = f64::from_bits(bits & !15);
        let w = h.w[(bits & 15) as usize];
        p[j + 1] = p[j] + w * a;
        q[j + 1] = q[j] + w;
        aa += w * (a * a);
    }
    if aa == 0.0 {
        return 0;
    }
    let (pt, wt) = (p[16], q[16]);
    let mut bk = [0f64; 17];
    let mut ck = [0f64; 17];
    let mut vk = [0f64; 17];
    let mut mk = [0f64; 17];
    let mut best_m = f64::INFINITY;
    let mut k0 = 0;
    for k in 0..17 {
        let b = pt + 3.0 * p[k];
        let c = wt + 15.0 * q[k];
        let v = b / c;
        let m = aa - b * v;
        bk[k] = b;
        ck[k] = c;
        vk[k] = v;
        mk[k] = m;
        if m < best_m {
            best_m = m;
            k0 = k;
        }
    }
    // Upper bound T_E from the best quadratic's two bytes around its vertex.
    let f = floor_byte(vk[k0]);
    let mut te = f64::INFINITY;
    for b in [f, (f + 1).min(NB - 1)] {
        let (qq, d) = quad(aa, bk[k0], ck[k0], SCALE[b]);
        let u = qq + EPS_Q * d;
        te = if u < te { u } else { te };
    }
    let tp = te * GROW46;
    let mcut = tp + EPS_M * aa;
    // Survivors and their candidate bytes.
    let mut surv = [0usize; 17];
    let mut ns = 0;
    let mut mask = 0u128;
    for k in 0..17 {
        if mk[k] > mcut {
            continue;
        }
        surv[ns] = k;
        ns += 1;
        let (a, b, c, v) = (aa, bk[k], ck[k], vk[k]);
        let f = floor_byte(v);
        let mut bb = f as isize;
        while bb >= 0 {
            let s = SCALE[bb as usize];
            let (qq, d) = quad(a, b, c, s);
            if qq - EPS_Q * d <= tp {
                mask |= 1u128 << bb;
            } else if s < v * VLO {
                break;
            }
            bb -= 1;
        }
        let mut bb = f + 1;
        while bb < NB {
            let s = SCALE[bb];
            let (qq, d) = quad(a, b, c, s);
            if qq - EPS_Q * d <= tp {
                mask |= 1u128 << bb;
            } else if s > v * VHI {
                break;
            }
            bb += 1;
        }
    }
    if mask.count_ones() == 1 {
        return mask.trailing_zeros() as u8;
    }
    // Several candidates: bounds from the surviving quadratics.
    let mut lbs = [0f64; NB];
    let mut best_ub = f64::INFINITY;
    let mut best_b = 0usize;
    let mut m = mask;
    while m != 0 {
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        let s = SCALE[b];
        let (mut lb, mut ub) = (f64::INFINITY, f64::INFINITY);
        for &k in &surv[..ns] {
            let (qq, d) = quad(aa, bk[k], ck[k], s);
            let (l, u) = (qq - EPS_Q * d, qq + EPS_Q * d);
            lb = if l < lb { l } else { lb };
            ub = if u < ub { u } else { ub };
        }
        lbs[b] = lb;
        if ub < best_ub {
            best_ub = ub;
            best_b = b;
        }
    }
    let cut = best_ub * GROW47;
    let mut live = 0;
    let mut m = mask;
    while m != 0 {
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        live += usize::from(lbs[b] <= cut);
    }
    if live == 1 {
        return best_b as u8;
    }
    let (mut bs, mut bb) = (f64::INFINITY, 0);
    let mut m = mask;
    while m != 0 {
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        if lbs[b] <= cut {
            let v = objective(Codebook::Fp2, h, table[b]);
            if v < bs {
                bs = v;
                bb = b;
            }
        }
    }
    bb as u8
}

#[cfg(test)]
mod bench_tmp {
    extern crate std;
    use super::*;
    use crate::format::rocmfpx::scale_search::scale_table_f64;
    use std::println;
    use std::time::Instant;
    fn halves(kind: u32) -> std::vec::Vec<Half> {
        let mut st = 99u64;
        let mut u = || {
            st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((st >> 11) as f64 + 0.5) / ((1u64 << 53) as f64)
        };
        let mut v = std::vec::Vec::new();
        for _ in 0..4096 {
            let mut h = Half { x: [0.0; 16], w: [1.0; 16] };
            for i in 0..16 {
                let (a, b) = (u(), u());
                let mut g = libm::sqrt(-2.0 * libm::log(a)) * libm::cos(6.283185307179586 * b);
                if kind == 1 { g /= libm::sqrt(-libm::log(u())); }
                h.x[i] = f64::from((0.02 * g) as f32);
                if kind == 2 { h.w[i] = (0.1 - libm::log(u())) * libm::sqrt(h.x[i]*h.x[i] + 4e-4); }
            }
            v.push(h);
        }
        v
    }
    #[test]
    #[ignore]
    fn bench() {
        let table = scale_table_f64();
        for kind in 0..3 {
            let hs = halves(kind);
            let one = |f: &dyn Fn(&Half) -> u8| {
                let t = Instant::now();
                let mut acc = 0usize;
                for h in &hs { acc += f(core::hint::black_box(h)) as usize; }
                core::hint::black_box(acc);
                t.elapsed().as_secs_f64() / hs.len() as f64 * 1e9
            };
            let mut ex = f64::INFINITY;
            for _ in 0..3 { ex = ex.min(one(&|h| search_exhaustive(Codebook::Fp2, h, &table))); }
            let (mut qd, mut wn, mut so) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
            for _ in 0..100 {
                qd = qd.min(one(&|h| search_fp2_quad(h, &table)));
                wn = wn.min(one(&|h| crate::format::rocmfpx::fast_fp2::search_fp2_window(h, &table)));
                so = so.min(one(&|h| { let mut k = h.x.map(|v| v.to_bits()); sort16_desc(&mut k); core::hint::black_box(&k); 0 }));
            }
            println!("kind {kind}: exhaustive {ex:.0} ns, quad {qd:.0} ns, window {wn:.0} ns, sort {so:.0}, ratio {:.1}", ex / qd);
        }
    }
}
