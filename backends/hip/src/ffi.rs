//! The two GPU driver APIs lowbit-hip speaks, loaded at run time with `libloading`: the CUDA
//! driver API plus NVRTC (NVIDIA path) and the HIP module API plus hiprtc (AMD path). Both
//! have the same shapes (HIP's module API mirrors CUDA's driver API call for call), so one
//! table of function pointers, [`Api`], serves both; the few calls that differ live in
//! [`VendorCalls`].
//!
//! This is the only module with `unsafe` (FFI). It knows C signatures and library names, and
//! nothing about kernels or formats.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::PathBuf;

use libloading::Library;

use crate::error::HipError;

/// An opaque driver handle (module, function, event, stream, context, RTC program).
pub(crate) type Handle = *mut c_void;

/// A kernel argument: device pointers and sizes are passed as 64-bit slots; a `u32`
/// parameter reads the slot's first four bytes, which on a little-endian host are the value.
#[cfg(not(target_endian = "little"))]
compile_error!("lowbit-hip passes kernel arguments as little-endian 64-bit slots");

/// Which runtime a device is driven through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// AMD: libamdhip64 + libhiprtc (code objects for gfx targets).
    Amd,
    /// NVIDIA: libcuda + libnvrtc (the same source compiled by NVRTC to a cubin).
    Nvidia,
}

impl core::fmt::Display for Vendor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Vendor::Amd => "AMD HIP (libamdhip64 + hiprtc)",
            Vendor::Nvidia => "NVIDIA CUDA (libcuda + NVRTC)",
        })
    }
}

type FnI32 = unsafe extern "C" fn() -> i32;
type FnU32 = unsafe extern "C" fn(u32) -> i32;
type FnPtrI32 = unsafe extern "C" fn(*mut i32) -> i32;
type FnName = unsafe extern "C" fn(*mut c_char, i32, i32) -> i32;
type FnAlloc = unsafe extern "C" fn(*mut u64, usize) -> i32;
type FnFree = unsafe extern "C" fn(u64) -> i32;
type FnHtoD = unsafe extern "C" fn(u64, *const c_void, usize) -> i32;
type FnDtoH = unsafe extern "C" fn(*mut c_void, u64, usize) -> i32;
type FnOutHandleData = unsafe extern "C" fn(*mut Handle, *const c_void) -> i32;
type FnHandle = unsafe extern "C" fn(Handle) -> i32;
type FnGetFunction = unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> i32;
type FnLaunch = unsafe extern "C" fn(
    Handle,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    Handle,
    *mut *mut c_void,
    *mut *mut c_void,
) -> i32;
/// cuLaunchKernelEx(config, f, kernelParams, extra) (CUDA 12+).
type FnLaunchEx =
    unsafe extern "C" fn(*const LaunchConfig, Handle, *mut *mut c_void, *mut *mut c_void) -> i32;
type FnEventCreate = unsafe extern "C" fn(*mut Handle, u32) -> i32;

/// CUDA's `CUlaunchAttribute`: a 32-bit id, padding to 8 bytes, a 64-byte value union.
#[repr(C)]
pub(crate) struct LaunchAttribute {
    id: u32,
    pad: u32,
    value: [u8; 64],
}

/// CUDA's `CUlaunchConfig` (cuda.h, CUDA 12).
#[repr(C)]
pub(crate) struct LaunchConfig {
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    stream: Handle,
    attrs: *mut LaunchAttribute,
    num_attrs: u32,
}

