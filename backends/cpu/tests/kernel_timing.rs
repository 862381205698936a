//! One quick timing per SIMD kernel against the scalar fallback (ignored by default; run with
//! `cargo test -p lowbit-cpu --release --test kernel_timing -- --ignored --nocapture`). Not a
//! benchmark: one shape, best of 3, whatever else the machine is doing. Also checks that the
//! SIMD result equals the scalar one bit for bit, so it can fail.

mod common;

use std::time::Instant;

use common::{random_acts, random_matrix, Rng};
use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::FormatId;
use lowbit_cpu::{CpuBackend, Isa};

fn best_of_3(
    cpu: &CpuBackend,
    m: &<CpuBackend as Backend>::Matrix,
    x: &[f32],
    n: usize,
    y: &mut [f32],
) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            cpu.matmul(m, x, n, y).unwrap();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore]
fn simd_vs_scalar_once() {
    let (rows, k) = (512, 4096);
    let scalar = CpuBackend::with_isa(Isa::Scalar).unwrap();
    for isa in Isa::available_all().into_iter().filter(|&i| i != Isa::Scalar) {
        let cpu = CpuBackend::with_isa(isa).unwrap();
        for format in [
            FormatId::Tq2_0,
            FormatId::Pq2_0,
            FormatId::RocmFp3,
            FormatId::Hfp4G32,
            FormatId::Mfp4G32,
            FormatId::Mfp4G32P,
            FormatId::Q4K,
            FormatId::Q6K,
        ] {
            let mut rng = Rng(5 + format as u64);
            let w = random_matrix(&mut rng, format, rows, k);
            let desc = MatrixDesc { format, rows, cols: k };
            let ms = scalar.upload(desc, &w).unwrap();
            let mc = cpu.upload(desc, &w).unwrap();
            for n in [1, 16] {
                let x = random_acts(&mut rng, n, k);
                let mut ys = vec![0f32; n * rows];
                let mut yc = vec![0f32; n * rows];
                let ts = best_of_3(&scalar, &ms, &x, n, &mut ys);
                let tc = best_of_3(&cpu, &mc, &x, n, &mut yc);
                assert!(ys.iter().zip(&yc).all(|(a, b)| a.to_bits() == b.to_bits()), "{format}");
                println!(
                    "{:>6} {:>10} n={n:>2}: scalar {:8.2} ms, {:>16} {:7.2} ms, x{:.1}",
                    isa.name(),
                    format.name(),
                    ts * 1e3,
                    cpu.table().kernel_name(format).unwrap_or("?"),
                    tc * 1e3,
                    ts / tc
                );
            }
        }
    }
}
