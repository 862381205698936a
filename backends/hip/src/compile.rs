//! Kernel compilation at first use, through the runtime's compiler (NVRTC or hiprtc), with an
//! on-disk code-object cache.
//!
//! The source is compiled in parts ([`Part`]): the base module (activation preparation, the
//! bandwidth probe) when the backend opens, and one module per format stem when a matrix of
//! that stem is first uploaded, so a process compiles only the kernels it uses. The AMD
//! ahead-of-time code objects hold every kernel in one module.
//!
//! Cache: one file per compile, named by a 128-bit hash of every compile input (kernel source,
//! header, vendor, target architecture, compiler version, options, and this crate's version).
//! It lives in `$LOWBIT_HIP_CACHE_DIR`, else `$XDG_CACHE_HOME/lowbit/hip`, else
//! `~/.cache/lowbit/hip`; `LOWBIT_HIP_CACHE=0` turns it off. Files are written to a temporary
//! name and renamed, so a crash never leaves a half file under a real name; at most
//! [`CACHE_FILES`] are kept (oldest removed first). The directory is safe to delete at any time.
//!
//! What must not live here: device calls other than compiling, and kernel names (backend.rs).

use std::path::PathBuf;

use crate::error::HipError;
use crate::ffi::{Api, Vendor};

/// The kernel source, compiled as one program.
pub(crate) const KERNELS: &str = include_str!("../kernels/lowbit_kernels.hip");
/// The portability header the source includes.
pub(crate) const HEADER: &str = include_str!("../kernels/lowbit_hip.h");
/// The tensor-core kernels' header the source includes (its body compiles only where LB_MMA is
/// defined: NVIDIA).
pub(crate) const MMA_HEADER: &str = include_str!("../kernels/lowbit_mma.h");

include!(concat!(env!("OUT_DIR"), "/aot.rs"));

/// The embedded ahead-of-time code object for an AMD architecture, if the crate was built with
/// the `aot` feature and clang.
pub(crate) fn aot_code_object(arch: &str) -> Option<&'static [u8]> {
    AOT.iter().find(|(a, _)| *a == arch).map(|(_, code)| *code)
}

/// Most code objects kept in the cache directory (a base module and 13 stems per source
/// version and target).
pub(crate) const CACHE_FILES: usize = 64;

/// What one compile of the kernel source builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part<'a> {
    /// The preparation kernels and `lb_read` (and `lb_mma_acts`).
    Base,
    /// The matvec kernels of one format stem (layout.rs `STEMS`).
    Stem(&'a str),
}

impl Part<'_> {
    /// The preprocessor definitions that select this part (kernels/lowbit_kernels.hip).
    pub(crate) fn defines(&self) -> Vec<String> {
        match self {
            Part::Base => vec!["-DLB_SELECT".to_string(), "-DLB_BASE".to_string()],
            Part::Stem(s) => vec!["-DLB_SELECT".to_string(), format!("-DLB_STEM_{s}")],
        }
    }
}

/// Extra preprocessor definitions for every compile, from `LOWBIT_HIP_DEFINES` (read once):
/// `NAME=VALUE` or `NAME` items separated by commas or spaces, letters, digits and `_` only
/// (any other item is an error naming it), e.g. `LB_LUT8_TAB=0` for session 9's ROCmFP3
/// decoder or `LB_CB_SEL=0,LB_CB_TAB=0` for session 9's 2-bit decoders (kernels/lowbit_hip.h,
/// lowbit_kernels.hip; docs/BENCHMARKS.md, session 10). A tuning knob; the cache key includes
/// them.
pub(crate) fn extra_defines() -> Result<&'static [String], HipError> {
    static D: std::sync::OnceLock<Result<Vec<String>, String>> = std::sync::OnceLock::new();
    match D.get_or_init(|| parse_defines(&std::env::var("LOWBIT_HIP_DEFINES").unwrap_or_default()))
    {
        Ok(d) => Ok(d),
        Err(log) => Err(HipError::Compile { log: log.clone() }),
    }
}

/// The `-D` options of a `LOWBIT_HIP_DEFINES` value, or a message naming its first bad item.
fn parse_defines(v: &str) -> Result<Vec<String>, String> {
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    v.split([',', ' '])
        .filter(|d| !d.is_empty())
        .map(|d| {
            let mut it = d.splitn(2, '=');
            if it.next().is_some_and(ok) && it.next().is_none_or(ok) {
                Ok(format!("-D{d}"))
            } else {
                Err(format!(
                    "LOWBIT_HIP_DEFINES: item `{d}` is not NAME or NAME=VALUE (letters, digits \
                     and `_`)"
                ))
            }
        })
        .collect()
}

/// Compiler options for a vendor and target (`arch`: "sm_90", "gfx1100", or "" = the
/// compiler's default, which for hiprtc is the current device).
pub(crate) fn options(vendor: Vendor, arch: &str) -> Vec<String> {
    let mut o = vec!["-std=c++17".to_string()];
    match vendor {
        Vendor::Nvidia => o.push(format!("--gpu-architecture={arch}")),
        Vendor::Amd => {
            o.push("-O3".to_string());
            if !arch.is_empty() {
                o.push(format!("--offload-arch={arch}"));
            }
        }
    }
    o
}

