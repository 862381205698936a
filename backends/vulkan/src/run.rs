//! Command recording and synchronous submission: one command pool, buffer and fence, a
//! two-entry timestamp query pool, and the [`Recorder`] the backend records into (buffer copies,
//! barriers, dispatches with pushed descriptors and constants, timestamps).
//!
//! Every submission is waited for before [`Runner::submit`] returns, so buffers and pipelines
//! can be reused or destroyed right after. What must not live here: kernel choice, formats.

use ash::vk;

use crate::device::Context;
use crate::error::{vkr, VulkanError};
use crate::pipeline::{Pipelines, BINDINGS};

/// A buffer range bound to a kernel binding.
#[derive(Clone, Copy, Debug)]
pub struct Bind {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Bytes from offset 0 the kernel may read.
    pub range: u64,
}

/// Records one command buffer.
pub struct Recorder<'a> {
    ctx: &'a Context,
    cmd: vk::CommandBuffer,
    pipelines: &'a mut Pipelines,
    queries: vk::QueryPool,
}

impl Recorder<'_> {
    /// Copies `size` bytes from the start of `src` to the start of `dst`.
    pub fn copy(&mut self, src: vk::Buffer, dst: vk::Buffer, size: u64) {
        let region = [vk::BufferCopy::default().size(size)];
        // SAFETY: recording state; both buffers hold at least `size` bytes (callers).
        unsafe { self.ctx.device.cmd_copy_buffer(self.cmd, src, dst, &region) };
    }

    /// Copies `size` bytes from the start of `src` to `dst` at byte `dst_offset`.
    pub fn copy_at(&mut self, src: vk::Buffer, dst: vk::Buffer, dst_offset: u64, size: u64) {
        let region = [vk::BufferCopy::default().dst_offset(dst_offset).size(size)];
        // SAFETY: recording state; the ranges lie inside both buffers (callers).
        unsafe { self.ctx.device.cmd_copy_buffer(self.cmd, src, dst, &region) };
    }

    /// Fills the first `size` bytes (a multiple of 4) of `dst` with the word `value`.
    pub fn fill(&mut self, dst: vk::Buffer, size: u64, value: u32) {
        // SAFETY: recording state; the range lies inside the buffer (callers).
        unsafe { self.ctx.device.cmd_fill_buffer(self.cmd, dst, 0, size, value) };
    }

    /// Makes every earlier transfer and shader write visible to every later read and write.
    pub fn barrier(&mut self) {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(
                vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE
                    | vk::AccessFlags::TRANSFER_READ
                    | vk::AccessFlags::TRANSFER_WRITE
                    | vk::AccessFlags::HOST_READ,
            )];
        let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
        // SAFETY: recording state.
        unsafe {
            self.ctx.device.cmd_pipeline_barrier(
                self.cmd,
                stages,
                stages | vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &mb,
                &[],
                &[],
            )
        };
    }

    /// Makes earlier shader writes visible to later shader reads and writes, compute stage to
    /// compute stage only: the barrier between the dispatches of a matmul (and between calls
    /// timed back to back). Transfers and host reads need [`Self::barrier`].
    pub fn compute_barrier(&mut self) {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
        let stage = vk::PipelineStageFlags::COMPUTE_SHADER;
        // SAFETY: recording state.
        unsafe {
            self.ctx.device.cmd_pipeline_barrier(
                self.cmd,
                stage,
                stage,
                vk::DependencyFlags::empty(),
                &mb,
                &[],
                &[],
            )
        };
    }

    /// Writes timestamp `i` (0 or 1) once all earlier commands are done.
    pub fn timestamp(&mut self, i: u32) {
        // SAFETY: recording state; the pool has 2 queries, reset at the start of the buffer.
        unsafe {
            self.ctx.device.cmd_write_timestamp(
                self.cmd,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                self.queries,
                i,
            )
        };
    }

    /// Dispatches kernel `kernel` over `groups` workgroups (folded into x and y past the
    /// device's x limit; `params[7]` receives the x extent) with `binds` at bindings 0..5.
    pub fn dispatch(
        &mut self,
        kernel: usize,
        binds: &[Bind; BINDINGS as usize],
        mut params: [u32; 8],
        groups: u32,
    ) -> Result<(), VulkanError> {
        let pipeline = self.pipelines.get(self.ctx, kernel)?;
        let maxx = self.ctx.info.max_groups[0].max(1);
        let gx = groups.clamp(1, maxx);
        let gy = groups.div_ceil(gx).max(1);
        if gy > self.ctx.info.max_groups[1] {
            return Err(VulkanError::TooLarge {
                what: "a dispatch's workgroup count",
                bytes: u64::from(groups),
                limit: u64::from(maxx) * u64::from(self.ctx.info.max_groups[1]),
            });
        }
        params[7] = gx;
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = binds
            .iter()
            .map(|b| {
                [vk::DescriptorBufferInfo::default().buffer(b.buffer).offset(0).range(b.range)]
            })
            .collect();
        let writes: Vec<vk::WriteDescriptorSet> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        let bytes: Vec<u8> = params.iter().flat_map(|p| p.to_le_bytes()).collect();
        // SAFETY: recording state; the pipeline, layout and buffers are valid and outlive the
        // (synchronous) submission.
        unsafe {
            let d = &self.ctx.device;
            d.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
            self.ctx.push.cmd_push_descriptor_set(
                self.cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.pipelines.layout,
                0,
                &writes,
            );
            d.cmd_push_constants(
                self.cmd,
                self.pipelines.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &bytes,
            );
            d.cmd_dispatch(self.cmd, gx, gy, 1);
        }
        Ok(())
    }
}

