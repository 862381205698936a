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
        let (shader, elems, meta) = match act {
            FormatId::Q8_0 | FormatId::Q8_1 => ("quant_q8_0", 32, 16),
            FormatId::Q8K => ("quant_q8_k", 256, 80),
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
        let groups = if elems == 32 { (blocks as u32).div_ceil(64) } else { blocks as u32 };
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
