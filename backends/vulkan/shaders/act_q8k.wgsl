// act_q8k.wgsl: Q8_K activations as quant_q8_k writes them, for kernels built on mm_body.wgsl
// (weight blocks of 256 elements, one activation block each). act_q: 64 words (16 vec4) per
// block, elements in order; act_meta: 5 vec4 per block: (d, sum q, 0, 0), then the 16 bsums
// (sums of q over elements 16i..16i+15) as exact f32.
@group(0) @binding(2) var<storage, read> act_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> act_meta: array<vec4<f32>>;

struct Q8K {
    d: f32,
    sum: i32,
    bs: array<vec4<f32>, 4>,
}

alias ABlock = Q8K;

fn load_a(col: u32, b: u32) -> Q8K {
    let i = (col * pc.nb + b) * 5u;
    let h = act_meta[i];
    return Q8K(h.x, i32(h.y), array<vec4<f32>, 4>(
        act_meta[i + 1u], act_meta[i + 2u], act_meta[i + 3u], act_meta[i + 4u]));
}

// Activation words (vec4 = 16 elements) v (< 16) of block b of column col.
fn q8k_words(col: u32, b: u32, v: u32) -> vec4<u32> {
    return act_q[(col * pc.nb + b) * 16u + v];
}

// bsum g (< 16) of a block.
fn q8k_bsum(a: Q8K, g: u32) -> i32 {
    return i32(a.bs[g / 4u][g % 4u]);
}

fn row_factor(row: u32) -> f32 {
    return 1.0;
}

// Nothing to prepare: the activations were quantized by their own dispatch.
fn prepare_act(lid: u32) {}

// Nothing to stage: the kernel reads its activations where they are.
fn stage_act(lid: u32, b0: u32) {}
