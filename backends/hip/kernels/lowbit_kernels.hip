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

// x (total f32, total % 32 == 0) -> Q8_0 quants + f32(f16(d)) per 32, bit-exact with ggml's
// quantize_row_q8_0_ref: d = amax/127, id = d ? 1/d : 0, q = roundf(x*id). One thread per
// element; groups of 32 lanes are one block.
LB_KERNEL void lb_quantize_q8_0(const float* x, lb_i8* aq, float* ad, lb_u32 total) {
    lb_u64 i = (lb_u64)lb_bid_x() * LB_BLOCK + lb_tid();
    float v = i < total ? x[i] : 0.0f;
    float amax = lb_max32(lb_fabsf(v));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (i < total) {
        aq[i] = (lb_i8)(lb_i32)lb_roundf(v * id);
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
// contribution for one activation column (`dot`), in the order the core reference states.


// Q8_0: sumi * (dw * da).
struct DecQ8_0 {
    lb_i32 w[8];
    float dw;
    LB_DEVM void load(const lb_u8* q, const lb_u8* s, const lb_u8*, lb_u64 blk) {
        const lb_i32* p = (const lb_i32*)(q + blk * 32);
#pragma unroll
        for (int i = 0; i < 8; i++) w[i] = p[i];
        dw = lb_f16_to_f32(((const lb_u16*)s)[blk]);
    }
    LB_DEVM float dot(const lb_i8* a, float da) const {
        const lb_i32* ap = (const lb_i32*)a;
        lb_i32 sumi = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) sumi = lb_dot4(w[i], ap[i], sumi);
        return (float)sumi * (dw * da);
    }
};

// Q4_0: element j = low nibble of byte j, j + 16 = high nibble; (q - 8) made signed bytewise.
struct DecQ4_0 {
    lb_i32 w[8];
    float dw;
    LB_DEVM void load(const lb_u8* q, const lb_u8* s, const lb_u8*, lb_u64 blk) {
        const lb_u32* p = (const lb_u32*)(q + blk * 16);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lb_u32 v = p[i];
            // nibble (0..15) - 8 per byte: +0x78 cannot carry out of a byte; ^0x80 re-signs.
            w[i] = (lb_i32)(((v & 0x0f0f0f0fu) + 0x78787878u) ^ 0x80808080u);
            w[i + 4] = (lb_i32)((((v >> 4) & 0x0f0f0f0fu) + 0x78787878u) ^ 0x80808080u);
        }
        dw = lb_f16_to_f32(((const lb_u16*)s)[blk]);
    }
    LB_DEVM float dot(const lb_i8* a, float da) const {
        const lb_i32* ap = (const lb_i32*)a;
        lb_i32 sumi = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) sumi = lb_dot4(w[i], ap[i], sumi);
        return (float)sumi * dw * da;
    }
};

// UE4M3-b8 (ROCmFPX scale): E = b >> 3, M = b & 7; E = 0: M * 2^-10, else (8 + M) * 2^(E-11).
LB_DEV float lb_ue4m3_b8(lb_u32 b) {
    lb_u32 e = b >> 3, m = b & 7u;
    return e == 0 ? (float)m * 0x1p-10f : (float)(8u + m) * lb_as_float((e + 116u) << 23);
}

// ROCmFP2: each code byte expands (byte permute over the codebook {-4,-1,1,4}) to four int8
// levels; d_act * (s0 * sum0 + s1 * sum1).
struct DecFp2 {
    lb_i32 w[8];
    float s0, s1;
    LB_DEVM void load(const lb_u8* q, const lb_u8* s, const lb_u8*, lb_u64 blk) {
        const lb_u32* p = (const lb_u32*)(q + blk * 8);
        const lb_u32 table = 0x0401FFFCu;  // bytes -4, -1, +1, +4
#pragma unroll
        for (int h = 0; h < 2; h++) {
            lb_u32 v = p[h];
#pragma unroll
            for (int j = 0; j < 4; j++) w[4 * h + j] = (lb_i32)lb_expand2(table, (v >> (8 * j)) & 0xffu);
        }
        lb_u32 e = ((const lb_u16*)s)[blk];
        s0 = lb_ue4m3_b8(e & 0xffu);
        s1 = lb_ue4m3_b8(e >> 8);
    }
    LB_DEVM float dot(const lb_i8* a, float da) const {
        const lb_i32* ap = (const lb_i32*)a;
        lb_i32 m0 = 0, m1 = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            m0 = lb_dot4(w[i], ap[i], m0);
            m1 = lb_dot4(w[i + 4], ap[i + 4], m1);
        }
        return da * (s0 * (float)m0 + s1 * (float)m1);
    }
};

