//! Measurement and test entry points of [`VulkanBackend`]: GPU-timestamped matmul timing, the
//! streaming-read probe (our own kernel, the bandwidth ceiling of `lowbit bench`), and the
//! device's activation quantization read back for byte comparisons.
//!
//! What must not live here: the `Backend` trait implementation (lib.rs), Vulkan setup.

use half::f16;
use lowbit_core::FormatId;

use crate::device::Buffer;
use crate::run::Bind;
use crate::{ensure, State, VulkanBackend, VulkanError, VulkanMatrix};

/// Microseconds per repetition of the parts of a matmul call ([`VulkanBackend::profile_matmul`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatmulProfile {
    /// An empty dispatch (one workgroup that reads nothing) and a full barrier (all stages,
    /// host included).
    pub empty_us: f64,
    /// An empty dispatch and a compute-to-compute barrier.
    pub empty_compute_barrier_us: f64,
    /// An empty dispatch with no barrier between repetitions.
    pub empty_no_barrier_us: f64,
    /// The activation preparation (rotation, quantizer dispatch; their barriers).
    pub act_us: f64,
    /// The matmul dispatches on activations prepared once, each followed by a barrier.
    pub matmul_us: f64,
    /// The matmul dispatches back to back, no barrier between repetitions.
    pub matmul_no_barrier_us: f64,
    /// The whole call, as `time_matmul` times it.
    pub full_us: f64,
}

/// The bytes of x (after a helper kernel ran), act_q and act_meta.
type HelperOut = (Vec<u8>, Vec<u8>, Vec<u8>);

impl VulkanBackend {
    /// GPU seconds per call of `matmul` for each matrix of `ms` (all of one shape), measured
    /// with timestamps around `reps` calls cycling through `ms` (activation quantization and
    /// every dispatch included, host transfers excluded). Cycling through several copies keeps
    /// small matrices from being served from the GPU's cache.
    pub fn time_matmul(
        &self,
        ms: &[&VulkanMatrix],
        x: &[f32],
        n: usize,
        reps: usize,
    ) -> Result<f64, VulkanError> {
        let first = ms.first().ok_or(VulkanError::BadArgument("no matrix to time".into()))?;
        if ms.iter().any(|m| m.desc != first.desc) {
            return Err(VulkanError::BadArgument("matrices of different shapes".into()));
        }
        self.check_call(first, x, n)?;
        let mut st = self.lock();
        self.stage(&mut st, first, x, n)?;
        let State { runner, scratch } = &mut *st;
        let xbytes = (x.len() * 4) as u64;
        let t = runner.submit(&self.ctx, |rec| {
            let s = &*scratch;
            rec.copy(
                s.x_host.as_ref().expect("staged").buffer,
                s.x_dev.as_ref().expect("staged").buffer,
                xbytes,
            );
            rec.barrier();
            // Warm-up call (pipelines are created while recording; caches settle).
            self.record_matmul(rec, s, first, n)?;
            rec.barrier();
            rec.timestamp(0);
            for i in 0..reps.max(1) {
                self.record_matmul(rec, s, ms[i % ms.len()], n)?;
                rec.compute_barrier();
            }
            rec.timestamp(1);
            Ok(true)
        })?;
        let t = t.ok_or(VulkanError::MissingFeature("timestamps on the compute queue".into()))?;
        Ok(t / reps.max(1) as f64)
    }

