//! Compute pipelines: one descriptor-set layout (five storage buffers, pushed per dispatch
//! with VK_KHR_push_descriptor) and one push-constant block shared by every kernel, and a
//! bounded in-memory cache of pipelines keyed by kernel variant.
//!
//! The bound matters: the set of variants is fixed at build time (build.rs), never keyed on a
//! call's shape, and the cache evicts the least recently used pipeline past
//! [`MAX_PIPELINES`] (an engine that compiled one pipeline per new token count grew without
//! bound; lowbit's variants do not depend on the token count beyond the five column tiers).
//!
//! Pipelines are created through the driver's pipeline cache, which `disk_cache.rs` keeps on
//! disk between processes.
//!
//! What must not live here: command recording (`run.rs`), kernel choice (`kernels.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ash::vk;

use crate::device::Context;
use crate::disk_cache;
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
    /// The driver's pipeline cache (null when the disk cache is off).
    vk_cache: vk::PipelineCache,
    /// Where `vk_cache` is saved.
    disk: Option<PathBuf>,
    /// Bytes of cache data loaded from disk at start (0: none).
    pub loaded_bytes: usize,
}

/// Prints the driver's statistics of each executable of a new pipeline (`LOWBIT_VK_STATS=1`)
/// to stderr, one line: `vk-stats <shader> <tpr>x<rpt>x<bpt> n=<ncols> dot4=<b>: name=value, ...`.
/// Query failures print nothing (a diagnostic only).
fn print_stats(
    ext: &ash::khr::pipeline_executable_properties::Device,
    p: vk::Pipeline,
    index: usize,
) {
    let k = &KERNELS[index];
    let info = vk::PipelineInfoKHR::default().pipeline(p);
    // SAFETY: a valid pipeline created with CAPTURE_STATISTICS_KHR on a device with the
    // feature enabled.
    let Ok(execs) = (unsafe { ext.get_pipeline_executable_properties(&info) }) else { return };
    for e in 0..execs.len() as u32 {
        let ei = vk::PipelineExecutableInfoKHR::default().pipeline(p).executable_index(e);
        // SAFETY: as above; e < the executable count.
        let Ok(stats) = (unsafe { ext.get_pipeline_executable_statistics(&ei) }) else { continue };
        let fields: Vec<String> = stats
            .iter()
            .map(|s| {
                let name = crate::device::cstr_field(&s.name);
                // SAFETY: the union member read is the one `format` names.
                let v = unsafe {
                    match s.format {
                        vk::PipelineExecutableStatisticFormatKHR::BOOL32 => s.value.b32.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                        _ => s.value.f64.to_string(),
                    }
                };
                format!("{name}={v}")
            })
            .collect();
        eprintln!(
            "vk-stats {} {}x{}x{} n={} dot4={}: {}",
            k.shader,
            k.tpr,
            k.rpt,
            k.bpt,
            k.ncols,
            k.dot4,
            fields.join(", ")
        );
    }
}

impl Pipelines {
    /// The shared layouts, and the driver pipeline cache seeded from the disk cache in
    /// `cache_dir` (see `disk_cache.rs`; `None` when it is off).
    pub fn new(ctx: &Context, cache_dir: Option<&Path>) -> Result<Self, VulkanError> {
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
        let disk = cache_dir.map(|d| disk_cache::file(d, &ctx.info, &ctx.cache_uuid));
        let initial = disk
            .as_deref()
            .and_then(|p| disk_cache::load(p, &ctx.info, &ctx.cache_uuid))
            .unwrap_or_default();
        let mut loaded_bytes = initial.len();
        let vk_cache = if disk.is_some() {
            let make = |data: &[u8]| {
                let ci = vk::PipelineCacheCreateInfo::default().initial_data(data);
                // SAFETY: valid device; the data passed the checksum and header checks.
                unsafe { ctx.device.create_pipeline_cache(&ci, None) }
            };
            match make(&initial) {
                Ok(c) => c,
                Err(_) => {
                    loaded_bytes = 0;
                    make(&[]).unwrap_or(vk::PipelineCache::null())
                }
            }
        } else {
            vk::PipelineCache::null()
        };
        Ok(Pipelines {
            set_layout,
            layout,
            cache: HashMap::new(),
            clock: 0,
            created: 0,
            vk_cache,
            disk,
            loaded_bytes,
        })
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
        let mut ci = vk::ComputePipelineCreateInfo::default().stage(stage).layout(self.layout);
        if ctx.exec_stats.is_some() {
            ci = ci.flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR);
        }
        // SAFETY: module and layout are valid; the module may be destroyed after creation.
        let made =
            unsafe { ctx.device.create_compute_pipelines(vk::PipelineCache::null(), &[ci], None) };
        // SAFETY: the module is no longer needed once the pipeline exists (or failed).
        unsafe { ctx.device.destroy_shader_module(module, None) };
        let p = made
            .map_err(|(_, r)| VulkanError::Vk { call: "vkCreateComputePipelines", result: r })?[0];
        self.created += 1;
        self.cache.insert(index, (p, self.clock));
        if let Some(ext) = &ctx.exec_stats {
            print_stats(ext, p, index);
        }
        Ok(p)
    }

    /// Pipelines held now.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Saves the driver cache to disk when pipelines were created, then destroys every object
    /// (device idle).
    pub(crate) fn destroy(&mut self, ctx: &Context) {
        if self.vk_cache != vk::PipelineCache::null() {
            if let (Some(path), true) = (&self.disk, self.created > 0) {
                // SAFETY: valid cache object; no pipeline creation in flight.
                if let Ok(data) = unsafe { ctx.device.get_pipeline_cache_data(self.vk_cache) } {
                    disk_cache::store(path, &data);
                }
            }
            // SAFETY: nothing uses the cache any more.
            unsafe { ctx.device.destroy_pipeline_cache(self.vk_cache, None) };
        }
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
