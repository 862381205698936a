// lowbit_kernels.hip: every lowbit GPU kernel (activation quantization, the bandwidth probe,
// and the matrix-vector products of each weight format), written once against lowbit_hip.h.
//
// Device layout (made by the host's repack, backends/hip/src/layout.rs): each matrix is split
// into planes so that every load is aligned and coalesced:
//   q  : the per-block quant bytes of every block, row after row (16 B per Q4_0 block, ...)
//   s  : the per-block scale bytes, row after row (f16 for ggml types, 2 bytes for ROCmFP2,
//        1 byte for the HFP4 family)
//   r  : per-row values (the HFP4 family's f16 row scale), else unused
// Activations: Q8_0 quants (i8, x[col*K + k]) with one f32 scale per 32 (the f16 value
// widened), or f32 (HFP4 family, rotated first for MFP4).
//
// Work shapes: one warp (wavefront) per output row; each lane walks the row's blocks with a
// stride of LB_WARP, decodes a weight block once and applies it to NC activation columns
// (NC = 1 for n = 1; 2, 4, 8 or 16 for n = 2..16); larger n runs in chunks of 16 columns
// (grid y). Rows are grid-strided, so a launch is correct for any warp width.
//
// What must not live here: host logic, format validation (the host validates on upload).
#include "lowbit_hip.h"

#define LB_BLOCK 256
#define LB_ROWS_PER_CTA (LB_BLOCK / LB_WARP)

// ------------------------------------------------------------------ activations --------------

// x (total f32, total % 32 == 0, columns of nb blocks) -> Q8_0 quants + f32(f16(d)) per 32,
// bit-exact with ggml's quantize_row_q8_0_ref: d = amax/127, id = d ? 1/d : 0,
// q = roundf(x*id). One thread per element; groups of 32 lanes are one block.
// Quant layout per column: the first 16 quants of every block (16 B each, block order), then
// the last 16 of every block, so that a warp's 16-byte loads are contiguous. With `order` = 1
// each half is stored in lb_codebook16 order (ROCmFP2's kernel), else in element order.
LB_KERNEL void lb_quantize_q8_0(const float* x, lb_i8* aq, float* ad, lb_u32 total, lb_u32 nb, lb_u32 order) {
    lb_u64 i = (lb_u64)lb_bid_x() * LB_BLOCK + lb_tid();
    float v = i < total ? x[i] : 0.0f;
    float amax = lb_max32(lb_fabsf(v));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (i < total) {
        lb_u64 k = (lb_u64)nb * 32, col = i / k, w = i % k, b = w >> 5, j = w & 31u;
        lb_u64 p = order == 1 ? (lb_u64)lb_codebook4_pos((int)(j & 15u)) : (j & 15u);
        aq[col * k + (j >> 4) * (nb * 16ull) + b * 16 + p] = (lb_i8)(lb_i32)lb_roundf(v * id);
        if ((i & 31u) == 0) ad[i >> 5] = lb_f16_to_f32(lb_f32_to_f16(d));
    }
}

