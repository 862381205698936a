//! Microbenchmark (session 11, h4): the bf16 HFP4 one-column loop outside the crate, on a
//! synthetic repacked HFP4G32 matrix (random codes, scale bytes 120..131), from memory (copies
//! cycled) or from L2 (few rows, one copy), variants selected by number (see `main`: kern =
//! the session-9 4-row body with flags, kern2::<R, A, FLAGS> rows in groups of R sharing the
//! activation loads with u32 scale loads, kern3 = row-major order). Exploratory: figures in
//! docs/BENCHMARKS.md "Session 11 (h4)". Not part of the workspace: `cargo new mb`, copy
//! this file to src/main.rs, `cargo build --release`, run `mb ROWS K COPIES REPS v1,v2,..`.

#![allow(unsafe_op_in_unsafe_fn, clippy::all)]
use std::arch::x86_64::*;
use std::time::Instant;

const HEADER: usize = 16;
const BLOCK: usize = 17;

#[repr(C, align(64))]
struct Lut32([[u16; 32]; 256]);
#[repr(C, align(64))]
struct Lut16([[u16; 16]; 256]);

const TBL256: u32 = 1;
const PF1: u32 = 2;
const PFT0: u32 = 4;
const NOPF: u32 = 8;
const NOTBL: u32 = 16;
const NOX: u32 = 32;
const NOQ: u32 = 64;

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn kern<const V: u32>(w: *const u8, nrows: usize, nb: usize, l32: &Lut32, l16: &Lut16, x: *const u16, out: *mut f32, pfd: usize) {
    const R: usize = 4;
    const P: usize = 2;
    let rb = HEADER + BLOCK * nb;
    let full = nb / 4 * 4;
    let pf = pfd;
    let tconst = _mm512_load_si512(l32.0[127].as_ptr().cast());
    let xc0 = _mm512_loadu_si512(x.cast());
    let xc1 = _mm512_loadu_si512(x.add(32).cast());
    let qc = _mm512_loadu_si512(w.add(1000).cast());
    let mut g0 = 0;
    while g0 + R <= nrows {
        let rp: [*const u8; R] = core::array::from_fn(|i| w.add((g0 + i) * rb));
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        let mut b = 0;
        while b < full {
            let mut q = [_mm512_setzero_si512(); R];
            let mut se = [core::ptr::null::<u8>(); R];
            for i in 0..R {
                let src = rp[i].add(HEADER + BLOCK * b);
                if V & NOPF == 0 {
                    let p0 = src.wrapping_add(pf);
                    if V & PFT0 != 0 { _mm_prefetch::<_MM_HINT_T0>(p0.cast()); } else { _mm_prefetch::<_MM_HINT_T1>(p0.cast()); }
                    if V & PF1 == 0 {
                        let p1 = src.wrapping_add(pf + 67);
                        if V & PFT0 != 0 { _mm_prefetch::<_MM_HINT_T0>(p1.cast()); } else { _mm_prefetch::<_MM_HINT_T1>(p1.cast()); }
                    }
                }
                q[i] = if V & NOQ != 0 { _mm512_xor_si512(qc, _mm512_set1_epi32(i as i32)) } else { _mm512_loadu_si512(src.cast()) };
                se[i] = src.add(64);
            }
            for t in 0..4 {
                let mut wv = [_mm512_setzero_si512(); R];
                for i in 0..R {
                    let e = *se[i].add(t) as usize;
                    let tb = if V & NOTBL != 0 { tconst } else if V & TBL256 != 0 {
                        _mm512_broadcast_i64x4(_mm256_load_si256(l16.0[e].as_ptr().cast()))
                    } else {
                        _mm512_load_si512(l32.0[e].as_ptr().cast())
                    };
                    let idx = match t { 0 => q[i], 1 => _mm512_srli_epi16::<4>(q[i]), 2 => _mm512_srli_epi16::<8>(q[i]), _ => _mm512_srli_epi16::<12>(q[i]) };
                    wv[i] = _mm512_permutexvar_epi16(idx, tb);
                }
                let xb = x.add(32 * P * (b + t));
                for pp in 0..P {
                    let xv: __m512bh = core::mem::transmute(if V & NOX != 0 { if pp == 0 { xc0 } else { xc1 } } else { _mm512_loadu_si512(xb.add(32 * pp).cast()) });
                    for i in 0..R {
                        acc[i][pp] = _mm512_dpbf16_ps(acc[i][pp], core::mem::transmute(wv[i]), xv);
                    }
                }
            }
            b += 4;
        }
        for i in 0..R {
            *out.add(g0 + i) = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
        }
        g0 += R;
    }
}


