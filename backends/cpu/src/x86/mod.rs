//! x86-64 SIMD kernels, one module per format family and instruction set.
//!
//! * **AVX2** (with FMA and F16C): [`avx2`] (Q8_0, Q4_0, Q5_0, MXFP4 and IQ4_NL on one body
//!   against Q8_0 activations), `legacy2` (Q4_1, Q5_1), `float2` (F32, F16, BF16), `kquant`
//!   (the lane-order body of Q3_K..Q6_K; entries in `ext` and `kquant_avx2`), `q2k_avx2`
//!   (Q2_K), `ternary` (TQ1_0, PTQ1_0, through `ext`), `pq2_avx2` (PQ2_0), `nvfp4_avx2`,
//!   `iq4xs_avx2`, `iq_avx2` (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M), `hfp4` (the
//!   HFP4 family), `ternary68` and `rocmfpx` (ROCmFP2, ROCmFP3; tried first on every ISA).
//!   Every format has an AVX2 kernel except Q8_1 and Q8_K, which run the scalar kernel.
//! * **AVX-512** (F/BW/VL): [`avx512`] (Q8_0, Q4_0), `ext`'s AVX-512 forms (TQ2_0, PQ2_0, Q4_K,
//!   Q6_K), `legacy512` (Q4_1, Q5_0, Q5_1, Q8_1), `float` (F32, F16, BF16), `hfp4_512`,
//!   `ternary68`, and `z512`'s layout, whose lanes each hold a whole (activation) block:
//!   `z512` itself (Q4_0 tiles of up to 4 columns, the K-quants, the ternary types, MXFP4,
//!   IQ4_NL), `iq512` (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_XS), `q3k512`
//!   (Q3_K), `tq1_512` (TQ1_0, PTQ1_0), `nvfp4_512` (NVFP4), `q4_0x16` (Q4_0, 2..16 columns;
//!   `q4_0pack` runs it and the one-column form on rows repacked into lane order at upload),
//!   `q8x16` (Q8_0, 2..16 columns), `pq2x4` and `pq2pack` (PQ2_0); `zseg` is the K-segmented
//!   driver of this layout for 2..16 columns on long rows; `gemm512` the prefill GEMM.
//! * **AVX-512 VNNI** (`Isa::Avx512Vnni`): the `vpdpbusd` forms of ROCmFP2/3 (`rocmfpx`), of
//!   `z512`'s Q4_0, MXFP4, NVFP4 and ternary kernels (`z512::kernel_vnni`; TQ1_0 and PTQ1_0
//!   decode with `vpermi2b` tables where the CPU also has AVX-512 VBMI) and of `legacy512`,
//!   the `vdpbf16ps` HFP4 family (`hfp4_bf16`, where the CPU has AVX512_BF16; repacked at
//!   upload), and the AVX-512 table otherwise.
//!
//! A format without a kernel for the chosen ISA falls back to the scalar kernel.
//!
//! Each kernel is a safe `fn` matching `RowsKernel` that checks every length the unsafe body
//! relies on ([`check_q8_0`]) and then calls a `#[target_feature]` entry point. Those safe
//! wrappers are private and reachable only through [`kernel`], which `KernelTable::new` calls
//! only after [`Isa::available`] confirmed the features: that is what makes the calls sound.
//!
//! Results are not bit-identical to the core's reference dot products: the integer partial
//! sums are exact, but they are scaled and accumulated in f32 vector lanes (FMA) across blocks
//! and summed across lanes at the end (see [`avx2`] for the order). They stay within the
//! DESIGN.md bound `|y - y_exact| <= c * K * 2^-24 * sum|terms|` with c = 1.

