//! ROCmFP2 row encoding with the scale search on SIMD: `Rule::Reference` without importance
//! weights, the same bytes as `lowbit_core::codec::encode_row` (and its exhaustive rule).
//!
//! With AVX-512 ([`Isa::Avx512`], [`Isa::Avx512Vnni`]) the scale bytes of 8 halves at a time
//! come from `x86::fp2_search512` (the core's fast search, lane by lane); the halves it leaves
//! undecided, and every half on other ISAs, go through the core's scalar search
//! (`codec::rocmfp2_search_half`). The codes and packing are the core's
//! (`codec::encode_rocmfp2_row_with_scales`), which also runs every input check. Nothing here
//! is unsafe (the x86 module's safe entry point checks the CPU's features itself).

use lowbit_core::{codec, EncodeOptions, FormatId, Rule};

use crate::isa::Isa;

/// `codec::encode_row`, with ROCmFP2's `Rule::Reference` without importance weights taken by
/// [`encode_rocmfp2_row`] (the same bytes, the same errors): the entry point for callers that
/// encode rows of any format (the quantizer, the benchmark).
pub fn encode_row(
    format: FormatId,
    src: &[f32],
    opts: &EncodeOptions<'_>,
    dst: &mut [u8],
) -> lowbit_core::Result<()> {
    if format == FormatId::RocmFp2 && opts.rule == Rule::Reference && opts.importance.is_none() {
        encode_rocmfp2_row(src, dst)
    } else {
        codec::encode_row(format, src, opts, dst)
    }
}

/// Encodes one ROCmFP2 row (`src.len()` a multiple of 32, `dst` `src.len() / 32 * 10`
/// bytes) as `codec::encode_row` with `Rule::Reference` and no importance weights does, with
/// the process-wide ISA ([`crate::isa::selected`]; scalar if it cannot be determined).
pub fn encode_rocmfp2_row(src: &[f32], dst: &mut [u8]) -> lowbit_core::Result<()> {
    encode_rocmfp2_row_with(crate::isa::selected().unwrap_or(Isa::Scalar), src, dst)
}

/// [`encode_rocmfp2_row`] with the search of `isa` (AVX-512 when `isa` is one of the AVX-512
/// ISAs and available; the core's scalar search otherwise). Same bytes for every `isa`.
pub fn encode_rocmfp2_row_with(isa: Isa, src: &[f32], dst: &mut [u8]) -> lowbit_core::Result<()> {
    let opts = EncodeOptions { rule: Rule::Reference, importance: None };
    if !matches!(isa, Isa::Avx512 | Isa::Avx512Vnni) || !isa.available() || src.len() % 32 != 0 {
        // the core's own path (and its length errors)
        return codec::encode_row(FormatId::RocmFp2, src, &opts, dst);
    }
    let mut scales = vec![0u8; src.len() / 16];
    rocmfp2_scales(isa, src, &mut scales);
    codec::encode_rocmfp2_row_with_scales(src, &scales, dst)
}

/// The fast search's scale byte of every half `src[16 h..16 h + 16]` into `out[h]`
/// (`out.len() == src.len() / 16`), by the search of `isa` as in [`encode_rocmfp2_row_with`].
/// Values must be finite for the bytes to mean anything (others give some byte, no panic).
pub(crate) fn rocmfp2_scales(isa: Isa, src: &[f32], out: &mut [u8]) {
    assert_eq!(out.len(), src.len() / 16, "one scale byte per half");
    let scalar = |x: &[f32]| {
        let h: &[f32; 16] = x.try_into().expect("16 values");
        codec::rocmfp2_search_half(h)
    };
    let done = vector_scales(isa, src, out, &scalar);
    for (h, ob) in out.iter_mut().enumerate().skip(done) {
        *ob = scalar(&src[16 * h..16 * h + 16]);
    }
}

/// The halves the AVX-512 search covers (whole groups of 8 from the start, the scalar search
/// taking its undecided lanes): how many of `out`'s entries it filled.
#[cfg(target_arch = "x86_64")]
fn vector_scales(isa: Isa, src: &[f32], out: &mut [u8], scalar: &dyn Fn(&[f32]) -> u8) -> usize {
    let mut done = 0;
    if !matches!(isa, Isa::Avx512 | Isa::Avx512Vnni) {
        return done;
    }
    for (x, o) in src.chunks_exact(128).zip(out.chunks_exact_mut(8)) {
        let x: &[f32; 128] = x.try_into().expect("128 values");
        let Some(found) = crate::x86::fp2_search512::search8_checked(x) else {
            break;
        };
        for (l, ob) in o.iter_mut().enumerate() {
            *ob = if found.undecided & (1 << l) != 0 {
                scalar(&x[16 * l..16 * l + 16])
            } else {
                found.bytes[l]
            };
        }
        done += 8;
    }
    done
}

