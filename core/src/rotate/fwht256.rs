//! hipfire's FWHT-256 with seeded signs: the rotation MFP4G32 / MFP4G32P weights are stored in
//! and the activations go through at run time (so that `<R w, R x> = <w, x>`).
//!
//! Source: github warpfront/hipfire `crates/hipfire-quantize/src/quant_fwht.rs`
//! (`cpu_fwht_256`, `gen_fwht_signs`; the fork unverbraucht/hipfire has them in
//! `crates/hipfire-quantize/src/main.rs`), and the inverse as hipfire's MFP4 dequantizer applies
//! it (`cpu_fwht_256(x, signs2, signs1)`, "forward with the sign vectors swapped").
//!
//! Exact operation order (every step an IEEE f32 operation, no fused multiply-add):
//!
//! * forward: `x[i] *= signs1[i]`; butterflies with strides 1, 2, 4, ..., 128, each pair
//!   `(a, b) = (x[i+j], x[i+j+h])` becoming `(a + b, a - b)`; `x[i] *= 0.0625 * signs2[i]`.
//! * inverse: the same with `signs2` first and `signs1` last.
//!
//! Multiplying by ±1 and by ±0.0625 is exact (barring subnormal results of the last step), so
//! the only roundings are the butterfly adds; any implementation that does the adds stage by
//! stage gets the same bits. Forward then inverse is the identity up to those roundings
//! (`H H = 256 I`).
//!
//! What must not live here: the normalised Walsh-Hadamard of other sizes (see `hadamard`).

/// hipfire's sign generator: `state = (state * 1103515245 + 12345) & 0x7fffffff` (u32,
/// wrapping), once per element; the sign is `+1` when bit 16 of the new state is set, else `-1`.
const fn gen_signs(seed: u32) -> [f32; 256] {
    let mut out = [0f32; 256];
    let mut state = seed;
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345) & 0x7fff_ffff;
        out[i] = if (state >> 16) & 1 == 1 { 1.0 } else { -1.0 };
        i += 1;
    }
    out
}

/// The first sign vector (seed 42), applied before the butterflies of the forward transform.
pub const FWHT_SIGNS1: [f32; 256] = gen_signs(42);

/// The second sign vector (seed 1042), applied (times 1/16) after the butterflies.
pub const FWHT_SIGNS2: [f32; 256] = gen_signs(1042);

/// The unnormalised Walsh-Hadamard butterflies, strides 1, 2, ..., 128, in place: the middle
/// step of [`fwht256`] and [`fwht256_inverse`], generic so that callers needing it in another
/// precision (the f64 covariance rotation of the GPTQ encoder) run the same order of pairs.
pub fn butterflies<T: Copy + core::ops::Add<Output = T> + core::ops::Sub<Output = T>>(
    x: &mut [T; 256],
) {
    let mut h = 1;
    while h < 256 {
        for pair in x.chunks_exact_mut(2 * h) {
            let (lo, hi) = pair.split_at_mut(h);
            for (a, b) in lo.iter_mut().zip(hi.iter_mut()) {
                let (u, v) = (*a, *b);
                *a = u + v;
                *b = u - v;
            }
        }
        h <<= 1;
    }
}

fn signed_transform(x: &mut [f32; 256], first: &[f32; 256], last: &[f32; 256]) {
    for (v, s) in x.iter_mut().zip(first) {
        *v *= *s;
    }
    butterflies(x);
    for (v, s) in x.iter_mut().zip(last) {
        *v *= 0.0625 * *s;
    }
}

/// hipfire's forward FWHT-256, in place: `x *= signs1`, butterflies, `x *= signs2 / 16`.
/// Orthogonal (up to f32 rounding): `<fwht256(w), fwht256(x)> = <w, x>`.
/// NaN and infinities propagate as IEEE arithmetic does.
pub fn fwht256(x: &mut [f32; 256]) {
    signed_transform(x, &FWHT_SIGNS1, &FWHT_SIGNS2);
}

/// The inverse of [`fwht256`], in place, as hipfire's dequantizer applies it: `x *= signs2`,
/// butterflies, `x *= signs1 / 16`.
pub fn fwht256_inverse(x: &mut [f32; 256]) {
    signed_transform(x, &FWHT_SIGNS2, &FWHT_SIGNS1);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit-packs a sign vector LSB-first, 1 = +1, as hex (FORMATS.md section 4 check strings).
    fn packed_hex(s: &[f32; 256]) -> [u8; 64] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for byte in 0..32 {
            let mut b = 0u8;
            for bit in 0..8 {
                if s[byte * 8 + bit] > 0.0 {
                    b |= 1 << bit;
                }
            }
            out[2 * byte] = HEX[(b >> 4) as usize];
            out[2 * byte + 1] = HEX[(b & 15) as usize];
        }
        out
    }

    #[test]
    fn sign_vectors_match_formats_md() {
        assert_eq!(
            &packed_hex(&FWHT_SIGNS1),
            b"6f431f7edba4cc7df732616531ea6134acf88f3f38308757889d933fa3258e40"
        );
        assert_eq!(
            &packed_hex(&FWHT_SIGNS2),
            b"61b35e61a484ab8e3bc0812461c61c51b819d43a93ecf3be71423aeee9af0f39"
        );
    }

    fn pseudo(seed: u32) -> [f32; 256] {
        let mut s = seed;
        let mut x = [0f32; 256];
        for v in x.iter_mut() {
            s = s.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
            *v = ((s >> 8) as f32 / (1u32 << 24) as f32) * 2.0 - 1.0;
        }
        x
    }

    #[test]
    fn unit_vector_maps_to_signed_row_of_h() {
        let mut x = [0f32; 256];
        x[0] = 1.0;
        fwht256(&mut x);
        // Column 0 of H is all ones: result = signs1[0] * signs2 / 16.
        for i in 0..256 {
            assert_eq!(x[i], FWHT_SIGNS1[0] * FWHT_SIGNS2[i] * 0.0625);
        }
    }

    #[test]
    fn inverse_undoes_forward_and_preserves_dots() {
        for seed in 0..8 {
            let x = pseudo(seed);
            let w = pseudo(seed + 100);
            let mut y = x;
            fwht256(&mut y);
            let mut z = y;
            fwht256_inverse(&mut z);
            for i in 0..256 {
                assert!((z[i] - x[i]).abs() <= 1e-6, "{i}: {} vs {}", z[i], x[i]);
            }
            let mut rw = w;
            fwht256(&mut rw);
            let d0: f64 = x.iter().zip(&w).map(|(a, b)| *a as f64 * *b as f64).sum();
            let d1: f64 = y.iter().zip(&rw).map(|(a, b)| *a as f64 * *b as f64).sum();
            assert!((d0 - d1).abs() <= 1e-5 * (1.0 + d0.abs()), "{d0} vs {d1}");
            // Norm preserved.
            let n0: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
            let n1: f64 = y.iter().map(|a| (*a as f64).powi(2)).sum();
            assert!((n0 - n1).abs() <= 1e-5 * n0);
        }
    }
}
