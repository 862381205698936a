//! The blocked prefill path (n > 16 columns) against the tiled path: a call with n columns
//! must give, bit for bit, what separate calls on its 16-column tiles give (the same kernels on
//! the same tiles; only the loop order and the gathering differ). Shapes span several L2-sized
//! row chunks, a ragged last chunk and a ragged last tile, on every available ISA. Formats
//! that run a prefill GEMM instead (`KernelTable::gemm_name`, AVX-512 VNNI) are checked
//! against the reference bound, on the same shapes, by `tests/matmul.rs`'s
//! `gemm_prefill_shapes`.

mod common;

use common::{random_acts, random_matrix, Rng};
use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::FormatId;
use lowbit_cpu::{CpuBackend, Isa};

fn check(cpu: &CpuBackend, format: FormatId, rows: usize, k: usize, n: usize, seed: u64) {
    if cpu.table().gemm_name(format).is_some() {
        return;
    }
    let mut rng = Rng(seed);
    let w = random_matrix(&mut rng, format, rows, k);
    let x = random_acts(&mut rng, n, k);
    let m = cpu.upload(MatrixDesc { format, rows, cols: k }, &w).unwrap();
    let mut y = vec![f32::NAN; n * rows];
    cpu.matmul(&m, &x, n, &mut y).unwrap();
    let mut j0 = 0;
    while j0 < n {
        let nc = 16.min(n - j0);
        let mut yt = vec![f32::NAN; nc * rows];
        cpu.matmul(&m, &x[j0 * k..(j0 + nc) * k], nc, &mut yt).unwrap();
        for (i, (a, b)) in y[j0 * rows..(j0 + nc) * rows].iter().zip(&yt).enumerate() {
            assert!(
                a.to_bits() == b.to_bits(),
                "{} {format} rows={rows} k={k} n={n}: column {}, row {}: prefill {a} vs tile {b}",
                cpu.name(),
                j0 + i / rows,
                i % rows
            );
        }
        j0 += nc;
    }
}

#[test]
fn prefill_equals_tiles() {
    for isa in Isa::available_all() {
        let cpu = CpuBackend::with_isa(isa).unwrap().with_threads(2).unwrap();
        for format in
            [FormatId::Q8_0, FormatId::RocmFp2, FormatId::RocmFp3, FormatId::Q4K, FormatId::Mfp4G32]
        {
            let k = 2048usize.next_multiple_of(format.geometry().row_multiple);
            // 301 rows of ~2 KiB: several 256 KiB chunks, a ragged last one; 37 columns: two
            // full tiles and a ragged one.
            check(&cpu, format, 301, k, 37, 11 + format as u64);
        }
    }
}