/// Command pool, buffer, fence, timestamp queries and the pipelines.
pub struct Runner {
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    queries: vk::QueryPool,
    pub(crate) pipelines: Pipelines,
}

impl Runner {
    /// Creates the objects on `ctx`'s device.
    pub fn new(ctx: &Context, cache_dir: Option<&std::path::Path>) -> Result<Self, VulkanError> {
        let d = &ctx.device;
        let mut pipelines = Pipelines::new(ctx, cache_dir)?;
        let pci = vk::CommandPoolCreateInfo::default()
            .queue_family_index(ctx.queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid device and create infos throughout; on failure the objects made so far
        // are destroyed before returning.
        unsafe {
            let pool = match d.create_command_pool(&pci, None) {
                Ok(p) => p,
                Err(r) => {
                    pipelines.destroy(ctx);
                    return Err(VulkanError::Vk { call: "vkCreateCommandPool", result: r });
                }
            };
            let ai = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            let made = d.allocate_command_buffers(&ai).and_then(|c| {
                let f = d.create_fence(&vk::FenceCreateInfo::default(), None)?;
                let qci = vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2);
                match d.create_query_pool(&qci, None) {
                    Ok(q) => Ok((c[0], f, q)),
                    Err(r) => {
                        d.destroy_fence(f, None);
                        Err(r)
                    }
                }
            });
            match made {
                Ok((cmd, fence, queries)) => Ok(Runner { pool, cmd, fence, queries, pipelines }),
                Err(r) => {
                    d.destroy_command_pool(pool, None);
                    pipelines.destroy(ctx);
                    Err(VulkanError::Vk { call: "vkCreateFence/QueryPool", result: r })
                }
            }
        }
    }

    /// Records with `f`, submits, waits. Returns the GPU time between timestamps 0 and 1 in
    /// seconds when `f` wrote both and the queue has timestamps.
    pub fn submit(
        &mut self,
        ctx: &Context,
        f: impl FnOnce(&mut Recorder<'_>) -> Result<bool, VulkanError>,
    ) -> Result<Option<f64>, VulkanError> {
        let d = &ctx.device;
        // SAFETY: the previous submission was waited for, so the buffer may be reset.
        unsafe {
            d.reset_command_buffer(self.cmd, vk::CommandBufferResetFlags::empty())
                .map_err(vkr("vkResetCommandBuffer"))?;
            d.begin_command_buffer(
                self.cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(vkr("vkBeginCommandBuffer"))?;
            d.cmd_reset_query_pool(self.cmd, self.queries, 0, 2);
        }
        let mut rec =
            Recorder { ctx, cmd: self.cmd, pipelines: &mut self.pipelines, queries: self.queries };
        let timed = f(&mut rec);
        // SAFETY: recording state; ending it is required even when recording failed.
        let ended = unsafe { d.end_command_buffer(self.cmd) };
        let timed = timed?;
        ended.map_err(vkr("vkEndCommandBuffer"))?;
        let cmds = [self.cmd];
        let si = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: a fully recorded buffer; the fence is unsignalled (reset after each wait).
        unsafe {
            d.queue_submit(ctx.queue, &si, self.fence).map_err(vkr("vkQueueSubmit"))?;
            let waited = d.wait_for_fences(&[self.fence], true, u64::MAX);
            d.reset_fences(&[self.fence]).map_err(vkr("vkResetFences"))?;
            waited.map_err(vkr("vkWaitForFences"))?;
        }
        if !timed || ctx.info.timestamp_period == 0.0 {
            return Ok(None);
        }
        let mut ts = [0u64; 2];
        // SAFETY: both queries were written by the waited submission.
        unsafe {
            d.get_query_pool_results(
                self.queries,
                0,
                &mut ts,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(vkr("vkGetQueryPoolResults"))?;
        let ticks = ts[1].wrapping_sub(ts[0]) as f64;
        Ok(Some(ticks * ctx.info.timestamp_period * 1e-9))
    }

    /// Destroys every object (device idle).
    pub(crate) fn destroy(&mut self, ctx: &Context) {
        self.pipelines.destroy(ctx);
        // SAFETY: no submission is in flight (each one is waited for).
        unsafe {
            ctx.device.destroy_query_pool(self.queries, None);
            ctx.device.destroy_fence(self.fence, None);
            ctx.device.destroy_command_pool(self.pool, None);
        }
    }
}