/// No vector search on this architecture.
#[cfg(not(target_arch = "x86_64"))]
fn vector_scales(_: Isa, _: &[f32], _: &mut [u8], _: &dyn Fn(&[f32]) -> u8) -> usize {
    0
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// A small deterministic generator (64-bit LCG, top 53 bits).
    struct Lcg(u64);
    impl Lcg {
        fn uni(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
        }
    }

    /// One half of kind `kind` (bell-shaped, zeros, equal magnitudes, f32 subnormals, huge
    /// values, values on code thresholds and levels of some scale, mostly zeros, two exact
    /// levels, groups of equals, a wide range, the smallest normals, one outlier).
    fn half(r: &mut Lcg, kind: usize) -> [f32; 16] {
        let mag = [1e-3, 0.02, 1.0, 300.0, 7e-5][(r.uni() * 5.0) as usize % 5];
        let scale = |b: usize| {
            let b = b.min(126) as u8;
            let blk = lowbit_core::format::rocmfpx::BlockRocmFp2 { qs: [0; 8], e: [b, b] };
            f64::from(blk.scales().unwrap()[0])
        };
        core::array::from_fn(|i| {
            let u = r.uni();
            let sign = if r.uni() < 0.5 { -1.0 } else { 1.0 };
            let b = (r.uni() * 127.0) as usize;
            let v = match kind {
                0 => (r.uni() + r.uni() + r.uni() + u - 2.0) * mag,
                1 => 0.0,
                2 => mag,
                3 => f64::from(f32::from_bits((u * 8388607.0) as u32 + 1)),
                4 => [1e30, 3.0e38, 1e20, 0.0][i % 4] * u,
                5 => [2.5, 1.0, 4.0, 1.75][i % 4] * scale(b),
                6 => {
                    if i < 3 {
                        mag * u
                    } else {
                        0.0
                    }
                }
                7 => {
                    if i % 2 == 0 {
                        mag
                    } else {
                        4.0 * mag
                    }
                }
                8 => mag * (i / 4) as f64,
                9 => (u - 0.5) * mag * 2f64.powf(r.uni() * 40.0 - 20.0),
                10 => f64::from(f32::MIN_POSITIVE) * (1.0 + u),
                11 => {
                    if i == 5 {
                        896.0 * (1.0 + u)
                    } else {
                        (u - 0.5) * 0.01
                    }
                }
                12 => (u - 0.5) * mag,
                _ => 2.5 * scale(b) * (1.0 + (u - 0.5) * 1e-6),
            };
            (sign * v) as f32
        })
    }

    /// A row of `halves` halves, each of a random kind (kind 0, bench-like, half the time), so
    /// vector batches mix lanes of every kind.
    fn row(r: &mut Lcg, halves: usize) -> Vec<f32> {
        let mut v = Vec::with_capacity(16 * halves);
        for _ in 0..halves {
            let kind = if r.uni() < 0.5 { 0 } else { (r.uni() * 14.0) as usize % 14 };
            v.extend_from_slice(&half(r, kind));
        }
        v
    }

    fn isas() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.available()).collect()
    }

    #[test]
    fn scales_match_the_core_search_on_every_isa() {
        let mut r = Lcg(0x005e_edf2);
        for n in 0..400 {
            let x = row(&mut r, 8 * 64 + n % 9); // whole vector batches plus a scalar tail
            let want: Vec<u8> = x
                .chunks_exact(16)
                .map(|h| codec::rocmfp2_search_half(h.try_into().unwrap()))
                .collect();
            for isa in isas() {
                let mut got = vec![0u8; x.len() / 16];
                rocmfp2_scales(isa, &x, &mut got);
                for (h, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g, w, "{isa:?} row {n} half {h}: {:?}", &x[16 * h..16 * h + 16]);
                }
            }
        }
    }

    #[test]
    fn rows_match_reference_and_exhaustive_on_every_isa() {
        let mut r = Lcg(0x00fe_edf2);
        let reference = EncodeOptions { rule: Rule::Reference, importance: None };
        let exhaustive = EncodeOptions { rule: Rule::Exhaustive, importance: None };
        for n in 0..60 {
            let x = row(&mut r, 8 * 12 + 2 * (n % 5)); // k a multiple of 32
            let bytes = x.len() / 32 * 10;
            let (mut want, mut ex) = (vec![0u8; bytes], vec![0u8; bytes]);
            codec::encode_row(FormatId::RocmFp2, &x, &reference, &mut want).unwrap();
            codec::encode_row(FormatId::RocmFp2, &x, &exhaustive, &mut ex).unwrap();
            assert_eq!(want, ex, "row {n}: the core's rules disagree");
            for isa in isas() {
                let mut got = vec![0u8; bytes];
                encode_rocmfp2_row_with(isa, &x, &mut got).unwrap();
                assert_eq!(got, want, "{isa:?} row {n}");
            }
            // the process-wide ISA (`LOWBIT_CPU`) through the drop-in entry point
            let mut got = vec![0u8; bytes];
            encode_row(FormatId::RocmFp2, &x, &reference, &mut got).unwrap();
            assert_eq!(got, want, "selected ISA, row {n}");
        }
    }

    #[test]
    fn bad_input_gets_the_core_errors_on_every_isa() {
        let mut r = Lcg(7);
        let reference = EncodeOptions { rule: Rule::Reference, importance: None };
        let base = row(&mut r, 16);
        for (at, bad) in [(0, f32::NAN), (77, f32::INFINITY), (255, f32::NEG_INFINITY)] {
            let mut x = base.clone();
            x[at] = bad;
            let mut out = vec![0u8; 80];
            let want = codec::encode_row(FormatId::RocmFp2, &x, &reference, &mut out).unwrap_err();
            for isa in isas() {
                let got = encode_rocmfp2_row_with(isa, &x, &mut out).unwrap_err();
                assert_eq!(got, want, "{isa:?} bad value at {at}");
            }
        }
        for isa in isas() {
            // wrong lengths: k not a multiple of 32, output too short
            let mut out = vec![0u8; 80];
            assert!(encode_rocmfp2_row_with(isa, &base[..240], &mut out).is_err());
            assert!(encode_rocmfp2_row_with(isa, &base, &mut out[..70]).is_err());
        }
    }

    #[test]
    fn vector_search_decides_most_halves() {
        // so the comparisons above exercise the vector path, not only its scalar hand-off
        if !Isa::Avx512.available() {
            return;
        }
        let mut r = Lcg(0xb311);
        let (mut total, mut undecided, mut zero) = (0u32, 0u32, 0usize);
        for _ in 0..200 {
            let x: Vec<f32> =
                (0..128).map(|_| (r.uni() + r.uni() + r.uni() + r.uni() - 2.0) as f32).collect();
            let found =
                crate::x86::fp2_search512::search8_checked(x.as_slice().try_into().unwrap())
                    .unwrap();
            total += 8;
            undecided += found.undecided.count_ones();
            zero += found.bytes.iter().filter(|&&b| b == 0).count();
        }
        assert!(undecided * 4 < total, "{undecided} of {total} halves left to the scalar search");
        assert!(zero * 10 < total as usize, "{zero} of {total} decided halves got byte 0");
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod timing {
    use super::*;
    #[test]
    #[ignore]
    fn time_search() {
        let mut st = 1u64;
        let x: Vec<f32> = (0..262144)
            .map(|_| {
                let mut g = 0.0;
                for _ in 0..4 {
                    st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    g += ((st >> 11) as f64) / ((1u64 << 53) as f64) - 0.5;
                }
                g as f32
            })
            .collect();
        let mut out = vec![0u8; x.len() / 16];
        let mut enc = vec![0u8; x.len() / 32 * 10];
        for isa in [Isa::Scalar, Isa::Avx512] {
            let mut best = f64::INFINITY;
            let mut best_e = f64::INFINITY;
            for _ in 0..20 {
                let t = std::time::Instant::now();
                rocmfp2_scales(isa, &x, &mut out);
                best = best.min(t.elapsed().as_secs_f64());
                let t = std::time::Instant::now();
                encode_rocmfp2_row_with(isa, &x, &mut enc).unwrap();
                best_e = best_e.min(t.elapsed().as_secs_f64());
            }
            let mut b8 = f64::INFINITY;
            let mut und = 0;
            for _ in 0..20 {
                und = 0;
                let t = std::time::Instant::now();
                for c in x.chunks_exact(128) {
                    let f =
                        crate::x86::fp2_search512::search8_checked(c.try_into().unwrap()).unwrap();
                    und += f.undecided.count_ones();
                    std::hint::black_box(f.bytes);
                }
                b8 = b8.min(t.elapsed().as_secs_f64());
            }
            eprintln!("search8 only {:.2} ns/w, undecided {und}", b8 * 1e9 / x.len() as f64);
            let t = std::time::Instant::now();
            codec::encode_rocmfp2_row_with_scales(&x, &out, &mut enc).unwrap();
            let common = t.elapsed().as_secs_f64();
            eprintln!(
                "{isa:?}: search {:.2} ns/w, encode {:.2} ns/w, common (1 run) {:.2}",
                best * 1e9 / x.len() as f64,
                best_e * 1e9 / x.len() as f64,
                common * 1e9 / x.len() as f64
            );
        }
    }
}
