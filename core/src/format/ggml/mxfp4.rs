//! ggml MXFP4 (GGUF type 39): 32 E2M1 values sharing one UE8M0 scale, 17 bytes per block.
//! Also the E2M1 pieces NVFP4 shares with it (the doubled value table and the nearest-code
//! search), which live here and nowhere else.
//!
//! Layout (ggml `ggml/src/ggml-common.h` `block_mxfp4`): `e` (UE8M0), then `qs[16]`; element
//! `j < 16` is the low nibble of `qs[j]`, element `j + 16` the high nibble (Q4_0's order).
//!
//! Values (ggml `dequantize_row_mxfp4` in `ggml/src/ggml-quants.c`, gguf-py `MXFP4`):
//! `w = kvalues_mxfp4[nibble] * 2^(e - 128)`, with the integer table
//! `kvalues_mxfp4 = 2 * E2M1 = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, ..., -12}` and the halved scale
//! `ggml_e8m0_to_fp32_half`. Both factors are exact, so every value is exact; code 8 (E2M1's
//! -0) reads as +0. `e = 0xFF` (UE8M0 NaN) is rejected with [`Error::IllegalByte`] (ggml does
//! not check it and would read 2^127).
//!
//! What must not live here: the UE8M0 conversions themselves ([`crate::scalar`]).

use half::f16;

use crate::assert_block_size;
use crate::block::{read_block, Block};
use crate::codec::{ActRow, EncodeOptions, Rule};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8_0;
use crate::registry::FormatId;
use crate::scalar::try_ue8m0_to_f32_half;

const FORMAT: FormatId = FormatId::Mxfp4;

/// ggml's `kvalues_mxfp4`: twice the E2M1 value of each 4-bit code
/// (ggml `ggml/src/ggml-common.h`; gguf-py `MXFP4.kvalues`).
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// ggml `block_mxfp4`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockMxfp4 {
    /// Shared scale, UE8M0 (2^(e - 127); 0xFF is illegal).
    pub e: u8,
    /// Codes: element j in the low nibble of `qs[j]`, element j + 16 in the high nibble.
    pub qs: [u8; 16],
}
assert_block_size!(BlockMxfp4, FormatId::Mxfp4);

impl BlockMxfp4 {
    /// The halved scale 2^(e - 128) (exact), or [`Error::IllegalByte`] at offset 0 for 0xFF.
    pub fn half_scale(&self) -> Result<f32> {
        try_ue8m0_to_f32_half(self.e).ok_or(Error::IllegalByte {
            format: FORMAT,
            field: "e",
            offset: 0,
            byte: self.e,
        })
    }
}

impl Block for BlockMxfp4 {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 32;

    /// `out[j] = kvalues_mxfp4[code_j] as f32 * 2^(e - 128)`, bit-exact with gguf-py / ggml.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        crate::block::check_block_out::<Self>(out)?;
        let d = self.half_scale()?;
        let (lo, hi) = out.split_at_mut(16);
        for ((q, a), b) in self.qs.iter().zip(lo).zip(hi) {
            *a = f32::from(KVALUES_MXFP4[(q & 15) as usize]) * d;
            *b = f32::from(KVALUES_MXFP4[(q >> 4) as usize]) * d;
        }
        Ok(())
    }
}

/// The code ggml's `best_index_mxfp4(x, d)` returns: the first of the 16 codes (in code order)
/// that minimises `|kvalues_mxfp4[i] * d - x|`, each error computed in f32 exactly as ggml
/// does (the product is exact, the subtraction rounds once). So exact ties go to the smaller
/// magnitude and to the non-negative code; -0 (code 8) is never returned; an `x` whose rounded
/// errors to two codes compare equal also takes the first one.
pub fn best_index(x: f32, d: f32) -> u8 {
    let mut best = 0u8;
    let mut best_err = (f32::from(KVALUES_MXFP4[0]) * d - x).abs();
    for (i, k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
        let err = (f32::from(*k) * d - x).abs();
        if err < best_err {
            best = i as u8;
            best_err = err;
        }
    }
    best
}

/// `floor(log2f(a))` for a finite `a > 0`, with `log2f` correctly rounded to f32 before the
/// floor (as glibc's `log2f` and numpy's float32 `log2` compute it: checked on every f32 within
/// 40 ulps below a power of two). This is not `floor(log2(a))`: for `a` just below 2^k with
/// |k| >= 2 the rounded logarithm is exactly k. The f64 logarithm has ample precision for the
/// rounding to f32 to be the correctly rounded one.
pub(crate) fn floor_log2f(a: f32) -> i32 {
    libm::floorf(libm::log2(f64::from(a)) as f32) as i32
}

/// ggml's MXFP4 exponent for a block whose largest magnitude is `amax`:
/// `e = floor(log2f(amax)) - 2 + 127`, and 0 for an all-zero block.
///
/// For `amax < 2^-125` ggml's `(uint8_t)` cast of a negative float is undefined behaviour (x86
/// wraps, giving 0xFF or huge scales); lowbit clamps to 0 (scale 2^-127), documented in
/// `docs/FORMAT-NOTES.md`. `amax` is at most f32::MAX, so e <= 253 (log2f(f32::MAX) rounds to 128).
pub fn mxfp4_exponent(amax: f32) -> u8 {
    if amax > 0.0 {
        (floor_log2f(amax) - 2 + 127).clamp(0, 254) as u8
    } else {
        0
    }
}