pub(crate) mod avx2;
pub(crate) mod avx512;
mod ext;
mod float;
mod float2;
pub(crate) mod fp2_search512;
mod gemm512;
mod hfp4;
mod hfp4_512;
mod hfp4_bf16;
mod iq4xs_avx2;
mod iq512;
mod iq_avx2;
mod kquant;
mod kquant_avx2;
mod legacy2;
mod legacy512;
mod nvfp4_512;
mod nvfp4_avx2;
mod pq2_avx2;
mod pq2pack;
mod pq2x4;
mod q2k_avx2;
mod q3k512;
mod q4_0pack;
mod q4_0x16;
mod q8_512;
mod q8x16;
mod rocmfpx;
pub(crate) mod stream;
mod ternary;
mod ternary68;
#[cfg(test)]
mod test_rng;
mod tq1_512;
pub(crate) mod vecops;
mod z512;
mod zseg;

use std::ops::Range;

use lowbit_core::error::Buffer;
use lowbit_core::format::ggml::BlockQ8_0;
use lowbit_core::{Error, FormatId};

use crate::act::{ActData, Acts};
use crate::isa::Isa;
use crate::kernels::{Kernel, MAX_TILE};

/// Weight format codes for the const-generic kernel bodies.
pub(crate) const W_Q8_0: u8 = 0;
/// Q4_0.
pub(crate) const W_Q4_0: u8 = 1;
/// MXFP4 (the AVX2 body's nibble-table decode).
pub(crate) const W_MXFP4: u8 = 2;
/// IQ4_NL (the AVX2 body's nibble-table decode).
pub(crate) const W_IQ4NL: u8 = 3;
/// Q5_0 (the AVX2 body's unsigned path, as Q4_0).
pub(crate) const W_Q5_0: u8 = 4;

/// Block bytes of each weight code.
pub(crate) const fn block_bytes(f: u8) -> usize {
    match f {
        W_Q8_0 => 34,
        W_MXFP4 => 17,
        W_Q5_0 => 22,
        _ => 18,
    }
}

/// The SIMD kernel for `(isa, format)`, if one exists.
pub(crate) fn kernel(isa: Isa, format: FormatId) -> Option<Kernel> {
    if isa == Isa::Avx512Vnni {
        return rocmfpx::kernel(isa, format)
            .or_else(|| z512::kernel_vnni(format))
            .or_else(|| legacy512::kernel_vnni(format))
            .or_else(|| hfp4_bf16::kernel(format))
            .or_else(|| kernel(Isa::Avx512, format));
    }
    rocmfpx::kernel(isa, format).or_else(|| match isa {
        Isa::Scalar | Isa::Neon | Isa::NeonDot | Isa::Avx512Vnni => None,
        Isa::Avx2 => avx2::kernel(format)
            .or_else(|| ext::kernel_avx2(format))
            .or_else(|| kquant_avx2::kernel(format))
            .or_else(|| float2::kernel(format))
            .or_else(|| legacy2::kernel(format))
            .or_else(|| nvfp4_avx2::kernel(format))
            .or_else(|| iq4xs_avx2::kernel(format))
            .or_else(|| iq_avx2::kernel(format))
            .or_else(|| ternary68::kernel_avx2(format)),
        Isa::Avx512 => avx512::kernel(format)
            .or_else(|| ext::kernel_avx512(format))
            .or_else(|| legacy512::kernel(format))
            .or_else(|| float::kernel(format))
            .or_else(|| ternary68::kernel_avx512(format)),
    })
}

