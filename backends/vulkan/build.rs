//! Compiles the WGSL kernels in `shaders/` to SPIR-V with naga (no external shader compiler) and
//! writes `$OUT_DIR/kernels.rs`: one [`Kernel`](src/kernels.rs) entry per (shader, variant).
//!
//! * Every shader is `shaders/<name>.wgsl` followed by `shaders/common.wgsl` (WGSL allows use
//!   before declaration at module scope, so the shader's own line numbers stay true). A parse or
//!   validation error fails the build with the file and line it points at.
//! * WGSL `override`s (workgroup size `WG`, threads per row `TPR`, rows per thread `RPT`,
//!   blocks per thread and step `BPT`, columns per dispatch `NCOLS`) are resolved here, once per variant of the table below:
//!   naga 27's SPIR-V writer rejects unresolved overrides (`back::spv::Error::Override`), so the
//!   specialisation happens at build time over a bounded, fixed set instead of through Vulkan
//!   specialisation constants. The set never depends on a call's shape (the column count of a
//!   call picks the smallest variant that covers it), so the number of pipelines is bounded.
//! * Each variant is written twice: with the SPIR-V integer dot product (`OpSDot`, for devices
//!   that report it accelerated) and without (naga's bit-extract polyfill of `dot4I8Packed`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Matmul shader file stems.
const MATMUL_SHADERS: [&str; 5] = ["mm_q8_0", "mm_q4_0", "mm_q4_1", "mm_rocmfp2", "mm_hfp4"];

/// Column-count variants of every matmul shader.
const NCOLS: [u32; 5] = [1, 2, 4, 8, 16];

/// (threads per row, rows per thread, blocks per thread and step) of every matmul variant, for
/// each column count (workgroups of 256; `RPT * NCOLS <= 64` accumulators, `BPT * RPT <= 8`
/// blocks in registers).
fn matmul_shapes(ncols: u32) -> &'static [(u32, u32, u32)] {
    match ncols {
        1 => &[(32, 2, 1), (32, 4, 1), (32, 2, 2), (32, 4, 2), (32, 2, 4), (16, 4, 1)],
        2 => &[(32, 2, 1), (32, 4, 1), (32, 2, 2), (32, 4, 2)],
        4 => &[(32, 2, 1), (32, 4, 1), (32, 2, 2)],
        8 => &[(32, 1, 1), (32, 2, 1), (32, 4, 1), (32, 2, 2)],
        _ => &[(32, 1, 1), (32, 2, 1), (32, 4, 1)],
    }
}

struct Variant {
    shader: &'static str,
    wg: u32,
    tpr: u32,
    rpt: u32,
    bpt: u32,
    ncols: u32,
}

fn variants() -> Vec<Variant> {
    let mut out = vec![
        Variant { shader: "read_bw", wg: 256, tpr: 1, rpt: 1, bpt: 1, ncols: 1 },
        Variant { shader: "quant_q8_0", wg: 64, tpr: 1, rpt: 1, bpt: 1, ncols: 1 },
    ];
    for shader in MATMUL_SHADERS {
        for ncols in NCOLS {
            for &(tpr, rpt, bpt) in matmul_shapes(ncols) {
                out.push(Variant { shader, wg: 256, tpr, rpt, bpt, ncols });
            }
        }
    }
    out
}

fn line_of(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].matches('\n').count() + 1
}

/// "file:line" of a byte offset into `shader ++ common`.
fn place(dir: &Path, stem: &str, shader_len: usize, full: &str, offset: usize) -> String {
    if offset < shader_len {
        format!("{}:{}", dir.join(format!("{stem}.wgsl")).display(), line_of(full, offset))
    } else {
        let common = &full[shader_len..];
        format!("{}:{}", dir.join("common.wgsl").display(), line_of(common, offset - shader_len))
    }
}

fn compile(dir: &Path, v: &Variant, common: &str, dot4: bool) -> Result<Vec<u32>, String> {
    let path = dir.join(format!("{}.wgsl", v.shader));
    let own = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let shader_len = own.len() + 1;
    let full = format!("{own}\n{common}");
    let module = naga::front::wgsl::parse_str(&full).map_err(|e| {
        let at = e.location(&full).map(|l| l.offset as usize).unwrap_or(0);
        format!(
            "{}: WGSL parse error: {}\n{}",
            place(dir, v.shader, shader_len, &full, at),
            e.message(),
            e.emit_to_string_with_path(&full, format!("{} + common.wgsl", path.display()))
        )
    })?;
    let caps = naga::valid::Capabilities::PUSH_CONSTANT;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| {
            let at = e.spans().next().map(|(s, _)| s.to_range().unwrap_or(0..0).start);
            format!(
                "{}: WGSL validation error: {}\n{}",
                place(dir, v.shader, shader_len, &full, at.unwrap_or(0)),
                e.as_inner(),
                e.emit_to_string_with_path(&full, &format!("{} + common.wgsl", path.display()))
            )
        })?;
    let mut constants = naga::back::PipelineConstants::default();
    for (name, value) in
        [("WG", v.wg), ("TPR", v.tpr), ("RPT", v.rpt), ("BPT", v.bpt), ("NCOLS", v.ncols)]
    {
        if module.overrides.iter().any(|(_, o)| o.name.as_deref() == Some(name)) {
            constants.insert(name.to_string(), f64::from(value));
        }
    }
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        Some((naga::ShaderStage::Compute, "main")),
        &constants,
    )
    .map_err(|e| format!("{}: overrides: {e}", path.display()))?;
    let mut caps_out: naga::FastHashSet<naga::back::spv::Capability> =
        [naga::back::spv::Capability::Shader, naga::back::spv::Capability::Float64]
            .into_iter()
            .collect();
    if dot4 {
        caps_out.insert(naga::back::spv::Capability::DotProduct);
        caps_out.insert(naga::back::spv::Capability::DotProductInput4x8BitPacked);
    }
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        flags: naga::back::spv::WriterFlags::empty(),
        capabilities: Some(caps_out),
        force_loop_bounding: false,
        zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".to_string(),
    };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
        .map_err(|e| format!("{}: SPIR-V output: {e}", path.display()))
}

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets this"))
        .join("shaders");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets this"));
    println!("cargo::rerun-if-changed=shaders");
    let common = std::fs::read_to_string(dir.join("common.wgsl"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join("common.wgsl").display()));
    let mut table = String::from("/// Every compiled kernel variant (generated by build.rs).\n");
    table.push_str("pub static KERNELS: &[Kernel] = &[\n");
    let mut failures = Vec::new();
    for (i, v) in variants().iter().enumerate() {
        for dot4 in [true, false] {
            match compile(&dir, v, &common, dot4) {
                Ok(words) => {
                    let file = out.join(format!("k{i}_{}.spv", u8::from(dot4)));
                    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                    std::fs::write(&file, bytes)
                        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                    writeln!(
                        table,
                        "    Kernel {{ shader: {:?}, wg: {}, tpr: {}, rpt: {}, bpt: {}, ncols: {}, \
                         dot4: {dot4}, spirv: include_bytes!({:?}) }},",
                        v.shader,
                        v.wg,
                        v.tpr,
                        v.rpt,
                        v.bpt,
                        v.ncols,
                        file.display().to_string()
                    )
                    .expect("writing to a String");
                }
                Err(e) => {
                    if !failures.contains(&e) {
                        failures.push(e);
                    }
                }
            }
        }
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("{f}");
        }
        panic!("{} shader compile error(s); first: {}", failures.len(), failures[0]);
    }
    table.push_str("];\n");
    std::fs::write(out.join("kernels.rs"), table).expect("writing kernels.rs");
}
