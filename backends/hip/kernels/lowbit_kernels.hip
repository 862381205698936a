// lowbit_kernels.hip: every lowbit GPU kernel (activation quantization, the bandwidth probe,
// and the matrix-vector products of each weight format), written once against lowbit_hip.h.
//
// Device layout (made by the host's repack, backends/hip/src/layout.rs, which has the table):
// every format is cut into units of 32 weights, and each matrix split into planes so that
// every load is aligned and coalesced:
//   q  : the code bytes of every unit, row after row (16 B per Q4_0 unit, 8 B per ROCmFP2 ...)
//   s  : per-unit scale bytes (f16 d, UE4M3-b8 pairs, ...; may be empty)
//   g  : per group of units (the f16 d of a PQ2_0 / TQ2_0 / K-quant block, ...)
//   r  : per-row values (the HFP4 family's f16 row scale), else unused
// Activations: Q8_0 / Q8_1 / Q8_K quants with one f32 scale and one extra word per unit
// (lb_quantize_q8, lb_quantize_q8k), or f32 (HFP4 family, rotated first for MFP4).
//
// Work shapes: each warp (wavefront) owns R rows; each lane walks the row's units with a
// stride of LB_WARP, decodes a unit once and applies it to NC activation columns (NC = 1 for
// n = 1, where a lane keeps U units of loads in flight; 2, 4, 8 or 16 for n = 2..16, activations
// staged in shared memory); larger n runs in tiles of 16 columns (grid y). Rows are
// grid-strided, so a launch is correct for any warp width. On NVIDIA, tiles of 8 and 16 also
// have tensor-core kernels (lb_mvq in lowbit_mma.h).
//
// What must not live here: host logic, format validation (the host validates on upload).
#include "lowbit_hip.h"

#ifndef LB_BLOCK
#define LB_BLOCK 256
#endif
#define LB_ROWS_PER_CTA (LB_BLOCK / LB_WARP)

// ------------------------------------------------------------------ activations --------------
// Quantized activations, per column of nu units of 32: quants aq (the first 16 of every unit,
// 16 B each in unit order, then the last 16 of every unit, so a warp's 16-byte loads are
// contiguous), one f32 scale ad per unit and one extra word ae per unit (Q8_1: f32 of the f16
// `s`; Q8_K: the two 16-element quant sums as i16 halves). With `order` = 1 each half is stored
// in lb_codebook16 order (ROCmFP2's kernels and the 2-bit tensor-core ones), with `order` = 2
// transposed (word g of a half, byte k = element 4k + g: the ternary dp4a kernels, DecTern;
// Q8_0 then also stores the unit's integer quant sum as its extra word), else in element order.

// The preparation kernels and the bandwidth probe: the base module (-DLB_SELECT -DLB_BASE).
#if !defined(LB_SELECT) || defined(LB_BASE)
LB_DEV void lb_store_quant(lb_i8* aq, lb_u64 i, lb_u32 nu, lb_u32 order, lb_i8 q) {
    lb_u64 k = (lb_u64)nu * 32, col = i / k, w = i % k, b = w >> 5, j = w & 31u;
    lb_u64 e = j & 15u;
    lb_u64 p = order == 1 ? (lb_u64)lb_codebook4_pos((int)e) : order == 2 ? 4 * (e & 3) + (e >> 2) : e;
    aq[col * k + (j >> 4) * (nu * 16ull) + b * 16 + p] = q;
}

// x (total f32, total % 32 == 0) -> Q8_0 (q81 = 0) or Q8_1 (q81 = 1), bit-exact with ggml's
// quantize_row_q8_{0,1}_ref: d = amax/127, id = d ? 1/d : 0, q = roundf(x*id); Q8_1 also
// s = f16((float)sum(q) * d) with the f32 d. One thread per element; 32 lanes per unit.
LB_KERNEL void lb_quantize_q8(const float* x, lb_i8* aq, float* ad, lb_u32* ae, lb_u32 total,
                              lb_u32 nu, lb_u32 order, lb_u32 q81) {
    lb_grid_launch_dependents();  // the matvec may start (its weight loads need no x)
    lb_u64 i = (lb_u64)lb_bid_x() * LB_BLOCK + lb_tid();
    float v = i < total ? x[i] : 0.0f;
    float amax = lb_max32(lb_fabsf(v));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    // C's (int) on x86-64 (ggml, and the core's c_f32_to_i32): NaN and out-of-range give
    // INT_MIN, whose low byte is 0 (an f32-subnormal block: 1/d overflows to inf).
    float rq = lb_roundf(v * id);
    lb_i32 q = (lb_i8)(lb_fabsf(rq) < 2147483648.0f ? (lb_i32)rq : (lb_i32)0x80000000u);
    float sum = q81 || order == 2 ? lb_shfl_xor(lb_sum16((float)q), 16) + lb_sum16((float)q) : 0.0f;
    if (i < total) {
        lb_store_quant(aq, i, nu, order, (lb_i8)q);
        if ((i & 31u) == 0) {
            ad[i >> 5] = lb_f16_to_f32(lb_f32_to_f16(d));
            if (q81) ae[i >> 5] = lb_as_u32(lb_f16_to_f32(lb_f32_to_f16(sum * d)));
            else if (order == 2) ae[i >> 5] = (lb_u32)(lb_i32)sum;  // DecTern's sum(a), exact
        }
    }
}

// x (total % 256 == 0) -> Q8_K, bit-exact with ggml's quantize_row_q8_K_ref (core q8_k.rs):
// max = the signed value of the first element with the largest |x|; iscale = -127/max;
// q = min(127, nearest_int(iscale*x)) (ties to even); d = 1/iscale; an all-zero block gives
// d = 0, q = 0; an iscale that overflows gives q = 0 and d = 1/iscale (as ggml's bit trick
// does). One 256-thread block per Q8_K block. ad gets d for each of the block's eight units, ae
// the two 16-element sums of each unit.
LB_KERNEL void lb_quantize_q8k(const float* x, lb_i8* aq, float* ad, lb_u32* ae, lb_u32 nu,
                               lb_u32 order) {
    lb_grid_launch_dependents();  // the matvec may start (its weight loads need no x)
    LB_SHARED float mag[256];
    LB_SHARED lb_u32 at[256];
    lb_u32 t = lb_tid();
    lb_u64 i = (lb_u64)lb_bid_x() * 256 + t;
    float v = x[i];
    mag[t] = lb_fabsf(v);
    at[t] = t;
    for (lb_u32 h = 128; h > 0; h >>= 1) {
        lb_barrier();
        if (t < h) {
            float a = mag[t], b = mag[t + h];
            if (b > a || (b == a && at[t + h] < at[t])) {
                mag[t] = b;
                at[t] = at[t + h];
            }
        }
    }
    lb_barrier();
    float amax = mag[0];
    float mx = x[(lb_u64)lb_bid_x() * 256 + at[0]];
    float iscale = -127.0f / mx;
    bool finite = lb_fabsf(iscale) <= 3.4028235e38f;
    lb_i32 q = 0;
    if (amax != 0.0f && finite) {
        q = (lb_i32)lb_rintf(iscale * v);
        q = q < 127 ? q : 127;
    }
    float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    float s16 = lb_sum16((float)q);
    float s16b = lb_shfl_xor(s16, 16);
    lb_store_quant(aq, i, nu, order, (lb_i8)q);
    if ((t & 31u) == 0) {
        ad[i >> 5] = d;
        ae[i >> 5] = ((lb_u32)(lb_i32)s16 & 0xffffu) | ((lb_u32)(lb_i32)s16b << 16);
    }
}