    /// Where the time of a matmul call goes (GPU timestamps, each part timed on its own over
    /// `reps` repetitions cycling through `ms`, every repetition followed by a full barrier
    /// unless said otherwise): see [`MatmulProfile`].
    pub fn profile_matmul(
        &self,
        ms: &[&VulkanMatrix],
        x: &[f32],
        n: usize,
        reps: usize,
    ) -> Result<MatmulProfile, VulkanError> {
        let first = ms.first().ok_or(VulkanError::BadArgument("no matrix to time".into()))?;
        if ms.iter().any(|m| m.desc != first.desc) {
            return Err(VulkanError::BadArgument("matrices of different shapes".into()));
        }
        self.check_call(first, x, n)?;
        let reps = reps.max(1);
        let empty_k = self.helper_kernel("read_bw")?;
        let mut st = self.lock();
        self.stage(&mut st, first, x, n)?;
        let State { runner, scratch } = &mut *st;
        let xbytes = (x.len() * 4) as u64;
        let plan = self.act_plan(first, n);
        let s = &*scratch;
        let dummy = crate::bind(&s.dummy);
        let empty_binds = [dummy, dummy, dummy, dummy, crate::bind(&s.dummy)];
        // mode: 0 empty dispatch + full barrier, 1 empty dispatches without barriers, 2
        // activation preparation, 3 matmul dispatches only, 4 matmul dispatches without
        // barriers, 5 the whole call, 6 empty dispatch + compute-to-compute barrier. Modes 2,
        // 3 and 5 end each repetition with a compute-to-compute barrier, as `time_matmul`.
        let mut time = |mode: u32| -> Result<f64, VulkanError> {
            let t = runner.submit(&self.ctx, |rec| {
                rec.copy(
                    s.x_host.as_ref().expect("staged").buffer,
                    s.x_dev.as_ref().expect("staged").buffer,
                    xbytes,
                );
                rec.barrier();
                self.record_matmul(rec, s, first, n)?;
                rec.barrier();
                rec.timestamp(0);
                for i in 0..reps {
                    let m = ms[i % ms.len()];
                    match mode {
                        0 | 1 | 6 => {
                            rec.dispatch(empty_k, &empty_binds, [0; 8], 1)?;
                        }
                        2 => {
                            self.record_act(rec, s, m, n)?;
                        }
                        3 | 4 => self.record_mm(rec, s, m, n, plan)?,
                        _ => self.record_matmul(rec, s, m, n)?,
                    }
                    match mode {
                        0 => rec.barrier(),
                        1 | 4 => {}
                        _ => rec.compute_barrier(),
                    }
                }
                rec.barrier();
                rec.timestamp(1);
                Ok(true)
            })?;
            let t =
                t.ok_or(VulkanError::MissingFeature("timestamps on the compute queue".into()))?;
            Ok(t / reps as f64 * 1e6)
        };
        // Twice: the first pass warms clocks and caches.
        let mut out = [0f64; 7];
        for _ in 0..2 {
            for (mode, o) in out.iter_mut().enumerate() {
                *o = time(mode as u32)?;
            }
        }
        Ok(MatmulProfile {
            empty_us: out[0],
            empty_no_barrier_us: out[1],
            act_us: out[2],
            matmul_us: out[3],
            matmul_no_barrier_us: out[4],
            full_us: out[5],
            empty_compute_barrier_us: out[6],
        })
    }

    /// Our read kernel over `copies` separate buffers of `bytes` each, one dispatch per
    /// buffer in turn, each followed by a compute-to-compute barrier (as one matmul call):
    /// the best microseconds per dispatch over several grid sizes, and that grid size.
    pub fn read_dispatch_us(
        &self,
        bytes: u64,
        copies: usize,
        reps: usize,
    ) -> Result<(f64, u32), VulkanError> {
        let size = bytes.min(self.ctx.info.max_buffer()) / 16 * 16;
        if size < 4096 {
            return Err(VulkanError::BadArgument(format!("read probe of {size} bytes")));
        }
        let k = self.helper_kernel("read_bw")?;
        let mut srcs = Vec::new();
        for _ in 0..copies.max(1) {
            srcs.push(Buffer::new(&self.ctx, size, false)?);
        }
        let out = Buffer::new(&self.ctx, 1 << 20, false)?;
        let mut st = self.lock();
        let State { runner, scratch } = &mut *st;
        ensure(&self.ctx, &mut scratch.dummy, 256, false)?;
        let dummy = scratch.dummy.as_ref().expect("made");
        let d = Bind { buffer: dummy.buffer, range: dummy.size };
        let words = (size / 16) as u32;
        let mut best = (f64::INFINITY, 0u32);
        for groups in [264u32, 528, 1056, 2112, 4224, 8448, 16896] {
            let threads = groups * 256;
            if threads / 2 > words && best.1 != 0 {
                break;
            }
            let params = [words, threads, 0, 0, 0, 0, 0, 0];
            let t = runner.submit(&self.ctx, |rec| {
                for src in &srcs {
                    rec.fill(src.buffer, size, 0x5A5A_5A5A);
                }
                rec.barrier();
                for pass in 0..2 {
                    if pass == 1 {
                        rec.timestamp(0);
                    }
                    for i in 0..reps.max(1) {
                        let src = &srcs[i % srcs.len()];
                        let binds = [
                            Bind { buffer: src.buffer, range: size },
                            d,
                            d,
                            d,
                            Bind { buffer: out.buffer, range: out.size },
                        ];
                        rec.dispatch(k, &binds, params, groups)?;
                        rec.compute_barrier();
                    }
                }
                rec.timestamp(1);
                Ok(true)
            })?;
            let t =
                t.ok_or(VulkanError::MissingFeature("timestamps on the compute queue".into()))?;
            let us = t / reps.max(1) as f64 * 1e6;
            if us < best.0 {
                best = (us, groups);
            }
        }
        Ok(best)
    }

