//! The matmul driver: checks lengths, prepares activations once, then splits the rows into
//! chunks across rayon and runs the format's kernel on each chunk, at most [`MAX_TILE`]
//! columns per kernel call. Three shapes of work:
//!
//! * **n = 1 (decode)**: one pass over the weights; each task writes its part of `y` directly.
//!   The rows are handed out as a queue of shrinking tasks ([`guided_tasks`]), and after the
//!   call one worker per extra thread is kept awake for a moment ([`keep_awake`]) so the next
//!   call does not wait for a sleeping thread.
//! * **n = 2..=16 (speculative verify)**: one pass, split as for n = 1; the kernel decodes
//!   each weight block once and reuses it for every column of the tile.
//! * **n > 16 (prefill)**: blocked. Each task owns a chunk of rows small enough to stay in the
//!   core's L2 cache ([`PREFILL_CHUNK_BYTES`]) and runs every 16-column tile over it, so the
//!   weights stream from memory once per call instead of once per tile; only the (much
//!   smaller) prepared activations are re-read, from the shared last-level cache.
//!
//!   Formats with a [`GemmKernel`] (`kernels::Extras::gemm`) run that instead: the call's
//!   activations are rearranged once into its panel, and each task runs its chunk of rows
//!   against every column.
//!
//! Kernels write a row-major `(row, column)` tile; for n = 1 that is `y` itself, otherwise the
//! tiles are gathered row-major and transposed into `y[j * rows + r]` at the end (rows * n
//! floats: cheap next to the weights and the arithmetic).
//!
//! What must not live here: kernel bodies, activation quantization (`act.rs`).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use lowbit_core::backend::MatrixDesc;
use lowbit_core::error::Buffer;
use lowbit_core::Error;
use rayon::prelude::*;

use crate::act::Acts;
use crate::error::CpuError;
use crate::kernels::{GemmKernel, Kernel, KernelTable, MAX_TILE};

/// Weight bytes per prefill task: a quarter of a typical 1-2 MiB L2, so the chunk stays cached
/// while every column tile runs over it, with room for the activations and outputs.
pub const PREFILL_CHUNK_BYTES: usize = 256 * 1024;

/// Weight bytes below which a one-pass task is not split further. A task costs about a
/// microsecond to hand out and start (and its kernel rebuilds its activation records); SmolLM2
/// decode on 2 threads ran about 5% faster with 64 KiB than with 16 KiB (`lowbit speed`,
/// 2026-12-01).
pub const MIN_TASK_BYTES: usize = 64 * 1024;

/// An upper bound on rows per prefill task: a multiple of 8 (the SIMD kernels' row group),
/// about 8 tasks per thread so uneven progress balances, but at least [`MIN_TASK_BYTES`] of
/// weights per task. (Until session 9 the one-pass split too; that now uses
/// [`guided_tasks`].)
fn chunk_rows(rows: usize, row_bytes: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    let per = rows.div_ceil(threads * 8);
    let min = MIN_TASK_BYTES.div_ceil(row_bytes.max(1));
    per.max(min).div_ceil(8).max(1) * 8
}

/// Rows per prefill task: as many whole groups of 8 rows as fit in [`PREFILL_CHUNK_BYTES`]
/// (at least 8), but no more than [`chunk_rows`] so every thread still gets work.
fn prefill_chunk_rows(rows: usize, row_bytes: usize) -> usize {
    let fit = (PREFILL_CHUNK_BYTES / row_bytes.max(1)) / 8 * 8;
    fit.max(8).min(chunk_rows(rows, row_bytes))
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
    if w.len() != rows * rb {
        let e =
            Error::Length { format, buffer: Buffer::Encoded, got: w.len(), expected: rows * rb };
        return Err(e.into());
    }
    if n == 0 || rows == 0 {
        return Ok(());
    }
    let mut acts = Acts::prepare(format, x, n, cols)?;
    let extras = table.extras(format);
    if let (Some(g), true) = (extras.gemm, n > MAX_TILE) {
        return gemm(g, desc, rb, w, &acts, y);
    }
    if let Some(prep) = extras.prep {
        acts.layout = prep(&acts);
    }
    if n == 1 {
        return one_pass(kernel, desc, rb, w, &acts, 0, 1, y);
    }
    if n > MAX_TILE {
        return blocked(kernel, desc, rb, w, &acts, y);
    }
    let mut tmp = vec![0f32; rows * n];
    one_pass(kernel, desc, rb, w, &acts, 0, n, &mut tmp)?;
    for (r, tr) in tmp.chunks_exact(n).enumerate() {
        for (j, &v) in tr.iter().enumerate() {
            y[j * rows + r] = v;
        }
    }
    Ok(())
}