/// The repack and activation-layout hooks of the SIMD kernel for `(isa, format)`.
pub(crate) fn extras(isa: Isa, format: FormatId) -> crate::kernels::Extras {
    let mut e = match isa {
        Isa::Avx512Vnni if z512::kernel_vnni(format).is_some() => z512::extras_vnni(format),
        Isa::Avx512Vnni if hfp4_bf16::kernel(format).is_some() => crate::kernels::Extras {
            repack: Some(hfp4_bf16::repack_row),
            prep: Some(hfp4_bf16::prep),
            ..Default::default()
        },
        Isa::Avx512Vnni => extras(Isa::Avx512, format),
        // The AVX2 PQ2_0 body reads the activations in its plane order, built once per call.
        Isa::Avx2 if format == FormatId::Pq2_0 => {
            crate::kernels::Extras { prep: Some(pq2_avx2::layout), ..Default::default() }
        }
        _ => {
            let e = rocmfpx::extras(isa, format);
            if e.repack.is_some() || e.prep.is_some() {
                return e;
            }
            let e = legacy512::extras(isa, format);
            if e.repack.is_some() || e.prep.is_some() || isa != Isa::Avx512 {
                e
            } else {
                z512::extras(format)
            }
        }
    };
    // The prefill GEMM unpacks canonical rows, Q4_1 in `legacy512`'s packed layout and Q4_0 in
    // `q4_0pack`'s lane order (the only repacks it knows).
    if matches!(isa, Isa::Avx512 | Isa::Avx512Vnni)
        && (e.repack.is_none() || matches!(format, FormatId::Q4_1 | FormatId::Q4_0))
    {
        e.gemm = gemm512::kernel(format, isa == Isa::Avx512Vnni);
    }
    e
}

/// How a driver prefetches a weight stream: how many bytes ahead, and into which cache level.
///
/// The default, [`Prefetch::DEFAULT`], is into L2 8 KiB ahead. Measured on this project's
/// EPYC (Zen 4), weights on huge pages (`crate::weights`), 2026-12-01, interleaved runs:
///
/// * SmolLM2 decode (short rows: 1-4 KiB per group of four rows, whose streams act as one):
///   Q8_0 82-90 → 112-123 tok/s (its output matrix 14 → 21-23 GB/s), Q4_0 193 → 243, Q4_1
///   155 → 210, the fpx-ifp2 file 147 → 162, against L1 prefetches 2 KiB ahead
///   (`lowbit speed -t 2 -p 0 -n 64`).
/// * 4096 x 14336, n = 1 (mean of two runs, `lowbit bench --n 1 --threads 1,2`): faster on one
///   and two threads for TQ2_0 (819 → 481 µs, 2 threads), TQ1_0, PQ2_0, ROCmFP3, Q6_K, Q4_K,
///   Q4_0, Q5_0 and IQ4_NL; mixed within 5-10% for ROCmFP2, MXFP4 and Q4_1; slower for NVFP4
///   (2078 → 2326 µs), which kept L1 2 KiB ahead ([`Prefetch::L1`]) until the bench read the
///   weights from memory (session 7: then L2 one group ahead was faster for it too).
///
/// Without huge pages the picture differed (L2 prefetches were slower for most formats on
/// long rows): a prefetch that crosses into a 4 KiB page whose translation is not cached is
/// more likely to be dropped.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Prefetch {
    /// `_MM_HINT_T0`, this many bytes ahead.
    L1(usize),
    /// `_MM_HINT_T1`, this many bytes ahead.
    L2(usize),
}

impl Prefetch {
    /// The policy of every driver that does not state another (see the type's doc).
    pub(crate) const DEFAULT: Prefetch = Prefetch::L2(8 << 10);

    /// This policy for a driver that streams `R` rows of `rb` bytes side by side, `group =
    /// R * rb`: an L2 prefetch runs at least one row group ahead, so each row's stream fetches
    /// the same place in the next group's row and the streams together stay a whole group ahead
    /// of the reads. With the fixed 8 KiB alone, rows longer than 2 KiB prefetched into their
    /// own group (already being read) and the next group arrived unprefetched. Measured with
    /// the weights read from memory (`lowbit bench` cycling through copies), 4096 x 14336, n = 1,
    /// µs, one / two threads, two interleaved rounds each, 2026-12-01 20:09 UTC: ROCmFP2 1640 /
    /// 1535 -> 1033 / 669, TQ2_0 1504 / 1007 -> 819 / 515, Q4_K 3704 / 2679 -> 1791 / 1160,
    /// Q8_0 4768 / 2913 -> 2646 / 2000, Q4_0 3124 / 3061 -> 1729 / 1152 (two groups ahead: no
    /// better). Rows of groups under 8 KiB (SmolLM2's, 4096-long rows of the 2- and 4-bit
    /// formats) keep the 8 KiB. L1 policies are returned unchanged.
    pub(crate) fn one_group_ahead(self, group: usize) -> Prefetch {
        match self {
            Prefetch::L2(ahead) => Prefetch::L2(ahead.max(group)),
            l1 @ Prefetch::L1(_) => l1,
        }
    }