// FWHT-256 with hipfire's seeded signs, in place on x (one 256-segment per 256 threads):
// x *= s1; butterflies with strides 1..128 (a+b, a-b); x *= 0.0625 * s2. The sign vectors are
// passed bit-packed (8 words each, LSB first, 1 = +1).
LB_KERNEL void lb_fwht256(float* x, const lb_u32* signs, lb_u32 segments) {
#if defined(LB_NVIDIA)
    __shared__ float buf[256];
#else
    __attribute__((shared)) float buf[256];
#endif
    lb_u32 seg = lb_bid_x();
    if (seg >= segments) return;
    lb_u32 t = lb_tid();
    float* p = x + (lb_u64)seg * 256;
    float v = p[t];
    if (!((signs[t >> 5] >> (t & 31u)) & 1u)) v = -v;
    buf[t] = v;
    for (lb_u32 h = 1; h < 256; h <<= 1) {
#if defined(LB_NVIDIA)
        __syncthreads();
#else
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
        __builtin_amdgcn_s_barrier();
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#endif
        float a = buf[t & ~h], b = buf[t | h];
        v = (t & h) ? a - b : a + b;
#if defined(LB_NVIDIA)
        __syncthreads();
#else
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
        __builtin_amdgcn_s_barrier();
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#endif
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

// ------------------------------------------------------------------ weight decoders ---------
// Each decoder loads one weight block of one row (`load`) and then returns that block's
// contribution for one activation column (`dot`, activations already in registers), in the
// order the core reference states. Loads are 16-byte vectors where the plane allows.

// 32 Q8_0 activation quants of one block as 8 words.
struct ActQ8 {
    lb_i32 a[8];
    float d;
    LB_DEVM void load(const lb_i8* aq, const float* ad, lb_u64 col, lb_u32 b, lb_u32 nb) {
        const lb_i8* base = aq + col * nb * 32;
        lb_i32x4 u = *(const lb_i32x4*)(base + b * 16ull);
        lb_i32x4 v = *(const lb_i32x4*)(base + (lb_u64)(nb + b) * 16);
        lb_u64 blk = col * nb + b;
        a[0] = u.x; a[1] = u.y; a[2] = u.z; a[3] = u.w;
        a[4] = v.x; a[5] = v.y; a[6] = v.z; a[7] = v.w;
        d = ad[blk];
    }
};

// Q8_0: sumi * (dw * da).
struct DecQ8_0 {
    lb_i32 w[8];
    float dw;
    LB_DEVM void load(const lb_u8* q, const lb_u8* s, lb_u64 row, lb_u32 b, lb_u32 nb) {
        // Plane layout as the activations': first halves of the row's blocks, then second.
        const lb_u8* base = q + row * nb * 32;
        lb_i32x4 u = lb_ld_stream16(base + b * 16ull);
        lb_i32x4 v = lb_ld_stream16(base + (lb_u64)(nb + b) * 16);
        lb_u64 blk = row * nb + b;
        w[0] = u.x; w[1] = u.y; w[2] = u.z; w[3] = u.w;
        w[4] = v.x; w[5] = v.y; w[6] = v.z; w[7] = v.w;
        dw = lb_f16_to_f32(((const lb_u16*)s)[blk]);
    }
    LB_DEVM float dot(const ActQ8& a) const {
        lb_i32 sumi = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) sumi = lb_dot4(w[i], a.a[i], sumi);
        return (float)sumi * (dw * a.d);
    }
};

// Q4_0: element j = low nibble of byte j, j + 16 = high nibble; (q - 8) made signed bytewise.
struct DecQ4_0 {
    lb_i32 w[8];
    float dw;
    LB_DEVM void load(const lb_u8* q, const lb_u8* s, lb_u64 row, lb_u32 b, lb_u32 nb) {
        lb_u64 blk = row * nb + b;
        lb_i32x4 u = lb_ld_stream16(q + blk * 16);
        lb_u32 v[4] = {(lb_u32)u.x, (lb_u32)u.y, (lb_u32)u.z, (lb_u32)u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            // nibble (0..15) - 8 per byte: +0x78 cannot carry out of a byte; ^0x80 re-signs.
            w[i] = (lb_i32)(((v[i] & 0x0f0f0f0fu) + 0x78787878u) ^ 0x80808080u);
            w[i + 4] = (lb_i32)((((v[i] >> 4) & 0x0f0f0f0fu) + 0x78787878u) ^ 0x80808080u);
        }
        dw = lb_f16_to_f32(((const lb_u16*)s)[blk]);
    }
    LB_DEVM float dot(const ActQ8& a) const {
        lb_i32 sumi = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) sumi = lb_dot4(w[i], a.a[i], sumi);
        return (float)sumi * dw * a.d;
    }
};

// UE4M3-b8 (ROCmFPX scale): E = b >> 3, M = b & 7; E = 0: M * 2^-10, else (8 + M) * 2^(E-11)
// = (1 + M/8) * 2^(E-8), i.e. f32 bits (E + 119) << 23 | M << 20. E = 0 is the E = 1 value
// minus 2^-7 (exact), so no int-to-float conversion is needed.
LB_DEV float lb_ue4m3_b8(lb_u32 b) {
    lb_u32 e = b >> 3, m = b & 7u;
    float v = lb_as_float(((e == 0 ? 1u : e) + 119u) << 23 | (m << 20));
    return e == 0 ? v - 0x1p-7f : v;
}

