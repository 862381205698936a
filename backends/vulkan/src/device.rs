//! The Vulkan context: loader, instance, the chosen physical device and its properties
//! (subgroup size, integer dot product support, buffer limits, timestamp period), the logical
//! device with one compute queue, and device-memory buffers. All `unsafe` Vulkan calls of the
//! crate's setup live here and in `run.rs`, each with a `// SAFETY:` line.
//!
//! What must not live here: kernels, format knowledge, pipeline choice.

use std::ffi::CStr;

use ash::vk;

use crate::error::{vkr, VulkanError};

/// Device facts the backend uses, read once.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    /// `VkPhysicalDeviceProperties::deviceName`.
    pub name: String,
    /// Driver name and version string (`VkPhysicalDeviceDriverProperties`).
    pub driver: String,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// Device id.
    pub device_id: u32,
    /// Driver version (vendor encoding).
    pub driver_version: u32,
    /// Device API version.
    pub api_version: u32,
    /// Subgroup size (queried, never assumed: lavapipe 8, NVIDIA 32, AMD 32 or 64).
    pub subgroup_size: u32,
    /// `shaderIntegerDotProduct` is supported (so `OpSDot` kernels can run).
    pub dot4_supported: bool,
    /// The driver says 4x8-bit packed signed dot products are accelerated.
    pub dot4_accelerated: bool,
    /// Largest storage-buffer range one descriptor may cover.
    pub max_storage_range: u64,
    /// Largest single allocation.
    pub max_allocation: u64,
    /// Largest workgroup count along x (and y).
    pub max_groups: [u32; 2],
    /// Nanoseconds per timestamp tick (0 if the queue has no timestamps).
    pub timestamp_period: f64,
    /// Whether the device is a CPU implementation (lavapipe, SwiftShader).
    pub is_cpu: bool,
    /// Largest workgroup memory one compute pipeline may declare, bytes.
    pub max_shared_bytes: u32,
}

impl DeviceInfo {
    /// The largest buffer the backend makes: the storage range and allocation limits.
    pub fn max_buffer(&self) -> u64 {
        self.max_storage_range.min(self.max_allocation)
    }
}

/// Loader, instance, device, queue.
pub struct Context {
    _entry: ash::Entry,
    pub(crate) instance: ash::Instance,
    pub(crate) phys: vk::PhysicalDevice,
    pub(crate) device: ash::Device,
    pub(crate) push: ash::khr::push_descriptor::Device,
    pub(crate) queue: vk::Queue,
    pub(crate) queue_family: u32,
    pub(crate) memory: vk::PhysicalDeviceMemoryProperties,
    /// `VkPhysicalDeviceProperties::pipelineCacheUUID`.
    pub(crate) cache_uuid: [u8; 16],
    /// With `LOWBIT_VK_STATS=1` on a device with VK_KHR_pipeline_executable_properties: the
    /// extension, so that each new pipeline's compiler statistics (registers, ...) are printed
    /// to stderr (`pipeline.rs`). A diagnostic: it never changes what runs.
    pub(crate) exec_stats: Option<ash::khr::pipeline_executable_properties::Device>,
    /// What was read about the device.
    pub info: DeviceInfo,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("info", &self.info).finish_non_exhaustive()
    }
}

pub(crate) fn cstr_field(raw: &[std::ffi::c_char]) -> String {
    // SAFETY: Vulkan fills these fixed arrays with NUL-terminated strings.
    unsafe { CStr::from_ptr(raw.as_ptr()) }.to_string_lossy().into_owned()
}

impl Context {
    /// Loads libvulkan, makes an instance and opens device `index` among those with a compute
    /// queue (`None`: the first discrete GPU, else the first integrated GPU, else the first).
    pub fn new(index: Option<usize>) -> Result<Self, VulkanError> {
        // SAFETY: loading the system Vulkan loader; its initialisation has no preconditions.
        let entry =
            unsafe { ash::Entry::load() }.map_err(|e| VulkanError::NoLoader(e.to_string()))?;
        let app = vk::ApplicationInfo::default()
            .application_name(c"lowbit")
            .api_version(vk::make_api_version(0, 1, 3, 0));
        let ci = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: the create info and what it points to live across the call.
        let instance = unsafe { entry.create_instance(&ci, None) }.map_err(|r| match r {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => {
                VulkanError::NoDevice("no driver (ERROR_INCOMPATIBLE_DRIVER)".into())
            }
            r => VulkanError::Vk { call: "vkCreateInstance", result: r },
        })?;
        match Self::open(entry, instance.clone(), index) {
            Ok(c) => Ok(c),
            Err(e) => {
                // SAFETY: nothing made from the instance outlives this point.
                unsafe { instance.destroy_instance(None) };
                Err(e)
            }
        }
    }