// FWHT-256 with hipfire's seeded signs, in place on x (one 256-segment per 256 threads):
// x *= s1; butterflies with strides 1..128 (a+b, a-b); x *= 0.0625 * s2. The sign vectors are
// passed bit-packed (8 words each, LSB first, 1 = +1).
LB_KERNEL void lb_fwht256(float* x, const lb_u32* signs, lb_u32 segments) {
    lb_grid_launch_dependents();  // the matvec may start (its weight loads need no x)
    LB_SHARED float buf[256];
    lb_u32 seg = lb_bid_x();
    if (seg >= segments) return;
    lb_u32 t = lb_tid();
    float* p = x + (lb_u64)seg * 256;
    float v = p[t];
    if (!((signs[t >> 5] >> (t & 31u)) & 1u)) v = -v;
    buf[t] = v;
    for (lb_u32 h = 1; h < 256; h <<= 1) {
        lb_barrier();
        float a = buf[t & ~h], b = buf[t | h];
        v = (t & h) ? a - b : a + b;
        lb_barrier();
        buf[t] = v;
    }
    v *= 0.0625f;
    if (!((signs[8 + (t >> 5)] >> (t & 31u)) & 1u)) v = -v;
    p[t] = v;
}

// f32 activations (columns of nb blocks) reordered so that float4 number i (0..7) of every
// block is contiguous: xt[col*K + (i*nb + b)*4 + j] = x[col*K + b*32 + 4i + j]. One thread per
// float4.
LB_KERNEL void lb_interleave_f32(const float* x, float* xt, lb_u32 total4, lb_u32 nb) {
    lb_grid_launch_dependents();  // the matvec may start (its weight loads need no x)
    lb_u64 t = (lb_u64)lb_bid_x() * LB_BLOCK + lb_tid();
    if (t >= total4) return;
    lb_u64 per = (lb_u64)nb * 8, col = t / per, w = t % per, b = w >> 3, i = w & 7u;
    ((lb_f32x4*)xt)[col * per + i * nb + b] = ((const lb_f32x4*)x)[t];
}

// Reads n16 16-byte words; the bandwidth ceiling the matvec kernels are compared with.
LB_KERNEL void lb_read(const lb_u32* p, lb_u64 n16, lb_u32* sink) {
    lb_u64 stride = (lb_u64)lb_grid_x() * LB_BLOCK;
    lb_u32 acc = 0;
    for (lb_u64 i = (lb_u64)lb_bid_x() * LB_BLOCK + lb_tid(); i < n16; i += stride) {
        const lb_u32* q = p + i * 4;
        acc ^= q[0] ^ q[1] ^ q[2] ^ q[3];
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;  // keeps the loads alive
}
#endif  // LB_BASE

// ------------------------------------------------------------------ activations in registers -
// The activations of one unit (32 elements) of one column, loaded from global memory (`load`)
// or from the block's shared-memory stage (`Stage<NC>::get`).

// Pointers to a call's prepared activations: Q8 quants, per-unit scales and extra words, or
// (f32 formats) the interleaved f32 activations in x.
struct ActPtrs {
    const lb_i8* aq;
    const float* ad;
    const lb_u32* ae;
    const float* x;
};

// Quantized activations (Q8_0, Q8_1 or Q8_K): 32 quants as 8 words (halves as stored), the
// unit's f32 scale d and its extra word e (see lb_quantize_q8 / lb_quantize_q8k).
struct ActQ8 {
    lb_i32 a[8];
    float d;
    lb_u32 e;
    LB_DEVM void load(const ActPtrs& p, lb_u64 col, lb_u32 b, lb_u32 nu) {
        const lb_i8* base = p.aq + col * nu * 32;
        lb_i32x4 u = *(const lb_i32x4*)(base + b * 16ull);
        lb_i32x4 v = *(const lb_i32x4*)(base + (lb_u64)(nu + b) * 16);
        set(u, v, p.ad[col * nu + b], p.ae[col * nu + b]);
    }
    LB_DEVM void set(lb_i32x4 u, lb_i32x4 v, float d_, lb_u32 e_) {
        a[0] = u.x; a[1] = u.y; a[2] = u.z; a[3] = u.w;
        a[4] = v.x; a[5] = v.y; a[6] = v.z; a[7] = v.w;
        d = d_;
        e = e_;
    }
};

// The Q8 activations of LB_WARP consecutive units for NC columns (one unit per lane).
template <int NC>
struct StageQ8 {
    lb_i32x4 q[2][NC][LB_WARP];
    float d[NC][LB_WARP];
    lb_u32 e[NC][LB_WARP];
    // Every thread of the block takes part: units c0 .. c0 + LB_WARP - 1 of columns col0 ..
    LB_DEVM void fill(const ActPtrs& p, lb_u32 col0, lb_u32 nc, lb_u32 c0, lb_u32 nu) {
        for (lb_u32 i = lb_tid(); i < 2u * NC * LB_WARP; i += LB_BLOCK) {
            lb_u32 h = i / (NC * LB_WARP), c = (i / LB_WARP) % NC, l = i % LB_WARP, b = c0 + l;
            if (c < nc && b < nu) {
                lb_u64 col = col0 + c;
                q[h][c][l] = *(const lb_i32x4*)(p.aq + col * nu * 32 + (lb_u64)(h * nu + b) * 16);
                if (h == 0) {
                    d[c][l] = p.ad[col * nu + b];
                    e[c][l] = p.ae[col * nu + b];
                }
            }
        }
    }
    LB_DEVM void get(ActQ8& a, int c, lb_u32 lane) const { a.set(q[0][c][lane], q[1][c][lane], d[c][lane], e[c][lane]); }
};

// 32 f32 activations of one unit, from the interleaved layout of lb_interleave_f32.
struct ActF32 {
    float x[32];
    LB_DEVM void set(int i, lb_f32x4 v) {
        x[4 * i] = v.x; x[4 * i + 1] = v.y; x[4 * i + 2] = v.z; x[4 * i + 3] = v.w;
    }
    LB_DEVM void load(const ActPtrs& p, lb_u64 col, lb_u32 b, lb_u32 nu) {
        const lb_f32x4* q = (const lb_f32x4*)(p.x + col * nu * 32);
#pragma unroll
        for (int i = 0; i < 8; i++) set(i, q[(lb_u64)i * nu + b]);
    }
};

template <int NC>
struct StageF32 {
    lb_f32x4 x[8][NC][LB_WARP];
    LB_DEVM void fill(const ActPtrs& p, lb_u32 col0, lb_u32 nc, lb_u32 c0, lb_u32 nu) {
        for (lb_u32 i = lb_tid(); i < 8u * NC * LB_WARP; i += LB_BLOCK) {
            lb_u32 k = i / (NC * LB_WARP), c = (i / LB_WARP) % NC, l = i % LB_WARP, b = c0 + l;
            if (c < nc && b < nu) {
                const lb_f32x4* q = (const lb_f32x4*)(p.x + (lb_u64)(col0 + c) * nu * 32);
                x[k][c][l] = q[(lb_u64)k * nu + b];
            }
        }
    }
    LB_DEVM void get(ActF32& a, int c, lb_u32 lane) const {
#pragma unroll
        for (int i = 0; i < 8; i++) a.set(i, x[i][c][lane]);
    }
};

template <class Act, int NC> struct StageOf;
template <int NC> struct StageOf<ActQ8, NC> { typedef StageQ8<NC> T; };
template <int NC> struct StageOf<ActF32, NC> { typedef StageF32<NC> T; };

// ------------------------------------------------------------------ weight decoders ---------
// A decoder takes one unit (32 weights) of one row from the device planes (layout.rs):
// q (QB bytes per unit), s (per-unit scale bytes), g (per group of G units), r (per row), and
// returns the unit's contribution for one activation column (`dot`), with the activations'
// order matching its weight words. `fetch` issues the unit's global loads into raw words and
// `decode` turns them into dot-ready words, so that the n = 1 skeleton can keep several
// units' loads in flight (raw words only: few registers) while it decodes an earlier one;
// `load` is the two together. The word order of `w` is the activations' (ActQ8), which the
// tensor-core fragment decoders (lowbit_mma.h) also follow. Integer parts are exact; the float
// association follows the core reference per unit (only the order of unit sums differs,
// within the bound).

// The staged n = 1 kernels (lb_mv1s) read a unit's bytes from shared memory instead: a decoder
// that has them states its plane geometry (code bytes QB and scale bytes SB per unit, SG units
// per g-plane entry of GB bytes, SG = 0 for none; the same as layout.rs's split) and `take`s
// the unit from pointers to its code bytes, scale bytes and g-plane entry.
#define LB_STAGED(qb, sb, g, gb)  \
    static constexpr int QB = qb; \
    static constexpr int SB = sb; \
    static constexpr int SG = g;  \
    static constexpr int GB = gb;

struct Mat {
    const lb_u8* q;
    const lb_u8* s;
    const lb_u8* g;
    const lb_u8* r;
    lb_u32 z;  // zero: lb_opaque_zero() in the dp4a kernels, 0 in the tensor-core ones (lb_table)
};

// How a decoder's byte table (a PRMT operand) is formed: 2: the constant XOR Mat::z, a zero
// the compilers cannot fold, so the table is one register for the whole kernel; 0: the
// literal, which NVRTC keeps in a uniform register and copies into a vector register before
// almost every PRMT (ptxas gives the PRMT the copy as its destination); 1: the literal through
// lb_opaque (the same copies). LB_LUT8_TAB is ROCmFP3's (default 2: no copies, 1.3% faster on
// the H200), LB_CB_TAB the 2-bit codebook decoders' (ROCmFP2's and the tensor-core fragments';
// default 2, measured with LB_CB_SEL = 2 when the ternary n = 1 decoders still used the
// table: together 11-12% faster for them; docs/BENCHMARKS.md, session 10).
#ifndef LB_CB_TAB
#define LB_CB_TAB 2
#endif
#ifndef LB_LUT8_TAB
#define LB_LUT8_TAB 2
#endif
template <int MODE>
LB_DEV lb_u32 lb_table(lb_u32 t, lb_u32 z) {
    if constexpr (MODE == 2) return t ^ z;
    else if constexpr (MODE == 1) return lb_opaque(t);
    else return t;
}

// (unused in the base module, which has no matvec kernels)
LB_DEV __attribute__((unused)) float lb_f16_at(const lb_u8* p, lb_u64 i) { return lb_f16_to_f32(((const lb_u16*)p)[i]); }

// UE4M3-b8 (ROCmFPX scale): E = b >> 3, M = b & 7; E = 0: M * 2^-10, else (8 + M) * 2^(E-11)
// = (1 + M/8) * 2^(E-8). The bits b << 20 read as f32 are (1 + M/8) * 2^(E-127) for E >= 1
// and the f32 subnormal M * 2^-129 for E = 0, so one exact multiply by 2^119 gives both (f32
// subnormals are kept: no flush-to-zero in these kernels). Also MFP4G32P's E4M3 block scale
// (bias 7) halved, and ggml's UE4M3 (NVFP4, halved as ggml_ue4m3_to_fp32 returns it) as a function of
// b & 0x7f.
LB_DEV float lb_ue4m3_b8(lb_u32 b) { return lb_as_float(b << 20) * 0x1p119f; }

// Nibbles of 16 bytes in ggml's Q4_0 order (byte j: element j low, j + 16 high) -> 8 words of
// unsigned bytes, element order.
LB_DEV void lb_nibbles(lb_i32x4 u, lb_i32 w[8]) {
    lb_u32 v[4] = {(lb_u32)u.x, (lb_u32)u.y, (lb_u32)u.z, (lb_u32)u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        w[i] = (lb_i32)(v[i] & 0x0f0f0f0fu);
        w[i + 4] = (lb_i32)((v[i] >> 4) & 0x0f0f0f0fu);
    }
}

// Byte x (0..127 each) - c per byte, as signed bytes: +(0x80 - c) cannot carry out of a byte
// for x + 0x80 - c <= 0xff; ^0x80 re-signs.
LB_DEV lb_i32 lb_sub_bytes(lb_i32 x, lb_u32 c) {
    return (lb_i32)(((lb_u32)x + (0x80u - c) * 0x01010101u) ^ 0x80808080u);
}

// Q8_0: q plane in halves as the activations'; sumi * (dw * da).
struct DecQ8_0 {
    lb_i32 w[8];
    lb_u32 h;
    float dw;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        const lb_u8* base = m.q + row * nu * 32;
        lb_i32x4 u = lb_ld_stream16(base + b * 16ull);
        lb_i32x4 v = lb_ld_stream16(base + (lb_u64)(nu + b) * 16);
        w[0] = u.x; w[1] = u.y; w[2] = u.z; w[3] = u.w;
        w[4] = v.x; w[5] = v.y; w[6] = v.z; w[7] = v.w;
        h = ((const lb_u16*)m.s)[row * nu + b];
    }
    LB_DEVM void decode() { dw = lb_h2f(h); }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const { return lb_dotf<8>(w, a.a) * (dw * a.d); }
};