#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn kern2<const R: usize, const A: usize, const V: u32>(w: *const u8, nrows: usize, nb: usize, l32: &Lut32, x: *const u16, out: *mut f32, pf: usize) {
    const P: usize = 2;
    let rb = HEADER + BLOCK * nb;
    let full = nb / 4 * 4;
    let lb = l32.0.as_ptr() as *const u8;
    let tconst = _mm512_load_si512(l32.0[127].as_ptr().cast());
    let mut g0 = 0;
    while g0 + R <= nrows {
        let rp: [*const u8; R] = core::array::from_fn(|i| w.add((g0 + i) * rb + HEADER));
        let mut acc = [[_mm512_setzero_ps(); A]; R];
        let mut off = 0;
        let mut xb = x;
        while off < 17 * full {
            let mut q = [_mm512_setzero_si512(); R];
            let mut sc = [0u32; R];
            if V & 32 != 0 {
                let l = (R * rb / 64 + nb / 4 - 1) / (nb / 4);
                let base = w.add(g0 * rb).wrapping_add(pf + (off / 68) * l * 64);
                for j in 0..l { _mm_prefetch::<_MM_HINT_T1>(base.wrapping_add(64 * j).cast()); }
            }
            for i in 0..R {
                let src = rp[i].add(off);
                if V & 512 != 0 {
                    _mm_prefetch::<_MM_HINT_T1>(rp[i].wrapping_add(pf - HEADER + 64 * (off / 68)).cast());
                } else if V & NOPF == 0 && V & 32 == 0 {
                    if V & 64 != 0 {
                    _mm_prefetch::<_MM_HINT_T2>(src.wrapping_add(pf).cast());
                    _mm_prefetch::<_MM_HINT_T2>(src.wrapping_add(pf + 67).cast());
                    } else if V & 128 != 0 {
                    _mm_prefetch::<_MM_HINT_NTA>(src.wrapping_add(pf).cast());
                    _mm_prefetch::<_MM_HINT_NTA>(src.wrapping_add(pf + 67).cast());
                    } else {
                    _mm_prefetch::<_MM_HINT_T1>(src.wrapping_add(pf).cast());
                    _mm_prefetch::<_MM_HINT_T1>(src.wrapping_add(pf + 67).cast());
                    }
                }
                q[i] = _mm512_loadu_si512(src.cast());
                sc[i] = (src.add(64) as *const u32).read_unaligned();
            }
            for t in 0..4 {
                let x0: __m512bh = core::mem::transmute(_mm512_loadu_si512(xb.cast()));
                let x1: __m512bh = core::mem::transmute(_mm512_loadu_si512(xb.add(32).cast()));
                for i in 0..R {
                    let e = ((sc[i] >> (8 * t)) & 255) as usize;
                    let tb = if V & 16 != 0 { let _ = e; tconst } else if V & 256 != 0 { _mm512_castsi256_si512(_mm256_load_si256(lb.add(e << 6).cast())) } else { _mm512_load_si512(lb.add(e << 6).cast()) };
                    let mut idx = match t { 0 => q[i], 1 => _mm512_srli_epi16::<4>(q[i]), 2 => _mm512_srli_epi16::<8>(q[i]), _ => _mm512_srli_epi16::<12>(q[i]) };
                    if V & 256 != 0 && t < 3 { idx = _mm512_and_si512(idx, _mm512_set1_epi16(15)); }
                    let wv: __m512bh = core::mem::transmute(_mm512_permutexvar_epi16(idx, tb));
                    acc[i][0] = _mm512_dpbf16_ps(acc[i][0], wv, x0);
                    acc[i][A - 1] = _mm512_dpbf16_ps(acc[i][A - 1], wv, x1);
                }
                xb = xb.add(64);
            }
            off += 68;
        }
        if V & 512 != 0 {
            let lines = (rb + 63) / 64;
            for i in 0..R { for l in full / 4..lines { _mm_prefetch::<_MM_HINT_T1>(rp[i].wrapping_add(pf - HEADER + 64 * l).cast()); } }
        }
        for i in 0..R {
            let mut s = acc[i][0];
            if A == 2 { s = _mm512_add_ps(s, acc[i][1]); }
            *out.add(g0 + i) = _mm512_reduce_add_ps(s);
        }
        g0 += R;
    }
}


