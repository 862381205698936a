//! NEON kernels for the HFP4 family with f32 activations: HFP4G32, MFP4G32 and MFP4G32P (the
//! rotated formats' activations arrive FWHT-rotated, once per matmul call, from `act.rs`; the
//! kernels see plain f32 columns).
//!
//! Row layout (from the core's `format::hipfire`, after hipfire): a 16-byte header (f16 row
//! scale at 0), then 17-byte blocks (scale byte, 16 bytes of E2M1 nibbles, low nibble = even
//! element).
//!
//! Shape: rows in groups of 4, one row per vector lane. Per block, each row's nibbles become
//! twice their E2M1 values as signed bytes (`tbl` on `{0, 1, 2, 3, 4, 6, 8, 12}` and negatives,
//! low and high nibbles interleaved back into element order by `zip`); the 4 rows are
//! transposed by two rounds of `zip` so that element `t` of the 4 rows sits in one 32-bit
//! lane group, widened to i32 and converted with one fraction bit (`scvtf #1`, an exact
//! halving). The 32 resulting vectors (element `t` of 4 rows) are reused for every column of
//! the tile. Each lane then evaluates the core reference's sequence exactly
//! (`s = 0; s += E2M1[c_t] * x_t` for t in order, `acc += s * factor`, `y = acc * rs`;
//! separate multiply and add, no FMA), so results are bit-identical to the reference
//! (`format::hipfire::dot`), whose bound applies: **c = 2**.
//!
//! What must not live here: the integer-activation formats (`int.rs` and its decoders).

use std::arch::aarch64::*;
use std::ops::Range;

use lowbit_core::format::hipfire::block::block_factor;
use lowbit_core::format::hipfire::header::RowHeader;
use lowbit_core::{Error, FormatId};

use crate::act::Acts;
use crate::kernels::Kernel;

use crate::shape::{check_hfp4, HFP4_BLOCK as BLOCK, HFP4_HEADER as HEADER};

/// The NEON kernel for `format`, if this module has one, named for [`Isa::Neon`] or (`DOT`)
/// [`Isa::NeonDot`] (the same code: it has no integer dot products for `sdot`).
///
/// [`Isa::Neon`]: crate::isa::Isa::Neon
/// [`Isa::NeonDot`]: crate::isa::Isa::NeonDot
pub(crate) fn kernel<const DOT: bool>(format: FormatId) -> Option<Kernel> {
    let name = match (format, DOT) {
        (FormatId::Hfp4G32, false) => "neon-hfp4g32",
        (FormatId::Hfp4G32, true) => "neon-dotprod-hfp4g32",
        (FormatId::Mfp4G32, false) => "neon-mfp4g32",
        (FormatId::Mfp4G32, true) => "neon-dotprod-mfp4g32",
        (FormatId::Mfp4G32P, false) => "neon-mfp4g32p",
        (FormatId::Mfp4G32P, true) => "neon-dotprod-mfp4g32p",
        _ => return None,
    };
    Some(Kernel { name, f: run })
}