    /// Streaming-read bandwidth of our own read kernel, in bytes per second: a device buffer of
    /// up to `bytes` (capped by the device's limits) read `reps` times per timing, for several
    /// grid sizes; the best. Returns `(buffer bytes, bytes per second)`.
    pub fn read_bandwidth(&self, bytes: u64, reps: usize) -> Result<(u64, f64), VulkanError> {
        let size = bytes.min(self.ctx.info.max_buffer()) / 16 * 16;
        if size < 4096 {
            return Err(VulkanError::BadArgument(format!("read probe of {size} bytes")));
        }
        let k = self.helper_kernel("read_bw")?;
        let src = Buffer::new(&self.ctx, size, false)?;
        let mut st = self.lock();
        let State { runner, scratch } = &mut *st;
        ensure(&self.ctx, &mut scratch.dummy, 256, false)?;
        let out = Buffer::new(&self.ctx, 1 << 20, false)?;
        let words = (size / 16) as u32;
        let dummy = scratch.dummy.as_ref().expect("made");
        let d = Bind { buffer: dummy.buffer, range: dummy.size };
        let binds = [
            Bind { buffer: src.buffer, range: size },
            d,
            d,
            d,
            Bind { buffer: out.buffer, range: out.size },
        ];
        let mut best = 0f64;
        for groups in [1024u32, 2048, 4096, 8192, 16384, 65536] {
            let threads = groups * 256;
            if threads / 2 > words {
                break;
            }
            let t = runner.submit(&self.ctx, |rec| {
                // A written pattern, so that every page read is real memory.
                rec.fill(src.buffer, size, 0x5A5A_5A5A);
                rec.barrier();
                rec.dispatch(k, &binds, [words, threads, 0, 0, 0, 0, 0, 0], groups)?;
                rec.barrier();
                rec.timestamp(0);
                for _ in 0..reps.max(1) {
                    rec.dispatch(k, &binds, [words, threads, 0, 0, 0, 0, 0, 0], groups)?;
                    rec.barrier();
                }
                rec.timestamp(1);
                Ok(true)
            })?;
            let t =
                t.ok_or(VulkanError::MissingFeature("timestamps on the compute queue".into()))?;
            best = best.max(size as f64 * reps.max(1) as f64 / t);
        }
        Ok((size, best))
    }

    /// Copies `x` to the device, runs helper kernel `shader` over it (`groups` workgroups,
    /// `params`, bindings x, -, act_q, act_meta, -; act_q and act_meta sized for `x.len()` bytes
    /// and `meta` bytes) and returns the bytes of x (after the kernel), act_q and act_meta.
    fn run_helper(
        &self,
        shader: &str,
        x: &[f32],
        meta: usize,
        params: [u32; 8],
        groups: u32,
    ) -> Result<HelperOut, VulkanError> {
        let mut st = self.lock();
        let ctx = &*self.ctx;
        let State { runner, scratch: s } = &mut *st;
        let xb = (x.len() * 4) as u64;
        ensure(ctx, &mut s.x_host, xb, true)?
            .bytes_mut()
            .ok_or(VulkanError::BadArgument("unmapped staging".into()))?[..x.len() * 4]
            .copy_from_slice(bytemuck::cast_slice(x));
        ensure(ctx, &mut s.x_dev, xb, false)?;
        ensure(ctx, &mut s.act_q, x.len() as u64, false)?;
        ensure(ctx, &mut s.act_meta, meta as u64, false)?;
        ensure(ctx, &mut s.dummy, 256, false)?;
        let (qb, mb) = (x.len() as u64, meta as u64);
        ensure(ctx, &mut s.y_host, xb + qb + mb, true)?;
        let k_idx = self.helper_kernel(shader)?;
        runner.submit(ctx, |rec| {
            let bd = |o: &Option<Buffer>| {
                let b = o.as_ref().expect("made");
                Bind { buffer: b.buffer, range: b.size }
            };
            let buf = |o: &Option<Buffer>| o.as_ref().expect("made").buffer;
            rec.copy(buf(&s.x_host), buf(&s.x_dev), xb);
            rec.barrier();
            let binds = [bd(&s.x_dev), bd(&s.dummy), bd(&s.act_q), bd(&s.act_meta), bd(&s.dummy)];
            rec.dispatch(k_idx, &binds, params, groups)?;
            rec.barrier();
            rec.copy(buf(&s.x_dev), buf(&s.y_host), xb);
            rec.copy_at(buf(&s.act_q), buf(&s.y_host), xb, qb);
            rec.copy_at(buf(&s.act_meta), buf(&s.y_host), xb + qb, mb);
            rec.barrier();
            Ok(false)
        })?;
        let out = s.y_host.as_mut().expect("made").bytes_mut().expect("mapped");
        let (xo, rest) = out.split_at((xb + qb + mb) as usize).0.split_at(xb as usize);
        let (qs, me) = rest.split_at(qb as usize);
        Ok((xo.to_vec(), qs.to_vec(), me.to_vec()))
    }

