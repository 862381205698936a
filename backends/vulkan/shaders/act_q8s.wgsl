// act_q8s.wgsl: Q8_0 / Q8_1 activations as quant_q8_0 writes them (act_q8.wgsl's layout), for
// the 4-, 8- and 16-column kernels built on mm_body.wgsl: at the start of each step the
// workgroup copies the activation blocks that step covers (its TPR * BPT weight blocks, APB
// activation blocks each, for each of the NCOLS columns) into workgroup memory once, and
// every row of the workgroup reads them from there instead of each thread fetching them from
// L2 for its own rows. Where they do not fit (more than STAGE_BLOCKS activation blocks a
// step) the kernel reads them from the buffers, as act_q8.wgsl.
@group(0) @binding(2) var<storage, read> act_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> act_meta: array<vec4<f32>>;

const STAGE_BLOCKS = 256u;

var<workgroup> stage_q: array<vec4<u32>, 512>;
var<workgroup> stage_m: array<vec4<f32>, 256>;
// First weight block of the step staged now.
var<private> stage_b0: u32;

struct Q8 {
    lo: vec4<u32>, // elements 0..15
    hi: vec4<u32>, // elements 16..31
    m: vec4<f32>,  // (d, sum, sum of elements 0..15, s)
}

// Activation blocks one step covers, per column.
fn step_blocks() -> u32 {
    return TPR * BPT * APB;
}

fn staged() -> bool {
    return step_blocks() * NCOLS <= STAGE_BLOCKS;
}

// Activation block i (< APB) of weight block b of column col (b within the staged step).
fn q8_block(col: u32, b: u32, i: u32) -> Q8 {
    if (staged()) {
        let e = (col - pc.act_col) * step_blocks() + (b - stage_b0) * APB + i;
        return Q8(stage_q[2u * e], stage_q[2u * e + 1u], stage_m[e]);
    }
    let ab = (col * pc.nb + b) * APB + i;
    return Q8(act_q[2u * ab], act_q[2u * ab + 1u], act_meta[ab]);
}

// Copies the activation blocks of the step starting at weight block b0 (all columns of the
// dispatch; column c >= pc.n repeats column pc.n - 1, as mm_body.wgsl reads it). Every thread
// calls it, in uniform control flow.
fn stage_act(lid: u32, b0: u32) {
    if (!staged()) {
        return;
    }
    workgroupBarrier();
    stage_b0 = b0;
    let per = step_blocks();
    let last = pc.nb * APB - 1u;
    for (var e = lid; e < per * NCOLS; e += WG) {
        let col = pc.act_col + min(e / per, pc.n - 1u);
        let ab = col * pc.nb * APB + min(b0 * APB + e % per, last);
        stage_q[2u * e] = act_q[2u * ab];
        stage_q[2u * e + 1u] = act_q[2u * ab + 1u];
        stage_m[e] = act_meta[ab];
    }
    workgroupBarrier();
}

fn row_factor(row: u32) -> f32 {
    return 1.0;
}

// Nothing to prepare: the activations were quantized by their own dispatch.
fn prepare_act(lid: u32) {}
