// act_q8.wgsl: Q8_0 / Q8_1 activations as quant_q8_0 writes them, for kernels built on
// mm_body.wgsl. The format file defines APB, the 32-element activation blocks per weight block.
// act_q: 8 words (two vec4) per activation block; act_meta: (d, sum q, sum of the first 16 q,
// Q8_1's s) per activation block.
@group(0) @binding(2) var<storage, read> act_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> act_meta: array<vec4<f32>>;

struct Q8 {
    lo: vec4<u32>, // elements 0..15
    hi: vec4<u32>, // elements 16..31
    m: vec4<f32>,  // (d, sum, sum of elements 0..15, s)
}

// Activation block i (< APB) of weight block b of column col.
fn q8_block(col: u32, b: u32, i: u32) -> Q8 {
    let ab = (col * pc.nb + b) * APB + i;
    return Q8(act_q[2u * ab], act_q[2u * ab + 1u], act_meta[ab]);
}

fn row_factor(row: u32) -> f32 {
    return 1.0;
}

// Nothing to prepare: the activations were quantized by their own dispatch.
fn prepare_act(lid: u32) {}

// Nothing to stage: the kernel reads its activations where they are.
fn stage_act(lid: u32, b0: u32) {}
