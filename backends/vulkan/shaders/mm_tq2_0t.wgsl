// TQ2_0 weights x Q8_K activations, tiled 8-column kernel (mm_tile.wgsl + act_q8kt.wgsl; the
// other variants are mm_tq2_0.wgsl's, whose comment has the device layout and arithmetic).
// Units are 64-element quarters of a block: unit p is code vec4 p of the block (bytes
// 16p..16p+15), whose bit pair l holds elements 128 (p / 2) + 32 l + 16 (p % 2) + 0..15, i.e.
// activation group 8 (p / 2) + 2 l + p % 2. Per unit: isum = sum(code * q_a) - sum(q_a)
// (exact), term = isum * (d_a * d); the 2-bit fields are extracted once for all columns.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

// The activation group (of 16) that bit pair k of unit p (< 4) of a block multiplies.
fn unit_group(p: u32, k: u32) -> u32 {
    return 8u * (p / 2u) + 2u * k + p % 2u;
}

struct WRaw {
    q: vec4<u32>,
    s: u32, // the scale word (this block's f16 and its neighbour's)
}

// wu = row * units + unit: code vec4 wu (four a block, in unit order).
fn fetch_w(wu: u32) -> WRaw {
    return WRaw(w_codes[wu], w_scales[wu >> 3u]);
}

struct WBlock {
    q: array<vec4<u32>, 4>, // bit pair k of every byte, as bytes 0..2
    d: f32,
}

fn decode_w(raw: WRaw, wu: u32) -> WBlock {
    let t = vec4<u32>(0x03030303u);
    return WBlock(array<vec4<u32>, 4>(raw.q & t, (raw.q >> vec4<u32>(2u)) & t,
        (raw.q >> vec4<u32>(4u)) & t, (raw.q >> vec4<u32>(6u)) & t), f16_of(raw.s, wu >> 2u));
}

// |isum| <= 64 * 2 * 128 < 2^22: i2f is exact.
fn block_dot(w: WBlock, a: Q8U, wu: u32, col: u32, u: u32) -> f32 {
    let isum = dot16(w.q[0], a.q[0]) + dot16(w.q[1], a.q[1]) + dot16(w.q[2], a.q[2])
        + dot16(w.q[3], a.q[3]) - i32(a.ds.y);
    return i2f(isum) * (a.ds.x * w.d);
}
