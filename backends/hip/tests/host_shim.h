// host_shim.h: what NVRTC provides, for compiling lowbit_kernels.hip's NVIDIA branch as plain
// C++ on the CPU (tests/vs_reference.rs, `host_emulation_matches_reference`). One thread per
// block and one lane per warp (LB_WARP = 1, LB_BLOCK = 1); the test walks the grid, setting
// the block index with lb_host_block before each call. Warp shuffles return the lane's own
// value, barriers do nothing. Only the matvec kernels are meaningful here (the quantizers
// need 32 lanes); the test feeds them activations prepared by the core.
#pragma once
#include <math.h>
#include <cstring>
#define __CUDACC_RTC__ 1
#define LB_HOST_EMULATION 1
#define LB_BLOCK 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct int4 { int x, y, z, w; };
struct float4 { float x, y, z, w; };
struct lb_dim3 { unsigned x, y, z; };
static lb_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, gridDim = {1, 1, 1};
extern "C" void lb_host_block(unsigned bx, unsigned by, unsigned gx) {
    blockIdx.x = bx;
    blockIdx.y = by;
    gridDim.x = gx;
}
static inline float __shfl_xor_sync(unsigned, float v, int, int) { return v; }
static inline void __syncthreads() {}
static inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; i++) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
    return c;
}
// CUDA: result byte n = byte (s >> 4n) & 7 of the eight bytes {y, x}.
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int n = 0; n < 4; n++) r |= (unsigned)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return r;
}
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
// mma.sync m16n8k32 s8 for one warp, from the 32 lanes' fragments (lowbit_hip.h,
// lb_mma16832, states the PTX ISA's fragment layout): A 16x32 and B 32x8 are rebuilt from the
// fragments, C from its fragments (laid out as D), D = A B + C handed back in D's layout. Written from the layout alone, so a
// kernel that places fragments differently from the hardware fails here too.
static inline void lb_host_mma16832(int (*d)[4], const unsigned (*a)[4], const unsigned (*b)[2], const int (*c)[4]) {
    int A[16][32], B[32][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = c[lane][i];
        for (int k = 0; k < 4; k++) {
            A[g][4 * t + k] = (signed char)(a[lane][0] >> (8 * k));
            A[g + 8][4 * t + k] = (signed char)(a[lane][1] >> (8 * k));
            A[g][16 + 4 * t + k] = (signed char)(a[lane][2] >> (8 * k));
            A[g + 8][16 + 4 * t + k] = (signed char)(a[lane][3] >> (8 * k));
            B[4 * t + k][g] = (signed char)(b[lane][0] >> (8 * k));
            B[16 + 4 * t + k][g] = (signed char)(b[lane][1] >> (8 * k));
        }
    }
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 4; i++) {
            int row = g + 8 * (i >> 1), col = 2 * t + (i & 1), s = C[row][col];
            for (int k = 0; k < 32; k++) s += A[row][k] * B[k][col];
            d[lane][i] = s;
        }
    }
}