    /// The device's quantization of `x` (columns of `k`) to `act` (Q8_0, Q8_1 or Q8_K), as the
    /// canonical block bytes: for tests that compare it byte for byte with the core's encoder.
    pub fn quantize_q8(&self, act: FormatId, x: &[f32], k: usize) -> Result<Vec<u8>, VulkanError> {
        let (shader, elems, meta, per_group) = match act {
            FormatId::Q8_0 | FormatId::Q8_1 => {
                let (k, elems, per_group) = self.q8_0_quantizer();
                (k, elems, 16, per_group)
            }
            FormatId::Q8K => ("quant_q8_k", 256, 80, 1),
            _ => {
                return Err(VulkanError::BadArgument(format!(
                    "{act} is not a Q8 activation format"
                )))
            }
        };
        if k == 0 || k % elems != 0 || x.len() % k != 0 {
            return Err(VulkanError::BadArgument(format!("{} values in columns of {k}", x.len())));
        }
        Self::check_q8(act, x, k)?;
        let n = x.len() / k;
        let blocks = x.len() / elems;
        let params = [blocks as u32, (k / elems) as u32, n as u32, 0, 0, 0, 0, 0];
        let groups = (blocks as u32).div_ceil(per_group);
        let (_, qs, meta_bytes) = self.run_helper(shader, x, blocks * meta, params, groups)?;
        let f = |i: usize, c: usize| {
            let o = i * meta + c * 4;
            f32::from_le_bytes([
                meta_bytes[o],
                meta_bytes[o + 1],
                meta_bytes[o + 2],
                meta_bytes[o + 3],
            ])
        };
        let mut bytes = Vec::with_capacity(act.row_bytes(k)? * n);
        for i in 0..blocks {
            if act == FormatId::Q8K {
                bytes.extend_from_slice(&f(i, 0).to_le_bytes());
                bytes.extend_from_slice(&qs[i * 256..i * 256 + 256]);
                for g in 0..16 {
                    bytes.extend_from_slice(&(f(i, 4 + g) as i16).to_le_bytes());
                }
                continue;
            }
            bytes.extend_from_slice(&f16::from_f32(f(i, 0)).to_le_bytes());
            if act == FormatId::Q8_1 {
                bytes.extend_from_slice(&f16::from_f32(f(i, 3)).to_le_bytes());
            }
            bytes.extend_from_slice(&qs[i * 32..i * 32 + 32]);
        }
        Ok(bytes)
    }

    /// The device's FWHT-256 of `x` (a multiple of 256 values), as the MFP4 formats' matmuls
    /// apply it to their activations: for tests that compare it bit for bit with the core.
    pub fn fwht256(&self, x: &[f32]) -> Result<Vec<f32>, VulkanError> {
        if x.is_empty() || x.len() % 256 != 0 {
            return Err(VulkanError::BadArgument(format!("{} values: not 256-segments", x.len())));
        }
        let segs = (x.len() / 256) as u32;
        let (xo, _, _) = self.run_helper("fwht256", x, 16, [segs, 0, 0, 0, 0, 0, 0, 0], segs)?;
        Ok(xo.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }
}