fn run(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (x, nb) = check_hfp4(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` reaches only for
    // `Isa::Neon` / `Isa::NeonDot` after their `available()` detected NEON; the lengths the
    // body relies on were checked by `check`.
    unsafe { entry(format, w, rb, nb, x, acts.k, cols, out) };
    Ok(())
}

#[target_feature(enable = "neon")]
#[allow(clippy::too_many_arguments)]
unsafe fn entry(
    format: FormatId,
    w: &[u8],
    rb: usize,
    nb: usize,
    x: &[f32],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees NEON and the `check` invariants.
    unsafe {
        match cols.len() {
            1 => body::<1>(format, w, rb, nb, x, k, cols, out),
            2..=4 => body::<4>(format, w, rb, nb, x, k, cols, out),
            _ => body::<16>(format, w, rb, nb, x, k, cols, out),
        }
    }
}

/// Twice the E2M1 value of each code 0..16 (bit 3 is the sign), as signed bytes.
const E2M1_X2: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// The 32 E2M1 values of one block of 4 rows: `tv[t]` lane `i` is element `t` of row `i`
/// (16 nibble bytes at each `p[i]`).
///
/// # Safety
/// NEON is available; each `p[i] .. p[i] + 16` is readable.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // `h` indexes the rows' halves and `tv` alike
unsafe fn decode4(p: &[*const u8; 4], tv: &mut [float32x4_t; 32]) {
    // SAFETY: 16-byte reads at each `p[i]` (caller) and of the 16-byte table; register-only
    // NEON operations otherwise.
    unsafe {
        let lut = vld1q_s8(E2M1_X2.as_ptr());
        let m = vdupq_n_u8(0x0F);
        // e[i][h]: row i, elements 16h..16h+16, twice their values, in element order.
        let e: [[int8x16_t; 2]; 4] = core::array::from_fn(|i| {
            let q = vld1q_u8(p[i]);
            let lo = vqtbl1q_s8(lut, vandq_u8(q, m));
            let hi = vqtbl1q_s8(lut, vshrq_n_u8::<4>(q));
            [vzip1q_s8(lo, hi), vzip2q_s8(lo, hi)]
        });
        for h in 0..2 {
            let (a, b, c, d) = (e[0][h], e[1][h], e[2][h], e[3][h]);
            // Byte pairs (row 0, row 1) and (row 2, row 3) of elements 0..8 and 8..16.
            let ab = [vzip1q_s8(a, b), vzip2q_s8(a, b)];
            let cd = [vzip1q_s8(c, d), vzip2q_s8(c, d)];
            for g in 0..2 {
                let x = vreinterpretq_s16_s8(ab[g]);
                let y = vreinterpretq_s16_s8(cd[g]);
                // Each 32-bit lane: one element of rows 0..4.
                let z = [
                    vreinterpretq_s8_s16(vzip1q_s16(x, y)),
                    vreinterpretq_s8_s16(vzip2q_s16(x, y)),
                ];
                for (u, zu) in z.into_iter().enumerate() {
                    let t0 = 16 * h + 8 * g + 4 * u;
                    let l = vmovl_s8(vget_low_s8(zu));
                    let hh = vmovl_high_s8(zu);
                    tv[t0] = vcvtq_n_f32_s32::<1>(vmovl_s16(vget_low_s16(l)));
                    tv[t0 + 1] = vcvtq_n_f32_s32::<1>(vmovl_high_s16(l));
                    tv[t0 + 2] = vcvtq_n_f32_s32::<1>(vmovl_s16(vget_low_s16(hh)));
                    tv[t0 + 3] = vcvtq_n_f32_s32::<1>(vmovl_high_s16(hh));
                }
            }
        }
    }
}

/// The kernel body (see the module doc).
///
/// # Safety
/// NEON is available; the `check` invariants hold (`w` whole rows of `rb = 16 + 17 nb` bytes,
/// `x` holds `k = 32 nb` values per column for every column in `cols`,
/// `out.len() == rows * cols.len()`, `1 <= cols.len() <= MAXC`).
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn body<const MAXC: usize>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    nb: usize,
    x: &[f32],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let nc = cols.len().min(MAXC);
    // SAFETY: weight reads stay inside the rows of the group (row index clamped to
    // `nrows - 1`; header bytes 0..16, block `b < nb` at `16 + 17 b .. 16 + 17 (b + 1)`);
    // activation reads are `x[(c * k + 32 b)..][..32]` (`..64` for a pair, only when
    // `b + 1 < nb`) for columns `c < acts.n` (checked); NEON is available.
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let here = (nrows - r0).min(4);
            let rp: [*const u8; 4] =
                core::array::from_fn(|i| w.as_ptr().add((r0 + i.min(here - 1)) * rb));
            let rs: [f32; 4] = core::array::from_fn(|i| {
                let hdr: &[u8; 16] = &*rp[i].cast::<[u8; 16]>();
                RowHeader::read(hdr).row_scale().to_f32()
            });
            let mut acc = [vdupq_n_f32(0.0); MAXC];
            let mut tv = [[vdupq_n_f32(0.0); 32]; 2];
            let mut b = 0;
            while b < nb {
                // Two blocks at a time (their block sums are independent chains; the adds into
                // `acc` stay in block order), one for an odd last block.
                let two = b + 1 < nb;
                let mut fac = [vdupq_n_f32(0.0); 2];
                for h in 0..1 + usize::from(two) {
                    let off = HEADER + (b + h) * BLOCK;
                    // Validated at upload; a byte the core refuses reads as 0 here, which
                    // uploaded matrices never reach.
                    let f: [f32; 4] = core::array::from_fn(|i| {
                        block_factor(format, *rp[i].add(off)).unwrap_or(0.0)
                    });
                    fac[h] = vld1q_f32(f.as_ptr());
                    let qp: [*const u8; 4] = core::array::from_fn(|i| rp[i].add(off + 1));
                    decode4(&qp, &mut tv[h]);
                }
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let xp = x.as_ptr().add((cols.start + jj) * k + 32 * b);
                    let mut s0 = vdupq_n_f32(0.0);
                    if two {
                        let mut s1 = vdupq_n_f32(0.0);
                        for t in 0..32 {
                            s0 = vaddq_f32(s0, vmulq_n_f32(tv[0][t], *xp.add(t)));
                            s1 = vaddq_f32(s1, vmulq_n_f32(tv[1][t], *xp.add(32 + t)));
                        }
                        *accj = vaddq_f32(*accj, vmulq_f32(s0, fac[0]));
                        *accj = vaddq_f32(*accj, vmulq_f32(s1, fac[1]));
                    } else {
                        for t in 0..32 {
                            s0 = vaddq_f32(s0, vmulq_n_f32(tv[0][t], *xp.add(t)));
                        }
                        *accj = vaddq_f32(*accj, vmulq_f32(s0, fac[0]));
                    }
                }
                b += 2;
            }
            let rsv = vld1q_f32(rs.as_ptr());
            for (jj, a) in acc.iter().enumerate().take(nc) {
                let mut t = [0f32; 4];
                vst1q_f32(t.as_mut_ptr(), vmulq_f32(*a, rsv));
                for (i, &v) in t.iter().enumerate().take(here) {
                    out[(r0 + i) * nc + jj] = v;
                }
            }
            r0 += 4;
        }
    }
}