#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn kern3<const R: usize, const A: usize, const V: u32>(w: *const u8, nrows: usize, nb: usize, l32: &Lut32, x: *const u16, out: *mut f32, pf: usize) {
    let rb = HEADER + BLOCK * nb;
    let full = nb / 4 * 4;
    let lb = l32.0.as_ptr() as *const u8;
    let mut g0 = 0;
    while g0 + R <= nrows {
        let rp: [*const u8; R] = core::array::from_fn(|i| w.add((g0 + i) * rb + HEADER));
        let mut acc = [[_mm512_setzero_ps(); A]; R];
        let mut off = 0;
        let mut xb = x;
        while off < 17 * full {
            let xv: [__m512bh; 8] = core::array::from_fn(|j| core::mem::transmute(_mm512_loadu_si512(xb.add(32 * j).cast())));
            for i in 0..R {
                let src = rp[i].add(off);
                if V & NOPF == 0 {
                    _mm_prefetch::<_MM_HINT_T1>(src.wrapping_add(pf).cast());
                    _mm_prefetch::<_MM_HINT_T1>(src.wrapping_add(pf + 67).cast());
                }
                let q = _mm512_loadu_si512(src.cast());
                let sc = (src.add(64) as *const u32).read_unaligned();
                for t in 0..4 {
                    let e = ((sc >> (8 * t)) & 255) as usize;
                    let tb = _mm512_load_si512(lb.add(e << 6).cast());
                    let idx = match t { 0 => q, 1 => _mm512_srli_epi16::<4>(q), 2 => _mm512_srli_epi16::<8>(q), _ => _mm512_srli_epi16::<12>(q) };
                    let wv: __m512bh = core::mem::transmute(_mm512_permutexvar_epi16(idx, tb));
                    acc[i][0] = _mm512_dpbf16_ps(acc[i][0], wv, xv[2 * t]);
                    acc[i][A - 1] = _mm512_dpbf16_ps(acc[i][A - 1], wv, xv[2 * t + 1]);
                }
            }
            xb = xb.add(256);
            off += 68;
        }
        for i in 0..R {
            let mut s = acc[i][0];
            if A == 2 { s = _mm512_add_ps(s, acc[i][1]); }
            *out.add(g0 + i) = _mm512_reduce_add_ps(s);
        }
        g0 += R;
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn linread(w: *const u8, len: usize) -> u64 {
    let mut a = [_mm512_setzero_si512(); 4];
    let mut off = 0;
    while off + 256 <= len {
        for i in 0..4 { a[i] = _mm512_add_epi64(a[i], _mm512_loadu_si512(w.add(off + 64 * i).cast())); }
        off += 256;
    }
    let s = _mm512_add_epi64(_mm512_add_epi64(a[0], a[1]), _mm512_add_epi64(a[2], a[3]));
    _mm512_reduce_add_epi64(s) as u64
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn readk(w: *const u8, nrows: usize, rb: usize) -> u64 {
    let mut a = [_mm512_setzero_si512(); 4];
    let mut g0 = 0;
    while g0 + 4 <= nrows {
        let mut off = 0;
        while off + 64 <= rb {
            for i in 0..4 {
                let p = w.add((g0 + i) * rb + off);
                _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(8192).cast());
                a[i] = _mm512_xor_si512(a[i], _mm512_loadu_si512(p.cast()));
            }
            off += 64;
        }
        g0 += 4;
    }
    let s = _mm512_xor_si512(_mm512_xor_si512(a[0], a[1]), _mm512_xor_si512(a[2], a[3]));
    _mm512_reduce_add_epi64(s) as u64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rows: usize = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(4096);
    let k: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(14336);
    let copies: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(8);
    let reps: usize = args.get(4).map(|s| s.parse().unwrap()).unwrap_or(24);
    let variants: Vec<String> = args.get(5).map(|s| s.split(',').map(|x| x.to_string()).collect()).unwrap_or(vec!["0".into()]);
    let nb = k / 32;
    let rb = HEADER + BLOCK * nb;
    let mut seed = 12345u64;
    let mut rnd = || { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; seed };
    let mat = rows * rb;
    let mut w = vec![0u8; mat * copies + 64];
    for v in w.iter_mut() { *v = rnd() as u8; }
    // scale bytes in a small range
    for c in 0..copies { for r in 0..rows { for b in 0..nb { let g = b / 4; let at = c*mat + r*rb + HEADER + 68*g + 64 + b%4; if b < nb/4*4 { w[at] = 120 + (rnd() % 12) as u8; } } } }
    let mut l32 = Box::new(Lut32([[0; 32]; 256]));
    let mut l16 = Box::new(Lut16([[0; 16]; 256]));
    let e2m1 = [0.0f32, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];
    for e in 1..255 { let f = 2f32.powi(e as i32 - 127); for i in 0..32 { let v = e2m1[i % 16] * f; let b = if v == 0.0 { 0 } else { (v.to_bits() >> 16) as u16 }; l32.0[e][i] = b; if i < 16 { l16.0[e][i] = b; } } }
    let x: Vec<u16> = (0..2 * k).map(|_| 0x3f80 + (rnd() % 100) as u16).collect();
    let mut out = vec![0f32; rows];
    let mut ref_out: Option<Vec<f32>> = None;
    let gbs = |t: f64| (mat as f64) / t / 1e9;
    let ghz = {
        let n = 20_000_000u64;
        let t = Instant::now();
        let mut a = 0u64;
        for _ in 0..n { unsafe { std::arch::asm!("add {0}, 1", "add {0}, 1", "add {0}, 1", "add {0}, 1", "add {0}, 1", "add {0}, 1", "add {0}, 1", "add {0}, 1", inout(reg) a); } }
        std::hint::black_box(a);
        8.0 * n as f64 / t.elapsed().as_secs_f64() / 1e9
    };
    let blocks = (rows * nb) as f64;
    let parsed: Vec<(String, u32, usize)> = variants.iter().map(|v| { let (vv, pfd) = match v.split_once('@') { Some((a, b)) => (a.parse::<u32>().unwrap(), b.parse::<usize>().unwrap()), None => { let vv = v.parse::<u32>().unwrap(); let r = if vv >= 1000 { (vv / 1000 % 10) as usize } else { 4 }; (vv, (r * rb).max(8192)) } }; (v.clone(), vv, pfd) }).collect();
    let run = |vv: u32, pfd: usize, wp: *const u8, out: &mut Vec<f32>| unsafe {
                    macro_rules! m { ($($n:literal),*) => { match vv { $($n => kern::<$n>(wp, rows, nb, &l32, &l16, x.as_ptr(), out.as_mut_ptr(), pfd),)* _ => panic!() } } }
                    if vv >= 1000 { let (r, a, f) = (vv / 1000 % 10, vv / 100 % 10, vv % 100 + vv / 10000 * 100) as (u32,u32,u32); match (r, a, f) {
                        (4,2,0) => kern2::<4,2,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (4,1,0) => kern2::<4,1,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,1,0) => kern2::<8,1,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (6,1,0) => kern2::<6,1,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,1,8) => kern2::<8,1,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (4,2,8) => kern2::<4,2,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,24) => kern2::<8,2,24>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (4,2,24) => kern2::<4,2,24>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,32) => kern2::<8,2,32>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (4,2,32) => kern2::<4,2,32>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,64) => kern2::<8,2,64>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,128) => kern2::<8,2,128>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,256) => kern2::<8,2,256>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,264) => kern2::<8,2,264>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,512) => kern2::<8,2,512>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (4,2,512) => kern2::<4,2,512>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,3,0) => kern3::<8,2,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,3,8) => kern3::<8,2,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (4,3,0) => kern3::<4,2,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (4,3,8) => kern3::<4,2,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (6,3,0) => kern3::<16,1,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (6,3,8) => kern3::<16,1,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,4,0) => kern3::<8,1,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,4,8) => kern3::<8,1,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (4,1,8) => kern2::<4,1,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (6,1,8) => kern2::<6,1,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,0) => kern2::<8,2,0>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        (8,2,8) => kern2::<8,2,8>(wp, rows, nb, &l32, x.as_ptr(), out.as_mut_ptr(), pfd),
                        _ => panic!() } } else {
                    m!(0,1,2,3,4,5,7,8,9,16,24,32,40,56,64,72,88,120); }
    };
    let mut best = vec![f64::MAX; parsed.len()];
    let mut all: Vec<Vec<f64>> = vec![vec![]; parsed.len()];
    let mut rbest = f64::MAX; let mut lbest = f64::MAX; let mut sink = 0u64;
    for r in 0..reps {
        let c = r % copies;
        let wp = unsafe { w.as_ptr().add(c * mat) };
        let t = Instant::now(); sink ^= unsafe { readk(wp, rows, rb) }; rbest = rbest.min(t.elapsed().as_secs_f64());
        let t = Instant::now(); sink ^= unsafe { linread(wp, mat) }; lbest = lbest.min(t.elapsed().as_secs_f64());
        for (i, (_, vv, pfd)) in parsed.iter().enumerate() {
            let t = Instant::now();
            run(*vv, *pfd, wp, &mut out);
            let e = t.elapsed().as_secs_f64();
            best[i] = best[i].min(e); all[i].push(e);
        }
    }
    let ceil = gbs(lbest);
    println!("{ghz:.2}GHz read4 {:.1} linear {:.1} GB/s ({sink})", gbs(rbest), ceil);
    for (i, (v, _, _)) in parsed.iter().enumerate() {
        let mut a = all[i].clone(); a.sort_by(|x, y| x.partial_cmp(y).unwrap());
        let med = a[a.len() / 2];
        println!("  v{v:<10} min {:7.1}us {:5.1}GB/s {:.3}  med {:7.1}us  {:.2}cyc", best[i] * 1e6, gbs(best[i]), gbs(best[i]) / ceil, med * 1e6, best[i] * ghz * 1e9 / blocks);
    }
}
