//! Test support for the x86 kernels' unit tests: one seeded generator, so that the layout and
//! kernel tests of different files draw their random matrices the same way. Test-only; no
//! kernel code lives here.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): a seed gives the same stream on every machine.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    /// The next 64 random bits.
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Roughly symmetric in (-1, 1), an occasional outlier x 50.
    pub(super) fn value(&mut self) -> f32 {
        let v = (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
        if self.next() % 61 == 0 {
            v * 50.0
        } else {
            v
        }
    }

    /// `blocks` blocks of `block_bytes` bytes each that open with a finite, full-mantissa f16
    /// scale of mixed magnitude followed by random bytes (the Q4_0 / Q8_0 / PQ2_0 shape).
    pub(super) fn f16_scaled_blocks(&mut self, blocks: usize, block_bytes: usize) -> Vec<u8> {
        let mut w = vec![0u8; blocks * block_bytes];
        for b in w.chunks_exact_mut(block_bytes) {
            let d = half::f16::from_f32(self.value() * 0.01);
            b[..2].copy_from_slice(&d.to_bits().to_le_bytes());
            b[2..].iter_mut().for_each(|q| *q = self.next() as u8);
        }
        w
    }
}
