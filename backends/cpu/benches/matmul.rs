//! Criterion benchmark of `CpuBackend::matmul`: every SIMD format of issue 3's target list on
//! the issue's shapes (rows x K = 4096x4096, 14336x4096, 4096x14336, 576x1536) and column
//! counts (n = 1, 4, 16, 512), reported as weight bytes per second (criterion's throughput).
//!
//! `lowbit bench` (runtime) is the measurement of record: it also probes the machine's read
//! bandwidth in the same run and prints the ratio. This bench is for A/B comparisons of kernel
//! changes with criterion's statistics:
//!
//! ```text
//! cargo bench -p lowbit-cpu --bench matmul                      # everything (~10 min)
//! cargo bench -p lowbit-cpu --bench matmul -- 'ROCmFP2/4096x14336/n1'
//! LOWBIT_CPU=avx2 cargo bench -p lowbit-cpu --bench matmul -- Q4_0
//! ```
//!
//! Weights are the core's reference encoding of a deterministic Gaussian tensor (row-varying
//! scale), activations a deterministic Gaussian; the ISA is the process-wide choice.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::codec::{self, EncodeOptions};
use lowbit_core::FormatId;
use lowbit_cpu::CpuBackend;

const FORMATS: [FormatId; 12] = [
    FormatId::Q8_0,
    FormatId::Q4_0,
    FormatId::Q4K,
    FormatId::Q6K,
    FormatId::Tq2_0,
    FormatId::Pq2_0,
    FormatId::RocmFp2,
    FormatId::RocmFp3,
    FormatId::Hfp4G32,
    FormatId::Mfp4G32,
    FormatId::Mxfp4,
    FormatId::F16,
];
const SHAPES: [(usize, usize); 4] = [(4096, 4096), (14336, 4096), (4096, 14336), (576, 1536)];
const NS: [usize; 4] = [1, 4, 16, 512];

/// A deterministic pseudo-Gaussian value stream (xorshift + sum of uniforms).
fn gaussian(seed: u64, len: usize) -> Vec<f32> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..len).map(|_| (0..4).map(|_| next()).sum::<f32>() - 2.0).collect()
}

/// The reference encoding of a `rows x k` Gaussian matrix, or `None` if the format has no
/// encoder or cannot hold `k`.
fn weights(format: FormatId, rows: usize, k: usize) -> Option<Vec<u8>> {
    let rb = format.row_bytes(k).ok()?;
    let src = gaussian(0x5eed ^ format as u64, rows * k);
    let mut out = vec![0u8; rows * rb];
    for (r, (x, o)) in src.chunks_exact(k).zip(out.chunks_exact_mut(rb)).enumerate() {
        let scale: Vec<f32> = x.iter().map(|v| v * (0.5 + (r % 7) as f32 * 0.1)).collect();
        codec::encode_row(format, &scale, &EncodeOptions::default(), o).ok()?;
    }
    Some(out)
}

fn matmul(c: &mut Criterion) {
    let cpu = CpuBackend::new().expect("CPU backend");
    for format in FORMATS {
        let mut group = c.benchmark_group(format.name());
        group.sample_size(10).warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(1));
        for (rows, k) in SHAPES {
            let Some(w) = weights(format, rows, k) else { continue };
            let m = cpu.upload(MatrixDesc { format, rows, cols: k }, &w).expect("upload");
            for n in NS {
                let x = gaussian(n as u64, n * k);
                let mut y = vec![0f32; n * rows];
                group.throughput(Throughput::Bytes(w.len() as u64));
                let id = BenchmarkId::new(format!("{rows}x{k}"), format!("n{n}"));
                group.bench_function(id, |b| {
                    b.iter(|| cpu.matmul(&m, black_box(&x), n, &mut y).expect("matmul"))
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, matmul);
criterion_main!(benches);