// ROCmFP2: each group of four codes expands (one byte permute over the codebook
// {-4,-1,1,4}) to four int8 levels, in lb_codebook16 order (the activations were stored in the
// same order by lb_quantize_q8_0 with order = 1); d_act * (s0 * sum0 + s1 * sum1).
struct DecFp2 {
    lb_i32 w[8];
    float s0, s1;
    LB_DEVM void load(const lb_u8* q, const lb_u8* s, lb_u64 row, lb_u32 b, lb_u32 nb) {
        lb_u64 blk = row * nb + b;
        lb_u32 p[2];
        lb_ld_stream8(q + blk * 8, p[0], p[1]);
        const lb_u32 table = 0x0401FFFCu;  // bytes -4, -1, +1, +4
#pragma unroll
        for (int h = 0; h < 2; h++) {
            lb_u32 o[4];
            lb_codebook16(table, p[h], o);
#pragma unroll
            for (int g = 0; g < 4; g++) w[4 * h + g] = (lb_i32)o[g];
        }
        lb_u32 e = ((const lb_u16*)s)[blk];
        s0 = lb_ue4m3_b8(e & 0xffu);
        s1 = lb_ue4m3_b8(e >> 8);
    }
    LB_DEVM float dot(const ActQ8& a) const {
        lb_i32 m0 = 0, m1 = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            m0 = lb_dot4(w[i], a.a[i], m0);
            m1 = lb_dot4(w[i + 4], a.a[i + 4], m1);
        }
        return a.d * (s0 * (float)m0 + s1 * (float)m1);
    }
};

// E2M1 nibble -> f32: magnitude index m (0..7) is 0, 0.5 or (1 + (m&1)/2) * 2^((m>>1) - 1).
LB_DEV float lb_e2m1(lb_u32 nib) {
    lb_u32 m = nib & 7u;
    lb_u32 mag = m < 2u ? (m ? 0x3f000000u : 0u) : ((m << 22) + (126u << 23));
    return lb_as_float(mag | ((nib & 8u) << 28));
}

// 32 f32 activations of one block.
struct ActF32 {
    float x[32];
    LB_DEVM void load(const float* xs, lb_u64 col, lb_u32 b, lb_u32 nb) {
        const lb_f32x4* p = (const lb_f32x4*)(xs + col * nb * 32);  // interleaved (lb_interleave_f32)
#pragma unroll
        for (int i = 0; i < 8; i++) {
            lb_f32x4 v = p[(lb_u64)i * nb + b];
            x[4 * i] = v.x; x[4 * i + 1] = v.y; x[4 * i + 2] = v.z; x[4 * i + 3] = v.w;
        }
    }
};

// HFP4G32 / MFP4G32 (block factor 2^(e-127)) and MFP4G32P (E4M3 block scale); f32 activations:
// s = sum E2M1 * x over the block, acc += s * factor; the row scale multiplies the row total.
template <bool E4M3>
struct DecHfp4 {
    lb_u32 v[4];
    float f;
    LB_DEVM void load(const lb_u8* q, const lb_u8* s, lb_u64 row, lb_u32 b, lb_u32 nb) {
        lb_u64 blk = row * nb + b;
        lb_i32x4 u = lb_ld_stream16(q + blk * 16);
        v[0] = (lb_u32)u.x; v[1] = (lb_u32)u.y; v[2] = (lb_u32)u.z; v[3] = (lb_u32)u.w;
        lb_u32 sb = s[blk];
        if (E4M3) {
            lb_u32 e = sb >> 3, m = sb & 7u;
            f = e == 0 ? (float)m * 0x1p-9f : (float)(8u + m) * lb_as_float((e + 117u) << 23);
        } else {
            f = lb_as_float(sb == 0 ? 0x00400000u : (sb << 23));
        }
    }
    LB_DEVM float dot(const ActF32& a) const {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 8; j++) acc += lb_e2m1((v[i] >> (4 * j)) & 15u) * a.x[8 * i + j];
        }
        return acc * f;
    }
};

// ------------------------------------------------------------------ matvec skeleton -----------

LB_DEV void lb_load_act(ActQ8& a, const void* p, const float* ad, lb_u64 col, lb_u32 b, lb_u32 nb) {
    a.load((const lb_i8*)p, ad, col, b, nb);
}
LB_DEV void lb_load_act(ActF32& a, const void* p, const float*, lb_u64 col, lb_u32 b, lb_u32 nb) {
    a.load((const float*)p, col, b, nb);
}


