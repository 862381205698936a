//! Column-count probe: `CpuBackend::matmul` on one shape for a list of column counts, each
//! with the minimum and median wall time of `reps` calls, and for n > 1 the ratio of its
//! minimum to the n = 1 minimum of the same run (the issue-3 "n = 4 costs <= 1.5x n = 1"
//! figure). For A/B runs and `perf record`; `lowbit bench` gives the documented figures.
//!
//! `cargo run --release -p lowbit-cpu --example kcols -- FORMAT[,...] [reps] [ROWSxK] [threads] [n,...]`

use std::time::Instant;

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::FormatId;
use lowbit_cpu::CpuBackend;

mod common;
use common::{fill_row, rng};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let formats = args.get(1).map(|s| s.as_str()).unwrap_or("ROCMFP2");
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(30);
    let shape = args.get(3).map(|s| s.as_str()).unwrap_or("4096x14336");
    let threads: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);
    let ns: Vec<usize> = args
        .get(5)
        .map(|s| s.split(',').map(|v| v.parse().expect("n")).collect())
        .unwrap_or_else(|| vec![1, 4]);
    let (rows, k) = shape.split_once('x').expect("ROWSxK");
    let (rows, k): (usize, usize) = (rows.parse().unwrap(), k.parse().unwrap());
    let cpu = CpuBackend::new().unwrap().with_threads(threads).unwrap();
    for name in formats.split(',') {
        let format = FormatId::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name));
        let Some(format) = format else {
            eprintln!("unknown format {name}");
            continue;
        };
        let rb = format.row_bytes(k).unwrap();
        let mut s = 7u64;
        let distinct = 64.min(rows);
        let mut proto = vec![0u8; distinct * rb];
        for row in proto.chunks_exact_mut(rb) {
            fill_row(format, row, k, &mut s);
        }
        let mut w = vec![0u8; rows * rb];
        for (i, row) in w.chunks_exact_mut(rb).enumerate() {
            row.copy_from_slice(&proto[(i % distinct) * rb..][..rb]);
        }
        let m = cpu.upload(MatrixDesc { format, rows, cols: k }, &w).unwrap();
        drop(w);
        let mut line = format!("{:<8} {}x{} {} thr", format.name(), rows, k, threads);
        let mut t1 = None;
        for &n in &ns {
            let x: Vec<f32> = (0..n * k).map(|_| rng(&mut s)).collect();
            let mut y = vec![0f32; n * rows];
            cpu.matmul(&m, &x, n, &mut y).unwrap();
            let mut ts: Vec<f64> = (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    cpu.matmul(&m, &x, n, &mut y).unwrap();
                    t.elapsed().as_secs_f64()
                })
                .collect();
            ts.sort_by(f64::total_cmp);
            let (min, med) = (ts[0], ts[reps / 2]);
            let t1v = *t1.get_or_insert(min);
            line += &format!(
                " | n={n}: min {:>7.1} med {:>7.1} us {:>6.2} GB/s x{:.2}",
                min * 1e6,
                med * 1e6,
                (rows * rb) as f64 / min / 1e9,
                min / t1v
            );
        }
        println!("{line}");
    }
}