/// Two independent 64-bit FNV-1a style hashes over the inputs, as 32 hex digits.
pub(crate) fn cache_key(parts: &[&[u8]]) -> String {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x8422_2325_cbf2_9ce4;
    for p in parts {
        // Length-prefix each part so ("ab","c") and ("a","bc") differ.
        for &byte in (p.len() as u64).to_le_bytes().iter().chain(p.iter()) {
            a = (a ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            b = (b ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        }
    }
    format!("{a:016x}{b:016x}")
}

/// The cache directory, or None when caching is off or no home is known.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    if std::env::var("LOWBIT_HIP_CACHE").is_ok_and(|v| v == "0") {
        return None;
    }
    if let Some(d) = std::env::var_os("LOWBIT_HIP_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("lowbit").join("hip"))
}

/// Compiles `part` of the kernels for `arch` (or returns the cached code object).
pub(crate) fn compile_kernels(api: &Api, arch: &str, part: Part) -> Result<Vec<u8>, HipError> {
    let mut opts = options(api.vendor, arch);
    opts.extend(part.defines());
    opts.extend(extra_defines()?.iter().cloned());
    let (maj, min) = api.compiler_version();
    let key = cache_key(&[
        KERNELS.as_bytes(),
        HEADER.as_bytes(),
        MMA_HEADER.as_bytes(),
        format!("{:?}", api.vendor).as_bytes(),
        arch.as_bytes(),
        format!("{maj}.{min}").as_bytes(),
        opts.join(" ").as_bytes(),
        env!("CARGO_PKG_VERSION").as_bytes(),
    ]);
    let dir = cache_dir();
    let path = dir.as_ref().map(|d| d.join(format!("{key}.co")));
    if let Some(p) = &path {
        if let Ok(code) = std::fs::read(p) {
            if !code.is_empty() {
                return Ok(code);
            }
        }
    }
    let code = api.compile(
        "lowbit_kernels.hip",
        KERNELS,
        &[("lowbit_hip.h", HEADER), ("lowbit_mma.h", MMA_HEADER)],
        &opts,
    )?;
    if let (Some(d), Some(p)) = (&dir, &path) {
        // The cache is an optimisation: failing to write it is not an error.
        let _ = store(d, p, &code);
    }
    Ok(code)
}

fn store(dir: &std::path::Path, path: &std::path::Path, code: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".tmp-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::write(&tmp, code)?;
    std::fs::rename(&tmp, path)?;
    prune(dir, CACHE_FILES)
}

/// Removes the oldest `*.co` files until at most `keep` remain.
pub(crate) fn prune(dir: &std::path::Path, keep: usize) -> std::io::Result<()> {
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "co"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    files.sort();
    let excess = files.len().saturating_sub(keep);
    for (_, p) in files.into_iter().take(excess) {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_depends_on_every_part_and_on_boundaries() {
        let k = cache_key(&[b"src", b"sm_90"]);
        assert_eq!(k.len(), 32);
        assert_ne!(k, cache_key(&[b"src", b"sm_89"]));
        assert_ne!(k, cache_key(&[b"sr", b"csm_90"]));
        assert_eq!(k, cache_key(&[b"src", b"sm_90"]));
    }

    #[test]
    fn prune_keeps_the_newest() {
        let dir = std::env::temp_dir().join(format!("lowbit-hip-prune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..5 {
            let p = dir.join(format!("{i}.co"));
            std::fs::write(&p, [i as u8]).unwrap();
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i);
            std::fs::File::options().write(true).open(&p).unwrap().set_modified(t).unwrap();
        }
        std::fs::write(dir.join("keep.txt"), b"x").unwrap();
        prune(&dir, 2).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["3.co", "4.co", "keep.txt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn embedded_code_objects_are_amdgpu_elf() {
        // Empty without the `aot` feature (or without clang); with it, each entry must be an
        // AMDGPU ELF (e_machine 0xE0) for a shipped architecture.
        for (arch, code) in AOT {
            assert!(["gfx1100", "gfx1151", "gfx1201", "gfx942"].contains(arch), "{arch}");
            assert_eq!(&code[..4], b"\x7fELF", "{arch}");
            assert_eq!(u16::from_le_bytes([code[18], code[19]]), 0xE0, "{arch}");
        }
        if cfg!(feature = "aot") && std::env::var("LOWBIT_HIP_REQUIRE_AOT").is_ok_and(|v| v == "1")
        {
            assert_eq!(AOT.len(), 4);
        }
    }

    #[test]
    fn parts_and_defines() {
        assert_eq!(Part::Stem("q4_k").defines(), ["-DLB_SELECT", "-DLB_STEM_q4_k"]);
        assert_eq!(Part::Base.defines(), ["-DLB_SELECT", "-DLB_BASE"]);
        let d = parse_defines("LB_CB_SEL=0, LB_CB_TAB=1").unwrap();
        assert_eq!(d, ["-DLB_CB_SEL=0", "-DLB_CB_TAB=1"]);
        assert_eq!(parse_defines("").unwrap(), Vec::<String>::new());
        for bad in ["X;rm=1", "=2", "A=", "B,A=1=2"] {
            let e = parse_defines(bad).unwrap_err();
            assert!(e.contains("LOWBIT_HIP_DEFINES") && e.contains('`'), "{bad}: {e}");
        }
    }

    #[test]
    fn options_name_the_target() {
        assert!(options(Vendor::Nvidia, "sm_90").contains(&"--gpu-architecture=sm_90".to_string()));
        assert!(options(Vendor::Amd, "gfx1100").contains(&"--offload-arch=gfx1100".to_string()));
        assert!(!options(Vendor::Amd, "").iter().any(|o| o.starts_with("--offload-arch")));
    }
}