/// One pass over the weights for the `nc <= MAX_TILE` columns from `j0`: `out` is row-major
/// `rows x nc`. The rows are cut into [`guided_tasks`], queued in row order; each of the
/// pool's threads takes the next task until none is left. Errors: the failing task with the
/// lowest first row wins (the same error whatever the threads' timing), its offset shifted to
/// a position in `w`.
#[allow(clippy::too_many_arguments)]
fn one_pass(
    kernel: Kernel,
    desc: MatrixDesc,
    rb: usize,
    w: &[u8],
    acts: &Acts,
    j0: usize,
    nc: usize,
    out: &mut [f32],
) -> Result<(), CpuError> {
    let threads = rayon::current_num_threads().max(1);
    let run = |(r0, wc, oc): (usize, &[u8], &mut [f32])| {
        (kernel.f)(desc.format, wc, rb, acts, j0..j0 + nc, oc).map_err(|e| (r0, e.at(r0 * rb)))
    };
    let mut tasks = Vec::new();
    let (mut w_left, mut out_left) = (w, out);
    let mut r0 = 0;
    for nr in guided_tasks(desc.rows, rb, threads) {
        let (wt, w_rest) = w_left.split_at(nr * rb);
        let (ot, out_rest) = std::mem::take(&mut out_left).split_at_mut(nr * nc);
        tasks.push((r0, wt, ot));
        (w_left, out_left, r0) = (w_rest, out_rest, r0 + nr);
    }
    if tasks.len() <= 1 {
        // One task (one thread, or a matrix too small to split): no hand-off at all.
        return match tasks.pop().map(run) {
            Some(Err((_, e))) => Err(e.into()),
            _ => Ok(()),
        };
    }
    let workers = threads.min(tasks.len());
    let queue = Mutex::new(tasks.into_iter());
    FORKS.fetch_add(1, Ordering::Relaxed);
    let failed: Mutex<Option<(usize, Error)>> = Mutex::new(None);
    (0..workers).into_par_iter().for_each(|_| {
        // A poisoned lock means a kernel panicked on another thread; rayon re-raises that
        // panic when the loop ends, so this worker just stops.
        while let Some(task) = queue.lock().ok().and_then(|mut q| q.next()) {
            let Err((r0, e)) = run(task) else { continue };
            if let Ok(mut f) = failed.lock() {
                if f.as_ref().is_none_or(|(first, _)| r0 < *first) {
                    *f = Some((r0, e));
                }
            }
        }
    });
    keep_awake(threads);
    match failed.into_inner().ok().flatten() {
        Some((_, e)) => Err(e.into()),
        None => Ok(()),
    }
}

/// How long a worker stays awake after a parallel one-pass call, waiting for the next, unless
/// `LOWBIT_CPU_LINGER_US` says otherwise (see [`linger_time`]).
pub const LINGER: Duration = Duration::from_millis(1);

/// The linger time in use: `LOWBIT_CPU_LINGER_US` (microseconds; `0` turns lingering off, for
/// hosts that would rather not spend up to a millisecond of a core after each call), read once
/// per process; [`LINGER`] when unset. A value that is not a whole number of microseconds is
/// ignored with a warning on stderr, and the default is kept.
pub(crate) fn linger_time() -> Duration {
    static TIME: OnceLock<Duration> = OnceLock::new();
    *TIME.get_or_init(|| {
        let var = std::env::var("LOWBIT_CPU_LINGER_US").ok();
        parse_linger(var.as_deref()).unwrap_or_else(|v| {
            eprintln!(
                "lowbit-cpu: LOWBIT_CPU_LINGER_US={v:?} is not a whole number of microseconds; \
                 keeping {} us",
                LINGER.as_micros()
            );
            LINGER
        })
    })
}

/// `LOWBIT_CPU_LINGER_US`'s value as a time: [`LINGER`] when unset, the text back when it is
/// not a whole number of microseconds.
fn parse_linger(var: Option<&str>) -> Result<Duration, &str> {
    match var {
        None => Ok(LINGER),
        Some(v) => v.trim().parse::<u64>().map(Duration::from_micros).map_err(|_| v),
    }
}

/// Parallel one-pass calls started so far (process-wide): a lingering worker stops when this
/// changes, and so is free to take the new call's work.
static FORKS: AtomicUsize = AtomicUsize::new(0);

/// Workers lingering now (process-wide).
static LINGERS: AtomicUsize = AtomicUsize::new(0);

