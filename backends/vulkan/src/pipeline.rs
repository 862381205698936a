//! Compute pipelines: one descriptor-set layout (five storage buffers, pushed per dispatch
//! with VK_KHR_push_descriptor) and one push-constant block shared by every kernel, and a
//! bounded in-memory cache of pipelines keyed by kernel variant.
//!
//! The bound matters: the set of variants is fixed at build time (build.rs), never keyed on a
//! call's shape, and the cache evicts the least recently used pipeline past
//! [`MAX_PIPELINES`] (an engine that compiled one pipeline per new token count grew without
//! bound; lowbit's variants do not depend on the token count beyond the five column tiers).
//!
//! What must not live here: command recording (`run.rs`), kernel choice (`kernels.rs`).

use std::collections::HashMap;

use ash::vk;

use crate::device::Context;
use crate::error::{vkr, VulkanError};
use crate::kernels::KERNELS;

/// Pipelines kept in memory at most.
pub const MAX_PIPELINES: usize = 48;

/// Bytes of the push-constant block (`MatmulParams` in common.wgsl: eight u32).
pub const PUSH_BYTES: u32 = 32;

/// Storage-buffer bindings of the shared layout.
pub const BINDINGS: u32 = 5;

/// The shared layouts and the pipeline cache.
pub struct Pipelines {
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) layout: vk::PipelineLayout,
    cache: HashMap<usize, (vk::Pipeline, u64)>,
    clock: u64,
    /// Pipelines created since the backend started (cache misses).
    pub created: u64,
}

impl Pipelines {
    /// The shared layouts.
    pub fn new(ctx: &Context) -> Result<Self, VulkanError> {
        let bindings: Vec<_> = (0..BINDINGS)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let ci = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR)
            .bindings(&bindings);
        // SAFETY: valid device and create info.
        let set_layout = unsafe { ctx.device.create_descriptor_set_layout(&ci, None) }
            .map_err(vkr("vkCreateDescriptorSetLayout"))?;
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(PUSH_BYTES)];
        let layouts = [set_layout];
        let pci = vk::PipelineLayoutCreateInfo::default()
            .set_layouts(&layouts)
            .push_constant_ranges(&ranges);
        // SAFETY: as above.
        let layout = match unsafe { ctx.device.create_pipeline_layout(&pci, None) } {
            Ok(l) => l,
            Err(r) => {
                // SAFETY: unused layout.
                unsafe { ctx.device.destroy_descriptor_set_layout(set_layout, None) };
                return Err(VulkanError::Vk { call: "vkCreatePipelineLayout", result: r });
            }
        };
        Ok(Pipelines { set_layout, layout, cache: HashMap::new(), clock: 0, created: 0 })
    }

    /// The pipeline of kernel `index`, compiled on first use. The caller guarantees that no
    /// submission is in flight (an evicted pipeline is destroyed at once).
    pub fn get(&mut self, ctx: &Context, index: usize) -> Result<vk::Pipeline, VulkanError> {
        self.clock += 1;
        if let Some(e) = self.cache.get_mut(&index) {
            e.1 = self.clock;
            return Ok(e.0);
        }
        if self.cache.len() >= MAX_PIPELINES {
            if let Some((&old, _)) = self.cache.iter().min_by_key(|(_, v)| v.1) {
                if let Some((p, _)) = self.cache.remove(&old) {
                    // SAFETY: no submission in flight (caller's guarantee).
                    unsafe { ctx.device.destroy_pipeline(p, None) };
                }
            }
        }
        let k = &KERNELS[index];
        let words: Vec<u32> =
            k.spirv.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let smci = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: valid SPIR-V from naga's writer.
        let module = unsafe { ctx.device.create_shader_module(&smci, None) }
            .map_err(vkr("vkCreateShaderModule"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let ci = vk::ComputePipelineCreateInfo::default().stage(stage).layout(self.layout);
        // SAFETY: module and layout are valid; the module may be destroyed after creation.
        let made =
            unsafe { ctx.device.create_compute_pipelines(vk::PipelineCache::null(), &[ci], None) };
        // SAFETY: the module is no longer needed once the pipeline exists (or failed).
        unsafe { ctx.device.destroy_shader_module(module, None) };
        let p = made
            .map_err(|(_, r)| VulkanError::Vk { call: "vkCreateComputePipelines", result: r })?[0];
        self.created += 1;
        self.cache.insert(index, (p, self.clock));
        Ok(p)
    }

    /// Pipelines held now.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Destroys every object (device idle).
    pub(crate) fn destroy(&mut self, ctx: &Context) {
        // SAFETY: the device is idle and nothing uses these objects any more.
        unsafe {
            for (_, (p, _)) in self.cache.drain() {
                ctx.device.destroy_pipeline(p, None);
            }
            ctx.device.destroy_pipeline_layout(self.layout, None);
            ctx.device.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}
