//! TEMPORARY session-9 diagnostics: where two-thread n = 1 time goes.
//! `mtrace FORMATS SHAPE ROUNDS CONFIGS` with CONFIGS like `1:0:0,2:0:0,2:1:0` (threads:split:pf).

use std::time::Instant;

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::FormatId;
use lowbit_cpu::CpuBackend;

mod common;
use common::{fill_row, rng};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let formats = args.get(1).map(|s| s.as_str()).unwrap_or("Q4_0");
    let shape = args.get(2).map(|s| s.as_str()).unwrap_or("4096x14336");
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let configs: Vec<(usize, usize, usize, usize)> = args
        .get(4)
        .map(|s| s.as_str())
        .unwrap_or("1:0:0,2:0:0,2:1:0")
        .split(',')
        .map(|c| {
            let v: Vec<usize> = c.split(':').map(|x| x.parse().unwrap()).collect();
            (v[0], v[1], v[2], *v.get(3).unwrap_or(&0))
        })
        .collect();
    let (rows, k) = shape.split_once('x').expect("ROWSxK");
    let (rows, k): (usize, usize) = (rows.parse().unwrap(), k.parse().unwrap());
    let cpus: Vec<CpuBackend> =
        (1..=2).map(|t| CpuBackend::new().unwrap().with_threads(t).unwrap()).collect();
    // probe
    let probe: Vec<u64> = (0..(256usize << 20) / 8).map(|i| i as u64).collect();
    let mut ceil = [0f64; 3];
    for _ in 0..2 {
        for t in 1..=2 {
            let bw = lowbit_cpu::probe::read_bandwidth(&probe, t, 2);
            ceil[t] = ceil[t].max(bw.gb_s);
        }
    }
    println!("ceiling 1 thr {:.1} GB/s, 2 thr {:.1} GB/s", ceil[1], ceil[2]);
    for name in formats.split(',') {
        let format =
            FormatId::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name)).unwrap();
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
        let copies = (256usize << 20).div_ceil(w.len()).max(2);
        let desc = MatrixDesc { format, rows, cols: k };
        let ms: Vec<_> = (0..copies).map(|_| cpus[0].upload(desc, &w).unwrap()).collect();
        drop(w);
        let x: Vec<f32> = (0..k).map(|_| rng(&mut s)).collect();
        let mut y = vec![0f32; rows];
        let mut best = vec![f64::MAX; configs.len()];
        let mut ratios = vec![Vec::new(); configs.len()];
        let mut recs = vec![Vec::new(); configs.len()];
        let mut outside = vec![0f64; configs.len()];
        let mut next = 0;
        for _ in 0..rounds {
            let mut local = [0f64; 3];
            for t in 1..=2 {
                local[t] = lowbit_cpu::probe::read_bandwidth(&probe, t, 2).gb_s;
                ceil[t] = ceil[t].max(local[t]);
            }
            for (ci, &(t, split, pf, inst)) in configs.iter().enumerate() {
                lowbit_cpu::matmul::trace::set_split(split);
                lowbit_cpu::matmul::trace::set_pf(pf);
                let cpu = &cpus[t - 1];
                for _ in 0..3 {
                    next = (next + 1) % ms.len();
                    cpu.matmul(&ms[next], &x, 1, &mut y).unwrap();
                }
                let _ = lowbit_cpu::matmul::trace::take();
                let mut meds = Vec::new();
                let mut ext = Vec::new();
                for _ in 0..5 {
                    let iters = 30;
                    let mut body = || {
                        let t0 = Instant::now();
                        for _ in 0..iters {
                            next = (next + 1) % ms.len();
                            let t1 = Instant::now();
                            cpu.matmul(&ms[next], &x, 1, &mut y).unwrap();
                            ext.push(t1.elapsed().as_nanos() as u64);
                        }
                        t0.elapsed().as_secs_f64() / iters as f64
                    };
                    let m = if inst == 1 { cpu.install(body) } else { body() };
                    meds.push(m);
                }
                meds.sort_by(f64::total_cmp);
                let r = lowbit_cpu::matmul::trace::take();
                let med = meds[2];
                ratios[ci].push((rows * rb) as f64 / med / 1e9 / local[t]);
                if med < best[ci] {
                    best[ci] = med;
                    if r.len() == ext.len() {
                        let mut c: Vec<f64> =
                            r.iter().zip(&ext).map(|(v, e)| (*e as f64 - v[1] as f64) / 1e3).collect();
                        c.sort_by(f64::total_cmp);
                        outside[ci] = c[c.len() / 2];
                    }
                    recs[ci] = r;
                }
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
        };
        for (ci, &(t, split, pf, inst)) in configs.iter().enumerate() {
            let gbs = (rows * rb) as f64 / best[ci] / 1e9;
            let mut rr = ratios[ci].clone();
            let mut line = format!(
                "{:<8} {rows}x{k} t{t} s{split} p{pf} i{inst}: {:>7.1} us {:>5.1} GB/s best-ratio {:.3} round-ratio med {:.3} max {:.3}",
                format.name(),
                best[ci] * 1e6,
                gbs,
                gbs / ceil[t],
                median(&mut rr),
                rr.last().copied().unwrap_or(0.0),
            );
            let r = &recs[ci];
            if !r.is_empty() {
                let f = |j: usize| {
                    let mut v: Vec<f64> = r.iter().filter(|x| x[j] != u64::MAX).map(|x| x[j] as f64 / 1e3).collect();
                    median(&mut v)
                };
                let mut tail: Vec<f64> = r
                    .iter()
                    .map(|x| (x[1] as f64 - x[3].max(if x[5] == u64::MAX { 0 } else { x[6] }) as f64) / 1e3)
                    .collect();
                let mut imb: Vec<f64> = r
                    .iter()
                    .filter(|x| x[5] != u64::MAX)
                    .map(|x| (x[3] as f64 - x[6] as f64).abs() / 1e3)
                    .collect();
                line += &format!(
                    " | prep {:.1} call {:.1} out {:.1} tail {:.1} imb {:.1} | t0 {:.1}-{:.1} busy {:.1} | t1 {:.1}-{:.1} busy {:.1}",
                    f(0), f(1), outside[ci], median(&mut tail), median(&mut imb), f(2), f(3), f(4), f(5), f(6), f(7)
                );
            }
            println!("{line}");
            if std::env::var_os("MT_RAW").is_some() {
                for x in r.iter().take(8) {
                    println!("   raw {:?}", x.iter().map(|v| if *v == u64::MAX { -1.0 } else { *v as f64 / 1e3 }).collect::<Vec<_>>());
                }
            }
        }
    }
}
