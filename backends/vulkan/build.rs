//! Compiles the WGSL kernels in `shaders/` to SPIR-V with naga (no external shader compiler) and
//! writes `$OUT_DIR/kernels.rs`: one [`Kernel`](src/kernels.rs) entry per (shader, variant).
//!
//! * A kernel is its WGSL files (the tables below) followed by `shaders/common.wgsl`,
//!   concatenated (WGSL allows use before declaration at module scope). A parse or validation
//!   error fails the build with the file and line it points at.
//! * WGSL `override`s (workgroup size `WG`, threads per row `TPR`, rows per thread `RPT`,
//!   blocks per thread and step `BPT`, columns per dispatch `NCOLS`, rotated loads `ROT`) are
//!   resolved here, once
//!   per variant of the tables below:
//!   naga 27's SPIR-V writer rejects unresolved overrides (`back::spv::Error::Override`), so the
//!   specialisation happens at build time over a bounded, fixed set instead of through Vulkan
//!   specialisation constants. The set never depends on a call's shape (the column count of a
//!   call picks the smallest variant that covers it), so the number of pipelines is bounded.
//! * Each variant is written twice: with the SPIR-V integer dot product (`OpSDot`, for devices
//!   that report it accelerated) and without (naga's bit-extract polyfill of `dot4I8Packed`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Matmul kernels: (kernel name, WGSL files in order, shape set). common.wgsl is appended to
/// every kernel. Kernels on `mm_body` define a format's block access and dot product only.
/// Names ending in `_f` are the fused 1-column kernels (act_q8f.wgsl), compiled for n = 1 only.
const MATMUL_KERNELS: [(&str, &[&str], Shapes); 47] = [
    ("mm_q8_0", &["mm_q8_0"], Shapes::Small),
    ("mm_q4_0", &["mm_q4_0"], Shapes::Small),
    ("mm_q4_1", &["mm_q4_1"], Shapes::Small),
    ("mm_rocmfp2", &["mm_rocmfp2", "act_q8", "mm_body"], Shapes::Small),
    ("mm_hfp4", &["mm_hfp4", "hfp4_fn", "factor_ue8m0"], Shapes::Hfp4),
    ("mm_mfp4p", &["mm_hfp4", "hfp4_fn", "factor_e4m3"], Shapes::Hfp4),
    ("mm_rocmfp3", &["mm_rocmfp3", "act_q8", "mm_body"], Shapes::Small),
    ("mm_mxfp4", &["mm_mxfp4", "act_q8", "mm_body"], Shapes::Small),
    ("mm_nvfp4", &["mm_nvfp4", "act_q8", "mm_body"], Shapes::Mid),
    ("mm_pq2_0", &["mm_pq2_0", "act_q8", "mm_body"], Shapes::Large),
    ("mm_q4_k", &["mm_q4_k", "q4_k_fn", "act_q8k", "mm_body"], Shapes::Large),
    ("mm_q6_k", &["mm_q6_k", "act_q8k", "mm_body"], Shapes::Large),
    ("mm_tq2_0", &["mm_tq2_0", "act_q8k", "mm_body"], Shapes::Large),
    // Rotated loads (names ending in `_o`, 1-column variants only, mm_body.wgsl's ROT): each
    // slot of raw words is refilled right after its block is decoded, so one step's words
    // are live instead of two (fewer registers, the same loads in flight).
    ("mm_rocmfp2_o", &["mm_rocmfp2", "act_q8", "mm_body"], Shapes::Small),
    ("mm_rocmfp3_o", &["mm_rocmfp3", "act_q8", "mm_body"], Shapes::Small),
    ("mm_mxfp4_o", &["mm_mxfp4", "act_q8", "mm_body"], Shapes::Small),
    ("mm_nvfp4_o", &["mm_nvfp4", "act_q8", "mm_body"], Shapes::Mid),
    ("mm_pq2_0_o", &["mm_pq2_0", "act_q8", "mm_body"], Shapes::Large),
    ("mm_tq2_0_o", &["mm_tq2_0", "act_q8k", "mm_body"], Shapes::Large),
    // Fused (opt-in): the workgroup quantizes its one activation column itself (1-column
    // variants only). Measured on an H200 (docs/BENCHMARKS.md, session 6): slower than the
    // separate quantizer dispatch except on small matrices, and more so for the formats whose
    // decode is ALU-heavy (ROCmFP2/3, MXFP4, NVFP4, PTQ1_0), which therefore have none.
    ("mm_q8_0_f", &["mm_q8_0b", "act_q8f", "q8_0_fn", "mm_body"], Shapes::Small),
    ("mm_q4_0_f", &["mm_q4_0b", "act_q8f", "q8_0_fn", "mm_body"], Shapes::Small),
    // Staged (names ending in `_s`, 4-, 8- and 16-column variants only): each step's
    // activation blocks are copied into workgroup memory once per workgroup (act_q8s.wgsl).
    // Only for the formats where that was faster at n = 8 on an H200 (docs/BENCHMARKS.md,
    // session 7: ROCmFP3, MXFP4, NVFP4 and PTQ1_0 were slower staged).
    ("mm_q8_0_s", &["mm_q8_0b", "act_q8s", "mm_body"], Shapes::Small),
    ("mm_q4_0_s", &["mm_q4_0b", "act_q8s", "mm_body"], Shapes::Small),
    ("mm_rocmfp2_s", &["mm_rocmfp2", "act_q8s", "mm_body"], Shapes::Small),
    ("mm_pq2_0_s", &["mm_pq2_0", "act_q8s", "mm_body"], Shapes::Large),
    // Column-split (names ending in `_c`, 8-column variants only, mm_cols.wgsl): the threads
    // of a row split the columns too, one column a thread, so each decodes its blocks once for
    // all its rows and keeps RPT accumulators; staged activations (act_q8s.wgsl). Only for
    // PQ2_0, where it was faster than mm_pq2_0_s on an H200 (docs/BENCHMARKS.md, session 9:
    // the other formats on mm_body were 1.3-3.5x slower with it).
    ("mm_pq2_0_c", &["mm_pq2_0", "act_q8s", "mm_cols"], Shapes::Cols),
    // Tiled (names ending in `_t`, 8-column variants only, mm_tile.wgsl): a chunk of K of
    // every column staged in workgroup memory once per chunk (act_q8t.wgsl), few rows a
    // thread, each block decoded once for all columns. The last file is the epilogue:
    // tile_sum_c.wgsl (constant accumulator indices) or, in the kernels named `*_r_t`,
    // tile_sum_r.wgsl (session 10's loop); the same sums, so the same results
    // (kernels.rs `tile_rolled` says which a format uses).
    ("mm_q8_0_t", &["mm_q8_0b", "act_q8t", "mm_tile", "tile_sum_c"], Shapes::Tile),
    ("mm_q4_0_t", &["mm_q4_0b", "act_q8t", "mm_tile", "tile_sum_c"], Shapes::Tile),
    ("mm_q4_1_t", &["mm_q4_1b", "act_q8t", "mm_tile", "tile_sum_c"], Shapes::Tile),
    ("mm_rocmfp2_t", &["mm_rocmfp2", "act_q8t", "mm_tile", "tile_sum_c"], Shapes::Tile),
    ("mm_rocmfp3_t", &["mm_rocmfp3", "act_q8t", "mm_tile", "tile_sum_c"], Shapes::Tile),
    ("mm_mxfp4_t", &["mm_mxfp4", "act_q8t", "mm_tile", "tile_sum_c"], Shapes::Tile),
    ("mm_nvfp4_t", &["mm_nvfp4", "act_q8t", "mm_tile", "tile_sum_c"], Shapes::TileShort),
    ("mm_pq2_0_t", &["mm_pq2_0", "act_q8t", "mm_tile", "tile_sum_c"], Shapes::TileShort),
    ("mm_q8_0_r_t", &["mm_q8_0b", "act_q8t", "mm_tile", "tile_sum_r"], Shapes::Tile),
    ("mm_q4_0_r_t", &["mm_q4_0b", "act_q8t", "mm_tile", "tile_sum_r"], Shapes::Tile),
    ("mm_q4_1_r_t", &["mm_q4_1b", "act_q8t", "mm_tile", "tile_sum_r"], Shapes::Tile),
    ("mm_rocmfp2_r_t", &["mm_rocmfp2", "act_q8t", "mm_tile", "tile_sum_r"], Shapes::Tile),
    ("mm_rocmfp3_r_t", &["mm_rocmfp3", "act_q8t", "mm_tile", "tile_sum_r"], Shapes::Tile),
    ("mm_mxfp4_r_t", &["mm_mxfp4", "act_q8t", "mm_tile", "tile_sum_r"], Shapes::Tile),
    ("mm_nvfp4_r_t", &["mm_nvfp4", "act_q8t", "mm_tile", "tile_sum_r"], Shapes::TileShort),
    ("mm_pq2_0_r_t", &["mm_pq2_0", "act_q8t", "mm_tile", "tile_sum_r"], Shapes::TileShort),
    // Tiled kernels of the 256-element Q8_K formats (units: quarters of a block,
    // act_q8kt.wgsl) and of the HFP4 family (units: half blocks, f32 activations,
    // act_f32t.wgsl); constant-index epilogue only.
    ("mm_tq2_0_t", &["mm_tq2_0t", "act_q8kt", "mm_tile", "tile_sum_c"], Shapes::TileK),
    ("mm_q4_k_t", &["mm_q4_kt", "q4_k_fn", "act_q8kt", "mm_tile", "tile_sum_c"], Shapes::TileK),
    ("mm_q6_k_t", &["mm_q6_kt", "act_q8kt", "mm_tile", "tile_sum_c"], Shapes::TileK),
    (
        "mm_hfp4_t",
        &["mm_hfp4t", "hfp4_fn", "factor_ue8m0", "act_f32t", "mm_tile", "tile_sum_c"],
        Shapes::TileF,
    ),
    (
        "mm_mfp4p_t",
        &["mm_hfp4t", "hfp4_fn", "factor_e4m3", "act_f32t", "mm_tile", "tile_sum_c"],
        Shapes::TileF,
    ),
];