// E2M1 nibble -> f32: magnitude index m (0..7) is 0, 0.5 or (1 + (m&1)/2) * 2^((m>>1) - 1).
LB_DEV float lb_e2m1(lb_u32 nib) {
    lb_u32 m = nib & 7u;
    lb_u32 mag = m < 2u ? (m ? 0x3f000000u : 0u) : ((m << 22) + (126u << 23));
    return lb_as_float(mag | ((nib & 8u) << 28));
}

// HFP4G32 / MFP4G32 (block factor 2^(e-127)) and MFP4G32P (E4M3 block scale); f32 activations:
// s = sum E2M1 * x over the block, acc += s * factor; the row scale multiplies the row total.
template <bool E4M3>
struct DecHfp4 {
    float w[32];
    float f;
    LB_DEVM void load(const lb_u8* q, const lb_u8* s, const lb_u8*, lb_u64 blk) {
        const lb_u32* p = (const lb_u32*)(q + blk * 16);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lb_u32 v = p[i];
#pragma unroll
            for (int j = 0; j < 8; j++) w[8 * i + j] = lb_e2m1((v >> (4 * j)) & 15u);
        }
        lb_u32 b = s[blk];
        if (E4M3) {
            lb_u32 e = b >> 3, m = b & 7u;
            f = e == 0 ? (float)m * 0x1p-9f : (float)(8u + m) * lb_as_float((e + 117u) << 23);
        } else {
            f = lb_as_float(b == 0 ? 0x00400000u : (b << 23));
        }
    }
    LB_DEVM float dotf(const float* x) const {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < 32; i += 4) {
            const float* xp = x + i;
            acc += w[i] * xp[0];
            acc += w[i + 1] * xp[1];
            acc += w[i + 2] * xp[2];
            acc += w[i + 3] * xp[3];
        }
        return acc * f;
    }
};

// ------------------------------------------------------------------ matvec skeletons ---------

// y[col*rows + row] = sum over blocks of dec.dot(activations of col), Q8_0 activations.
template <int NC, class Dec>
LB_DEV void lb_mv_q8(const lb_u8* wq, const lb_u8* ws, const lb_u8* wr, const lb_i8* aq, const float* ad,
                     float* y, lb_u32 rows, lb_u32 nb, lb_u32 ncols) {
    lb_u32 warp = lb_tid() / LB_WARP, lane = lb_tid() % LB_WARP;
    lb_u32 col0 = lb_bid_y() * NC;
    lb_u32 nc = ncols - col0 < (lb_u32)NC ? ncols - col0 : (lb_u32)NC;
    lb_u64 k = (lb_u64)nb * 32;
    for (lb_u32 row = lb_bid_x() * LB_ROWS_PER_CTA + warp; row < rows; row += lb_grid_x() * LB_ROWS_PER_CTA) {
        float acc[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) acc[c] = 0.0f;
        for (lb_u32 b = lane; b < nb; b += LB_WARP) {
            Dec dec;
            dec.load(wq, ws, wr, (lb_u64)row * nb + b);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if ((lb_u32)c < nc) {
                    lb_u64 col = col0 + c;
                    acc[c] += dec.dot(aq + col * k + (lb_u64)b * 32, ad[col * nb + b]);
                }
            }
        }
#pragma unroll
        for (int c = 0; c < NC; c++) {
            float v = lb_warp_sum(acc[c]);
            if (lane == 0 && (lb_u32)c < nc) y[(lb_u64)(col0 + c) * rows + row] = v;
        }
    }
}

