// PTQ1_0 weights x Q8_0 activations (Prism). Device layout (repack.rs): codes = the block's 24
// qs bytes as three vec2 (canonical order); w_scales = one word per block: d (f16, low half),
// qh[0] (bits 16..23), qh[1] (bits 24..31). Digit n of a byte is ((byte * 3^n) & 0xFF) * 3 >> 8
// (0..2, weight = (digit - 1) * d); qs[m] (m < 16) holds elements m + 16n, qs[16 + m] (m < 8)
// elements 80 + m + 8n, qh[h] elements 120 + h + 2n (n < 4). Per activation block k:
// isum_k = sum(digit * q) - sum(q) (exact); term = d_w * sum_k(d_a_k * isum_k).
@group(0) @binding(0) var<storage, read> w_codes: array<vec2<u32>>;

const PREFETCH = true;

// One column: decode every block of a step first (mm_body.wgsl; decoding at use measured
// 0-4% slower for this format on an H200, docs/BENCHMARKS.md session 8).
const DECODE_AT_USE = false;

const APB = 4u;

struct WBlock {
    q0: vec2<u32>, // qs[0..8]
    q1: vec2<u32>, // qs[8..16]
    q2: vec2<u32>, // qs[16..24]
    h: u32,        // d | qh[0] << 16 | qh[1] << 24
}

alias WRaw = WBlock;

fn fetch_w(wi: u32) -> WBlock {
    return WBlock(w_codes[3u * wi], w_codes[3u * wi + 1u], w_codes[3u * wi + 2u], w_scales[wi]);
}

fn decode_w(raw: WBlock, wi: u32) -> WBlock {
    return raw;
}

alias ABlock = array<Q8, 4>;

fn load_a(col: u32, b: u32) -> ABlock {
    return ABlock(q8_block(col, b, 0u), q8_block(col, b, 1u), q8_block(col, b, 2u),
        q8_block(col, b, 3u));
}

// Digit (3^n = p) of each of the four bytes of w, as bytes; bytes 0, 2 and 1, 3 go through
// 16-bit lanes (byte * 81 < 2^16), so no product crosses a lane.
fn digits(w: u32, p: u32) -> u32 {
    let lane = vec2<u32>(w, w >> 8u) & vec2<u32>(0x00FF00FFu);
    let t = (lane * p) & vec2<u32>(0x00FF00FFu);
    let d = ((t * 3u) >> vec2<u32>(8u)) & vec2<u32>(0x00FF00FFu);
    return d.x | (d.y << 8u);
}

fn digits4(w: vec4<u32>, p: u32) -> vec4<u32> {
    return vec4<u32>(digits(w.x, p), digits(w.y, p), digits(w.z, p), digits(w.w, p));
}

// Digit n of a single byte.
fn digit1(byte: u32, p: u32) -> u32 {
    return ((((byte * p) & 0xFFu) * 3u) >> 8u);
}

fn ptq_part(lo: vec4<u32>, hi: vec4<u32>, a: Q8) -> f32 {
    return a.m.x * i2f_minus(dot16(lo, a.lo) + dot16(hi, a.hi), a.m.y);
}

fn block_dot(w: WBlock, a: ABlock, wi: u32, col: u32, b: u32) -> f32 {
    let q = vec4<u32>(w.q0, w.q1); // qs[0..16]
    let e = w.q2;                  // qs[16..24]
    let h0 = (w.h >> 16u) & 0xFFu;
    let h1 = w.h >> 24u;
    // Elements 120..127: qh[i % 2], digit i / 2.
    let t0 = digit1(h0, 1u) | (digit1(h1, 1u) << 8u) | (digit1(h0, 3u) << 16u)
        | (digit1(h1, 3u) << 24u);
    let t1 = digit1(h0, 9u) | (digit1(h1, 9u) << 8u) | (digit1(h0, 27u) << 16u)
        | (digit1(h1, 27u) << 24u);
    var s = ptq_part(digits4(q, 1u), digits4(q, 3u), a[0]);
    s += ptq_part(digits4(q, 9u), digits4(q, 27u), a[1]);
    s += ptq_part(digits4(q, 81u),
        vec4<u32>(digits(e.x, 1u), digits(e.y, 1u), digits(e.x, 3u), digits(e.y, 3u)), a[2]);
    s += ptq_part(vec4<u32>(digits(e.x, 9u), digits(e.y, 9u), digits(e.x, 27u), digits(e.y, 27u)),
        vec4<u32>(digits(e.x, 81u), digits(e.y, 81u), t0, t1), a[3]);
    return f16_of(w.h, 0u) * s;
}
