// common.wgsl: declarations shared by every kernel; build.rs appends this file to each shader.
// What lives here: the push-constant block, bindings every matmul uses, and pure helper
// functions (integer dot products, scale decoders, exact division and rounding). No entry
// points.

// Push constants of every matmul dispatch (one per weight segment).
struct MatmulParams {
    rows: u32,      // rows of this segment
    nb: u32,        // blocks per row
    n: u32,         // activation columns of this dispatch (1..=NCOLS)
    y_off: u32,     // first output row of this segment
    y_stride: u32,  // output rows of the whole matrix (column stride of y)
    act_col: u32,   // first activation column of this dispatch
    scale_off: u32, // word offset of per-row data inside w_scales (formats that have it)
    wg_x: u32,      // workgroups along x (dispatches wider than the limit fold into y)
}

var<push_constant> pc: MatmulParams;

// Threads of the workgroup, threads that share one row, rows each thread accumulates,
// consecutive blocks each thread loads per step, and activation columns per dispatch:
// resolved by build.rs per variant (RPT * NCOLS <= 64, BPT * RPT <= 8).
override WG: u32 = 256u;
override TPR: u32 = 32u;
override RPT: u32 = 1u;
override BPT: u32 = 1u;
override NCOLS: u32 = 1u;

// The reduction buffer: 256 * RED_PASS partial sums (workgroups of 256), used in passes of
// RED_PASS outputs per thread. build.rs defines RED_PASS: 16, or 8 for the fused kernels (so
// that their workgroup memory, with act_q8f.wgsl's, stays within 32 KiB). Fewer passes are
// faster where 32 threads share a row (one reduction per pass).
var<workgroup> red: array<f32, 256u * RED_PASS>;

// Linear workgroup index of a dispatch folded into x and y.
fn wg_linear(wgid: vec3<u32>) -> u32 {
    return wgid.x + wgid.y * pc.wg_x;
}

// Sum of the four int8 x int8 products of two packed words, 4 times.
fn dot16(w: vec4<u32>, a: vec4<u32>) -> i32 {
    return dot4I8Packed(w.x, a.x) + dot4I8Packed(w.y, a.y) + dot4I8Packed(w.z, a.z)
        + dot4I8Packed(w.w, a.w);
}

// The f16 at half-word index i of a u32 array read as f16 pairs (little-endian). Finite
// values only (upload rejects NaN and infinite scales); exact. The magnitude bits shifted into
// f32 position with the exponent rebased (+112) are the value of a normal half; for a
// subnormal one (exponent 0) that reads 2^-15 (1 + m/1024), and the value m 2^-24 is twice
// it minus 2^-14 (exact: every step is representable).
fn f16_of(word: u32, i: u32) -> f32 {
    let h = (word >> ((i & 1u) * 16u)) & 0xFFFFu;
    let v = bitcast<f32>(((h & 0x7FFFu) << 13u) + 0x38000000u);
    let mag = select(v * 2.0 - 0.00006103515625, v, (h & 0x7C00u) != 0u);
    return bitcast<f32>(bitcast<u32>(mag) | ((h & 0x8000u) << 16u));
}

// UE4M3 with exponent bias 8 (ROCmFPX scales): 4 exponent bits, 3 mantissa bits, no sign;
// exponent 0 is subnormal (m/8 * 2^-7). The caller has validated the byte (< 0x7F) at upload.
// As in f16_of: the bits rebased (+119) are the normal value; a subnormal one is twice the
// exponent-0 reading minus 2^-7 (exact).
fn ue4m3_b8(b: u32) -> f32 {
    let v = bitcast<f32>((b << 20u) + 0x3B800000u);
    return select(v * 2.0 - 0.0078125, v, b >= 8u);
}

// Both UE4M3-b8 bytes of the low 16 bits of e (validated < 0x7F), divided by 128, in one
// conversion: byte b shifted to f16 bits 13..7 puts its 4 exponent bits in the low exponent
// bits of an f16 and its 3 mantissa bits at the top of the mantissa, which reads as
// 2^(e - 15) (1 + m/8) (e = 0: the subnormal 2^-14 m/8), exactly 2^-7 times ue4m3_b8(b).
fn ue4m3_b8_pair_div128(e: u32) -> vec2<f32> {
    return unpack2x16float(((e << 7u) & 0x7F80u) | ((e << 15u) & 0x7F800000u));
}

// f32(x) for |x| < 2^22 without a conversion instruction (those run at a quarter of the
// integer rate): the bits of 1.5 * 2^23 + x, minus 1.5 * 2^23 (exact).
fn i2f(x: i32) -> f32 {
    return bitcast<f32>(x + 0x4B400000) - 12582912.0;
}

// i2f(x) - c for |x| < 2^22 and an integer-valued c with |c| < 2^22 (exact), in one
// subtraction.
fn i2f_minus(x: i32, c: f32) -> f32 {
    return bitcast<f32>(x + 0x4B400000) - (12582912.0 + c);
}