// The same for f32 activations and a per-row f16 scale (HFP4 family).
template <int NC, class Dec>
LB_DEV void lb_mv_f32(const lb_u8* wq, const lb_u8* ws, const lb_u8* wr, const float* x, float* y,
                      lb_u32 rows, lb_u32 nb, lb_u32 ncols) {
    lb_u32 warp = lb_tid() / LB_WARP, lane = lb_tid() % LB_WARP;
    lb_u32 col0 = lb_bid_y() * NC;
    lb_u32 nc = ncols - col0 < (lb_u32)NC ? ncols - col0 : (lb_u32)NC;
    lb_u64 k = (lb_u64)nb * 32;
    for (lb_u32 row = lb_bid_x() * LB_ROWS_PER_CTA + warp; row < rows; row += lb_grid_x() * LB_ROWS_PER_CTA) {
        float acc[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) acc[c] = 0.0f;
        for (lb_u32 b = lane; b < nb; b += LB_WARP) {
            Dec dec;
            dec.load(wq, ws, wr, (lb_u64)row * nb + b);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if ((lb_u32)c < nc) acc[c] += dec.dotf(x + (col0 + c) * k + (lb_u64)b * 32);
            }
        }
        float rs = lb_f16_to_f32(((const lb_u16*)wr)[row]);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            float v = lb_warp_sum(acc[c]);
            if (lane == 0 && (lb_u32)c < nc) y[(lb_u64)(col0 + c) * rows + row] = v * rs;
        }
    }
}

#define LB_MV_Q8(name, Dec, NC)                                                                   \
    LB_KERNEL void name(const lb_u8* wq, const lb_u8* ws, const lb_u8* wr, const lb_i8* aq,      \
                        const float* ad, float* y, lb_u32 rows, lb_u32 nb, lb_u32 ncols) {       \
        lb_mv_q8<NC, Dec>(wq, ws, wr, aq, ad, y, rows, nb, ncols);                               \
    }
#define LB_MV_F32(name, Dec, NC)                                                                  \
    LB_KERNEL void name(const lb_u8* wq, const lb_u8* ws, const lb_u8* wr, const float* x,       \
                        float* y, lb_u32 rows, lb_u32 nb, lb_u32 ncols) {                        \
        lb_mv_f32<NC, Dec>(wq, ws, wr, x, y, rows, nb, ncols);                                   \
    }
#define LB_MV_Q8_ALL(fmt, Dec)                                                                   \
    LB_MV_Q8(lb_mv_##fmt##_1, Dec, 1) LB_MV_Q8(lb_mv_##fmt##_2, Dec, 2)                         \
    LB_MV_Q8(lb_mv_##fmt##_4, Dec, 4) LB_MV_Q8(lb_mv_##fmt##_8, Dec, 8)                         \
    LB_MV_Q8(lb_mv_##fmt##_16, Dec, 16)
#define LB_MV_F32_ALL(fmt, Dec)                                                                  \
    LB_MV_F32(lb_mv_##fmt##_1, Dec, 1) LB_MV_F32(lb_mv_##fmt##_2, Dec, 2)                       \
    LB_MV_F32(lb_mv_##fmt##_4, Dec, 4) LB_MV_F32(lb_mv_##fmt##_8, Dec, 8)                       \
    LB_MV_F32(lb_mv_##fmt##_16, Dec, 16)

LB_MV_Q8_ALL(q8_0, DecQ8_0)
LB_MV_Q8_ALL(q4_0, DecQ4_0)
LB_MV_Q8_ALL(rocmfp2, DecFp2)
LB_MV_F32_ALL(hfp4, DecHfp4<false>)
LB_MV_F32_ALL(hfp4p, DecHfp4<true>)
