// Q6_K weights x Q8_K activations, tiled 8-column kernel (mm_tile.wgsl + act_q8kt.wgsl; the
// other variants are mm_q6_k.wgsl's, whose comment has the device layout and arithmetic).
// Units are 64-element quarters of a block: unit u = 2n + i is, for k = 0..3, elements
// 128n + 32k + 16i + 0..15 (activation group 8n + 2k + i): ql vec4s 4n + i (k = 0, 2) and
// 4n + 2 + i (k = 1, 3), qh vec4 8 + 2n + i, scales 8n + i + 2k. The 6-bit codes q are
// decoded once for all columns to the int8 q - 32 (q ^ 32 is q - 32 in 6-bit two's
// complement; its bit 5 is copied to bits 6 and 7), so per unit and column
// isum = sum_k scale_k * sum((q - 32) * q_a) (exact, no group sums) and term = (d_a * d) * isum.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

// The activation group (of 16) that word k of unit u (< 4) of a block multiplies.
fn unit_group(u: u32, k: u32) -> u32 {
    return 8u * (u / 2u) + 2u * k + u % 2u;
}

struct WRaw {
    wl: vec4<u32>,
    w2: vec4<u32>,
    h: vec4<u32>,
    sc: vec4<u32>,
    s: u32, // the scale word (this block's f16 and its neighbour's)
}

// wu = row * units + unit (four a block).
fn fetch_w(wu: u32) -> WRaw {
    let wi = wu >> 2u;
    let w = 13u * wi;
    let n = (wu >> 1u) & 1u;
    let i = wu & 1u;
    return WRaw(w_codes[w + 4u * n + i], w_codes[w + 4u * n + 2u + i],
        w_codes[w + 8u + 2u * n + i], w_codes[w + 12u], w_scales[wi >> 1u]);
}

struct WBlock {
    q: array<vec4<u32>, 4>, // q - 32 as int8, k = 0..3
    sc: vec4<i32>,          // scales of k = 0..3
    d: f32,
}

// The signed scale g (< 16).
fn q6t_scale(sc: vec4<u32>, g: u32) -> i32 {
    return (i32(sc[g / 4u] << (24u - 8u * (g % 4u)))) >> 24u;
}

// Bytes of 6-bit codes q (0..63) to the int8 q - 32.
fn q6t_centre(q: vec4<u32>) -> vec4<u32> {
    let x = q ^ vec4<u32>(0x20202020u);
    let s = x & vec4<u32>(0x20202020u);
    return x | (s << vec4<u32>(1u)) | (s << vec4<u32>(2u));
}

fn decode_w(raw: WRaw, wu: u32) -> WBlock {
    let f = vec4<u32>(0x0F0F0F0Fu);
    let t = vec4<u32>(0x03030303u);
    let g = 8u * ((wu >> 1u) & 1u) + (wu & 1u);
    let s4 = vec4<u32>(4u);
    let q = array<vec4<u32>, 4>(
        q6t_centre((raw.wl & f) | ((raw.h & t) << s4)),
        q6t_centre((raw.w2 & f) | (((raw.h >> vec4<u32>(2u)) & t) << s4)),
        q6t_centre(((raw.wl >> s4) & f) | (((raw.h >> s4) & t) << s4)),
        q6t_centre(((raw.w2 >> s4) & f) | (((raw.h >> vec4<u32>(6u)) & t) << s4)));
    let sc = vec4<i32>(q6t_scale(raw.sc, g), q6t_scale(raw.sc, g + 2u),
        q6t_scale(raw.sc, g + 4u), q6t_scale(raw.sc, g + 6u));
    return WBlock(q, sc, f16_of(raw.s, wu >> 2u));
}

// |isum| <= 4 * 128 * 16 * 32 * 128 < 2^25: f32(isum) is within half an ulp of it.
fn block_dot(w: WBlock, a: Q8U, wu: u32, col: u32, u: u32) -> f32 {
    let isum = w.sc.x * dot16(w.q[0], a.q[0]) + w.sc.y * dot16(w.q[1], a.q[1])
        + w.sc.z * dot16(w.q[2], a.q[2]) + w.sc.w * dot16(w.q[3], a.q[3]);
    return (a.ds.x * w.d) * f32(isum);
}