/// Encodes one block by ggml's `quantize_row_mxfp4_ref` (byte-exact with it and gguf-py):
/// `amax` = largest |x|, `e` from [`mxfp4_exponent`], each element the code of
/// [`best_index`] against the halved scale `2^(e - 128)`. Values beyond `6 * 2^(e - 127)`
/// saturate to ±6 (the exponent rule already keeps `amax / 2^(e-127)` below 8).
pub fn encode_block_reference(x: &[f32; 32]) -> BlockMxfp4 {
    let mut amax = 0f32;
    for v in x {
        if amax < v.abs() {
            amax = v.abs();
        }
    }
    let e = mxfp4_exponent(amax);
    let d = try_ue8m0_to_f32_half(e).unwrap_or(0.0);
    let mut qs = [0u8; 16];
    for (j, q) in qs.iter_mut().enumerate() {
        *q = best_index(x[j], d) | (best_index(x[j + 16], d) << 4);
    }
    BlockMxfp4 { e, qs }
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    crate::block::decode_blocks::<BlockMxfp4>(src, dst)
}

pub(crate) fn encode_row(src: &[f32], opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_reference_blocks(src, opts, dst, encode_block_reference)
}

/// The MXFP4 / NVFP4 `encode_row`: the reference rule only (another gives
/// [`Error::Unsupported`] naming the format), each block of `N` values through `encode`.
pub(crate) fn encode_reference_blocks<B: Block, const N: usize>(
    src: &[f32],
    opts: &EncodeOptions<'_>,
    dst: &mut [u8],
    encode: fn(&[f32; N]) -> B,
) -> Result<()> {
    if opts.rule != Rule::Reference {
        return Err(Error::Unsupported { format: B::FORMAT, op: "encode with this rule" });
    }
    for (x, out) in src.chunks_exact(N).zip(dst.chunks_exact_mut(B::BYTES)) {
        let x: &[f32; N] = x
            .try_into()
            .map_err(|_| Error::Unsupported { format: B::FORMAT, op: "encode a partial block" })?;
        out.copy_from_slice(bytemuck::bytes_of(&encode(x)));
    }
    Ok(())
}

/// Reference dot product with Q8_0 activations (ggml's `vec_dot_type` for MXFP4), following
/// ggml's `ggml_vec_dot_mxfp4_q8_0_generic` (`ggml/src/ggml-cpu/quants.c`):
///
/// per block `i` (in order): `sumi = Σ_j kvalues_mxfp4[code_j] * q8_j` as an exact i32
/// (|sumi| <= 32 * 12 * 128), `d = f32(d_act) * 2^(e - 128)` (one f32 product), then
/// `sum += d * sumi as f32` into one running f32 sum starting at +0.
///
/// Accuracy against an f64 sum of decoded products: each block adds at most two roundings
/// (the product `d * sumi`, the accumulation), so `|y - y_ref| <= 2 * n_blocks * 2^-24 *
/// Σ|terms|` holds with c = 2 per block (c = 1/16 per element for n = 32 elements).
/// A weight block with `e = 0xFF` is an [`Error::IllegalByte`] (offset into `w`).
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let a = act.q8_0(FORMAT)?;
    let mut sum = 0f32;
    for (i, y) in a.iter().enumerate() {
        let x: BlockMxfp4 = read_block(w, i);
        let dx = x.half_scale().map_err(|e| e.at(i * BlockMxfp4::BYTES))?;
        sum += f16_act(y) * dx * block_sumi(&x, y) as f32;
    }
    Ok(sum)
}

fn f16_act(y: &BlockQ8_0) -> f32 {
    f16::to_f32(y.d)
}

fn block_sumi(x: &BlockMxfp4, y: &BlockQ8_0) -> i32 {
    let mut s1 = 0i32;
    let mut s2 = 0i32;
    for j in 0..16 {
        s1 += i32::from(y.qs[j]) * i32::from(KVALUES_MXFP4[(x.qs[j] & 15) as usize]);
        s2 += i32::from(y.qs[j + 16]) * i32::from(KVALUES_MXFP4[(x.qs[j] >> 4) as usize]);
    }
    s1 + s2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponent_rule() {
        assert_eq!(mxfp4_exponent(0.0), 0);
        assert_eq!(mxfp4_exponent(6.0), 127); // floor(log2 6) = 2
        assert_eq!(mxfp4_exponent(8.0), 128);
        // Just below 8: log2f rounds to exactly 3.0.
        assert_eq!(mxfp4_exponent(f32::from_bits(8f32.to_bits() - 1)), 128);
        assert_eq!(mxfp4_exponent(f32::MAX), 253); // log2f rounds to 128
        assert_eq!(mxfp4_exponent(1e-40), 0); // ggml: undefined; lowbit clamps
    }

    #[test]
    fn ties_toward_zero_and_no_negative_zero() {
        let d = 0.5; // E2M1 values themselves
        assert_eq!(best_index(0.25, d), 0);
        assert_eq!(best_index(-0.25, d), 0);
        assert_eq!(best_index(-0.0, d), 0);
        assert_eq!(best_index(5.0, d), 6);
        assert_eq!(best_index(-5.0, d), 14);
        assert_eq!(best_index(100.0, d), 7);
    }

    #[test]
    fn illegal_scale() {
        let b = BlockMxfp4 { e: 0xff, qs: [0; 16] };
        let mut out = [0f32; 32];
        assert!(matches!(
            b.decode(&mut out),
            Err(Error::IllegalByte { offset: 0, byte: 0xff, .. })
        ));
    }
}