/// Helper kernels: (name, files, workgroup size).
const HELPERS: [(&str, &[&str], u32); 6] = [
    ("read_bw", &["read_bw"], 256),
    ("quant_q8_0", &["quant_q8_0", "q8_0_fn"], 64),
    ("quant_q8_0p", &["quant_q8_0p"], 256),
    ("quant_q8_k", &["quant_q8_k"], 64),
    ("fwht256", &["fwht256"], 256),
    ("sum_parts", &["sum_parts"], 256),
];

/// Column-count variants of every matmul shader.
const NCOLS: [u32; 5] = [1, 2, 4, 8, 16];

/// Which kernel shapes a matmul kernel is compiled for (by the size of its blocks).
#[derive(Clone, Copy, PartialEq)]
enum Shapes {
    /// 32-element blocks: the full sweep.
    Small,
    /// 64-element blocks.
    Mid,
    /// 128- and 256-element blocks: fewer threads per row (rows are few blocks long).
    Large,
    /// The HFP4 family (f32 activations, mm_hfp4.wgsl): more rows per thread at n >= 4, where
    /// each activation vec4 read serves every row of the thread.
    Hfp4,
    /// The column-split kernels (mm_cols.wgsl; 8 columns): TPR is the threads per row and
    /// column, each thread keeps RPT accumulators (`RPT <= 16`, `BPT * RPT <= 8`).
    Cols,
    /// The tiled kernels (mm_tile.wgsl; 8 columns) of formats with one activation block a
    /// weight block (chunks of 32 blocks): `RPT <= 4`, `TPR` dividing 32, BPT = K split.
    Tile,
    /// The tiled kernels of formats with 2 or 4 activation blocks a weight block (chunks of
    /// 16 or 8 blocks): `TPR <= 8`.
    TileShort,
    /// The tiled kernels of the Q8_K formats (act_q8kt.wgsl: chunks of 32 quarter-blocks).
    TileK,
    /// The tiled kernels of the HFP4 family (act_f32t.wgsl: chunks of 32 half-blocks).
    TileF,
}

