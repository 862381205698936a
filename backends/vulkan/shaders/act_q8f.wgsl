// act_q8f.wgsl: Q8_0 activations quantized by each matmul workgroup itself, for the fused
// kernels built on mm_body.wgsl (one column, K <= 32 * FUSED_BLOCKS): no separate quantizer
// dispatch and no barrier between it and the matmul. The bytes are those of quant_q8_0.wgsl
// (the same q8_0_fn.wgsl). The format file defines APB, the 32-element activation blocks per
// weight block. x: the f32 activations (binding 2); the quantized blocks live in workgroup
// memory: 8 words (two vec4) per block, and (d, sum q | sum of the first 16 q << 16) per block.
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;

const FUSED_BLOCKS = 512u;

var<workgroup> sq: array<vec4<u32>, 1024>;
var<workgroup> sm: array<vec2<u32>, 512>;

struct Q8 {
    lo: vec4<u32>, // elements 0..15
    hi: vec4<u32>, // elements 16..31
    m: vec4<f32>,  // (d, sum, sum of elements 0..15, unused)
}

// Quantizes column pc.act_col into workgroup memory; every thread of the workgroup calls it.
fn prepare_act(lid: u32) {
    let blocks = pc.nb * APB;
    for (var g = lid; g < blocks; g += WG) {
        let q = q8_0_quantize(pc.act_col * blocks + g);
        sq[2u * g] = q.lo;
        sq[2u * g + 1u] = q.hi;
        // Both sums are integers below 2^12 in magnitude: two 16-bit halves.
        let sums = (u32(i32(q.m.y)) & 0xFFFFu) | (u32(i32(q.m.z)) << 16u);
        sm[g] = vec2<u32>(bitcast<u32>(q.m.x), sums);
    }
    workgroupBarrier();
}

// Activation block i (< APB) of weight block b (the one column).
fn q8_block(col: u32, b: u32, i: u32) -> Q8 {
    let ab = b * APB + i;
    let m = sm[ab];
    let s = bitcast<i32>(m.y);
    return Q8(sq[2u * ab], sq[2u * ab + 1u],
        vec4<f32>(bitcast<f32>(m.x), i2f((s << 16u) >> 16u), i2f(s >> 16u), 0.0));
}

fn row_factor(row: u32) -> f32 {
    return 1.0;
}

// Nothing to stage: the kernel reads its activations where they are.
fn stage_act(lid: u32, b0: u32) {}
