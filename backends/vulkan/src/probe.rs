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
                rec.barrier();
            }
            rec.timestamp(1);
            Ok(true)
        })?;
        let t = t.ok_or(VulkanError::MissingFeature("timestamps on the compute queue".into()))?;
        Ok(t / reps.max(1) as f64)
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

    /// The device's quantization of `x` (columns of `k`) to `act` (Q8_0 or Q8_1), as the
    /// canonical block bytes: for tests that compare it byte for byte with the core's encoder.
    pub fn quantize_q8(&self, act: FormatId, x: &[f32], k: usize) -> Result<Vec<u8>, VulkanError> {
        if !matches!(act, FormatId::Q8_0 | FormatId::Q8_1) {
            return Err(VulkanError::BadArgument(format!("{act} is not a Q8 activation format")));
        }
        if k == 0 || k % 32 != 0 || x.len() % k != 0 {
            return Err(VulkanError::BadArgument(format!("{} values in columns of {k}", x.len())));
        }
        Self::check_q8(act, x, k)?;
        let n = x.len() / k;
        let nb = k / 32;
        let blocks = n * nb;
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
        ensure(ctx, &mut s.act_meta, (blocks * 16) as u64, false)?;
        ensure(ctx, &mut s.dummy, 256, false)?;
        let back = (x.len() + blocks * 16) as u64;
        ensure(ctx, &mut s.y_host, back, true)?;
        let k_idx = self.helper_kernel("quant_q8_0")?;
        runner.submit(ctx, |rec| {
            let bd = |o: &Option<Buffer>| {
                let b = o.as_ref().expect("made");
                Bind { buffer: b.buffer, range: b.size }
            };
            let buf = |o: &Option<Buffer>| o.as_ref().expect("made").buffer;
            rec.copy(buf(&s.x_host), buf(&s.x_dev), xb);
            rec.barrier();
            let binds = [bd(&s.x_dev), bd(&s.dummy), bd(&s.act_q), bd(&s.act_meta), bd(&s.dummy)];
            let params = [blocks as u32, nb as u32, n as u32, 0, 0, 0, 0, 0];
            rec.dispatch(k_idx, &binds, params, (blocks as u32).div_ceil(64))?;
            rec.barrier();
            rec.copy(buf(&s.act_q), buf(&s.y_host), x.len() as u64);
            rec.copy_at(buf(&s.act_meta), buf(&s.y_host), x.len() as u64, (blocks * 16) as u64);
            rec.barrier();
            Ok(false)
        })?;
        let out = s.y_host.as_mut().expect("made").bytes_mut().expect("mapped");
        let (qs, meta) = out.split_at(x.len());
        let f = |i: usize, c: usize| {
            let o = i * 16 + c * 4;
            f32::from_le_bytes([meta[o], meta[o + 1], meta[o + 2], meta[o + 3]])
        };
        let mut bytes = Vec::with_capacity(act.row_bytes(k)? * n);
        for i in 0..blocks {
            bytes.extend_from_slice(&f16::from_f32(f(i, 0)).to_le_bytes());
            if act == FormatId::Q8_1 {
                bytes.extend_from_slice(&f16::from_f32(f(i, 3)).to_le_bytes());
            }
            bytes.extend_from_slice(&qs[i * 32..i * 32 + 32]);
        }
        Ok(bytes)
    }
}