/// (threads per row, rows per thread, blocks per thread and step) of every matmul variant, for
/// each column count (workgroups of 256; `RPT * NCOLS <= 64` accumulators, `BPT * RPT <= 8`
/// blocks in registers).
fn matmul_shapes(set: Shapes, ncols: u32) -> &'static [(u32, u32, u32)] {
    match (set, ncols) {
        (Shapes::Small, 1) => &[
            (32, 2, 1),
            (32, 4, 1),
            (32, 2, 2),
            (32, 4, 2),
            (32, 2, 4),
            (16, 4, 1),
            (16, 8, 1),
            (8, 8, 1),
        ],
        (Shapes::Small, 2) => &[(32, 2, 1), (32, 4, 1), (32, 2, 2), (32, 4, 2), (16, 8, 1)],
        (Shapes::Small, 4) => &[(32, 2, 1), (32, 4, 1), (32, 2, 2), (32, 8, 1), (16, 8, 1)],
        (Shapes::Small, 8) => {
            &[(32, 1, 1), (32, 2, 1), (32, 4, 1), (32, 2, 2), (32, 8, 1), (16, 8, 1)]
        }
        (Shapes::Small, _) => &[(32, 1, 1), (32, 2, 1), (32, 4, 1), (16, 4, 1)],
        (Shapes::Mid, 1) => &[(32, 2, 1), (16, 4, 1), (16, 2, 2), (16, 8, 1)],
        (Shapes::Mid, 2 | 4) => &[(32, 2, 1), (16, 4, 1), (16, 8, 1)],
        (Shapes::Mid, 8) => &[(32, 1, 1), (16, 2, 1), (16, 4, 1), (16, 8, 1)],
        (Shapes::Mid, _) => &[(32, 1, 1), (16, 2, 1), (16, 4, 1)],
        (Shapes::Large, 1) => &[(16, 2, 1), (8, 4, 1), (8, 2, 1), (16, 4, 1), (8, 8, 1)],
        (Shapes::Large, 2 | 4) => &[(16, 2, 1), (8, 4, 1), (8, 2, 1), (8, 8, 1)],
        (Shapes::Large, 8) => &[(16, 1, 1), (8, 2, 1), (8, 1, 1), (8, 4, 1), (8, 8, 1)],
        (Shapes::Large, _) => &[(16, 1, 1), (8, 2, 1), (8, 1, 1), (8, 4, 1)],
        (Shapes::Hfp4, 1) => {
            &[(32, 4, 1), (32, 2, 2), (16, 4, 1), (16, 4, 2), (16, 8, 1), (8, 8, 1)]
        }
        (Shapes::Hfp4, 2) => &[(32, 4, 1), (16, 4, 1), (16, 8, 1)],
        (Shapes::Hfp4, 4) => &[(32, 4, 1), (16, 4, 1), (16, 8, 1), (8, 8, 1)],
        (Shapes::Hfp4, 8) => {
            &[(32, 2, 1), (32, 4, 1), (16, 4, 1), (16, 8, 1), (8, 4, 1), (8, 8, 1)]
        }
        (Shapes::Hfp4, _) => &[(32, 2, 1), (32, 4, 1), (16, 4, 1), (8, 4, 1)],
        (Shapes::Cols, _) => &[(4, 8, 1), (4, 4, 1), (4, 4, 2), (8, 4, 1)],
        // (threads per row, rows per thread, K split: mm_tile.wgsl reads BPT as the number
        // of workgroups that share a row group).
        (Shapes::Tile, _) => &[
            (16, 4, 1),
            (16, 4, 2),
            (16, 4, 4),
            (8, 2, 1),
            (8, 2, 2),
            (8, 4, 2),
            (8, 4, 4),
            (16, 2, 2),
            (32, 4, 2),
            (32, 4, 4),
            // Session 13's sweep with the constant-index epilogue: the default of MXFP4 and
            // ROCmFP3. (4x2x1 and 8x1x1 were compiled for it and were slower for every
            // format, 8x4x1 for ROCmFP2, the one it was timed on: docs/BENCHMARKS.md,
            // session 13 (vk).)
            (16, 2, 1),
        ],
        // (Session 13 also swept 2x2x1, 8x1x1 and 4x1x2: slower for NVFP4 and PQ2_0.)
        (Shapes::TileShort, _) => {
            &[(8, 2, 1), (8, 2, 2), (4, 2, 1), (4, 2, 2), (4, 2, 4), (8, 4, 2), (8, 4, 4)]
        }
        (Shapes::TileK, _) => &[
            (16, 2, 1),
            (16, 4, 1),
            (8, 2, 1),
            (8, 4, 1),
            (4, 2, 1),
            (8, 2, 2),
            (8, 1, 1),
            (16, 1, 1),
        ],
        // (Session 13 also swept 8x1x1 and 8x2x2: slower for HFP4G32.)
        (Shapes::TileF, _) => {
            &[(16, 4, 1), (8, 4, 1), (16, 2, 1), (8, 2, 1), (32, 2, 1), (4, 2, 1)]
        }
    }
}

