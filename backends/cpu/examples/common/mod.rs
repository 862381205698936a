//! What the streaming probes (`kstream`, `kcols`) share: a seeded generator and valid random
//! weight rows. Not an example itself (a folder with `mod.rs`, not `main.rs`).

use lowbit_core::codec::{self, EncodeOptions};
use lowbit_core::FormatId;

/// One step of a 64-bit LCG (Knuth's MMIX constants).
pub fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *s
}

/// A uniform value in [-1, 1).
pub fn rng(s: &mut u64) -> f32 {
    let u = ((next(s) >> 40) as f32) / (1u64 << 24) as f32;
    2.0 * u - 1.0
}

/// One valid row: the reference encoder's output, or random blocks redrawn until they decode.
pub fn fill_row(format: FormatId, row: &mut [u8], k: usize, s: &mut u64) {
    let vals: Vec<f32> = (0..k).map(|_| rng(s) * 0.05).collect();
    if codec::encode_row(format, &vals, &EncodeOptions::default(), row).is_ok() {
        return;
    }
    let g = format.geometry();
    let mut out = vec![0f32; g.block_elems];
    for blk in row.chunks_exact_mut(g.block_bytes) {
        loop {
            for b in blk.iter_mut() {
                *b = (next(s) >> 56) as u8;
            }
            if codec::decode_row(format, blk, &mut out).is_ok() {
                break;
            }
        }
    }
}
