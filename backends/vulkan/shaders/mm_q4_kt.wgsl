// Q4_K weights x Q8_K activations, tiled 8-column kernel (mm_tile.wgsl + act_q8kt.wgsl; the
// other variants are mm_q4_k.wgsl's, whose comment has the device layout and arithmetic).
// Units are 64-element quarters of a block: unit c is qs vec4s 2c and 2c + 1 (sub-block 2c in
// the low nibbles, 2c + 1 in the high ones), activation groups 4c..4c + 3. Per unit:
// isum = sc_2c * sum(q * q_a) + sc_2c+1 * (...), msum = m_2c * (bsum of 2c) + m_2c+1 * (...)
// (exact), term = (d_a * d) * isum - (d_a * dmin) * msum; the nibbles, scales and mins are
// decoded once for all columns.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

// The activation group (of 16) that word k of unit c (< 4) of a block multiplies.
fn unit_group(c: u32, k: u32) -> u32 {
    return 4u * c + k;
}

struct WRaw {
    h: vec4<u32>, // d | dmin << 16, the 12 scale bytes
    q0: vec4<u32>,
    q1: vec4<u32>,
}

// wu = row * units + unit (four a block).
fn fetch_w(wu: u32) -> WRaw {
    let w = 9u * (wu >> 2u);
    let c = wu & 3u;
    return WRaw(w_codes[w], w_codes[w + 1u + 2u * c], w_codes[w + 2u + 2u * c]);
}

struct WBlock {
    q: array<vec4<u32>, 4>, // nibbles of groups 4c..4c + 3
    sc: vec2<i32>,          // scales of sub-blocks 2c, 2c + 1
    mn: vec2<f32>,          // their mins
    d: f32,
    dmin: f32,
}

fn decode_w(raw: WRaw, wu: u32) -> WBlock {
    let m = vec4<u32>(0x0F0F0F0Fu);
    let c = wu & 3u;
    let s0 = k4_scale_min(raw.h, 2u * c);
    let s1 = k4_scale_min(raw.h, 2u * c + 1u);
    return WBlock(array<vec4<u32>, 4>(raw.q0 & m, raw.q1 & m, (raw.q0 >> vec4<u32>(4u)) & m,
        (raw.q1 >> vec4<u32>(4u)) & m), vec2<i32>(s0.x, s1.x), vec2<f32>(f32(s0.y), f32(s1.y)),
        f16_of(raw.h.x, 0u), f16_of(raw.h.x, 1u));
}

// |isum| <= 2 * 63 * 32 * 15 * 128 < 2^24 and |msum| <= 2 * 63 * 32 * 128 < 2^24: both exact
// in f32 (so is the f32 msum: products and sums of integers below 2^24).
fn block_dot(w: WBlock, a: Q8U, wu: u32, col: u32, u: u32) -> f32 {
    let lo = dot16(w.q[0], a.q[0]) + dot16(w.q[1], a.q[1]);
    let hi = dot16(w.q[2], a.q[2]) + dot16(w.q[3], a.q[3]);
    let isum = w.sc.x * lo + w.sc.y * hi;
    let msum = w.mn.x * (a.bs.x + a.bs.y) + w.mn.y * (a.bs.z + a.bs.w);
    return (a.ds.x * w.d) * f32(isum) - (a.ds.x * w.dmin) * msum;
}
