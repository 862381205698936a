//! The on-disk pipeline cache: the driver's `VkPipelineCache` data saved between processes, so
//! later runs skip the driver's shader compiles.
//!
//! * Key (the file name): PCI vendor and device id, driver version, the device's
//!   `pipelineCacheUUID`, and a hash of every compiled kernel (SPIR-V and overrides, i.e. the
//!   whole build-time kernel table): anything that changes the compiled result changes the
//!   name, so a stale file is never read.
//! * Safe to delete at any time; a file that is truncated, corrupt or for another device is
//!   ignored (an FNV-1a checksum of the payload and the Vulkan header's vendor, device and
//!   UUID are checked before the driver sees the data).
//! * Bounded: a payload above [`MAX_FILE_BYTES`] is not written, and after each write the
//!   oldest other files of the folder go until the folder holds at most [`MAX_DIR_BYTES`].
//! * Written to a temporary file and renamed; failures to read or write are ignored (a cache).
//! * Off with `LOWBIT_VK_PIPELINE_CACHE=0`. Folder: [`crate::VulkanOptions::pipeline_cache_dir`],
//!   else `LOWBIT_VK_CACHE_DIR`, else `$XDG_CACHE_HOME/lowbit/vulkan`, else
//!   `$HOME/.cache/lowbit/vulkan`.
//!
//! What must not live here: Vulkan calls (`pipeline.rs` creates and reads the cache object).

use std::path::{Path, PathBuf};

use crate::device::DeviceInfo;
use crate::kernels::KERNELS;

/// Largest payload written.
pub const MAX_FILE_BYTES: usize = 32 << 20;
/// Largest folder kept.
pub const MAX_DIR_BYTES: u64 = 128 << 20;

fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Hash of the whole kernel table (every variant's name, overrides, dot-product flag and
/// SPIR-V).
pub fn kernels_hash() -> u64 {
    KERNELS.iter().fold(FNV_START, |h, k| {
        let h = fnv1a(h, k.shader.as_bytes());
        let h = [k.wg, k.tpr, k.rpt, k.bpt, k.ncols, u32::from(k.dot4)]
            .iter()
            .fold(h, |h, v| fnv1a(h, &v.to_le_bytes()));
        fnv1a(h, k.spirv)
    })
}

/// The folder to use, or `None` when the cache is off.
pub fn folder(explicit: Option<&Path>) -> Option<PathBuf> {
    if std::env::var("LOWBIT_VK_PIPELINE_CACHE").as_deref() == Ok("0") {
        return None;
    }
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("LOWBIT_VK_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|p| p.join("lowbit").join("vulkan")))
        .or_else(|| env("HOME").map(|p| p.join(".cache").join("lowbit").join("vulkan")))
}

/// The cache file of a device in `dir`.
pub fn file(dir: &Path, info: &DeviceInfo, uuid: &[u8; 16]) -> PathBuf {
    let u: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!(
        "{:04x}-{:04x}-{:08x}-{u}-{:016x}.vkpc",
        info.vendor_id,
        info.device_id,
        info.driver_version,
        kernels_hash()
    ))
}

/// The payload of `path` if it exists, its checksum holds, and its Vulkan header names this
/// device (header: length, version, vendor id, device id, 16-byte UUID, little-endian).
pub fn load(path: &Path, info: &DeviceInfo, uuid: &[u8; 16]) -> Option<Vec<u8>> {
    let raw = std::fs::read(path).ok()?;
    if raw.len() < 8 + 32 || raw.len() > MAX_FILE_BYTES + 8 {
        return None;
    }
    let (sum, payload) = raw.split_at(8);
    if u64::from_le_bytes(sum.try_into().ok()?) != fnv1a(FNV_START, payload) {
        return None;
    }
    let word =
        |i: usize| u32::from_le_bytes([payload[i], payload[i + 1], payload[i + 2], payload[i + 3]]);
    let header_ok = word(0) as usize >= 32
        && word(4) == 1
        && word(8) == info.vendor_id
        && word(12) == info.device_id
        && &payload[16..32] == uuid;
    header_ok.then(|| payload.to_vec())
}

/// Writes `payload` to `path` (checksum first; temporary file and rename), then trims the
/// folder to [`MAX_DIR_BYTES`] by removing the oldest other `.vkpc` files.
pub fn store(path: &Path, payload: &[u8]) {
    if payload.is_empty() || payload.len() > MAX_FILE_BYTES {
        return;
    }
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut bytes = fnv1a(FNV_START, payload).to_le_bytes().to_vec();
    bytes.extend_from_slice(payload);
    if std::fs::write(&tmp, &bytes).is_err() || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return;
    }
    trim(dir, path);
}

fn trim(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "vkpc"))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((m.modified().ok()?, m.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort();
    for (_, len, p) in files {
        if total <= MAX_DIR_BYTES {
            break;
        }
        if p != keep && std::fs::remove_file(&p).is_ok() {
            total -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_and_header_guard_the_payload() {
        let dir = std::env::temp_dir().join(format!("lowbit-vkpc-{}", std::process::id()));
        let info = DeviceInfo {
            name: "x".into(),
            driver: "d".into(),
            vendor_id: 0x10de,
            device_id: 0x2335,
            driver_version: 7,
            api_version: 0,
            subgroup_size: 32,
            dot4_supported: true,
            dot4_accelerated: true,
            max_storage_range: 1,
            max_allocation: 1,
            max_groups: [1, 1],
            timestamp_period: 1.0,
            is_cpu: false,
            max_shared_bytes: 49152,
        };
        let uuid = [3u8; 16];
        let path = file(&dir, &info, &uuid);
        let mut payload = Vec::new();
        for w in [48u32, 1, 0x10de, 0x2335] {
            payload.extend_from_slice(&w.to_le_bytes());
        }
        payload.extend_from_slice(&uuid);
        payload.extend_from_slice(&[9u8; 16]);
        store(&path, &payload);
        assert_eq!(load(&path, &info, &uuid).as_deref(), Some(&payload[..]));
        // Another device's UUID, or one flipped payload byte: ignored.
        assert_eq!(load(&path, &info, &[4u8; 16]), None);
        let mut raw = std::fs::read(&path).unwrap();
        raw[40] ^= 1;
        std::fs::write(&path, &raw).unwrap();
        assert_eq!(load(&path, &info, &uuid), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