// The common raw part of the formats with 16 code bytes per unit and one scale word.
struct Raw16 {
    lb_i32x4 v;
    lb_u32 sc;
};

// Q4_0: (q - 8) * d; sumi * dw * da (ggml's order).
struct DecQ4_0 : Raw16 {
    lb_i32 w[8];
    float dw;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        v = lb_ld_stream16(m.q + u * 16);
        sc = ((const lb_u16*)m.s)[u];
    }
    LB_DEVM void decode() {
        lb_nibbles(v, w);
#pragma unroll
        for (int i = 0; i < 8; i++) w[i] = lb_sub_bytes(w[i], 8);
        dw = lb_h2f(sc);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const { return lb_dotf<8>(w, a.a) * dw * a.d; }
};

// Q4_1 against Q8_1: (dw * da) * sumi + mw * sa (ggml_vec_dot_q4_1_q8_1's association).
struct DecQ4_1 : Raw16 {
    lb_i32 w[8];
    float dw, mw;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        v = lb_ld_stream16(m.q + u * 16);
        sc = ((const lb_u32*)m.s)[u];
    }
    LB_DEVM void decode() {
        lb_nibbles(v, w);
        dw = lb_h2f(sc & 0xffffu);
        mw = lb_h2f(sc >> 16);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const {
        return (dw * a.d) * lb_dotf<8>(w, a.a) + mw * lb_as_float(a.e);
    }
};

// The E2M1 codes of ggml's kvalues_mxfp4 (twice the E2M1 value) as a lb_lut16 table.
#define LB_KVALUES_MXFP4 {0x03020100u, 0x0c080604u, 0xfdfeff00u, 0xf4f8fafcu}

// MXFP4: kvalues * 2^(e - 128); (da * 2^(e-128)) * sumi (ggml_vec_dot_mxfp4_q8_0's order).
struct DecMxfp4 : Raw16 {
    lb_i32 w[8];
    float dx;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        v = lb_ld_stream16(m.q + u * 16);
        sc = m.s[u];
    }
    LB_STAGED(16, 1, 0, 0)
    LB_DEVM void take(const Mat&, const lb_u8* q, const lb_u8* s, const lb_u8*) {
        v = *(const lb_i32x4*)q;
        sc = *s;
    }
    LB_DEVM void decode() {
        const lb_u32 t[4] = LB_KVALUES_MXFP4;
        lb_u32 q[4] = {(lb_u32)v.x, (lb_u32)v.y, (lb_u32)v.z, (lb_u32)v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) lb_lut16(t, q[i], (lb_u32&)w[i], (lb_u32&)w[i + 4]);
        // 2^(e-128): normal for e >= 2, else the subnormals 2^-127 (e = 1) and 2^-128 (e = 0).
        dx = lb_as_float(sc >= 2 ? (sc - 1) << 23 : 0x00200000u << sc);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const { return (a.d * dx) * lb_dotf<8>(w, a.a); }
};