/// Keeps up to `threads - 1` workers of the current pool awake for [`linger_time`] after a
/// parallel call, so the next call finds them awake: a job that yields the CPU in a loop
/// until the next parallel call starts, other work of the pool turns up (it runs that work
/// at once, attention heads or the next forward pass, and stops lingering), or the time is
/// up. Rayon puts a worker that finds no work to sleep after a few microseconds of searching;
/// on the project's VM a sleeping worker's virtual CPU halts, and waking it took from tens of
/// microseconds to the length of a whole call: in a run of back-to-back 4096 x 14336 n = 1
/// calls on 2 threads (Q4_0, 2026-12-02), about half the calls ran on one thread from start
/// to end (2.1 ms, the one-thread time) and the helper joined the others 0.6-1.8 ms late.
fn keep_awake(threads: usize) {
    if threads < 2 || linger_time().is_zero() {
        return;
    }
    if LINGERS.fetch_add(1, Ordering::Relaxed) >= threads - 1 {
        LINGERS.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let seen = FORKS.load(Ordering::Relaxed);
    rayon::spawn(move || linger(seen));
}

thread_local! {
    /// Whether this worker is inside [`linger`] (possibly running other work from there).
    static IN_LINGER: Cell<bool> = const { Cell::new(false) };
}

/// The job [`keep_awake`] spawns; it holds one count of [`LINGERS`] on entry and gives it back.
fn linger(seen: usize) {
    // Reached from another linger's `rayon::yield_now` on the same thread: nothing to add
    // (and no nesting deeper than one).
    if IN_LINGER.with(|f| f.replace(true)) {
        LINGERS.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let t = Instant::now();
    let mut counted = true;
    while FORKS.load(Ordering::Relaxed) == seen && t.elapsed() < linger_time() {
        // Not counted as lingering while it may run other work, so a call inside that work
        // can keep another worker awake.
        LINGERS.fetch_sub(1, Ordering::Relaxed);
        counted = false;
        if rayon::yield_now() != Some(rayon::Yield::Idle) {
            break;
        }
        LINGERS.fetch_add(1, Ordering::Relaxed);
        counted = true;
        std::thread::yield_now();
    }
    if counted {
        LINGERS.fetch_sub(1, Ordering::Relaxed);
    }
    IN_LINGER.with(|f| f.set(false));
}

/// Rows of each task of a one-pass call, in row order. One thread: a single task (each task
/// restarts the kernel's row groups and, in some kernels, rebuilds activation records).
/// Several: self-scheduling with shrinking tasks, in the manner of guided self-scheduling
/// (Polychronopoulos and Kuck, 1987, which hands out `1 / threads` of the remaining rows):
/// each task takes `1 / (2 * threads)` of the rows not yet planned, rounded up to whole groups
/// of 8 rows (the SIMD kernels' row group) and at least [`MIN_TASK_BYTES`] of weights. Tasks
/// start large (few hand-outs, long contiguous streams) and end small, so the threads finish
/// within a small task of each other. With chunks of equal size (session 8: about 8 per
/// thread) the thread that finished first waited 30-60 µs per 4096 x 14336 call for the other
/// (median, n = 1, 2 threads, 2026-12-02); with these, 2-5 µs.
fn guided_tasks(rows: usize, row_bytes: usize, threads: usize) -> Vec<usize> {
    if threads <= 1 || rows == 0 {
        return if rows == 0 { Vec::new() } else { vec![rows] };
    }
    let min = MIN_TASK_BYTES.div_ceil(row_bytes.max(1)).div_ceil(8).max(1) * 8;
    let mut left = rows;
    let mut tasks = Vec::new();
    while left > 0 {
        let t = left.div_ceil(2 * threads).div_ceil(8) * 8;
        let t = t.max(min).min(left);
        tasks.push(t);
        left -= t;
    }
    tasks
}

/// The blocked prefill pass: each task takes an L2-sized chunk of rows and runs every column
/// tile over it, transposing each tile into a column-major block of its own (`n` columns of
/// the chunk's rows, in cache); the blocks are then copied into `y` (`y[j * rows + r]`) as
/// contiguous runs, rather than scattering `rows * n` single floats across `y`.
fn blocked(
    kernel: Kernel,
    desc: MatrixDesc,
    rb: usize,
    w: &[u8],
    acts: &Acts,
    y: &mut [f32],
) -> Result<(), CpuError> {
    let n = acts.n;
    let rows = desc.rows;
    let chunk = prefill_chunk_rows(rows, rb);
    let blocks: Vec<Result<Vec<f32>, Error>> = w
        .par_chunks(chunk * rb)
        .enumerate()
        .map_init(
            || vec![0f32; chunk * MAX_TILE],
            |tile, (c, wc)| {
                let rows_here = wc.len() / rb;
                let mut block = vec![0f32; rows_here * n];
                let mut j0 = 0;
                while j0 < n {
                    let nc = MAX_TILE.min(n - j0);
                    let t = &mut tile[..rows_here * nc];
                    (kernel.f)(desc.format, wc, rb, acts, j0..j0 + nc, t)
                        .map_err(|e| e.at(c * chunk * rb))?;
                    for jj in 0..nc {
                        let col = &mut block[(j0 + jj) * rows_here..][..rows_here];
                        for (r, v) in col.iter_mut().enumerate() {
                            *v = t[r * nc + jj];
                        }
                    }
                    j0 += nc;
                }
                Ok(block)
            },
        )
        .collect();
    place_blocks(blocks, chunk, n, rows, y)
}

/// The prefill GEMM: the activation panel is built once, then each task runs an L2-sized
/// chunk of rows against every column into a column-major block of its own, copied into `y`
/// as contiguous runs (as [`blocked`]).
fn gemm(
    g: GemmKernel,
    desc: MatrixDesc,
    rb: usize,
    w: &[u8],
    acts: &Acts,
    y: &mut [f32],
) -> Result<(), CpuError> {
    let n = acts.n;
    let rows = desc.rows;
    let panel = (g.panel)(desc.format, acts)?;
    let chunk = prefill_chunk_rows(rows, rb);
    let blocks: Vec<Result<Vec<f32>, Error>> = w
        .par_chunks(chunk * rb)
        .enumerate()
        .map(|(c, wc)| {
            let mut block = vec![0f32; wc.len() / rb * n];
            (g.f)(desc.format, wc, rb, &panel, &mut block).map_err(|e| e.at(c * chunk * rb))?;
            Ok(block)
        })
        .collect();
    place_blocks(blocks, chunk, n, rows, y)
}

/// Copies each task's column-major block (chunk `c`: rows `c * chunk ..`, `n` columns) into
/// `y[j * rows + r]` as contiguous runs; the first failed task's error wins.
fn place_blocks(
    blocks: Vec<Result<Vec<f32>, Error>>,
    chunk: usize,
    n: usize,
    rows: usize,
    y: &mut [f32],
) -> Result<(), CpuError> {
    for (c, block) in blocks.into_iter().enumerate() {
        let block = block?;
        let r0 = c * chunk;
        let rows_here = block.len() / n;
        for (j, col) in block.chunks_exact(rows_here).enumerate() {
            y[j * rows + r0..][..rows_here].copy_from_slice(col);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn linger_variable_parses_or_names_the_bad_value() {
        assert_eq!(parse_linger(None), Ok(LINGER));
        assert_eq!(parse_linger(Some("0")), Ok(Duration::ZERO));
        assert_eq!(parse_linger(Some(" 250 ")), Ok(Duration::from_micros(250)));
        assert_eq!(parse_linger(Some("1ms")), Err("1ms"));
        assert_eq!(parse_linger(Some("-5")), Err("-5"));
    }

    use super::*;

    /// The plan covers every row once, in tasks of whole 8-row groups (all but the last),
    /// never growing, each at least the minimum task but the last; one thread (or a small
    /// matrix) gets a single task, no rows none.
    #[test]
    fn guided_tasks_cover_rows_in_shrinking_groups() {
        assert_eq!(guided_tasks(0, 100, 2), Vec::<usize>::new());
        assert_eq!(guided_tasks(4096, 8064, 1), vec![4096]);
        assert_eq!(guided_tasks(1, 8064, 2), vec![1]);
        assert_eq!(guided_tasks(2, 8064, 3), vec![2]);
        // Under the minimum task (64 KiB): one task.
        assert_eq!(guided_tasks(7, 4096, 2), vec![7]);
        for threads in [2usize, 3, 4, 8] {
            for rows in [1usize, 2, 7, 8, 9, 13, 100, 203, 517, 4096, 14336] {
                for rb in [18usize, 1088, 4352, 8064, 16384, 70_000] {
                    let plan = guided_tasks(rows, rb, threads);
                    assert_eq!(plan.iter().sum::<usize>(), rows, "{rows} {rb} {threads}");
                    let min = MIN_TASK_BYTES.div_ceil(rb).div_ceil(8) * 8;
                    let (last, head) = plan.split_last().expect("rows > 0");
                    assert!(*last > 0);
                    for (i, &t) in head.iter().enumerate() {
                        assert_eq!(t % 8, 0, "{plan:?}");
                        assert!(t >= min, "{plan:?}");
                        assert!(plan[i + 1] <= t, "{plan:?}");
                    }
                    assert!(plan[0] <= rows.div_ceil(2 * threads).div_ceil(8) * 8 + min);
                }
            }
        }
        // 4096 rows of 8064 bytes (4096 x 14336 Q4_0), 2 threads: 1024, 768, 576, ...
        assert_eq!(&guided_tasks(4096, 8064, 2)[..3], &[1024, 768, 576]);
    }
}