struct Variant {
    shader: &'static str,
    files: &'static [&'static str],
    wg: u32,
    tpr: u32,
    rpt: u32,
    bpt: u32,
    ncols: u32,
    /// mm_body.wgsl's ROT (1: rotated loads, the kernels named `*_o`).
    rot: u32,
}

fn variants() -> Vec<Variant> {
    let mut out = Vec::new();
    for (shader, files, wg) in HELPERS {
        out.push(Variant { shader, files, wg, tpr: 1, rpt: 1, bpt: 1, ncols: 1, rot: 0 });
    }
    for (shader, files, set) in MATMUL_KERNELS {
        for ncols in NCOLS {
            if (shader.ends_with("_f") || shader.ends_with("_o")) && ncols != 1
                || shader.ends_with("_s") && ncols < 4
                || (shader.ends_with("_c") || shader.ends_with("_t")) && ncols != 8
            {
                continue;
            }
            for &(tpr, rpt, bpt) in matmul_shapes(set, ncols) {
                let rot = u32::from(shader.ends_with("_o"));
                out.push(Variant { shader, files, wg: 256, tpr, rpt, bpt, ncols, rot });
            }
        }
    }
    out
}

fn line_of(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].matches('\n').count() + 1
}

/// "file:line" of a byte offset into the concatenation of `parts` (name, length incl. the
/// joining newline).
fn place(dir: &Path, parts: &[(&str, usize)], full: &str, offset: usize) -> String {
    let mut start = 0;
    for &(name, len) in parts {
        if offset < start + len {
            let text = &full[start..start + len];
            return format!(
                "{}:{}",
                dir.join(format!("{name}.wgsl")).display(),
                line_of(text, offset - start)
            );
        }
        start += len;
    }
    format!("{}: end of input", dir.display())
}