// NVFP4: a unit is two 16-element sub-blocks (8 code bytes each: low nibbles elements 0-7, high
// 8-15) with a UE4M3 scale each; per sub-block (da * scale/2) * sumi (ggml's order).
struct DecNvfp4 : Raw16 {
    lb_i32 w[8];
    float s0, s1;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        v = lb_ld_stream16(m.q + u * 16);
        sc = ((const lb_u16*)m.s)[u];
    }
    LB_STAGED(16, 2, 0, 0)
    LB_DEVM void take(const Mat&, const lb_u8* q, const lb_u8* s, const lb_u8*) {
        v = *(const lb_i32x4*)q;
        sc = *(const lb_u16*)s;
    }
    LB_DEVM void decode() {
        const lb_u32 t[4] = LB_KVALUES_MXFP4;
        // Code word k: low nibbles elements 4(k&1) + 16(k>>1) .., high nibbles 8 further.
        lb_lut16(t, (lb_u32)v.x, (lb_u32&)w[0], (lb_u32&)w[2]);
        lb_lut16(t, (lb_u32)v.y, (lb_u32&)w[1], (lb_u32&)w[3]);
        lb_lut16(t, (lb_u32)v.z, (lb_u32&)w[4], (lb_u32&)w[6]);
        lb_lut16(t, (lb_u32)v.w, (lb_u32&)w[5], (lb_u32&)w[7]);
        s0 = lb_ue4m3_b8(sc & 0x7fu);
        s1 = lb_ue4m3_b8((sc >> 8) & 0x7fu);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const {
        return (a.d * s0) * lb_dotf<4>(w, a.a) + (a.d * s1) * lb_dotf<4>(w + 4, a.a + 4);
    }
};

// ROCmFP3, repacked on upload to one 3-bit code per nibble in Q4_0 order: levels
// {0, 1, 2, 4, 0, -1, -2, -4}; d_act * (s0 * sum0 + s1 * sum1) (core rocmfpx/dot.rs).
struct DecFp3 : Raw16 {
    lb_u32 z;
    lb_i32 w[8];
    float s0, s1;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        v = lb_ld_stream16(m.q + u * 16);
        sc = ((const lb_u16*)m.s)[u];
        z = m.z;
    }
    LB_STAGED(16, 2, 0, 0)
    LB_DEVM void take(const Mat& m, const lb_u8* q, const lb_u8* s, const lb_u8*) {
        v = *(const lb_i32x4*)q;
        sc = *(const lb_u16*)s;
        z = m.z;
    }
    LB_DEVM void decode() {
        // Codes are 3-bit: an 8-entry table serves (lb_lut8).
        lb_u32 q[4] = {(lb_u32)v.x, (lb_u32)v.y, (lb_u32)v.z, (lb_u32)v.w};
        const lb_u32 lo = lb_table<LB_LUT8_TAB>(0x04020100u, z), hi = lb_table<LB_LUT8_TAB>(0xfcfeff00u, z);
#pragma unroll
        for (int i = 0; i < 4; i++) lb_lut8(lo, hi, q[i], (lb_u32&)w[i], (lb_u32&)w[i + 4]);
        s0 = lb_ue4m3_b8(sc & 0xffu);
        s1 = lb_ue4m3_b8(sc >> 8);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const {
        return a.d * (s0 * lb_dotf<4>(w, a.a) + s1 * lb_dotf<4>(w + 4, a.a + 4));
    }
};

// The 2-bit codebook formats: 16 codes per word in ROCmFP2's layout (element 4j + i at bits
// 2i of byte j), expanded by lb_codebook16 (activations in lb_codebook4_pos order).
LB_DEV void lb_codes2(lb_u32 table, lb_u32 p0, lb_u32 p1, lb_i32 w[8]) {
    lb_u32 o[4];
    lb_codebook16(table, p0, o);
#pragma unroll
    for (int g = 0; g < 4; g++) w[g] = (lb_i32)o[g];
    lb_codebook16(table, p1, o);
#pragma unroll
    for (int g = 0; g < 4; g++) w[4 + g] = (lb_i32)o[g];
}

// ROCmFP2: codebook {-4,-1,1,4}; d_act * (s0 * sum0 + s1 * sum1).
struct DecFp2 {
    lb_u32 p0, p1, sc, z;
    lb_i32 w[8];
    float s0, s1;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        lb_ld_stream8(m.q + u * 8, p0, p1);
        sc = ((const lb_u16*)m.s)[u];
        z = m.z;
    }
    LB_STAGED(8, 2, 0, 0)
    LB_DEVM void take(const Mat& m, const lb_u8* q, const lb_u8* s, const lb_u8*) {
        p0 = ((const lb_u32*)q)[0];
        p1 = ((const lb_u32*)q)[1];
        sc = *(const lb_u16*)s;
        z = m.z;
    }
    LB_DEVM void decode() {
        lb_codes2(lb_table<LB_CB_TAB>(0x0401FFFCu, z), p0, p1, w);
        s0 = lb_ue4m3_b8(sc & 0xffu);
        s1 = lb_ue4m3_b8(sc >> 8);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const {
        return a.d * (s0 * lb_dotf<4>(w, a.a) + s1 * lb_dotf<4>(w + 4, a.a + 4));
    }
};

// Ternary codes {-1, 0, +1, +2} with an f16 scale per group of G units: PQ2_0 and PTQ1_0
// (repacked to PQ2_0's codes, G = 4, Q8_0 activations) and TQ2_0 (repacked, G = 8, Q8_K);
// dw * (da * sumi).
//
// The value of code c is c - 1, so sumi = sum(c * a) - sum(a): no table. With the activations
// in the transposed order (lb_quantize_q8's order 2: word g of a half, byte k = element 4k + g)
// the masks line up with them directly: (p >> 2g) & 0x03030303 is word g's codes. Two masks per
// shift serve two words: & 0x0c0c0c0c gives 4c, summed in a second chain whose total (a
// multiple of 4) is shifted down exactly. Per unit: 10 integer ops and 8 IDP, against 10
// selector ops, 8 PRMT and 8 IDP for the table lookup. sum(a) is the activations' extra word:
// the integer quant sum (order 2 with Q8_0) or the two i16 half sums (Q8_K).
template <int G>
struct DecTern {
    lb_u32 p0, p1, sc;
    lb_i32 w[8];
    float dw;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        lb_ld_stream8(m.q + u * 8, p0, p1);
        sc = ((const lb_u16*)m.g)[u / G];
    }
    LB_STAGED(8, 0, G, 2)
    LB_DEVM void take(const Mat&, const lb_u8* q, const lb_u8*, const lb_u8* g) {
        p0 = ((const lb_u32*)q)[0];
        p1 = ((const lb_u32*)q)[1];
        sc = *(const lb_u16*)g;
    }
    LB_DEVM void decode() {
        const lb_u32 p[2] = {p0, p1};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            lb_u32 v = p[h], v4 = p[h] >> 4;
            w[4 * h + 0] = (lb_i32)(v & 0x03030303u);   // codes of word 0 (elements 4k)
            w[4 * h + 1] = (lb_i32)(v & 0x0c0c0c0cu);   // 4 x codes of word 1
            w[4 * h + 2] = (lb_i32)(v4 & 0x03030303u);  // codes of word 2
            w[4 * h + 3] = (lb_i32)(v4 & 0x0c0c0c0cu);  // 4 x codes of word 3
        }
        dw = lb_h2f(sc);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    // Q8_K (TQ2_0): the two i16 half sums; Q8_0 in order 2: the sum itself.
    LB_DEVM static lb_i32 act_sum(lb_u32 e) {
        if constexpr (G == 8) return (lb_i32)(short)(e & 0xffffu) + ((lb_i32)e >> 16);
        else return (lb_i32)e;
    }
    LB_DEVM float dot(const ActQ8& a) const {
        lb_i32 s1 = 0x4b400000 - act_sum(a.e), s4 = 0;  // lb_dotf's magic start
#pragma unroll
        for (int h = 0; h < 2; h++) {
            s1 = lb_dot4(w[4 * h + 0], a.a[4 * h + 0], s1);
            s4 = lb_dot4(w[4 * h + 1], a.a[4 * h + 1], s4);
            s1 = lb_dot4(w[4 * h + 2], a.a[4 * h + 2], s1);
            s4 = lb_dot4(w[4 * h + 3], a.a[4 * h + 3], s4);
        }
        float sumi = lb_as_float((lb_u32)(s1 + (s4 >> 2))) - 12582912.0f;
        return dw * (a.d * sumi);
    }
};

