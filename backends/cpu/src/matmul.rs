//! The matmul driver: checks lengths, prepares activations once, then for each tile of at most
//! [`MAX_TILE`] columns splits the rows into chunks across rayon and runs the format's kernel
//! on each chunk. Kernels write a row-major `(row, column)` tile; for n = 1 that is `y`
//! itself, otherwise it is transposed into `y[j * rows + r]` afterwards (rows * n floats: cheap
//! next to the weights).
//!
//! Large n (prefill) currently loops over tiles of 16 columns, re-reading the weights once per
//! tile; a blocked prefill kernel is future work.

use lowbit_core::backend::MatrixDesc;
use lowbit_core::error::Buffer;
use lowbit_core::Error;
use rayon::prelude::*;

use crate::act::Acts;
use crate::error::CpuError;
use crate::kernels::{KernelTable, MAX_TILE};

/// Rows per rayon task: a multiple of 8 (the SIMD kernels' row group), about 8 tasks per
/// thread so uneven progress balances, at least 8.
fn chunk_rows(rows: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    let per = rows.div_ceil(threads * 8);
    per.div_ceil(8).max(1) * 8
}

pub(crate) fn matmul(
    table: &KernelTable,
    desc: MatrixDesc,
    w: &[u8],
    x: &[f32],
    n: usize,
    y: &mut [f32],
) -> Result<(), CpuError> {
    let MatrixDesc { format, rows, cols } = desc;
    let kernel = table.get(format).ok_or(CpuError::Unsupported { format })?;
    let rb = format.row_bytes(cols)?;
    if x.len() != n * cols {
        let e =
            Error::Length { format, buffer: Buffer::Activations, got: x.len(), expected: n * cols };
        return Err(e.into());
    }
    if y.len() != n * rows {
        let e = Error::Length { format, buffer: Buffer::Values, got: y.len(), expected: n * rows };
        return Err(e.into());
    }
    if n == 0 || rows == 0 {
        return Ok(());
    }
    let acts = Acts::prepare(format, x, n, cols)?;
    let chunk = chunk_rows(rows);
    let run_tile = |j0: usize, nc: usize, out: &mut [f32]| -> Result<(), Error> {
        let res: Vec<Result<(), Error>> = w
            .par_chunks(chunk * rb)
            .zip(out.par_chunks_mut(chunk * nc))
            .enumerate()
            .map(|(c, (wc, oc))| {
                (kernel.f)(format, wc, rb, &acts, j0..j0 + nc, oc).map_err(|e| e.at(c * chunk * rb))
            })
            .collect();
        res.into_iter().collect()
    };
    if n == 1 {
        run_tile(0, 1, y)?;
        return Ok(());
    }
    let mut tmp = vec![0f32; rows * MAX_TILE.min(n)];
    let mut j0 = 0;
    while j0 < n {
        let nc = MAX_TILE.min(n - j0);
        let t = &mut tmp[..rows * nc];
        run_tile(j0, nc, t)?;
        for (r, tr) in t.chunks_exact(nc).enumerate() {
            for (j, &v) in tr.iter().enumerate() {
                y[(j0 + j) * rows + r] = v;
            }
        }
        j0 += nc;
    }
    Ok(())
}