/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`: the value's first int, non-zero,
/// lets the launched grid start before the previous kernel in the stream has finished (it
/// resolves the dependency itself with `griddepcontrol.wait`).
const ATTR_PROGRAMMATIC_STREAM_SERIALIZATION: u32 = 6;
type FnEventRecord = unsafe extern "C" fn(Handle, Handle) -> i32;
type FnElapsed = unsafe extern "C" fn(*mut f32, Handle, Handle) -> i32;
type FnRtcCreate = unsafe extern "C" fn(
    *mut Handle,
    *const c_char,
    *const c_char,
    i32,
    *const *const c_char,
    *const *const c_char,
) -> i32;
type FnRtcCompile = unsafe extern "C" fn(Handle, i32, *const *const c_char) -> i32;
type FnRtcSize = unsafe extern "C" fn(Handle, *mut usize) -> i32;
type FnRtcGet = unsafe extern "C" fn(Handle, *mut c_char) -> i32;
type FnRtcDestroy = unsafe extern "C" fn(*mut Handle) -> i32;
type FnVersion = unsafe extern "C" fn(*mut i32, *mut i32) -> i32;

/// Calls whose names or shapes differ between the two vendors.
pub(crate) enum VendorCalls {
    /// CUDA: devices need a context made current on each calling thread.
    Nvidia {
        device_get: unsafe extern "C" fn(*mut i32, i32) -> i32,
        primary_ctx_retain: unsafe extern "C" fn(*mut Handle, i32) -> i32,
        ctx_set_current: FnHandle,
        device_attribute: unsafe extern "C" fn(*mut i32, i32, i32) -> i32,
        error_name: unsafe extern "C" fn(i32, *mut *const c_char) -> i32,
        /// cuLaunchKernelEx, where the driver has it (programmatic dependent launch).
        launch_ex: Option<FnLaunchEx>,
    },
    /// HIP: a current device per thread.
    Amd {
        set_device: unsafe extern "C" fn(i32) -> i32,
        error_name: unsafe extern "C" fn(i32) -> *const c_char,
    },
}

/// Every driver and run-time-compiler entry point lowbit-hip uses.
pub(crate) struct Api {
    pub vendor: Vendor,
    pub init: FnU32,
    pub device_count: FnPtrI32,
    pub device_name: FnName,
    pub mem_alloc: FnAlloc,
    pub mem_free: FnFree,
    pub htod: FnHtoD,
    pub dtoh: FnDtoH,
    pub module_load: FnOutHandleData,
    pub module_unload: FnHandle,
    pub get_function: FnGetFunction,
    pub launch: FnLaunch,
    pub event_create: FnEventCreate,
    pub event_record: FnEventRecord,
    pub event_sync: FnHandle,
    pub event_elapsed: FnElapsed,
    pub event_destroy: FnHandle,
    pub synchronize: FnI32,
    pub vendor_calls: VendorCalls,
    pub rtc_create: FnRtcCreate,
    pub rtc_compile: FnRtcCompile,
    pub rtc_log_size: FnRtcSize,
    pub rtc_log: FnRtcGet,
    pub rtc_code_size: FnRtcSize,
    pub rtc_code: FnRtcGet,
    pub rtc_destroy: FnRtcDestroy,
    pub rtc_version: FnVersion,
    /// Where the two libraries were found (for logs and the code-object cache key).
    pub paths: [String; 2],
    // The libraries stay loaded as long as the function pointers above may be called.
    _driver: Library,
    _rtc: Library,
}

/// Library file names tried in order (the first that loads wins). `LOWBIT_HIP_DRIVER_LIB` /
/// `LOWBIT_HIP_RTC_LIB` put an explicit path first.
fn candidates(vendor: Vendor, rtc: bool) -> Vec<String> {
    let env = if rtc { "LOWBIT_HIP_RTC_LIB" } else { "LOWBIT_HIP_DRIVER_LIB" };
    let mut out: Vec<String> = std::env::var(env).into_iter().collect();
    let (names, dirs): (&[&str], Vec<PathBuf>) = match (vendor, rtc) {
        (Vendor::Nvidia, false) => (&["libcuda.so.1", "libcuda.so"], vec![]),
        (Vendor::Nvidia, true) => (
            &["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"],
            ["CUDA_HOME", "CUDA_PATH"]
                .iter()
                .filter_map(|v| std::env::var_os(v).map(|p| PathBuf::from(p).join("lib64")))
                .chain([PathBuf::from("/usr/local/cuda/lib64")])
                .collect(),
        ),
        (Vendor::Amd, false) => {
            (&["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"], rocm_dirs())
        }
        (Vendor::Amd, true) => (&["libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6"], rocm_dirs()),
    };
    out.extend(names.iter().map(|n| n.to_string()));
    for d in dirs {
        out.extend(names.iter().map(|n| d.join(n).to_string_lossy().into_owned()));
    }
    out
}

fn rocm_dirs() -> Vec<PathBuf> {
    std::env::var_os("ROCM_PATH")
        .map(|p| PathBuf::from(p).join("lib"))
        .into_iter()
        .chain([PathBuf::from("/opt/rocm/lib")])
        .collect()
}

fn open_first(vendor: Vendor, rtc: bool) -> Result<(Library, String), HipError> {
    let tried = candidates(vendor, rtc);
    let mut last = String::new();
    for name in &tried {
        // SAFETY: loading a vendor GPU runtime runs its initialisers; these libraries are
        // designed to be dlopen'ed by applications (that is how their own loaders work).
        match unsafe { Library::new(name) } {
            Ok(lib) => return Ok((lib, name.clone())),
            Err(e) => last = e.to_string(),
        }
    }
    Err(HipError::NoRuntime { vendor, tried: tried.join(", "), last })
}

/// Looks a symbol up and copies the function pointer out.
fn sym<T: Copy>(lib: &Library, path: &str, names: &[&str]) -> Result<T, HipError> {
    for name in names {
        let mut z = name.as_bytes().to_vec();
        z.push(0);
        // SAFETY: `T` is the C signature of `name` as declared by the vendor's header (the
        // type aliases above); the pointer is used only while `lib` stays loaded (Api owns it).
        if let Ok(s) = unsafe { lib.get::<T>(&z) } {
            return Ok(*s);
        }
    }
    Err(HipError::MissingSymbol { library: path.to_string(), symbol: names.join(" / ") })
}

impl Api {
    /// Loads one vendor's driver and compiler libraries and resolves every entry point.
    pub(crate) fn load(vendor: Vendor) -> Result<Api, HipError> {
        let (drv, dp) = open_first(vendor, false)?;
        let (rtc, rp) = open_first(vendor, true)?;
        macro_rules! s {
            ($lib:expr, $path:expr, $($n:literal),+) => { sym(&$lib, &$path, &[$($n),+])? };
        }
        Ok(match vendor {
            Vendor::Nvidia => Api {
                vendor,
                init: s!(drv, dp, "cuInit"),
                device_count: s!(drv, dp, "cuDeviceGetCount"),
                device_name: s!(drv, dp, "cuDeviceGetName"),
                mem_alloc: s!(drv, dp, "cuMemAlloc_v2"),
                mem_free: s!(drv, dp, "cuMemFree_v2"),
                htod: s!(drv, dp, "cuMemcpyHtoD_v2"),
                dtoh: s!(drv, dp, "cuMemcpyDtoH_v2"),
                module_load: s!(drv, dp, "cuModuleLoadData"),
                module_unload: s!(drv, dp, "cuModuleUnload"),
                get_function: s!(drv, dp, "cuModuleGetFunction"),
                launch: s!(drv, dp, "cuLaunchKernel"),
                event_create: s!(drv, dp, "cuEventCreate"),
                event_record: s!(drv, dp, "cuEventRecord"),
                event_sync: s!(drv, dp, "cuEventSynchronize"),
                event_elapsed: s!(drv, dp, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
                event_destroy: s!(drv, dp, "cuEventDestroy_v2"),
                synchronize: s!(drv, dp, "cuCtxSynchronize"),
                vendor_calls: VendorCalls::Nvidia {
                    device_get: s!(drv, dp, "cuDeviceGet"),
                    primary_ctx_retain: s!(drv, dp, "cuDevicePrimaryCtxRetain"),
                    ctx_set_current: s!(drv, dp, "cuCtxSetCurrent"),
                    device_attribute: s!(drv, dp, "cuDeviceGetAttribute"),
                    error_name: s!(drv, dp, "cuGetErrorName"),
                    launch_ex: sym(&drv, &dp, &["cuLaunchKernelEx"]).ok(),
                },
                rtc_create: s!(rtc, rp, "nvrtcCreateProgram"),
                rtc_compile: s!(rtc, rp, "nvrtcCompileProgram"),
                rtc_log_size: s!(rtc, rp, "nvrtcGetProgramLogSize"),
                rtc_log: s!(rtc, rp, "nvrtcGetProgramLog"),
                rtc_code_size: s!(rtc, rp, "nvrtcGetCUBINSize"),
                rtc_code: s!(rtc, rp, "nvrtcGetCUBIN"),
                rtc_destroy: s!(rtc, rp, "nvrtcDestroyProgram"),
                rtc_version: s!(rtc, rp, "nvrtcVersion"),
                paths: [dp, rp],
                _driver: drv,
                _rtc: rtc,
            },
            Vendor::Amd => Api {
                vendor,
                init: s!(drv, dp, "hipInit"),
                device_count: s!(drv, dp, "hipGetDeviceCount"),
                device_name: s!(drv, dp, "hipDeviceGetName"),
                mem_alloc: s!(drv, dp, "hipMalloc"),
                mem_free: s!(drv, dp, "hipFree"),
                htod: s!(drv, dp, "hipMemcpyHtoD"),
                dtoh: s!(drv, dp, "hipMemcpyDtoH"),
                module_load: s!(drv, dp, "hipModuleLoadData"),
                module_unload: s!(drv, dp, "hipModuleUnload"),
                get_function: s!(drv, dp, "hipModuleGetFunction"),
                launch: s!(drv, dp, "hipModuleLaunchKernel"),
                event_create: s!(drv, dp, "hipEventCreateWithFlags"),
                event_record: s!(drv, dp, "hipEventRecord"),
                event_sync: s!(drv, dp, "hipEventSynchronize"),
                event_elapsed: s!(drv, dp, "hipEventElapsedTime"),
                event_destroy: s!(drv, dp, "hipEventDestroy"),
                synchronize: s!(drv, dp, "hipDeviceSynchronize"),
                vendor_calls: VendorCalls::Amd {
                    set_device: s!(drv, dp, "hipSetDevice"),
                    error_name: s!(drv, dp, "hipGetErrorName"),
                },
                rtc_create: s!(rtc, rp, "hiprtcCreateProgram"),
                rtc_compile: s!(rtc, rp, "hiprtcCompileProgram"),
                rtc_log_size: s!(rtc, rp, "hiprtcGetProgramLogSize"),
                rtc_log: s!(rtc, rp, "hiprtcGetProgramLog"),
                rtc_code_size: s!(rtc, rp, "hiprtcGetCodeSize"),
                rtc_code: s!(rtc, rp, "hiprtcGetCode"),
                rtc_destroy: s!(rtc, rp, "hiprtcDestroyProgram"),
                rtc_version: s!(rtc, rp, "hiprtcVersion"),
                paths: [dp, rp],
                _driver: drv,
                _rtc: rtc,
            },
        })
    }

    /// Turns a driver status into a result, naming the call and the driver's error name.
    pub(crate) fn check(&self, call: &'static str, code: i32) -> Result<(), HipError> {
        if code == 0 {
            return Ok(());
        }
        let name = match self.vendor_calls {
            VendorCalls::Nvidia { error_name, .. } => {
                let mut p: *const c_char = std::ptr::null();
                // SAFETY: cuGetErrorName writes a pointer to a static string (or fails).
                let rc = unsafe { error_name(code, &mut p) };
                cstr_or(rc == 0, p)
            }
            // SAFETY: hipGetErrorName returns a pointer to a static string for any code.
            VendorCalls::Amd { error_name, .. } => cstr_or(true, unsafe { error_name(code) }),
        };
        Err(HipError::Driver { call, code, name })
    }

    /// Makes device `dev` current on the calling thread; returns the CUDA context to keep.
    pub(crate) fn open_device(&self, dev: i32) -> Result<Handle, HipError> {
        match self.vendor_calls {
            VendorCalls::Nvidia { device_get, primary_ctx_retain, ctx_set_current, .. } => {
                let mut d = 0i32;
                let mut ctx: Handle = std::ptr::null_mut();
                // SAFETY: out-pointers to locals; the driver was initialised by the caller.
                unsafe {
                    self.check("cuDeviceGet", device_get(&mut d, dev))?;
                    self.check("cuDevicePrimaryCtxRetain", primary_ctx_retain(&mut ctx, d))?;
                    self.check("cuCtxSetCurrent", ctx_set_current(ctx))?;
                }
                Ok(ctx)
            }
            VendorCalls::Amd { set_device, .. } => {
                // SAFETY: plain call with a device index below the device count.
                self.check("hipSetDevice", unsafe { set_device(dev) })?;
                Ok(std::ptr::null_mut())
            }
        }
    }

    /// Binds the device (context) to the calling thread.
    pub(crate) fn bind(&self, dev: i32, ctx: Handle) -> Result<(), HipError> {
        match self.vendor_calls {
            // SAFETY: `ctx` is the primary context retained by open_device.
            VendorCalls::Nvidia { ctx_set_current, .. } => {
                self.check("cuCtxSetCurrent", unsafe { ctx_set_current(ctx) })
            }
            // SAFETY: plain call with a device index checked by open_device.
            VendorCalls::Amd { set_device, .. } => {
                self.check("hipSetDevice", unsafe { set_device(dev) })
            }
        }
    }

    /// CUDA compute capability (major, minor); None on AMD.
    pub(crate) fn compute_capability(&self, dev: i32) -> Result<Option<(i32, i32)>, HipError> {
        match self.vendor_calls {
            VendorCalls::Nvidia { device_get, device_attribute, .. } => {
                let (mut d, mut major, mut minor) = (0i32, 0i32, 0i32);
                // SAFETY: out-pointers to locals; 75/76 are CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{MAJOR,MINOR}.
                unsafe {
                    self.check("cuDeviceGet", device_get(&mut d, dev))?;
                    self.check("cuDeviceGetAttribute", device_attribute(&mut major, 75, d))?;
                    self.check("cuDeviceGetAttribute", device_attribute(&mut minor, 76, d))?;
                }
                Ok(Some((major, minor)))
            }
            VendorCalls::Amd { .. } => Ok(None),
        }
    }

    /// The device's marketing name.
    pub(crate) fn name(&self, dev: i32) -> Result<String, HipError> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer is 256 bytes and its length is passed.
        self.check("device name", unsafe { (self.device_name)(buf.as_mut_ptr(), 256, dev) })?;
        Ok(cstr_or(true, buf.as_ptr()))
    }

    /// The run-time compiler's (major, minor) version.
    pub(crate) fn compiler_version(&self) -> (i32, i32) {
        let (mut a, mut b) = (0, 0);
        // SAFETY: out-pointers to locals.
        unsafe { (self.rtc_version)(&mut a, &mut b) };
        (a, b)
    }

    /// Compiles `source` (with `headers` as (include name, text) pairs) and returns the device
    /// code (cubin / code object), or the compiler log as an error.
    pub(crate) fn compile(
        &self,
        name: &str,
        source: &str,
        headers: &[(&str, &str)],
        options: &[String],
    ) -> Result<Vec<u8>, HipError> {
        let cs = |s: &str| {
            CString::new(s).map_err(|_| HipError::Compile { log: format!("NUL in {s:?}") })
        };
        let src = cs(source)?;
        let cname = cs(name)?;
        let hdr_text: Vec<CString> = headers.iter().map(|h| cs(h.1)).collect::<Result<_, _>>()?;
        let hdr_name: Vec<CString> = headers.iter().map(|h| cs(h.0)).collect::<Result<_, _>>()?;
        let hp: Vec<*const c_char> = hdr_text.iter().map(|c| c.as_ptr()).collect();
        let hn: Vec<*const c_char> = hdr_name.iter().map(|c| c.as_ptr()).collect();
        let opts: Vec<CString> = options.iter().map(|o| cs(o)).collect::<Result<_, _>>()?;
        let op: Vec<*const c_char> = opts.iter().map(|c| c.as_ptr()).collect();
        let mut prog: Handle = std::ptr::null_mut();
        // SAFETY: every pointer refers to a live NUL-terminated string owned above; the counts
        // match the arrays; `prog` is destroyed below on every path after creation.
        unsafe {
            let rc = (self.rtc_create)(
                &mut prog,
                src.as_ptr(),
                cname.as_ptr(),
                hp.len() as i32,
                hp.as_ptr(),
                hn.as_ptr(),
            );
            if rc != 0 {
                return Err(HipError::Compile {
                    log: format!("creating the program failed ({rc})"),
                });
            }
            let rc = (self.rtc_compile)(prog, op.len() as i32, op.as_ptr());
            let mut log_len = 0usize;
            (self.rtc_log_size)(prog, &mut log_len);
            let mut log = vec![0u8; log_len.max(1)];
            (self.rtc_log)(prog, log.as_mut_ptr() as *mut c_char);
            let log = String::from_utf8_lossy(&log).trim_end_matches('\0').to_string();
            if rc != 0 {
                (self.rtc_destroy)(&mut prog);
                return Err(HipError::Compile { log });
            }
            let mut size = 0usize;
            let rc1 = (self.rtc_code_size)(prog, &mut size);
            let mut code = vec![0u8; size];
            let rc2 =
                if size > 0 { (self.rtc_code)(prog, code.as_mut_ptr() as *mut c_char) } else { 1 };
            (self.rtc_destroy)(&mut prog);
            if rc1 != 0 || rc2 != 0 {
                return Err(HipError::Compile {
                    log: format!("no device code returned ({rc1}, {rc2}); log: {log}"),
                });
            }
            Ok(code)
        }
    }
}

fn cstr_or(ok: bool, p: *const c_char) -> String {
    if !ok || p.is_null() {
        return "unknown".to_string();
    }
    // SAFETY: the driver returned a NUL-terminated static string (checked non-null).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Api {
    /// Allocates `bytes` (at least 1) of device memory.
    pub(crate) fn alloc(&self, bytes: usize) -> Result<u64, HipError> {
        let mut p = 0u64;
        // SAFETY: out-pointer to a local.
        self.check("mem_alloc", unsafe { (self.mem_alloc)(&mut p, bytes.max(1)) })?;
        Ok(p)
    }

    /// Frees a pointer from [`Api::alloc`] (errors are ignored: nothing can be done in Drop).
    pub(crate) fn free(&self, p: u64) {
        // SAFETY: `p` came from alloc and is freed once (DeviceBuffer's Drop).
        unsafe { (self.mem_free)(p) };
    }

    /// Copies `src` to device memory at `dst` (which holds at least `src.len()` bytes).
    pub(crate) fn upload(&self, dst: u64, src: &[u8]) -> Result<(), HipError> {
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: the source slice is live for the (synchronous) copy; the caller guarantees
        // the destination allocation is large enough.
        self.check("memcpy HtoD", unsafe {
            (self.htod)(dst, src.as_ptr() as *const c_void, src.len())
        })
    }

    /// Copies device memory at `src` into `dst`.
    pub(crate) fn download(&self, dst: &mut [u8], src: u64) -> Result<(), HipError> {
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: the destination slice is live and writable for the (synchronous) copy.
        self.check("memcpy DtoH", unsafe {
            (self.dtoh)(dst.as_mut_ptr() as *mut c_void, src, dst.len())
        })
    }

    /// Loads device code and returns the module.
    pub(crate) fn load_module(&self, code: &[u8]) -> Result<Handle, HipError> {
        let mut m: Handle = std::ptr::null_mut();
        // SAFETY: `code` is a complete cubin / code object produced by the matching compiler.
        self.check("module load", unsafe {
            (self.module_load)(&mut m, code.as_ptr() as *const c_void)
        })?;
        Ok(m)
    }

    /// Looks a kernel up in a module.
    pub(crate) fn function(&self, module: Handle, name: &str) -> Result<Handle, HipError> {
        let c = CString::new(name)
            .map_err(|_| HipError::Compile { log: format!("bad kernel name {name:?}") })?;
        let mut f: Handle = std::ptr::null_mut();
        // SAFETY: `module` is a loaded module; `c` is NUL-terminated.
        self.check("get function", unsafe { (self.get_function)(&mut f, module, c.as_ptr()) })?;
        Ok(f)
    }

    /// Launches `f` on the default stream with `args` (one 64-bit slot per kernel parameter,
    /// in order; see the note on little-endian slots).
    pub(crate) fn launch_kernel(
        &self,
        f: Handle,
        grid: [u32; 2],
        block: u32,
        args: &mut [u64],
    ) -> Result<(), HipError> {
        let mut ptrs: Vec<*mut c_void> =
            args.iter_mut().map(|a| a as *mut u64 as *mut c_void).collect();
        // SAFETY: `f` is a kernel of this module whose parameters are 8-byte pointers/u64 or
        // u32 (read from the slot's low half); `ptrs` and `args` outlive the call (the driver
        // copies parameters at launch).
        self.check("launch", unsafe {
            (self.launch)(
                f,
                grid[0],
                grid[1],
                1,
                block,
                1,
                1,
                0,
                std::ptr::null_mut(),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// Whether [`Self::launch_kernel`] can launch as a programmatic dependent (CUDA's
    /// cuLaunchKernelEx is there).
    pub(crate) fn has_dependent_launch(&self) -> bool {
        matches!(self.vendor_calls, VendorCalls::Nvidia { launch_ex: Some(_), .. })
    }

    /// As [`Self::launch_kernel`], but with `dependent` and where the driver has
    /// cuLaunchKernelEx, the grid may start before the previous kernel on the stream has
    /// finished: `f` must wait for it (`lb_grid_wait`) before reading anything it wrote.
    pub(crate) fn launch_kernel_dependent(
        &self,
        f: Handle,
        grid: [u32; 2],
        block: u32,
        args: &mut [u64],
        dependent: bool,
    ) -> Result<(), HipError> {
        let launch_ex = match self.vendor_calls {
            VendorCalls::Nvidia { launch_ex: Some(l), .. } if dependent => l,
            _ => return self.launch_kernel(f, grid, block, args),
        };
        let mut ptrs: Vec<*mut c_void> =
            args.iter_mut().map(|a| a as *mut u64 as *mut c_void).collect();
        let mut attr =
            LaunchAttribute { id: ATTR_PROGRAMMATIC_STREAM_SERIALIZATION, pad: 0, value: [0; 64] };
        attr.value[..4].copy_from_slice(&1i32.to_ne_bytes());
        let config = LaunchConfig {
            grid: [grid[0], grid[1], 1],
            block: [block, 1, 1],
            shared_mem_bytes: 0,
            stream: std::ptr::null_mut(),
            attrs: &mut attr,
            num_attrs: 1,
        };
        // SAFETY: as in `launch_kernel`; `config` and `attr` are laid out as cuda.h's
        // CUlaunchConfig / CUlaunchAttribute (repr(C)) and outlive the call.
        self.check("launch (dependent)", unsafe {
            launch_ex(&config, f, ptrs.as_mut_ptr(), std::ptr::null_mut())
        })
    }

    /// Waits for all work on the device.
    pub(crate) fn sync(&self) -> Result<(), HipError> {
        // SAFETY: no arguments.
        self.check("synchronize", unsafe { (self.synchronize)() })
    }

    /// Runs `work` between two events and returns the elapsed GPU time in milliseconds.
    pub(crate) fn time_ms(
        &self,
        work: &mut dyn FnMut() -> Result<(), HipError>,
    ) -> Result<f32, HipError> {
        let (mut a, mut b): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: out-pointers to locals; the events are destroyed before returning.
        unsafe {
            self.check("event create", (self.event_create)(&mut a, 0))?;
            if let Err(e) = self.check("event create", (self.event_create)(&mut b, 0)) {
                (self.event_destroy)(a);
                return Err(e);
            }
        }
        let mut run = || -> Result<f32, HipError> {
            // SAFETY: live events on the default stream.
            unsafe { self.check("event record", (self.event_record)(a, std::ptr::null_mut()))? };
            work()?;
            let mut ms = 0f32;
            // SAFETY: live events; out-pointer to a local.
            unsafe {
                self.check("event record", (self.event_record)(b, std::ptr::null_mut()))?;
                self.check("event sync", (self.event_sync)(b))?;
                self.check("event elapsed", (self.event_elapsed)(&mut ms, a, b))?;
            }
            Ok(ms)
        };
        let r = run();
        // SAFETY: both events were created above and are destroyed once.
        unsafe {
            (self.event_destroy)(a);
            (self.event_destroy)(b);
        }
        r
    }
}

/// One opened device: the loaded API, the device index, its CUDA context (null on AMD), and
/// the kernel modules loaded so far with their functions by name.
pub(crate) struct Device {
    pub api: Api,
    pub index: i32,
    ctx: Handle,
    loaded: std::sync::Mutex<Loaded>,
}

/// The modules loaded on a device and the functions resolved in them.
#[derive(Default)]
struct Loaded {
    modules: Vec<Handle>,
    functions: Vec<(String, Handle)>,
}

// SAFETY: driver handles (contexts, modules, functions) are process-wide objects that both
// runtimes allow any thread to use; every entry point binds the context/device to the calling
// thread first (Device::bind), and mutable per-call state lives behind the backend's Mutex.
unsafe impl Send for Device {}
// SAFETY: as above; the module and function lists are behind a Mutex.
unsafe impl Sync for Device {}

impl Device {
    /// Initialises the runtime and opens device `index` (binding it to this thread).
    pub(crate) fn open(api: Api, index: i32) -> Result<Device, HipError> {
        // SAFETY: plain initialisation call with flags 0.
        api.check("init", unsafe { (api.init)(0) })
            .map_err(|e| HipError::NoDevice { detail: e.to_string() })?;
        let mut count = 0;
        // SAFETY: out-pointer to a local.
        api.check("device count", unsafe { (api.device_count)(&mut count) })
            .map_err(|e| HipError::NoDevice { detail: e.to_string() })?;
        if index < 0 || index >= count {
            return Err(HipError::NoDevice {
                detail: format!(
                    "{:?} runtime reports {count} device(s); asked for device {index}",
                    api.vendor
                ),
            });
        }
        let ctx = api.open_device(index)?;
        Ok(Device { api, index, ctx, loaded: std::sync::Mutex::new(Loaded::default()) })
    }

    /// Binds this device to the calling thread.
    pub(crate) fn bind(&self) -> Result<(), HipError> {
        self.api.bind(self.index, self.ctx)
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads a kernel module from device code (on this device, bound to the calling thread)
    /// and resolves `names` in it.
    pub(crate) fn load_kernels(&self, code: &[u8], names: &[String]) -> Result<(), HipError> {
        self.bind()?;
        let module = self.api.load_module(code)?;
        let mut loaded = self.loaded();
        loaded.modules.push(module);
        for n in names {
            let f = self.api.function(module, n)?;
            loaded.functions.push((n.clone(), f));
        }
        Ok(())
    }

    /// A kernel by name (resolved when its module was loaded).
    pub(crate) fn kernel(&self, name: &str) -> Result<Handle, HipError> {
        self.loaded().functions.iter().find(|(n, _)| n == name).map(|(_, f)| *f).ok_or_else(|| {
            HipError::Compile { log: format!("kernel {name} missing from the loaded modules") }
        })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let modules = std::mem::take(&mut self.loaded().modules);
        if !modules.is_empty() && self.bind().is_ok() {
            for m in modules {
                // SAFETY: each module was loaded by load_kernels and is unloaded once; no
                // kernel handle outlives the Device (buffers hold an Arc to it).
                unsafe { (self.api.module_unload)(m) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_runtime_is_an_unavailable_error_naming_what_was_tried() {
        // SAFETY of the env change: this test alone touches this variable.
        std::env::set_var("LOWBIT_HIP_DRIVER_LIB", "/nonexistent/libamdhip64.so");
        let has_rocm = std::path::Path::new("/opt/rocm/lib/libamdhip64.so").exists();
        match Api::load(Vendor::Amd) {
            Err(e) => {
                assert!(e.is_unavailable(), "{e}");
                let s = e.to_string();
                assert!(
                    s.contains("/nonexistent/libamdhip64.so") && s.contains("libamdhip64.so.6"),
                    "{s}"
                );
            }
            Ok(_) => assert!(has_rocm, "loaded an AMD runtime that should not exist"),
        }
    }

    #[test]
    fn candidates_put_the_override_first() {
        let c = candidates(Vendor::Nvidia, true);
        assert!(c.iter().any(|n| n == "libnvrtc.so.13"));
        assert!(c.iter().any(|n| n.ends_with("/usr/local/cuda/lib64/libnvrtc.so")));
    }
}