// Q4_K against Q8_K, repacked: q = the unit's 32 nibbles in Q4_0 order, s = (scale, min) of the
// unit's sub-block (6-bit values unpacked on upload), g = (d, dmin) f16 per 8 units;
// (d*da) * (sc * sumi) - (dmin*da) * (m * asum), asum = the unit's quant sum (from Q8_K's bsums).
struct DecQ4K : Raw16 {
    lb_u32 dd;
    lb_i32 w[8];
    float d, dmin;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        v = lb_ld_stream16(m.q + u * 16);
        sc = ((const lb_u16*)m.s)[u];
        dd = ((const lb_u32*)m.g)[u / 8];
    }
    LB_DEVM void decode() {
        lb_nibbles(v, w);
        d = lb_h2f(dd & 0xffffu);
        dmin = lb_h2f(dd >> 16);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const {
        lb_i32 asum = (lb_i32)(short)(a.e & 0xffffu) + (lb_i32)(short)(a.e >> 16);
        lb_i32 scale = (lb_i32)(sc & 0xffu), mn = (lb_i32)(sc >> 8);
        return (d * a.d) * lb_i2f(scale * lb_dotn<8>(w, a.a)) - (dmin * a.d) * lb_i2f(mn * asum);
    }
};

// Q6_K against Q8_K, repacked: q = 16 bytes of low nibbles (Q4_0 order), s = 8 bytes of high
// 2-bit pairs (word x, byte k, field t: element 4(4x + t) + k), g = 18 bytes per 8 units: d
// f16, then the 16 int8 sub-block scales; (d*da) * (sc0 * sum0 + sc1 * sum1) with q - 32.
struct DecQ6K : Raw16 {
    lb_u32 h[2], dh;
    lb_i32 w[8];
    lb_i32 sc0, sc1;
    float d;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        v = lb_ld_stream16(m.q + u * 16);
        lb_ld_stream8(m.s + u * 8, h[0], h[1]);
        const lb_u16* grp = (const lb_u16*)(m.g + (u / 8) * 18);
        sc = grp[1 + u % 8];
        dh = grp[0];
    }
    LB_DEVM void decode() {
        lb_nibbles(v, w);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            lb_u32 x = h[i >> 2];
            int t = i & 3;
            lb_u32 hi = (t == 0 ? x << 4 : t == 1 ? x << 2 : t == 2 ? x : x >> 2) & 0x30303030u;
            w[i] = lb_sub_bytes((lb_i32)((lb_u32)w[i] | hi), 32);
        }
        sc0 = (lb_i32)(signed char)(sc & 0xffu);
        sc1 = (lb_i32)(signed char)(sc >> 8);
        d = lb_h2f(dh);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActQ8& a) const {
        lb_i32 s = sc0 * lb_dotn<4>(w, a.a) + sc1 * lb_dotn<4>(w + 4, a.a + 4);
        return (d * a.d) * (float)s;
    }
};

// HFP4G32 / MFP4G32 (block factor 2^(e-127)) and MFP4G32P (E4M3 block scale); f32 activations:
// s = sum E2M1 * x over the block, acc += s * factor; the row scale multiplies the row total.
// Each code goes through lb_lut16 to kvalues + 12 (twice the E2M1 value, biased to a byte
// 0..24), then to f32 by lb_byte_f32 (one PRMT and one FADD per weight) in `decode`; `dot` is
// one FMA per weight and column. The 1/2 is folded into the block factor (exact).
template <bool E4M3>
struct DecHfp4 : Raw16 {
    float w[32];
    float f;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) {
        lb_u64 u = row * nu + b;
        v = lb_ld_stream16(m.q + u * 16);
        sc = m.s[u];
    }
    LB_STAGED(16, 1, 0, 0)
    LB_DEVM void take(const Mat&, const lb_u8* q, const lb_u8* s, const lb_u8*) {
        v = *(const lb_i32x4*)q;
        sc = *s;
    }
    LB_DEVM void decode() {
        const lb_u32 t[4] = {0x0f0e0d0cu, 0x18141210u, 0x090a0b0cu, 0x00040608u};
        lb_u32 q[4] = {(lb_u32)v.x, (lb_u32)v.y, (lb_u32)v.z, (lb_u32)v.w};
        // Byte j of the block holds elements 2j (low nibble) and 2j + 1 (high nibble).
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lb_u32 lo, hi;
            lb_lut16(t, q[i], lo, hi);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                w[8 * i + 2 * k] = lb_byte_f32(lo, k, 12.0f);
                w[8 * i + 2 * k + 1] = lb_byte_f32(hi, k, 12.0f);
            }
        }
        // E4M3 (bias 7) halved is UE4M3-b8 of the same byte; else 2^(e-128): e >= 2 normal,
        // e = 1 and e = 0 the subnormals 2^-127, 2^-128.
        if (E4M3) f = lb_ue4m3_b8(sc);
        else f = lb_as_float(sc >= 2 ? (sc - 1) << 23 : 0x00200000u << sc);
    }
    LB_DEVM void load(const Mat& m, lb_u64 row, lb_u32 b, lb_u32 nu) { fetch(m, row, b, nu); decode(); }
    LB_DEVM float dot(const ActF32& a) const {
        float acc[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 32; j += 2) {
            acc[0] += w[j] * a.x[j];
            acc[1] += w[j + 1] * a.x[j + 1];
        }
        return (acc[0] + acc[1]) * f;
    }
};

// ------------------------------------------------------------------ matvec skeletons ----------