// y[col*rows + row] = sum over blocks of dec.dot(activations of col) (times the row's f16
// scale when the format has one: `rowscale`). Each warp owns R consecutive rows.
// R = rows per warp: activations loaded once per block and column serve R rows.
template <int NC, int R, class Dec, class Act, bool ROWSCALE>
LB_DEV void lb_mv(const lb_u8* wq, const lb_u8* ws, const lb_u8* wr, const void* act0, const float* ad,
                  float* y, lb_u32 rows, lb_u32 nb, lb_u32 ncols) {
    lb_u32 warp = lb_tid() / LB_WARP, lane = lb_tid() % LB_WARP;
    lb_u32 col0 = lb_bid_y() * NC;
    lb_u32 nc = ncols - col0 < (lb_u32)NC ? ncols - col0 : (lb_u32)NC;
    lb_u32 groups = (rows + R - 1) / R;
    for (lb_u32 g = lb_bid_x() * LB_ROWS_PER_CTA + warp; g < groups; g += lb_grid_x() * LB_ROWS_PER_CTA) {
        lb_u32 row0 = g * R;
        float acc[R][NC];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;
        for (lb_u32 b = lane; b < nb; b += LB_WARP) {
            Dec dec[R];
#pragma unroll
            for (int r = 0; r < R; r++) {
                lb_u32 row = row0 + r < rows ? row0 + r : rows - 1;  // clamp: loads stay in bounds
                dec[r].load(wq, ws, row, b, nb);
            }
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if ((lb_u32)c < nc) {
                    Act a;
                    lb_load_act(a, act0, ad, col0 + c, b, nb);
#pragma unroll
                    for (int r = 0; r < R; r++) acc[r][c] += dec[r].dot(a);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            lb_u32 row = row0 + r;
            float rs = 1.0f;
            if (ROWSCALE && row < rows) rs = lb_f16_to_f32(((const lb_u16*)wr)[row]);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                float v = lb_warp_sum(acc[r][c]);
                if (ROWSCALE) v *= rs;
                if (lane == 0 && (lb_u32)c < nc && row < rows) y[(lb_u64)(col0 + c) * rows + row] = v;
            }
        }
    }
}

#define LB_MV_Q8(fmt, Dec, NC, R)                                                                 \
    LB_KERNEL void lb_mv_##fmt##_##NC##_r##R(const lb_u8* wq, const lb_u8* ws, const lb_u8* wr,      \
                                              const lb_i8* aq, const float* ad, float* y, lb_u32 rows, \
                                              lb_u32 nb, lb_u32 ncols) {                               \
        lb_mv<NC, R, Dec, ActQ8, false>(wq, ws, wr, aq, ad, y, rows, nb, ncols);                      \
    }
#define LB_MV_F32(fmt, Dec, NC, R)                                                                \
    LB_KERNEL void lb_mv_##fmt##_##NC##_r##R(const lb_u8* wq, const lb_u8* ws, const lb_u8* wr,      \
                                              const float* x, float* y, lb_u32 rows, lb_u32 nb,       \
                                              lb_u32 ncols) {                                          \
        lb_mv<NC, R, Dec, ActF32, true>(wq, ws, wr, x, (const float*)0, y, rows, nb, ncols);          \
    }
// Every column tile (1, 2, 4, 8, 16) times rows per warp (1, 2, 4); the host picks one.
#define LB_MV_NC(M, fmt, Dec, NC) M(fmt, Dec, NC, 1) M(fmt, Dec, NC, 2) M(fmt, Dec, NC, 4)
#define LB_MV_ALL(M, fmt, Dec)                                                                    \
    LB_MV_NC(M, fmt, Dec, 1) LB_MV_NC(M, fmt, Dec, 2) LB_MV_NC(M, fmt, Dec, 4)                    \
    LB_MV_NC(M, fmt, Dec, 8) LB_MV_NC(M, fmt, Dec, 16)

LB_MV_ALL(LB_MV_Q8, q8_0, DecQ8_0)
LB_MV_ALL(LB_MV_Q8, q4_0, DecQ4_0)
LB_MV_ALL(LB_MV_Q8, rocmfp2, DecFp2)
LB_MV_ALL(LB_MV_F32, hfp4, DecHfp4<false>)
LB_MV_ALL(LB_MV_F32, hfp4p, DecHfp4<true>)
