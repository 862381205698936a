//! Checks how this CPU's vdpbf16ps rounds (session 9, bf16): 3.2 M random lanes against three
//! models (odd product added first then even, each add rounded; even first; one rounding of the
//! exact sum) and its handling of a subnormal input and a subnormal product. Not part of the
//! workspace: build it in a scratch crate as tools/hfp4_bf16_micro.rs says.

use std::arch::x86_64::*;
fn bf(x: u16) -> f32 { f32::from_bits((x as u32) << 16) }
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn dp(acc: [f32;16], a: [u16;32], b: [u16;32]) -> [f32;16] {
    let r = _mm512_dpbf16_ps(std::mem::transmute(acc), std::mem::transmute(a), std::mem::transmute(b));
    std::mem::transmute(r)
}
fn main() {
    let mut seed = 99u64;
    let mut rnd = || { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; seed };
    let (mut ma, mut mb, mut mc, mut none, mut tot) = (0, 0, 0, 0, 0);
    for _ in 0..200000 {
        let mut a = [0u16;32]; let mut b = [0u16;32]; let mut acc = [0f32;16];
        for i in 0..32 { a[i] = (0x3800 + (rnd() % 0x1000) as u16) ^ ((rnd() & 1) as u16) << 15; b[i] = (0x3800 + (rnd() % 0x1000) as u16) ^ ((rnd() & 1) as u16) << 15; }
        for i in 0..16 { acc[i] = f32::from_bits(0x3c000000 + (rnd() % 0x6000000) as u32) * if rnd() & 1 == 1 { -1.0 } else { 1.0 }; }
        let r = unsafe { dp(acc, a, b) };
        for i in 0..16 {
            let p0 = bf(a[2*i]) * bf(b[2*i]); let p1 = bf(a[2*i+1]) * bf(b[2*i+1]);
            let m_a = (acc[i] + p1) + p0; // intel: odd first
            let m_c = (acc[i] + p0) + p1;
            let m_b = (acc[i] as f64 + p0 as f64 + p1 as f64) as f32;
            tot += 1;
            let (x, y, z) = (r[i] == m_a, r[i] == m_b, r[i] == m_c);
            if x { ma += 1 } if y { mb += 1 } if z { mc += 1 } if !x && !y && !z { none += 1; if none < 5 { println!("miss acc {} p0 {} p1 {} r {} a {} b {} c {}", acc[i], p0, p1, r[i], m_a, m_b, m_c); } }
        }
    }
    println!("tot {tot} odd-first {ma} single-round {mb} even-first {mc} none {none}");
    // denormal behaviour
    let mut a = [0u16;32]; let mut b = [0u16;32];
    a[0] = 0x0001; b[0] = 0x3f80; // denormal input
    a[2] = 0x0080; b[2] = 0x3f00; // 2^-126 * 0.5 -> denormal product
    let r = unsafe { dp([0.0;16], a, b) };
    println!("denormal in -> {:e}, denormal product -> {:e}", r[0], r[1]);
}