// n = 1: y[row] = sum over units of dec.dot(activations) (times the row's f16 scale when
// ROWSCALE). Each warp owns R consecutive rows (a block LB_ROWS_PER_CTA * R, grid-strided);
// lane l takes units l, l + LB_WARP, ... of its rows. Software-pipelined P deep: the raw
// weight words of the next P - 1 steps (with AP, their activations too) are in flight while a
// step is decoded, so a lane keeps P units x R rows of loads outstanding with raw words only
// in registers (P = 1: load, then decode). Without AP the activations (L1 hits) are loaded
// when used, which keeps the ring small. The ring of P slots is indexed by compile-time
// constants (the step loop is unrolled P times). Launched as a programmatic dependent of the
// activation preparation, a warp issues its first group's prologue weight loads before it
// waits for that kernel (lb_grid_wait; with AP before them, as the prologue then reads
// activations too).
template <int R, int P, bool AP, class Dec, class Act, bool ROWSCALE>
LB_DEV void lb_mv1(const Mat& m, const ActPtrs& ap, float* y, lb_u32 rows, lb_u32 nu) {
    lb_u32 warp = lb_tid() / LB_WARP, lane = lb_tid() % LB_WARP;
    lb_u32 groups = (rows + R - 1) / R;
    lb_u32 steps = (nu + LB_WARP - 1) / LB_WARP;
    bool waited = false;
    for (lb_u32 g0 = lb_bid_x() * LB_ROWS_PER_CTA; g0 < groups; g0 += lb_grid_x() * LB_ROWS_PER_CTA) {
        lb_u32 g = g0 + warp;
        if (g >= groups) continue;  // no barriers in this skeleton
        lb_u32 row0 = g * R;
        lb_u64 rowc[R];
#pragma unroll
        for (int r = 0; r < R; r++) rowc[r] = row0 + r < rows ? row0 + r : rows - 1;  // loads stay in bounds
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.0f;
        Dec ring[P][R];
        Act act[AP ? P : 1];
        if (AP && !waited) lb_grid_wait();
        // Prologue: steps 0 .. P - 2 into slots 0 .. P - 2.
#pragma unroll
        for (int k = 0; k < P - 1; k++) {
            lb_u32 b = (lb_u32)k * LB_WARP + lane;
            if (b < nu) {
                if (AP) act[AP ? k : 0].load(ap, 0, b, nu);
#pragma unroll
                for (int r = 0; r < R; r++) ring[k][r].fetch(m, rowc[r], b, nu);
            }
        }
        if (!waited) {
            lb_grid_wait();
            waited = true;
        }
        for (lb_u32 s0 = 0; s0 < steps; s0 += P) {
#pragma unroll
            for (int k = 0; k < P; k++) {
                // Issue step s0 + k + P - 1 into slot (k + P - 1) % P, then use slot k.
                const int f = (k + P - 1) % P;
                lb_u32 bf = (s0 + k + P - 1) * LB_WARP + lane;
                if (bf < nu) {
                    if (AP) act[AP ? f : 0].load(ap, 0, bf, nu);
#pragma unroll
                    for (int r = 0; r < R; r++) ring[f][r].fetch(m, rowc[r], bf, nu);
                }
                lb_u32 b = (s0 + k) * LB_WARP + lane;
                if (b < nu) {
                    if (!AP) act[0].load(ap, 0, b, nu);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        Dec d = ring[k][r];
                        d.decode();
                        acc[r] += d.dot(act[AP ? k : 0]);
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            lb_u32 row = row0 + r;
            float v = lb_warp_sum(acc[r]);
            if (ROWSCALE && row < rows) v *= lb_f16_at(m.r, row);
            if (lane == 0 && row < rows) y[row] = v;
        }
    }
}

// ------------------------------------------------------------------ n = 1, staged weights -----
// The staged n = 1 skeleton (pipeline codes 30 + S): as lb_mv1, but a warp's weight bytes go
// global -> shared by lb_stage_copy (cp.async on NVIDIA), S - 1 steps ahead of the step being
// decoded, so the loads in flight cost no registers and no register scoreboards (lb_mv1's
// ring in registers tied its deep loads to the scoreboards of the activation loads: session
// 11's profile). Each step copies, for each of the warp's R rows, the LB_WARP units' code bytes
// (16-byte copies), scale bytes and g-plane entries (4-byte copies) into the step's slot, as
// whole aligned chunks of each row's planes (the host picks these kernels only where every
// row of every plane starts chunk-aligned: backend.rs staged_fits); a lane then takes its
// unit's bytes from the slot (Dec::take), decodes it and applies it to the activations,
// loaded when used (LB_STAGE_ACT = 1: one step ahead). Bit-identical to lb_mv1 (the same
// units per lane in the same order). Measured 4-35% slower than the lb_mv1 defaults on the
// H200 (docs/BENCHMARKS.md, session 12: the activations' global loads keep the long-scoreboard
// waits, and the registers barely fell), so the host runs it only when forced. Two follow-ups
// lost too and were removed (session 13, commit 30d0371): each step's activations copied into
// the slot in the same commit group (8-47% slower than the defaults where the ring fits 48
// KiB), and a register cap of 5 blocks per SM (launch bounds: 8-15% slower on the defaults).
LB_DEV constexpr int lb_r16(int x) { return (x + 15) / 16 * 16; }
LB_DEV constexpr int lb_cmin(int a, int b) { return a < b ? a : b; }
template <class Dec>
struct StagePlan {
    static constexpr int QP = LB_WARP * Dec::QB;  // code bytes of a row's step
    static constexpr int SP = LB_WARP * Dec::SB;  // scale bytes
    // g-plane bytes: the entries of the step's units (a step starts on an entry boundary when
    // LB_WARP is a multiple of SG, else it lies within one entry).
    static constexpr int GP = Dec::SG == 0 ? 0 : (LB_WARP >= Dec::SG ? LB_WARP / Dec::SG : 1) * Dec::GB;
    static constexpr int SO = lb_r16(QP), GO = SO + lb_r16(SP), ROWB = GO + lb_r16(GP);
    static constexpr int CQ = lb_cmin(16, QP), CS = lb_cmin(4, SP), CG = lb_cmin(4, GP);
};

// Copies R rows of N chunks of CH bytes of a plane (rows of row_bytes) into the slot, lanes
// striding over the chunks: chunk c of row r from plane + row * row_bytes + off + c * CH to
// slot + r * ROWB + dst_off + c * CH, skipping chunks at or past the row's end. Rows past the
// matrix read its last row (clamped, as lb_mv1's loads).
template <int R, int N, int CH, int ROWB>
LB_DEV void lb_stage_plane(lb_u8* slot, int dst_off, const lb_u8* plane, lb_u64 row0, lb_u32 rows,
                           lb_u32 row_bytes, lb_u32 off, lb_u32 lane) {
    if constexpr (N > 0) {
#pragma unroll
        for (int i0 = 0; i0 < R * N; i0 += LB_WARP) {
            int i = i0 + (int)lane;
            if (i < R * N) {
                int r = i / N, c = i % N;
                lb_u64 row = row0 + r < rows ? row0 + r : rows - 1;  // copies stay in bounds
                lb_u32 o = off + (lb_u32)(c * CH);
                if (o < row_bytes) lb_stage_copy<CH>(slot + r * ROWB + dst_off + c * CH, plane + row * row_bytes + o);
            }
        }
    }
}

// Issues the copies of step t (units t * LB_WARP ..) of rows row0 .. row0 + R - 1 into slot.
template <int R, class Dec>
LB_DEV void lb_stage_step(lb_u8* slot, const Mat& m, lb_u64 row0, lb_u32 rows, lb_u32 nu, lb_u32 t, lb_u32 lane) {
    typedef StagePlan<Dec> Pl;
    lb_u32 b0 = t * LB_WARP;
    lb_stage_plane<R, Pl::QP / Pl::CQ, Pl::CQ, Pl::ROWB>(slot, 0, m.q, row0, rows, nu * Dec::QB, b0 * Dec::QB, lane);
    if constexpr (Pl::SP > 0)
        lb_stage_plane<R, Pl::SP / Pl::CS, Pl::CS, Pl::ROWB>(slot, Pl::SO, m.s, row0, rows, nu * Dec::SB, b0 * Dec::SB, lane);
    if constexpr (Pl::GP > 0)
        lb_stage_plane<R, Pl::GP / Pl::CG, Pl::CG, Pl::ROWB>(slot, Pl::GO, m.g, row0, rows, nu / Dec::SG * Dec::GB,
                                                             b0 / Dec::SG * Dec::GB, lane);
}

// LB_STAGE_ACT = 1 loads a step's activations one step ahead (in registers) instead of when
// used; 0 (default) when used.
#ifndef LB_STAGE_ACT
#define LB_STAGE_ACT 0
#endif
template <int R, int S, class Dec, class Act, bool ROWSCALE>
LB_DEV void lb_mv1s(const Mat& m, const ActPtrs& ap, float* y, lb_u32 rows, lb_u32 nu) {
    typedef StagePlan<Dec> Pl;
    constexpr int SLOT = R * Pl::ROWB;  // bytes per warp and step
    static_assert(S >= 2, "a stage ring of at least two slots");
    LB_SHARED lb_i32x4 stage[LB_ROWS_PER_CTA * S * SLOT / 16];
    lb_u32 warp = lb_tid() / LB_WARP, lane = lb_tid() % LB_WARP;
    lb_u8* ring = (lb_u8*)stage + warp * (S * SLOT);
    lb_u32 groups = (rows + R - 1) / R;
    lb_u32 steps = (nu + LB_WARP - 1) / LB_WARP;
    bool waited = false;
    for (lb_u32 g0 = lb_bid_x() * LB_ROWS_PER_CTA; g0 < groups; g0 += lb_grid_x() * LB_ROWS_PER_CTA) {
        lb_u32 g = g0 + warp;
        if (g >= groups) continue;  // no barriers in this skeleton
        lb_u32 row0 = g * R;
        // Prologue: steps 0 .. S - 2 into slots 0 .. S - 2, one commit group per step (empty
        // past the end), so that waiting for all but S - 2 groups means step t has landed.
#pragma unroll
        for (int k = 0; k < S - 1; k++) {
            if ((lb_u32)k < steps) lb_stage_step<R, Dec>(ring + k * SLOT, m, row0, rows, nu, (lb_u32)k, lane);
            lb_stage_commit();
        }
        if (!waited) {
            lb_grid_wait();
            waited = true;
        }
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.0f;
        Act a, an;
        if (LB_STAGE_ACT && lane < nu) an.load(ap, 0, lane, nu);
        lb_u32 use = 0, fill = S - 1;  // slots of step t and of step t + S - 1
        for (lb_u32 t = 0; t < steps; t++) {
            lb_stage_wait<S - 2>();
            lb_warp_sync();  // step t visible to every lane; every lane is done with step t - 1
            if (t + S - 1 < steps) lb_stage_step<R, Dec>(ring + fill * SLOT, m, row0, rows, nu, t + S - 1, lane);
            lb_stage_commit();
            lb_u32 b = t * LB_WARP + lane;
            if (LB_STAGE_ACT) {
                a = an;
                if (b + LB_WARP < nu) an.load(ap, 0, b + LB_WARP, nu);
            }
            if (b < nu) {
                if (!LB_STAGE_ACT) a.load(ap, 0, b, nu);
                const lb_u8* sl = ring + use * SLOT;
                lb_u32 gi = 0;  // the unit's g-plane entry within the step's
                if constexpr (Dec::SG > 0) gi = (b / Dec::SG - t * LB_WARP / Dec::SG) * Dec::GB;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const lb_u8* rb = sl + r * Pl::ROWB;
                    Dec d;
                    d.take(m, rb + lane * Dec::QB, rb + Pl::SO + lane * Dec::SB, rb + Pl::GO + gi);
                    d.decode();
                    acc[r] += d.dot(a);
                }
            }
            use = use + 1 == (lb_u32)S ? 0u : use + 1;
            fill = fill + 1 == (lb_u32)S ? 0u : fill + 1;
        }
        lb_warp_sync();  // every lane done with the ring before the next group's prologue
#pragma unroll
        for (int r = 0; r < R; r++) {
            lb_u32 row = row0 + r;
            float v = lb_warp_sum(acc[r]);
            if (ROWSCALE && row < rows) v *= lb_f16_at(m.r, row);
            if (lane == 0 && row < rows) y[row] = v;
        }
    }
}

// The static shared memory a staged kernel needs (bytes per block), and whether it fits the
// 48 KiB every target allows; a code that does not fit compiles to lb_mv1's default form (the
// host never picks it: backend.rs staged_fits computes the same size).
template <int R, int S, class Dec>
LB_DEV constexpr bool lb_stage_fits() { return LB_ROWS_PER_CTA * S * R * StagePlan<Dec>::ROWB <= 48 * 1024; }

// n >= 2: y[col*rows + row] = sum over units of dec.dot(activations of col) (times the row's
// f16 scale when ROWSCALE). Each warp owns R consecutive rows; a block owns LB_ROWS_PER_CTA * R
// rows, grid-strided. Each lane decodes a unit of its R rows once and applies it to NC columns,
// whose activations (LB_WARP units x NC columns) the block stages in shared memory once per
// chunk; every warp reads them there.
template <int NC, int R, class Dec, class Act, bool ROWSCALE>
LB_DEV void lb_mv(const Mat& m, const ActPtrs& ap, float* y, lb_u32 rows, lb_u32 nu, lb_u32 ncols) {
    LB_SHARED typename StageOf<Act, NC>::T st;
    lb_grid_wait();  // see lb_mv1
    lb_u32 warp = lb_tid() / LB_WARP, lane = lb_tid() % LB_WARP;
    lb_u32 col0 = lb_bid_y() * NC;
    lb_u32 nc = ncols - col0 < (lb_u32)NC ? ncols - col0 : (lb_u32)NC;
    lb_u32 groups = (rows + R - 1) / R;
    for (lb_u32 g0 = lb_bid_x() * LB_ROWS_PER_CTA; g0 < groups; g0 += lb_grid_x() * LB_ROWS_PER_CTA) {
        lb_u32 g = g0 + warp;
        bool active = g < groups;  // uniform per warp; inactive warps still fill and sync
        lb_u32 row0 = g * R;
        float acc[R][NC];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;
        for (lb_u32 c0 = 0; c0 < nu; c0 += LB_WARP) {
            Dec dec[R];
            lb_u32 b = c0 + lane;
            if (active && b < nu) {
#pragma unroll
                for (int r = 0; r < R; r++) {
                    lb_u32 row = row0 + r < rows ? row0 + r : rows - 1;  // clamp: loads stay in bounds
                    dec[r].load(m, row, b, nu);
                }
            }
            lb_barrier();
            st.fill(ap, col0, nc, c0, nu);
            lb_barrier();
            if (active && b < nu) {
#pragma unroll
                for (int c = 0; c < NC; c++) {
                    if ((lb_u32)c < nc) {
                        Act a;
                        st.get(a, c, lane);
#pragma unroll
                        for (int r = 0; r < R; r++) acc[r][c] += dec[r].dot(a);
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            lb_u32 row = row0 + r;
            float rs = 1.0f;
            if (ROWSCALE && active && row < rows) rs = lb_f16_at(m.r, row);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                float v = lb_warp_sum(acc[r][c]);
                if (ROWSCALE) v *= rs;
                if (active && lane == 0 && (lb_u32)c < nc && row < rows) y[(lb_u64)(col0 + c) * rows + row] = v;
            }
        }
    }
}

// n = 5..16 on NVIDIA: the int8 tensor-core kernels (lowbit_mma.h).
#include "lowbit_mma.h"

// The tensor-core kernels lb_mv_<stem>_<NC>_mma_m<MT>b<RB>s<S> (NC = 8 or 16 columns, 16 MT
// rows per block, RB staged code bytes per row and stage, S stages; Fr: the fragment decoder,
// ACC: units chained per epilogue, AH: units ahead for the small per-unit loads, see
// lowbit_mma.h). The pq2 stem takes AH = 3 (10% faster at n = 8 on the H200), the others 1 (3
// moved them by -6% to +2%; docs/BENCHMARKS.md, session 11). The same parameters as every matvec kernel, but aq and ad
// are the reordered activations of lb_mma_acts (af, adf). NVIDIA only (the host never picks
// them on AMD).
#define LB_MVQ(fmt, Fr, ACC, AH, NC, MT, RB, S)                                                     \
    LB_KERNEL void lb_mv_##fmt##_##NC##_mma_m##MT##b##RB##s##S(                                   \
        const lb_u8* q, const lb_u8* s, const lb_u8* g, const lb_u8* r, const lb_i8* aq,           \
        const float* ad, const lb_u32* ae, const float* x, float* y, lb_u32 rows, lb_u32 nu,       \
        lb_u32 ncols) {                                                                            \
        Mat m = {q, s, g, r, 0u};                                                                  \
        lb_mvq<NC, MT, RB, S, ACC, LB_MMA_AH(AH), Fr>(m, (const lb_u32*)aq, ad, y, rows, nu, ncols); \
    }
// The variants (backend.rs MMA_VARIANTS): (MT, RB, S) = (2, 64, 2), (1, 64, 3), (1, 64, 2),
// (1, 128, 2) for NC = 8; NC = 16 only (1, 64, 2) (static shared memory: 48 KiB per block).
#define LB_MVQ_ALL(fmt, Fr, ACC, AH)                                                                \
    LB_MVQ(fmt, Fr, ACC, AH, 8, 2, 64, 2) LB_MVQ(fmt, Fr, ACC, AH, 8, 1, 64, 3)                    \
    LB_MVQ(fmt, Fr, ACC, AH, 8, 1, 64, 2) LB_MVQ(fmt, Fr, ACC, AH, 8, 1, 128, 2)                   \
    LB_MVQ(fmt, Fr, ACC, AH, 16, 1, 64, 2)

// NC = 1: the pipelined skeleton, else the staged one (a template, so only the chosen one is
// instantiated). U = P (1, 2, 4): P deep with the activations in the ring; U = 10 + P (12,
// 14): weights only (activations loaded when used). Deeper rings lost to register pressure on
// the H200 (docs/BENCHMARKS.md, sessions 6 and 8: weights-only P = 8 and 16 were 5-70%
// slower than the defaults) and are not instantiated; so did weights P deep with the
// activations one step ahead (a ring of two: 2-50% slower, session 11).
template <int NC, int R, int U, class Dec, class Act, bool ROWSCALE>
LB_DEV void lb_mv_any(const Mat& m, const ActPtrs& ap, float* y, lb_u32 rows, lb_u32 nu, lb_u32 ncols) {
    if constexpr (NC == 1 && U > 30) {
        if constexpr (lb_stage_fits<R, U - 30, Dec>()) lb_mv1s<R, U - 30, Dec, Act, ROWSCALE>(m, ap, y, rows, nu);
        else lb_mv1<R, 2, false, Dec, Act, ROWSCALE>(m, ap, y, rows, nu);
    } else if constexpr (NC == 1) lb_mv1<R, (U > 10 ? U - 10 : U), (U < 10), Dec, Act, ROWSCALE>(m, ap, y, rows, nu);
    else lb_mv<NC, R, Dec, Act, ROWSCALE>(m, ap, y, rows, nu, ncols);
}

// One kernel per (format stem, column tile NC, rows per warp R, pipeline code U; U > 1 only
// for NC = 1); every kernel has the same parameters, unused ones are 0.
#define LB_MV(fmt, Dec, Act, ROWSCALE, NC, R, U)                                                   \
    LB_KERNEL void lb_mv_##fmt##_##NC##_r##R##_u##U(const lb_u8* q, const lb_u8* s, const lb_u8* g, \
                                              const lb_u8* r, const lb_i8* aq, const float* ad,      \
                                              const lb_u32* ae, const float* x, float* y,            \
                                              lb_u32 rows, lb_u32 nu, lb_u32 ncols) {                \
        Mat m = {q, s, g, r, lb_opaque_zero()};                                                    \
        ActPtrs ap = {aq, ad, ae, x};                                                              \
        lb_mv_any<NC, R, U, Dec, Act, ROWSCALE>(m, ap, y, rows, nu, ncols);                         \
    }
#define LB_MV_R(fmt, Dec, Act, RS, NC, U) \
    LB_MV(fmt, Dec, Act, RS, NC, 1, U) LB_MV(fmt, Dec, Act, RS, NC, 2, U) LB_MV(fmt, Dec, Act, RS, NC, 4, U)
#define LB_MV_1(fmt, Dec, Act, RS)                                    \
    LB_MV_R(fmt, Dec, Act, RS, 1, 1) LB_MV_R(fmt, Dec, Act, RS, 1, 2) \
    LB_MV_R(fmt, Dec, Act, RS, 1, 4) LB_MV_R(fmt, Dec, Act, RS, 1, 12) LB_MV_R(fmt, Dec, Act, RS, 1, 14)
// The staged n = 1 codes (lb_mv1s, S = 3 and 4 slots; 6 and 8 were slower still on the H200),
// for the decoders that can take a unit from shared memory (LB_STAGED). Run only when forced.
#define LB_MV_1S(fmt, Dec, Act, RS) LB_MV_R(fmt, Dec, Act, RS, 1, 33) LB_MV_R(fmt, Dec, Act, RS, 1, 34)
// Column tiles 1, 2, 4, 8, 16 (f32 activations: up to 8, the stage's shared-memory limit).
#define LB_MV_Q8(fmt, Dec)                                                                         \
    LB_MV_1(fmt, Dec, ActQ8, false) LB_MV_R(fmt, Dec, ActQ8, false, 2, 1)                          \
    LB_MV_R(fmt, Dec, ActQ8, false, 4, 1) LB_MV_R(fmt, Dec, ActQ8, false, 8, 1)                    \
    LB_MV_R(fmt, Dec, ActQ8, false, 16, 1)
#define LB_MV_F32(fmt, Dec)                                                                        \
    LB_MV_1(fmt, Dec, ActF32, true) LB_MV_R(fmt, Dec, ActF32, true, 2, 1)                          \
    LB_MV_R(fmt, Dec, ActF32, true, 4, 1) LB_MV_R(fmt, Dec, ActF32, true, 8, 1)

// One section per format stem (backend.rs compiles each as its own module on the stem's first
// use: -DLB_SELECT -DLB_STEM_<stem>; without LB_SELECT, e.g. the AMD ahead-of-time build,
// everything is compiled). The stems are layout.rs STEMS.
#if !defined(LB_SELECT) || defined(LB_STEM_q8_0)
LB_MV_Q8(q8_0, DecQ8_0)
#if defined(LB_MMA)
LB_MVQ_ALL(q8_0, FrQ8_0, 1, 1)
#endif
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_q4_0)
LB_MV_Q8(q4_0, DecQ4_0)
#if defined(LB_MMA)
LB_MVQ_ALL(q4_0, FrQ4_0, 1, 1)
#endif
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_q4_1)
LB_MV_Q8(q4_1, DecQ4_1)
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_mxfp4)
LB_MV_Q8(mxfp4, DecMxfp4)
LB_MV_1S(mxfp4, DecMxfp4, ActQ8, false)
#if defined(LB_MMA)
LB_MVQ_ALL(mxfp4, FrMxfp4, 1, 1)
#endif
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_nvfp4)
LB_MV_Q8(nvfp4, DecNvfp4)
LB_MV_1S(nvfp4, DecNvfp4, ActQ8, false)
#if defined(LB_MMA)
LB_MVQ_ALL(nvfp4, FrNvfp4, 1, 1)
#endif
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_rocmfp2)
LB_MV_Q8(rocmfp2, DecFp2)
LB_MV_1S(rocmfp2, DecFp2, ActQ8, false)
#if defined(LB_MMA)
LB_MVQ_ALL(rocmfp2, FrFp2, 1, 1)
#endif
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_rocmfp3)
LB_MV_Q8(rocmfp3, DecFp3)
LB_MV_1S(rocmfp3, DecFp3, ActQ8, false)
#if defined(LB_MMA)
LB_MVQ_ALL(rocmfp3, FrFp3, 1, 1)
#endif
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_pq2)
LB_MV_Q8(pq2, DecTern<4>)
LB_MV_1S(pq2, DecTern<4>, ActQ8, false)
#if defined(LB_MMA)
LB_MVQ_ALL(pq2, FrTern<4>, 1, 3)
#endif
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_tq2_0)
LB_MV_Q8(tq2_0, DecTern<8>)
LB_MV_1S(tq2_0, DecTern<8>, ActQ8, false)
#if defined(LB_MMA)
LB_MVQ_ALL(tq2_0, FrTern<8>, 8, 1)
#endif
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_q4_k)
LB_MV_Q8(q4_k, DecQ4K)
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_q6_k)
LB_MV_Q8(q6_k, DecQ6K)
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_hfp4)
LB_MV_F32(hfp4, DecHfp4<false>)
LB_MV_1S(hfp4, DecHfp4<false>, ActF32, true)
#endif
#if !defined(LB_SELECT) || defined(LB_STEM_hfp4p)
LB_MV_F32(hfp4p, DecHfp4<true>)
LB_MV_1S(hfp4p, DecHfp4<true>, ActF32, true)
#endif
