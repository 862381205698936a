//! How a one-pass call (n <= 16) splits its rows across threads must not change a single
//! output bit: every row is computed by the same kernel over the same row groups whatever the
//! thread count (tasks are whole groups of 8 rows), so a pool of 1, 2 or 3 threads gives the
//! same bits, for row counts below the thread count, odd row counts, and matrices large enough
//! to be cut into many shrinking tasks. Each call also runs on a worker of its pool
//! (`CpuBackend::install`, as the engine calls it) and from outside, back to back, so the
//! worker kept awake after a call (`matmul::keep_awake`) is exercised.

mod common;

use common::{random_acts, random_matrix, Rng};
use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::FormatId;
use lowbit_cpu::{CpuBackend, Isa};

#[test]
fn thread_count_does_not_change_bits() {
    for isa in Isa::available_all() {
        let pools: Vec<CpuBackend> = [1, 2, 3]
            .into_iter()
            .map(|t| CpuBackend::with_isa(isa).unwrap().with_threads(t).unwrap())
            .collect();
        for format in
            [FormatId::Q8_0, FormatId::Q4_0, FormatId::RocmFp2, FormatId::Q4K, FormatId::Tq2_0]
        {
            let k = 4096usize.next_multiple_of(format.geometry().row_multiple);
            // 1 and 2 rows: fewer rows than threads; 13: one partial row group; 203 and 517:
            // above the 64 KiB minimum task for every format here, so several shrinking tasks
            // with a ragged last one.
            for (i, rows) in [1usize, 2, 13, 203, 517].into_iter().enumerate() {
                let mut rng = Rng(0x5151 + 97 * i as u64 + format as u64);
                let w = random_matrix(&mut rng, format, rows, k);
                let desc = MatrixDesc { format, rows, cols: k };
                for n in [1usize, 3] {
                    let x = random_acts(&mut rng, n, k);
                    let mut want: Option<Vec<f32>> = None;
                    for cpu in &pools {
                        let m = cpu.upload(desc, &w).unwrap();
                        for inside in [false, true] {
                            let mut y = vec![f32::NAN; n * rows];
                            if inside {
                                cpu.install(|| cpu.matmul(&m, &x, n, &mut y)).unwrap();
                            } else {
                                cpu.matmul(&m, &x, n, &mut y).unwrap();
                            }
                            let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                            match &want {
                                None => want = Some(y),
                                Some(w0) => {
                                    let w0: Vec<u32> = w0.iter().map(|v| v.to_bits()).collect();
                                    assert!(
                                        bits == w0,
                                        "{} {format} rows={rows} n={n} threads={} inside={inside}",
                                        cpu.name(),
                                        cpu.threads()
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
