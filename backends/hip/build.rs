//! Build script: with the `aot` feature and a clang that targets amdgcn (`clang-19`, or
//! `LOWBIT_HIP_CLANG`), compiles the kernels ahead of time for gfx1100, gfx1151, gfx1201 and
//! gfx942 and embeds the code objects (src/compile.rs uses them instead of hiprtc when the
//! device's architecture matches). Without the feature, or without clang, it embeds nothing
//! (a cargo warning says why) and kernels are compiled at first use as usual.

use std::path::PathBuf;
use std::process::Command;

const ARCHS: [&str; 4] = ["gfx1100", "gfx1151", "gfx1201", "gfx942"];

fn main() {
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-env-changed=LOWBIT_HIP_CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut entries = Vec::new();
    if std::env::var_os("CARGO_FEATURE_AOT").is_some() {
        let clang = std::env::var("LOWBIT_HIP_CLANG").unwrap_or_else(|_| "clang-19".to_string());
        let src = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"))
            .join("kernels");
        for arch in ARCHS {
            let obj = out.join(format!("lowbit_kernels.{arch}.co"));
            let status = Command::new(&clang)
                .args([
                    "-x",
                    "hip",
                    "--cuda-device-only",
                    "--no-gpu-bundle-output",
                    "-nogpuinc",
                    "-nogpulib",
                ])
                .args(["-O3", "-std=c++17", &format!("--offload-arch={arch}"), "-I"])
                .arg(&src)
                .arg("-c")
                .arg(src.join("lowbit_kernels.hip"))
                .arg("-o")
                .arg(&obj)
                .status();
            match status {
                Ok(s) if s.success() => entries.push((arch, obj)),
                Ok(s) => println!("cargo:warning=lowbit-hip aot: {clang} failed for {arch} ({s})"),
                Err(e) => {
                    println!("cargo:warning=lowbit-hip aot: {clang} not usable ({e}); no code objects embedded");
                    break;
                }
            }
        }
    }
    let mut rs =
        String::from("/// Ahead-of-time code objects (architecture, bytes), made by build.rs.\n");
    rs.push_str("pub(crate) const AOT: &[(&str, &[u8])] = &[\n");
    for (arch, obj) in &entries {
        rs.push_str(&format!("    ({arch:?}, include_bytes!({:?})),\n", obj.display().to_string()));
    }
    rs.push_str("];\n");
    std::fs::write(out.join("aot.rs"), rs).expect("write aot.rs");
}
