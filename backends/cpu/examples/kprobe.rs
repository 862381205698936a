//! Kernel probe: minimum wall time of `CpuBackend::matmul` (1 thread) on two cache-resident
//! shapes, and the marginal cost per weight byte between them (which removes the per-call
//! work: activation quantization, thread wake-up).
//!
//! `cargo run --release -p lowbit-cpu --example kprobe -- [FORMAT,...] [reps]`

use std::time::Instant;

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::codec::{self, EncodeOptions};
use lowbit_core::FormatId;
use lowbit_cpu::CpuBackend;

fn rng(s: &mut u64) -> f32 {
    *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let u = ((*s >> 40) as f32) / (1u64 << 24) as f32;
    2.0 * u - 1.0
}

/// Random bytes for a format without an encoder, each block redrawn until the core decodes it.
fn random_row(format: FormatId, row: &mut [u8], s: &mut u64) {
    let g = format.geometry();
    let mut out = vec![0f32; g.block_elems];
    for blk in row.chunks_exact_mut(g.block_bytes) {
        loop {
            for b in blk.iter_mut() {
                *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *b = (*s >> 56) as u8;
            }
            if codec::decode_row(format, blk, &mut out).is_ok() {
                break;
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let formats = args.get(1).map(|s| s.as_str()).unwrap_or("ROCMFP2,ROCMFP3,HFP4G32,MFP4G32");
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200);
    let cpu = CpuBackend::new().unwrap().with_threads(1).unwrap();
    for name in formats.split(',') {
        let format = FormatId::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name));
        let Some(format) = format else {
            eprintln!("unknown format {name}");
            continue;
        };
        let k = 4096;
        let mut res = Vec::new();
        for rows in [64usize, 448] {
            let rb = format.row_bytes(k).unwrap();
            let mut w = vec![0u8; rows * rb];
            let mut s = 7u64;
            let mut vals = vec![0f32; k];
            for row in w.chunks_exact_mut(rb) {
                vals.iter_mut().for_each(|v| *v = rng(&mut s) * 0.05);
                if codec::encode_row(format, &vals, &EncodeOptions::default(), row).is_err() {
                    random_row(format, row, &mut s);
                }
            }
            let m = cpu.upload(MatrixDesc { format, rows, cols: k }, &w).unwrap();
            for n in [1usize, 4, 16] {
                let x: Vec<f32> = (0..n * k).map(|_| rng(&mut s)).collect();
                let mut y = vec![0f32; n * rows];
                let mut best = f64::MAX;
                for _ in 0..reps {
                    let t = Instant::now();
                    cpu.matmul(&m, &x, n, &mut y).unwrap();
                    best = best.min(t.elapsed().as_secs_f64());
                }
                res.push((rows, n, best, rows * rb));
            }
        }
        for n in [1usize, 4, 16] {
            let a: Vec<_> = res.iter().filter(|r| r.1 == n).collect();
            let (small, big) = (a[0], a[1]);
            let dt = big.2 - small.2;
            let db = (big.3 - small.3) as f64;
            println!(
                "{:<8} n={:>2}: {:>4}x{k} {:>8.1} us, {:>4}x{k} {:>8.1} us; marginal {:.2} GB/s ({:.3} ns/KB)",
                format.name(),
                n,
                small.0,
                small.2 * 1e6,
                big.0,
                big.2 * 1e6,
                db / dt / 1e9,
                dt / db * 1e12,
            );
        }
    }
    println!("kernels: {:?}", cpu.table());
}