    /// Prefetches every cache line of `p + ahead .. p + ahead + len` (`len >= 1`) as
    /// [`prefetch_lines`] does, into the level named.
    ///
    /// # Safety
    /// None beyond the call (as [`prefetch_lines`]).
    #[inline(always)]
    pub(crate) unsafe fn span(self, p: *const u8, len: usize) {
        use std::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1};
        match self {
            // SAFETY: prefetch hints never fault.
            Prefetch::L1(ahead) => unsafe { prefetch_lines::<_MM_HINT_T0>(p, ahead, len) },
            // SAFETY: as above.
            Prefetch::L2(ahead) => unsafe { prefetch_lines::<_MM_HINT_T1>(p, ahead, len) },
        }
    }
}

/// Prefetches (hint `HINT`) every cache line of `p + ahead .. p + ahead + len` (`len >= 1`):
/// the lines at 64-byte steps and the one holding the last byte. Drivers whose weight group is
/// longer than a line call this once per group and row stream; one prefetch per group left a
/// third of the lines of 144- and 210-byte K-quant blocks to the hardware prefetcher, which
/// cost up to 1.6x in streaming time (4096 x 14336, one thread, 2026-12-01).
///
/// # Safety
/// None beyond the call: a prefetch never faults, and the addresses are only computed
/// (`wrapping_add`).
#[inline(always)]
unsafe fn prefetch_lines<const HINT: i32>(p: *const u8, ahead: usize, len: usize) {
    use std::arch::x86_64::_mm_prefetch;
    // SAFETY: prefetch hints never fault.
    unsafe {
        let mut off = 0;
        while off < len {
            _mm_prefetch::<HINT>(p.wrapping_add(ahead + off).cast());
            off += 64;
        }
        _mm_prefetch::<HINT>(p.wrapping_add(ahead + len - 1).cast());
    }
}

/// What the unsafe bodies may rely on, checked by [`check_q8_0`].
pub(crate) struct Checked<'a> {
    /// Every activation block (`acts.n` columns of `nb` blocks).
    pub a: &'a [BlockQ8_0],
    /// Their scales as f32 (same length).
    pub ad: &'a [f32],
    /// Blocks per row (= per column).
    pub nb: usize,
}

/// Checks, for a kernel on `bs`-byte weight blocks of 32 elements against Q8_0 activations:
/// `rb == nb * bs` with `nb * 32 == acts.k`; `w` holds whole rows; the tile is 1..=16 columns
/// inside `acts`; `out` holds `rows * tile` values; the activation arrays hold `n * nb`
/// entries. Any violation is an internal error reported as [`Error::Length`].
pub(crate) fn check_q8_0<'a>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
    bs: usize,
) -> Result<Checked<'a>, Error> {
    let ActData::Q8_0 { blocks, d } = &acts.data else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: acts.row(0).format(),
        });
    };
    let nb = rb / bs.max(1);
    let nc = cols.len();
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let ok = rb != 0
        && rb == nb * bs
        && nb * 32 == acts.k
        && w.len() == rows * rb
        && (1..=MAX_TILE).contains(&nc)
        && cols.end <= acts.n
        && blocks.len() == acts.n * nb
        && d.len() == blocks.len()
        && out.len() == rows * nc;
    if !ok {
        return Err(Error::Length {
            format,
            buffer: Buffer::Activations,
            got: blocks.len(),
            expected: acts.n * nb,
        });
    }
    Ok(Checked { a: blocks, ad: d, nb })
}