    fn open(
        entry: ash::Entry,
        instance: ash::Instance,
        index: Option<usize>,
    ) -> Result<Self, VulkanError> {
        // SAFETY: valid instance.
        let devices = unsafe { instance.enumerate_physical_devices() }
            .map_err(vkr("vkEnumeratePhysicalDevices"))?;
        let mut usable = Vec::new();
        for &pd in &devices {
            // SAFETY: pd comes from this instance.
            let qf = unsafe { instance.get_physical_device_queue_family_properties(pd) };
            if let Some(q) = qf.iter().position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
            {
                // SAFETY: as above.
                let p = unsafe { instance.get_physical_device_properties(pd) };
                usable.push((pd, q as u32, p, qf[q].timestamp_valid_bits));
            }
        }
        if usable.is_empty() {
            return Err(VulkanError::NoDevice(format!(
                "{} device(s), none with a compute queue",
                devices.len()
            )));
        }
        let pick = match index {
            Some(i) => i,
            None => {
                let rank = |t: vk::PhysicalDeviceType| match t {
                    vk::PhysicalDeviceType::DISCRETE_GPU => 0,
                    vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
                    vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
                    _ => 3,
                };
                (0..usable.len()).min_by_key(|&i| rank(usable[i].2.device_type)).unwrap_or(0)
            }
        };
        let (phys, queue_family, props, ts_bits) = *usable.get(pick).ok_or_else(|| {
            VulkanError::NoDevice(format!("device {pick} asked for, {} usable", usable.len()))
        })?;
        if props.api_version < vk::make_api_version(0, 1, 1, 0) {
            return Err(VulkanError::MissingFeature("Vulkan 1.1 (subgroups, SPIR-V 1.3)".into()));
        }
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut dotp = vk::PhysicalDeviceShaderIntegerDotProductProperties::default();
        let mut m3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut drv = vk::PhysicalDeviceDriverProperties::default();
        let has_13 = props.api_version >= vk::make_api_version(0, 1, 3, 0);
        // SAFETY: pd from this instance.
        let exts = unsafe { instance.enumerate_device_extension_properties(phys) }
            .map_err(vkr("vkEnumerateDeviceExtensionProperties"))?;
        let has_ext = |n: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(n));
        let dot_ext = has_ext(ash::khr::shader_integer_dot_product::NAME);
        {
            let mut p2 = vk::PhysicalDeviceProperties2::default()
                .push_next(&mut subgroup)
                .push_next(&mut m3)
                .push_next(&mut drv);
            if has_13 || dot_ext {
                p2 = p2.push_next(&mut dotp);
            }
            // SAFETY: the chain's structs live across the call.
            unsafe { instance.get_physical_device_properties2(phys, &mut p2) };
        }
        let mut dotf = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default();
        if has_13 || dot_ext {
            let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut dotf);
            // SAFETY: as above.
            unsafe { instance.get_physical_device_features2(phys, &mut f2) };
        }
        let dot4_supported = dotf.shader_integer_dot_product == vk::TRUE;
        if !has_ext(ash::khr::push_descriptor::NAME) {
            return Err(VulkanError::MissingFeature("VK_KHR_push_descriptor".into()));
        }
        let mut ext_names = vec![ash::khr::push_descriptor::NAME.as_ptr()];
        if dot4_supported && !has_13 {
            ext_names.push(ash::khr::shader_integer_dot_product::NAME.as_ptr());
        }
        let want_stats = std::env::var("LOWBIT_VK_STATS").is_ok_and(|v| v == "1")
            && has_ext(ash::khr::pipeline_executable_properties::NAME);
        if want_stats {
            ext_names.push(ash::khr::pipeline_executable_properties::NAME.as_ptr());
        }
        let mut enable_stats = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
            .pipeline_executable_info(true);
        let prio = [1.0f32];
        let qci = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(queue_family)
            .queue_priorities(&prio)];
        let mut enable_dot = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default()
            .shader_integer_dot_product(dot4_supported);
        let mut dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qci)
            .enabled_extension_names(&ext_names);
        if dot4_supported {
            dci = dci.push_next(&mut enable_dot);
        }
        if want_stats {
            dci = dci.push_next(&mut enable_stats);
        }
        // SAFETY: create info and its chain live across the call.
        let device =
            unsafe { instance.create_device(phys, &dci, None) }.map_err(vkr("vkCreateDevice"))?;
        // SAFETY: the family was created with one queue.
        let queue = unsafe { device.get_device_queue(queue_family, 0) };
        let push = ash::khr::push_descriptor::Device::new(&instance, &device);
        let exec_stats = want_stats
            .then(|| ash::khr::pipeline_executable_properties::Device::new(&instance, &device));
        // SAFETY: valid physical device.
        let memory = unsafe { instance.get_physical_device_memory_properties(phys) };
        let l = &props.limits;
        let info = DeviceInfo {
            name: cstr_field(&props.device_name),
            driver: format!("{} {}", cstr_field(&drv.driver_name), cstr_field(&drv.driver_info))
                .trim()
                .to_string(),
            vendor_id: props.vendor_id,
            device_id: props.device_id,
            driver_version: props.driver_version,
            api_version: props.api_version,
            subgroup_size: subgroup.subgroup_size,
            dot4_supported,
            dot4_accelerated: dot4_supported
                && dotp.integer_dot_product4x8_bit_packed_signed_accelerated == vk::TRUE,
            max_storage_range: u64::from(l.max_storage_buffer_range),
            max_allocation: m3.max_memory_allocation_size,
            max_groups: [l.max_compute_work_group_count[0], l.max_compute_work_group_count[1]],
            timestamp_period: if ts_bits > 0 { f64::from(l.timestamp_period) } else { 0.0 },
            is_cpu: props.device_type == vk::PhysicalDeviceType::CPU,
            max_shared_bytes: l.max_compute_shared_memory_size,
        };
        Ok(Context {
            _entry: entry,
            instance,
            phys,
            device,
            push,
            queue,
            queue_family,
            memory,
            cache_uuid: props.pipeline_cache_uuid,
            exec_stats,
            info,
        })
    }

    /// A memory type index with all of `want` among `bits`.
    pub(crate) fn memory_type(&self, bits: u32, want: vk::MemoryPropertyFlags) -> Option<u32> {
        (0..self.memory.memory_type_count).find(|&i| {
            bits & (1 << i) != 0
                && self.memory.memory_types[i as usize].property_flags.contains(want)
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every object made from the device is destroyed before the context (buffers
        // and pipelines hold an Arc<Context>); the device is idle after the wait.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
        let _ = self.phys;
    }
}

/// A buffer with its own memory; host-visible buffers stay mapped.
pub struct Buffer {
    pub(crate) buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    /// Size in bytes.
    pub size: u64,
    mapped: Option<*mut u8>,
    device: ash::Device,
}

// SAFETY: the mapped pointer is only dereferenced through &mut self or while the backend's
// state lock is held; Vulkan handles are plain integers.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// A storage buffer of `size` bytes (at least 16), device-local, or host-visible and
    /// coherent (mapped) when `host` is set.
    pub fn new(ctx: &Context, size: u64, host: bool) -> Result<Self, VulkanError> {
        let size = size.max(16);
        if size > ctx.info.max_allocation {
            return Err(VulkanError::TooLarge {
                what: "a buffer",
                bytes: size,
                limit: ctx.info.max_allocation,
            });
        }
        let d = &ctx.device;
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let bci = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid device and create info.
        let buffer = unsafe { d.create_buffer(&bci, None) }.map_err(vkr("vkCreateBuffer"))?;
        // SAFETY: buffer from this device.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let want = if host {
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT
        } else {
            vk::MemoryPropertyFlags::DEVICE_LOCAL
        };
        let cleanup = |e| {
            // SAFETY: the buffer is unused.
            unsafe { d.destroy_buffer(buffer, None) };
            e
        };
        let Some(mt) = ctx.memory_type(req.memory_type_bits, want) else {
            return Err(cleanup(VulkanError::MissingFeature(format!("a memory type {want:?}"))));
        };
        let ai = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(mt);
        // SAFETY: valid allocate info.
        let memory = unsafe { d.allocate_memory(&ai, None) }
            .map_err(|r| cleanup(VulkanError::Vk { call: "vkAllocateMemory", result: r }))?;
        let free = |e| {
            // SAFETY: the memory and buffer are unused.
            unsafe {
                d.free_memory(memory, None);
                d.destroy_buffer(buffer, None);
            }
            e
        };
        // SAFETY: memory fits the buffer's requirements.
        unsafe { d.bind_buffer_memory(buffer, memory, 0) }
            .map_err(|r| free(VulkanError::Vk { call: "vkBindBufferMemory", result: r }))?;
        let mapped = if host {
            // SAFETY: host-visible memory, mapped once for the buffer's life.
            let p = unsafe { d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .map_err(|r| free(VulkanError::Vk { call: "vkMapMemory", result: r }))?;
            Some(p.cast::<u8>())
        } else {
            None
        };
        Ok(Buffer { buffer, memory, size, mapped, device: d.clone() })
    }

    /// The mapped bytes of a host-visible buffer.
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        // SAFETY: the mapping covers `size` bytes and lives as long as self; &mut self keeps
        // it unaliased on the host (the device only touches it inside a waited submission).
        self.mapped.map(|p| unsafe { std::slice::from_raw_parts_mut(p, self.size as usize) })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: every submission that used the buffer has been waited for (submissions are
        // synchronous); the device outlives the buffer (the owner holds an Arc<Context>).
        unsafe {
            if self.mapped.is_some() {
                self.device.unmap_memory(self.memory);
            }
            self.device.destroy_buffer(self.buffer, None);
            self.device.free_memory(self.memory, None);
        }
    }
}