fn compile(dir: &Path, v: &Variant, dot4: bool) -> Result<Vec<u32>, String> {
    let mut full = String::new();
    let mut parts = Vec::new();
    for name in v.files.iter().copied().chain(["common"]) {
        let path = dir.join(format!("{name}.wgsl"));
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        full.push_str(&text);
        full.push('\n');
        parts.push((name, text.len() + 1));
    }
    // The reduction pass (common.wgsl's RED_PASS), after every file so error lines stay put.
    let red_pass = if v.shader.ends_with("_f") { 8 } else { 16 };
    full.push_str(&format!("const RED_PASS: u32 = {red_pass}u;\n"));
    let label = v.files.iter().map(|f| format!("{f}.wgsl")).collect::<Vec<_>>().join(" + ");
    let path = dir.join(format!("{}.wgsl", v.files[0]));
    let module = naga::front::wgsl::parse_str(&full).map_err(|e| {
        let at = e.location(&full).map(|l| l.offset as usize).unwrap_or(0);
        format!(
            "{}: WGSL parse error: {}\n{}",
            place(dir, &parts, &full, at),
            e.message(),
            e.emit_to_string_with_path(&full, format!("{label} + common.wgsl"))
        )
    })?;
    // unpack2x16float (mm_hfp4.wgsl) is GLSL.std.450 UnpackHalf2x16, core in Vulkan.
    let caps = naga::valid::Capabilities::PUSH_CONSTANT
        | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| {
            let at = e.spans().next().map(|(s, _)| s.to_range().unwrap_or(0..0).start);
            format!(
                "{}: WGSL validation error: {}\n{}",
                place(dir, &parts, &full, at.unwrap_or(0)),
                e.as_inner(),
                e.emit_to_string_with_path(&full, &format!("{label} + common.wgsl"))
            )
        })?;
    let mut constants = naga::back::PipelineConstants::default();
    for (name, value) in [
        ("WG", v.wg),
        ("TPR", v.tpr),
        ("RPT", v.rpt),
        ("BPT", v.bpt),
        ("NCOLS", v.ncols),
        ("ROT", v.rot),
    ] {
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
    let mut table = String::from("/// Every compiled kernel variant (generated by build.rs).\n");
    table.push_str("pub static KERNELS: &[Kernel] = &[\n");
    let mut failures = Vec::new();
    for (i, v) in variants().iter().enumerate() {
        for dot4 in [true, false] {
            match compile(&dir, v, dot4) {
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
