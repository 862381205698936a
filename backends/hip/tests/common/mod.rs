//! Shared test helpers: a deterministic RNG and random valid matrices for any format.

#![allow(dead_code)]

use lowbit_core::codec::{self, EncodeOptions};
use lowbit_core::{Error, FormatId};

/// SplitMix64.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u = self.uniform().max(1e-300);
        let v = self.uniform();
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }

    /// Normal values with occasional outliers (x 20).
    pub fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let x = self.normal();
                if self.next_u64() % 64 == 0 {
                    x * 20.0
                } else {
                    x
                }
            })
            .collect()
    }
}

/// A random valid matrix of `rows x k` in `format`: even rows encoded from random values with
/// the reference encoder (where the format has one), odd rows (and every row of formats
/// without an encoder) random bytes, each block redrawn until the core decodes it.
pub fn random_matrix(rng: &mut Rng, format: FormatId, rows: usize, k: usize) -> Vec<u8> {
    let rb = format.row_bytes(k).unwrap();
    let g = format.geometry();
    let mut out = vec![0u8; rows * rb];
    let opts = EncodeOptions::default();
    for (r, row) in out.chunks_exact_mut(rb).enumerate() {
        let vals = rng.values(k);
        if (r % 2 == 0 || g.row_header_bytes != 0) && format.info().encoders.reference {
            codec::encode_row(format, &vals, &opts, row).unwrap();
            continue;
        }
        assert_eq!(g.row_header_bytes, 0, "{format}: cannot draw random rows");
        let mut scratch = vec![0f32; g.block_elems];
        for blk in row.chunks_exact_mut(g.block_bytes) {
            let mut tries = 0;
            blk.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
            loop {
                // Redraw only the bytes the core complains about, so formats with many
                // constrained fields (Ternary68's 2-bit codes) still converge.
                match codec::decode_row(format, blk, &mut scratch) {
                    Ok(()) => break,
                    Err(Error::IllegalByte { offset, .. }) if offset < blk.len() => {
                        blk[offset] = rng.next_u64() as u8;
                    }
                    Err(Error::NonFiniteScale { offset, .. }) if offset < blk.len() => {
                        let end = (offset + 8).min(blk.len());
                        blk[offset..end].iter_mut().for_each(|b| *b = rng.next_u64() as u8);
                    }
                    Err(_) => blk.iter_mut().for_each(|b| *b = rng.next_u64() as u8),
                }
                tries += 1;
                assert!(tries < 10_000, "{format}: no valid random block");
            }
        }
    }
    out
}

/// Activations for `n` columns of `k`: random values, column 1 (if any) all zero.
pub fn random_acts(rng: &mut Rng, n: usize, k: usize) -> Vec<f32> {
    let mut x = rng.values(n * k);
    if n > 1 {
        x[k..2 * k].iter_mut().for_each(|v| *v = 0.0);
    }
    x
}
