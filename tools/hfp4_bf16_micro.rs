//! Microbenchmark (session 9, bf16): the HFP4 inner loop on cache-resident data (4 rows x 448
//! blocks, one thread), ns per row-block: v0 the f32 kernel's decode (vpmovzxbd, vpsrld, two
//! vpermps, two FMAs), v1 the vdpbf16ps decode from 4-block nibble words (P = 2 or 3 activation
//! parts), v2 the f32 decode from the same repacked words. Not part of the workspace: build it
//! in a scratch crate (`cargo new mb`, copy this file to src/main.rs, `cargo build --release`).
//! Figures: docs/BENCHMARKS.md, "Session 9 (bf16)".

#![allow(unsafe_op_in_unsafe_fn)]
use std::arch::x86_64::*;
use std::time::Instant;
const NB: usize = 448; const R: usize = 4;

#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn v0(w: &[u8], lut: &[[f32;16];256], x: &[f32]) -> f32 {
    let mut acc = [_mm512_setzero_ps(); R];
    let rb = 17 * NB;
    for b in 0..NB {
        let xl = _mm512_loadu_ps(x.as_ptr().add(32*b));
        let xh = _mm512_loadu_ps(x.as_ptr().add(32*b+16));
        for i in 0..R {
            let blk = w.as_ptr().add(i*rb + 17*b);
            let t = _mm512_loadu_ps(lut[*blk as usize].as_ptr());
            let d = _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(1).cast()));
            let lo = _mm512_permutexvar_ps(d, t);
            let hi = _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(d), t);
            acc[i] = _mm512_fmadd_ps(lo, xl, acc[i]);
            acc[i] = _mm512_fmadd_ps(hi, xh, acc[i]);
        }
    }
    let mut s = 0.0; for a in acc { s += _mm512_reduce_add_ps(a); } s
}

// repacked: per row: codes [NB/4][64 bytes], scales [NB]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,avx512bf16")]
unsafe fn v1<const P: usize>(codes: &[u8], sc: &[u8], lut: &[[u16;32];256], xp: &[u16]) -> f32 {
    let mut acc = [[_mm512_setzero_ps(); P]; R];
    let cb = 16 * NB;
    for c in 0..NB/4 {
        for i in 0..R {
            let q = _mm512_loadu_si512(codes.as_ptr().add(i*cb + 64*c).cast());
            let qs = [q, _mm512_srli_epi16::<4>(q), _mm512_srli_epi16::<8>(q), _mm512_srli_epi16::<12>(q)];
            for k in 0..4 {
                let b = 4*c + k;
                let s = *sc.get_unchecked(i*NB + b) as usize;
                let t = _mm512_loadu_si512(lut[s].as_ptr().cast());
                let wv: __m512bh = std::mem::transmute(_mm512_permutexvar_epi16(qs[k], t));
                for p in 0..P {
                    let xv: __m512bh = std::mem::transmute(_mm512_loadu_si512(xp.as_ptr().add(32*(P*b+p)).cast()));
                    acc[i][p] = _mm512_dpbf16_ps(acc[i][p], wv, xv);
                }
            }
        }
    }
    let mut s = 0.0; for a in acc { for v in a { s += _mm512_reduce_add_ps(v); } } s
}

// repacked f32: codes as above, words widen to dwords
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn v2(codes: &[u8], sc: &[u8], lut: &[[f32;16];256], x: &[f32]) -> f32 {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    let cb = 16 * NB;
    for c in 0..NB/4 {
        for i in 0..R {
            for h in 0..2 {
                let q = _mm512_cvtepu16_epi32(_mm256_loadu_si256(codes.as_ptr().add(i*cb + 64*c + 32*h).cast()));
                let qs = [q, _mm512_srli_epi32::<4>(q), _mm512_srli_epi32::<8>(q), _mm512_srli_epi32::<12>(q)];
                for k in 0..4 {
                    let b = 4*c + k;
                    let s = *sc.get_unchecked(i*NB + b) as usize;
                    let t = _mm512_loadu_ps(lut[s].as_ptr());
                    let xv = _mm512_loadu_ps(x.as_ptr().add(32*b + 16*h));
                    acc[i][h] = _mm512_fmadd_ps(_mm512_permutexvar_ps(qs[k], t), xv, acc[i][h]);
                }
            }
        }
    }
    let mut s = 0.0; for a in acc { for v in a { s += _mm512_reduce_add_ps(v); } } s
}

fn main() {
    let mut seed = 12345u64;
    let mut rnd = || { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; seed };
    let w: Vec<u8> = (0..R*17*NB).map(|_| rnd() as u8 & 0x7f).collect();
    let codes: Vec<u8> = (0..R*16*NB).map(|_| rnd() as u8).collect();
    let sc: Vec<u8> = (0..R*NB).map(|_| 100 + (rnd() % 20) as u8).collect();
    let mut lut = Box::new([[0f32;16];256]);
    for e in 0..256 { for c in 0..16 { lut[e][c] = (c as f32) * (e as f32 / 256.0); } }
    let mut lutb = Box::new([[0u16;32];256]);
    for e in 0..256 { for c in 0..32 { lutb[e][c] = 0x3f80 + (c as u16 & 15); } }
    let x: Vec<f32> = (0..32*NB).map(|_| (rnd() % 1000) as f32 / 1000.0).collect();
    let xp: Vec<u16> = (0..3*32*NB).map(|_| 0x3f80 + (rnd() % 100) as u16).collect();
    let iters = 20000;
    for round in 0..3 {
        let mut r = |name: &str, f: &mut dyn FnMut() -> f32| {
            let t = Instant::now(); let mut s = 0.0;
            for _ in 0..iters { s += f(); }
            let ns = t.elapsed().as_nanos() as f64 / (iters * R * NB) as f64;
            println!("round {round} {name}: {ns:.3} ns/row-block ({s})");
        };
        unsafe {
            r("v0 f32 canonical", &mut || v0(std::hint::black_box(&w), &lut, &x));
            r("v1 bf16 P=2", &mut || v1::<2>(std::hint::black_box(&codes), &sc, &lutb, &xp));
            r("v1 bf16 P=3", &mut || v1::<3>(std::hint::black_box(&codes), &sc, &lutb, &xp));
            r("v2 f32 repacked", &mut || v2(std::hint::black_box(&codes), &sc, &lut, &x));
        }
    }
}
