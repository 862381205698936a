//! Vector read loops for the read-bandwidth probe ([`crate::probe`]): one linear pass over a
//! buffer with 64-byte loads (AVX-512) or 32-byte loads (AVX2), four independent accumulators,
//! optionally with a software prefetch into L2 a fixed distance ahead, the way the matmul
//! drivers stream their weights ([`super::Prefetch::DEFAULT`]).
//!
//! What must not live here: timing, threads, the choice of pattern (all in `crate::probe`).

// The AVX-512 intrinsics are stable from Rust 1.89, newer than the workspace's declared 1.85,
// as in every `*512` module of this crate.
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::Prefetch;
use crate::isa::Isa;

/// The wrapping sum of `buf` by the widest vector loop `isa` allows (`None` for an ISA without
/// one here: scalar, NEON), prefetching as `prefetch` says.
pub(crate) fn linear_sum(buf: &[u64], isa: Isa, prefetch: Option<Prefetch>) -> Option<u64> {
    if !isa.available() {
        return None;
    }
    match isa {
        // SAFETY: `isa` is available and includes AVX-512F.
        Isa::Avx512 | Isa::Avx512Vnni => Some(unsafe { sum512(buf, prefetch) }),
        // SAFETY: `isa` is available and includes AVX2.
        Isa::Avx2 => Some(unsafe { sum256(buf, prefetch) }),
        _ => None,
    }
}

/// Wrapping sum of `buf` by AVX-512 loads, 256 bytes a step; `prefetch` as the drivers use it.
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f")]
unsafe fn sum512(buf: &[u64], prefetch: Option<Prefetch>) -> u64 {
    let steps = buf.len() / 32;
    let p = buf.as_ptr().cast::<u8>();
    // SAFETY: every load reads `p + 256 s .. p + 256 s + 256` for s < steps, inside `buf`;
    // prefetches never fault; AVX-512F (caller).
    unsafe {
        let mut a = [_mm512_setzero_si512(); 4];
        for s in 0..steps {
            let q = p.add(256 * s);
            if let Some(pf) = prefetch {
                pf.span(q, 256);
            }
            for (l, acc) in a.iter_mut().enumerate() {
                *acc = _mm512_add_epi64(*acc, _mm512_loadu_si512(q.add(64 * l).cast()));
            }
        }
        let v = _mm512_add_epi64(_mm512_add_epi64(a[0], a[1]), _mm512_add_epi64(a[2], a[3]));
        let tail = buf[32 * steps..].iter().fold(0u64, |s, x| s.wrapping_add(*x));
        (_mm512_reduce_add_epi64(v) as u64).wrapping_add(tail)
    }
}

/// Wrapping sum of `buf` by AVX2 loads, 128 bytes a step; `prefetch` as the drivers use it.
///
/// # Safety
/// AVX2 is available.
#[target_feature(enable = "avx2")]
unsafe fn sum256(buf: &[u64], prefetch: Option<Prefetch>) -> u64 {
    let steps = buf.len() / 16;
    let p = buf.as_ptr().cast::<u8>();
    // SAFETY: every load reads `p + 128 s .. p + 128 s + 128` for s < steps, inside `buf`;
    // prefetches never fault; AVX2 (caller).
    unsafe {
        let mut a = [_mm256_setzero_si256(); 4];
        for s in 0..steps {
            let q = p.add(128 * s);
            if let Some(pf) = prefetch {
                pf.span(q, 128);
            }
            for (l, acc) in a.iter_mut().enumerate() {
                *acc = _mm256_add_epi64(*acc, _mm256_loadu_si256(q.add(32 * l).cast()));
            }
        }
        let v = _mm256_add_epi64(_mm256_add_epi64(a[0], a[1]), _mm256_add_epi64(a[2], a[3]));
        let mut t = [0u64; 4];
        _mm256_storeu_si256(t.as_mut_ptr().cast(), v);
        let tail = buf[16 * steps..].iter().fold(0u64, |s, x| s.wrapping_add(*x));
        t.iter().fold(tail, |s, x| s.wrapping_add(*x))
    }
}