// a / b correctly rounded (nearest, ties to even) for positive normal a, b with a quotient
// that is normal or overflows (+inf): a restoring division of the 24-bit significands. GPU division is not correctly
// rounded (Vulkan allows 2.5 ulp), and the activation bytes must equal the core encoder's.
fn div_rne(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    var e = i32(ua >> 23u) - i32(ub >> 23u) + 127;
    var r = (ua & 0x7FFFFFu) | 0x800000u;
    let mb = (ub & 0x7FFFFFu) | 0x800000u;
    if (r < mb) {
        r = r << 1u;
        e = e - 1;
    }
    var q = 0u;
    for (var i = 0u; i < 25u; i++) {
        q = q << 1u;
        if (r >= mb) {
            r = r - mb;
            q = q | 1u;
        }
        r = r << 1u;
    }
    let round_bit = q & 1u;
    q = q >> 1u;
    if (round_bit == 1u && (r != 0u || (q & 1u) == 1u)) {
        q = q + 1u;
    }
    if (q == 0x1000000u) {
        q = q >> 1u;
        e = e + 1;
    }
    if (e > 254) {
        return bitcast<f32>(0x7F800000u); // overflow: +inf, as IEEE division rounds it
    }
    return bitcast<f32>((u32(e) << 23u) | (q & 0x7FFFFFu));
}

// The f32 value of x rounded to f16 (nearest, ties to even), for finite x >= 0 below f16's
// overflow threshold (the host rejects larger scales first). Integer arithmetic only.
fn f16_round(x: f32) -> f32 {
    let u = bitcast<u32>(x);
    let e = i32(u >> 23u) - 127;
    if (e < -25 || u == 0u) {
        return 0.0;
    }
    let ulp_e = max(e - 10, -24);
    let m = (u & 0x7FFFFFu) | 0x800000u;
    let shift = u32(ulp_e - (e - 23));
    var q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u) == 1u)) {
        q = q + 1u;
    }
    return ldexp(f32(q), ulp_e);
}

// C's roundf (half away from zero) for |v| < 2^23.
fn round_away(v: f32) -> i32 {
    let t = trunc(v);
    let f = v - t;
    return i32(t) + select(0, 1, f >= 0.5) - select(0, 1, f <= -0.5);
}

// Sums each output's TPR partials (this thread's RPT x NCOLS sums, in passes of RED_PASS per
// thread) and stores the results of this workgroup's rows. Every thread of the workgroup
// must call it.
fn reduce_store(lid: u32, wgl: u32, acc: ptr<function, array<f32, 64>>) {
    let teams = WG / TPR;
    let team = lid / TPR;
    let t = lid % TPR;
    let per = RPT * NCOLS;
    let pass_outs = min(per, RED_PASS);
    let outs = teams * pass_outs;
    for (var p0 = 0u; p0 < per; p0 += RED_PASS) {
        for (var i = 0u; i < pass_outs; i++) {
            red[t * outs + team * pass_outs + i] = (*acc)[p0 + i];
        }
        workgroupBarrier();
        for (var o = lid; o < outs; o += WG) {
            var s = 0.0;
            for (var i = 0u; i < TPR; i++) {
                s += red[i * outs + o];
            }
            // o = team * pass_outs + i, accumulator p0 + i = r * NCOLS + c.
            let a = p0 + o % pass_outs;
            let c = a % NCOLS;
            let row = (wgl * teams + o / pass_outs) * RPT + a / NCOLS;
            if (row < pc.rows && c < pc.n) {
                y[(pc.act_col + c) * pc.y_stride + pc.y_off + row] = s;
            }
        }
        workgroupBarrier();
    }
}

// The 2-bit fields of a device "crumb word" (16 elements, element 4j+L at bits 8L+2j; see
// repack.rs): component j holds elements 4j..4j+3 as four bytes 0..3.
fn crumbs(w: u32) -> vec4<u32> {
    return vec4<u32>(w, w >> 2u, w >> 4u, w >> 6u) & vec4<u32>(0x03030303u);
}

// E2M1 codes, eight nibbles a word, to ggml's doubled values kvalues_mxfp4 = 2 * E2M1 (0, 1,
// 2, 3, 4, 6, 8, 12, negated for codes 9..15) as signed bytes: `lo` from the low nibbles
// (component t: byte L = low nibble of byte L of x[t]), `hi` from the high ones. Code 8 (-0)
// must not occur: upload rewrites it to code 0 (both read as +0). The magnitude is formed for
// eight codes per operation while still in nibbles: with m = code & 7 and its bits m2 m1 m0,
// value = m + m2 ((m & 3) + 2 m1 m0) (<= 12, no carry between nibbles). Then the nibbles are
// spread into bytes and negated where the sign bit is set: (v ^ 0xFF) + 1 only on bytes with
// v >= 1, so no carry crosses a byte.
struct KvBytes {
    lo: vec4<u32>,
    hi: vec4<u32>,
}

fn kv_nibbles(x: vec4<u32>) -> KvBytes {
    let ones = vec4<u32>(0x11111111u);
    let m = x & vec4<u32>(0x77777777u);
    let m2 = (x >> vec4<u32>(2u)) & ones;
    let m10 = (x >> vec4<u32>(1u)) & x & ones;
    let extra = (x & vec4<u32>(0x33333333u)) + (m10 << vec4<u32>(1u));
    let v = m + (extra & (m2 * 15u));
    let s = (x >> vec4<u32>(3u)) & ones;
    let lo = v & vec4<u32>(0x0F0F0F0Fu);
    let hi = (v >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
    let slo = s & vec4<u32>(0x0F0F0F0Fu);
    let shi = (s >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
    return KvBytes((lo ^ (slo * 0xFFu)) + slo, (hi ^ (shi * 0xFFu)) + shi);
}

// UE8M0 halved (ggml_e8m0_to_fp32_half): 2^(e - 128), exact (e = 0, 1: f32 subnormals).
fn e8m0_half(e: u32) -> f32 {
    return select(bitcast<f32>((e - 1u) << 23u), bitcast<f32>(0x00400000u >> (1u - e)), e < 2u);
}
