// lowbit_hip.h: the portability layer every lowbit HIP kernel is written against.
//
// One kernel source compiles two ways:
//  * AMD: hiprtc, or clang -x hip --cuda-device-only -nogpuinc -nogpulib (no ROCm headers:
//    this file never includes hip_runtime.h). Thread ids, shuffles, dot4 and byte-permute map
//    to amdgcn builtins; wave32 (RDNA) and wave64 (CDNA) both work because every reduction
//    is written over LB_WARP lanes with xor shuffles.
//  * NVIDIA: NVRTC. The same names map to CUDA's threadIdx/__shfl_xor_sync/__dp4a/__byte_perm,
//    the way HIP itself runs on NVIDIA.
//
// What lives here: ids, shuffles, integer dot products, byte permutes and table lookups, bit
// casts, the f16 conversions (bit-exact, written out so no vendor half header is needed),
// global -> shared staged copies (cp.async on NVIDIA, plain loads on AMD), and on NVIDIA the
// int8 tensor-core MMA (LB_MMA; emulated over 32 lanes by the host tests). What must not
// live here: anything that knows a weight format (that is the kernels' job).
#pragma once

typedef unsigned char lb_u8;
typedef signed char lb_i8;
typedef unsigned short lb_u16;
typedef unsigned int lb_u32;
typedef int lb_i32;
typedef unsigned long long lb_u64;

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
// ---------------------------------------------------------------- NVIDIA (NVRTC) ----------
#define LB_NVIDIA 1
#if defined(LB_HOST_EMULATION)
// The NVIDIA branch compiled for the CPU by the tests (backends/hip/tests/host_shim.h): one
// lane per warp, plain loads.
#define LB_WARP 1
#else
#define LB_WARP 32
#endif
#define LB_KERNEL extern "C" __global__
#define LB_DEV static __device__ __forceinline__
typedef int4 lb_i32x4;      // 16-byte vector loads: .x .y .z .w
typedef float4 lb_f32x4;
LB_DEV lb_u32 lb_tid() { return threadIdx.x; }
LB_DEV lb_u32 lb_bid_x() { return blockIdx.x; }
LB_DEV lb_u32 lb_bid_y() { return blockIdx.y; }
LB_DEV lb_u32 lb_grid_x() { return gridDim.x; }
LB_DEV float lb_shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m, 32); }
// Signed 8-bit dot of four lanes plus c.
LB_DEV lb_i32 lb_dot4(lb_i32 a, lb_i32 b, lb_i32 c) { return __dp4a(a, b, c); }
// Byte permute with a byte-granular selector: result byte i = byte sel.byte[i] (0..7) of the
// 8-byte value (hi:lo). CUDA's selector takes one nibble per result byte.
LB_DEV lb_u32 lb_perm(lb_u32 hi, lb_u32 lo, lb_u32 sel) {
    lb_u32 nib = (sel & 0x7u) | ((sel >> 4) & 0x70u) | ((sel >> 8) & 0x700u) | ((sel >> 12) & 0x7000u);
    return __byte_perm(lo, hi, nib);
}
// The sixteen 2-bit codes of v as four words of four table bytes (group g = out[g]): two masks,
// two shifts and four PRMTs per sixteen weights (prmt reads the low 16 selector bits, one
// nibble per byte). Byte k of out[g] is the code of element 2k + {0,1,8,9}[g];
// lb_codebook4_pos says where the activations go.
// LB_CB_SEL selects the selector form (docs/BENCHMARKS.md, session 10):
//  0: __byte_perm on m0, m1 and their >> 16. NVRTC narrows each selector to the 16 bits PRMT
//    reads, which turns the two shared masks into four mask-and-shift pairs (7 instructions
//    per word instead of 5), but it knows bit 3 of every nibble is 0.
//  1: m0 and m1 through lb_opaque (5 instructions per word at the LLVM level). Measured
//    slower: __byte_perm's selector nibbles are 3 bits wide, so without the knowledge that
//    bit 3 (PRMT's sign-replicate flag) is clear ptxas adds a `& 0x7777` before every PRMT.
//  2 (default): the PRMT as inline PTX (`prmt.b32`, hardware semantics: bit 3 must be and is
//    clear), so neither narrowing nor the extra mask can happen. With LB_CB_TAB = 2, on the
//    H200 at 16384^2, n = 1: PQ2_0 28.6 -> 25.1 us, TQ2_0 29.7 -> 26.4, PTQ1_0 28.6 -> 25.1,
//    ROCmFP2 unchanged (28.7).
#ifndef LB_CB_SEL
#define LB_CB_SEL 2
#endif
#if defined(LB_HOST_EMULATION)
LB_DEV lb_u32 lb_opaque(lb_u32 x) { return x; }
LB_DEV lb_u32 lb_opaque_zero() { return 0u; }
LB_DEV lb_u32 lb_prmt(lb_u32 a, lb_u32 b, lb_u32 sel) { return __byte_perm(a, b, sel & 0x7777u); }
#else
// x, through an empty asm: the same bits, but the compiler can no longer look through it.
LB_DEV lb_u32 lb_opaque(lb_u32 x) {
    asm("" : "+r"(x));
    return x;
}
// Zero (tid.x < 1024, so tid.x >> 10 = 0), as a per-thread value the compilers cannot fold:
// a table XORed with it stays in one register for a whole kernel instead of being copied from
// a uniform register before each PRMT (LB_CB_TAB, LB_LUT8_TAB in lowbit_kernels.hip).
LB_DEV lb_u32 lb_opaque_zero() {
    lb_u32 t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t >> 10;
}
// PTX prmt.b32 in its default mode: the low 16 bits of sel, one nibble per result byte, bits
// 0-2 the byte of {b, a}, bit 3 replicates that byte's sign (callers keep it clear).
LB_DEV lb_u32 lb_prmt(lb_u32 a, lb_u32 b, lb_u32 sel) {
    lb_u32 d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}
#endif
LB_DEV void lb_codebook16(lb_u32 table, lb_u32 v, lb_u32 out[4]) {
#if LB_CB_SEL == 2
    lb_u32 m0 = v & 0x33333333u, m1 = (v >> 2) & 0x33333333u;
    out[0] = lb_prmt(table, 0u, m0);
    out[1] = lb_prmt(table, 0u, m1);
    out[2] = lb_prmt(table, 0u, m0 >> 16);
    out[3] = lb_prmt(table, 0u, m1 >> 16);
#else
#if LB_CB_SEL == 1
    lb_u32 m0 = lb_opaque(v & 0x33333333u), m1 = lb_opaque((v >> 2) & 0x33333333u);
#else
    lb_u32 m0 = v & 0x33333333u, m1 = (v >> 2) & 0x33333333u;
#endif
    out[0] = __byte_perm(table, 0u, m0);
    out[1] = __byte_perm(table, 0u, m1);
    out[2] = __byte_perm(table, 0u, m0 >> 16);
    out[3] = __byte_perm(table, 0u, m1 >> 16);
#endif
}
// Position (0..15) at which the activation of element e (0..15) of a 16-code word is stored
// so that group g's bytes line up with lb_codebook4's: 4g + k.
LB_DEV int lb_codebook4_pos(int e) { return 4 * ((e >= 8 ? 2 : 0) + (e & 1)) + ((e & 7) >> 1); }
// 16-entry byte table lookup over the nibbles of v (table t: bytes 0..15 in t[0..3]): byte k
// of lo = t[low nibble of byte k of v], byte k of hi = t[high nibble of byte k]. PRMT reads one
// nibble per result byte (bits 0-2 through __byte_perm), so the eight nibbles go through two
// table halves and a select on bit 3, then two PRMTs restore byte order (the method of
// llama.cpp's get_int_from_table_16, ggml-cuda/vecdotq.cuh).
LB_DEV void lb_lut16(const lb_u32 t[4], lb_u32 v, lb_u32& lo, lb_u32& hi) {
    lb_u32 sel = 0x32103210u | ((v & 0x88888888u) >> 1);
    lb_u32 r[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        lb_u32 q = v >> (16 * i);
        r[i] = __byte_perm(__byte_perm(t[0], t[1], q), __byte_perm(t[2], t[3], q), sel >> (16 * i));
    }
    lo = __byte_perm(r[0], r[1], 0x6420u);
    hi = __byte_perm(r[0], r[1], 0x7531u);
}
// 8-entry byte table lookup (t_lo: entries 0-3, t_hi: 4-7) over the nibbles of v, every
// nibble below 8: byte k of lo = t[low nibble of byte k], of hi = t[high nibble]. PRMT takes
// the nibbles in place (v's low half: lo0 hi0 lo1 hi1), two more PRMTs restore byte order:
// five instructions per eight codes.
LB_DEV void lb_lut8(lb_u32 t_lo, lb_u32 t_hi, lb_u32 v, lb_u32& lo, lb_u32& hi) {
    lb_u32 r0 = __byte_perm(t_lo, t_hi, v), r1 = __byte_perm(t_lo, t_hi, v >> 16);
    lo = __byte_perm(r0, r1, 0x6420u);
    hi = __byte_perm(r0, r1, 0x7531u);
}
#define LB_DEVM __device__ __forceinline__
// binary16 bits -> f32 on the conversion unit (exact; subnormals kept). The host emulation
// uses the written-out conversion below.
#if defined(LB_HOST_EMULATION)
#define LB_SOFT_H2F 1
#else
LB_DEV float lb_h2f(lb_u32 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h));
    return f;
}
#endif
// Weight loads that should not evict the (reused) activations from L1: cache-streaming
// (evict-first) 16- and 8-byte loads.
#if defined(LB_HOST_EMULATION)
LB_DEV lb_i32x4 lb_ld_stream16(const void* p) { return *(const lb_i32x4*)p; }
LB_DEV void lb_ld_stream8(const void* p, lb_u32& a, lb_u32& b) {
    a = ((const lb_u32*)p)[0];
    b = ((const lb_u32*)p)[1];
}
#else
// LB_LD_W picks the cache operator: 0 (default) .cs (evict-first in L1 and L2), 1 .cg (L2
// only: the weights never take L1 lines from the activations), 2 .L1::no_allocate.
#ifndef LB_LD_W
#define LB_LD_W 0
#endif
#if LB_LD_W == 1
#define LB_LD_OP ".cg"
#elif LB_LD_W == 2
#define LB_LD_OP ".L1::no_allocate"
#else
#define LB_LD_OP ".cs"
#endif
LB_DEV lb_i32x4 lb_ld_stream16(const void* p) {
    lb_i32x4 r;
    asm("ld.global" LB_LD_OP ".v4.s32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
LB_DEV void lb_ld_stream8(const void* p, lb_u32& a, lb_u32& b) {
    asm("ld.global" LB_LD_OP ".v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "l"(p));
}
#endif
// Warp-collective int8 tensor-core MMA, m16n8k32 (D = A B + c, s32; mma.sync, sm_80+), on
// per-lane fragment arrays of LB_SIM lanes: one (the calling lane's) on the device, all 32 in
// the host emulation (tests/host_shim.h computes the product from the fragments). Fragments as
// the PTX ISA lays them out, lane = 4 g + t: a[0] = A[g][4t..4t+3], a[1] = A[g+8][4t..],
// a[2] = A[g][16+4t..], a[3] = A[g+8][16+4t..] (row-major bytes); b[0] = B[4t..4t+3][g],
// b[1] = B[16+4t..][g]; d[0] = D[g][2t], d[1] = D[g][2t+1], d[2] = D[g+8][2t],
// d[3] = D[g+8][2t+1]; c (the accumulator C, e.g. the i2f magic number) is laid out as d.
#define LB_MMA 1
#if defined(LB_HOST_EMULATION)
#define LB_SIM 32
LB_DEV void lb_syncwarp() {}
LB_DEV void lb_mma16832(lb_i32 (*d)[4], const lb_u32 (*a)[4], const lb_u32 (*b)[2], const lb_i32 (*c)[4]) {
    lb_host_mma16832(d, a, b, c);
}
#else
#define LB_SIM 1
LB_DEV void lb_syncwarp() { __syncwarp(); }
LB_DEV void lb_mma16832(lb_i32 (*d)[4], const lb_u32 (*a)[4], const lb_u32 (*b)[2], const lb_i32 (*c)[4]) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};"
        : "=r"(d[0][0]), "=r"(d[0][1]), "=r"(d[0][2]), "=r"(d[0][3])
        : "r"(a[0][0]), "r"(a[0][1]), "r"(a[0][2]), "r"(a[0][3]), "r"(b[0][0]), "r"(b[0][1]),
          "r"(c[0][0]), "r"(c[0][1]), "r"(c[0][2]), "r"(c[0][3]));
}
#endif
// Programmatic dependent launch (sm_90+; no-ops elsewhere and in the host emulation): a kernel
// launched with the programmatic-serialization attribute may start while the kernel before it
// runs; lb_grid_wait blocks until that kernel has finished and its writes are visible, and
// lb_grid_launch_dependents lets the next kernel start early. Without the attribute the wait
// returns at once (stream order already holds).
#if defined(LB_HOST_EMULATION) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900
LB_DEV void lb_grid_wait() {}
LB_DEV void lb_grid_launch_dependents() {}
#else
LB_DEV void lb_grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
LB_DEV void lb_grid_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" :::); }
#endif
#define LB_SHARED __shared__
LB_DEV void lb_barrier() { __syncthreads(); }
LB_DEV float lb_roundf(float x) { return roundf(x); }
LB_DEV float lb_rintf(float x) { return rintf(x); }
LB_DEV float lb_fabsf(float x) { return fabsf(x); }
LB_DEV float lb_fmaxf(float a, float b) { return fmaxf(a, b); }
LB_DEV float lb_as_float(lb_u32 u) { return __uint_as_float(u); }
LB_DEV lb_u32 lb_as_u32(float f) { return __float_as_uint(f); }
#elif defined(__HIP__) || defined(__AMDGCN__)
// ---------------------------------------------------------------- AMD (hiprtc / clang) ----
#define LB_AMD 1
#if defined(__AMDGCN_WAVEFRONT_SIZE__)
#define LB_WARP __AMDGCN_WAVEFRONT_SIZE__
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
#define LB_WARP __AMDGCN_WAVEFRONT_SIZE
#else
#define LB_WARP 64
#endif
#define LB_KERNEL extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, 256)))
#define LB_DEV static __attribute__((device)) __attribute__((always_inline)) inline
typedef int lb_i32x4 __attribute__((ext_vector_type(4)));    // 16-byte vector loads
typedef float lb_f32x4 __attribute__((ext_vector_type(4)));
LB_DEV lb_u32 lb_tid() { return __builtin_amdgcn_workitem_id_x(); }
LB_DEV lb_u32 lb_bid_x() { return __builtin_amdgcn_workgroup_id_x(); }
LB_DEV lb_u32 lb_bid_y() { return __builtin_amdgcn_workgroup_id_y(); }
LB_DEV lb_u32 lb_grid_x() {
    // Dispatch packet grid size (work-items) divided by the work-group size.
    return __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x();
}
LB_DEV lb_u32 lb_lane_id() { return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)); }
LB_DEV float lb_shfl_xor(float v, int m) {
    int src = (int)((lb_lane_id() ^ (lb_u32)m) << 2);
    return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(src, __builtin_bit_cast(int, v)));
}
LB_DEV lb_i32 lb_dot4(lb_i32 a, lb_i32 b, lb_i32 c) {
#if defined(__gfx11__) || defined(__gfx12__) || defined(__GFX11__) || defined(__GFX12__)
    // RDNA3/3.5/4: v_dot4_i32_iu8 with both operands signed.
    return __builtin_amdgcn_sudot4(true, a, true, b, c, false);
#else
    // CDNA3 (gfx942) and RDNA2: v_dot4(c)_i32_i8.
    return __builtin_amdgcn_sdot4(a, b, c, false);
#endif
}
// v_perm_b32: bytes 0-3 come from the second operand, 4-7 from the first.
LB_DEV lb_u32 lb_perm(lb_u32 hi, lb_u32 lo, lb_u32 sel) { return __builtin_amdgcn_perm(hi, lo, sel); }
// As on NVIDIA, but v_perm_b32 takes one selector byte per result byte: group g is code g of
// every byte, so byte k of out[g] is the code of element 4k + g.
LB_DEV void lb_codebook16(lb_u32 table, lb_u32 v, lb_u32 out[4]) {
#pragma unroll
    for (int g = 0; g < 4; g++) out[g] = __builtin_amdgcn_perm(0u, table, (v >> (2 * g)) & 0x03030303u);
}
LB_DEV int lb_codebook4_pos(int e) { return 4 * (e & 3) + (e >> 2); }
// NVIDIA needs these to steer NVRTC's instruction selection; here they are plain values.
LB_DEV lb_u32 lb_opaque(lb_u32 x) { return x; }
LB_DEV lb_u32 lb_opaque_zero() { return 0u; }
// As on NVIDIA: v_perm_b32 takes byte selectors 0-7, so each half is looked up in both table
// halves and selected by bit 3 of the index.
LB_DEV void lb_lut16(const lb_u32 t[4], lb_u32 v, lb_u32& lo, lb_u32& hi) {
    lb_u32 idx[2] = {v & 0x0f0f0f0fu, (v >> 4) & 0x0f0f0f0fu};
    lb_u32 out[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        lb_u32 i7 = idx[h] & 0x07070707u;
        lb_u32 a = __builtin_amdgcn_perm(t[1], t[0], i7), b = __builtin_amdgcn_perm(t[3], t[2], i7);
        lb_u32 m = ((idx[h] >> 3) & 0x01010101u) * 0xffu;
        out[h] = (b & m) | (a & ~m);
    }
    lo = out[0];
    hi = out[1];
}
// As on NVIDIA: v_perm_b32 takes a byte selector per result byte.
LB_DEV void lb_lut8(lb_u32 t_lo, lb_u32 t_hi, lb_u32 v, lb_u32& lo, lb_u32& hi) {
    lo = __builtin_amdgcn_perm(t_hi, t_lo, v & 0x07070707u);
    hi = __builtin_amdgcn_perm(t_hi, t_lo, (v >> 4) & 0x07070707u);
}
#define LB_DEVM __attribute__((device)) __attribute__((always_inline)) inline
// binary16 bits -> f32 (v_cvt_f32_f16: exact, f16 denormals kept in the default mode).
LB_DEV float lb_h2f(lb_u32 h) { return (float)__builtin_bit_cast(_Float16, (lb_u16)h); }
// Weight loads that should not evict the (reused) activations: nontemporal loads.
typedef unsigned lb_u32x2 __attribute__((ext_vector_type(2)));
LB_DEV lb_i32x4 lb_ld_stream16(const void* p) { return __builtin_nontemporal_load((const lb_i32x4*)p); }
LB_DEV void lb_ld_stream8(const void* p, lb_u32& a, lb_u32& b) {
    lb_u32x2 v = __builtin_nontemporal_load((const lb_u32x2*)p);
    a = v.x;
    b = v.y;
}
// No programmatic dependent launch on AMD: stream order.
LB_DEV void lb_grid_wait() {}
LB_DEV void lb_grid_launch_dependents() {}
#define LB_SHARED __attribute__((shared))
LB_DEV void lb_barrier() {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
LB_DEV float lb_roundf(float x) { return __builtin_roundf(x); }
LB_DEV float lb_rintf(float x) { return __builtin_rintf(x); }
LB_DEV float lb_fabsf(float x) { return __builtin_fabsf(x); }
LB_DEV float lb_fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
LB_DEV float lb_as_float(lb_u32 u) { return __builtin_bit_cast(float, u); }
LB_DEV lb_u32 lb_as_u32(float f) { return __builtin_bit_cast(lb_u32, f); }
#else
#error "lowbit_hip.h: compile with NVRTC (NVIDIA) or as HIP for amdgcn (hiprtc / clang -x hip)"
#endif

// ---------------------------------------------------------------- staged copies -----------
// Global -> shared copies of CH bytes (both addresses CH-aligned) that the n = 1 staged
// kernels (lb_mv1s) keep several steps deep without registers: on NVIDIA (sm_80+) cp.async,
// completion tracked by commit groups (lb_stage_commit, lb_stage_wait<N>: all but the newest N
// groups landed), not by register scoreboards; on AMD and in the host emulation a plain load
// and store (complete at once; commit and wait are no-ops). lb_warp_sync then makes a warp's
// copies visible to all its lanes.
#if defined(LB_NVIDIA) && !defined(LB_HOST_EMULATION)
template <int CH>
LB_DEV void lb_stage_copy(void* dst, const void* src) {
    lb_u32 d = (lb_u32)__cvta_generic_to_shared(dst);
    static_assert(CH == 4 || CH == 8 || CH == 16, "cp.async copies 4, 8 or 16 bytes");
    if constexpr (CH == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(d), "l"(src), "n"(CH) : "memory");
}
LB_DEV void lb_stage_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
LB_DEV void lb_stage_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
LB_DEV void lb_warp_sync() { __syncwarp(); }
#else
template <int CH>
LB_DEV void lb_stage_copy(void* dst, const void* src) {
    if constexpr (CH == 16) *(lb_i32x4*)dst = *(const lb_i32x4*)src;
    else if constexpr (CH == 8) {
        ((lb_u32*)dst)[0] = ((const lb_u32*)src)[0];
        ((lb_u32*)dst)[1] = ((const lb_u32*)src)[1];
    } else if constexpr (CH == 4) *(lb_u32*)dst = *(const lb_u32*)src;
    else {
        for (int i = 0; i < CH; i++) ((lb_u8*)dst)[i] = ((const lb_u8*)src)[i];
    }
}
LB_DEV void lb_stage_commit() {}
template <int N>
LB_DEV void lb_stage_wait() {}
#if defined(LB_AMD)
LB_DEV void lb_warp_sync() {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
#else
LB_DEV void lb_warp_sync() {}
#endif
#endif

// ---------------------------------------------------------------- shared helpers ----------
#if defined(LB_NVIDIA)
LB_DEV lb_u32 lb_lane() { return threadIdx.x & 31u; }
#else
LB_DEV lb_u32 lb_lane() { return lb_lane_id(); }
#endif

// int -> float for |i| < 2^22, exact, on the full-rate ALUs (the magic-number method: the
// integer lands in the mantissa of 1.5 * 2^23) instead of the quarter-rate conversion unit.
LB_DEV float lb_i2f(lb_i32 i) { return lb_as_float((lb_u32)(i + 0x4b400000)) - 12582912.0f; }

// Byte k (0..3, a compile-time constant after unrolling) of w, minus bias, as f32, exact:
// the byte is permuted into the mantissa of 2^23 and 2^23 + bias subtracted (two full-rate
// instructions, no conversion unit).
LB_DEV float lb_byte_f32(lb_u32 w, int k, float bias) {
#if defined(LB_NVIDIA)
    lb_u32 bits = __byte_perm(w, 0x4b000000u, 0x7650u + (lb_u32)k);
#else
    lb_u32 bits = __builtin_amdgcn_perm(0x4b000000u, w, 0x07060500u + (lb_u32)k);
#endif
    return lb_as_float(bits) - (8388608.0f + bias);
}

// Signed 8-bit dot of n words of four lanes each.
template <int N>
LB_DEV lb_i32 lb_dotn(const lb_i32* w, const lb_i32* a) {
    lb_i32 s = 0;
#pragma unroll
    for (int i = 0; i < N; i++) s = lb_dot4(w[i], a[i], s);
    return s;
}

// lb_i2f(lb_dotn<N>(w, a)) with the conversion's magic number as the dot's starting value, so
// only the subtraction is left (bit-identical; |sum| < 2^22).
template <int N>
LB_DEV float lb_dotf(const lb_i32* w, const lb_i32* a) {
    lb_i32 s = 0x4b400000;
#pragma unroll
    for (int i = 0; i < N; i++) s = lb_dot4(w[i], a[i], s);
    return lb_as_float((lb_u32)s) - 12582912.0f;
}

// Sum over groups of 16 lanes (every lane of the group gets it).
LB_DEV float lb_sum16(float v) {
#pragma unroll
    for (int m = 8; m > 0; m >>= 1) v += lb_shfl_xor(v, m);
    return v;
}

// Sum over the LB_WARP lanes of a warp/wavefront (every lane gets the total).
LB_DEV float lb_warp_sum(float v) {
#pragma unroll
    for (int m = LB_WARP / 2; m > 0; m >>= 1) v += lb_shfl_xor(v, m);
    return v;
}
// Max over groups of 32 lanes (a Q8 block), every lane of the group gets it.
LB_DEV float lb_max32(float v) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) v = lb_fmaxf(v, lb_shfl_xor(v, m));
    return v;
}

// IEEE binary16 bits -> f32, exact (subnormals, inf and NaN included).
LB_DEV float lb_f16_to_f32(lb_u32 h) {
    lb_u32 sign = (h & 0x8000u) << 16;
    lb_u32 em = h & 0x7fffu;
    if (em >= 0x7c00u) return lb_as_float(sign | 0x7f800000u | ((em & 0x3ffu) << 13));
    // em << 13 puts the f16 exponent/mantissa into f32 position with bias 15 read as 127:
    // multiplying by 2^112 rebiases exactly (also for f16 subnormals).
    return lb_as_float(sign | lb_as_u32(lb_as_float(em << 13) * 0x1p112f));
}

#if defined(LB_SOFT_H2F)
LB_DEV float lb_h2f(lb_u32 h) { return lb_f16_to_f32(h & 0xffffu); }
#endif

// f32 -> binary16 bits, round to nearest even (ggml's GGML_FP32_TO_FP16 rule).
LB_DEV lb_u32 lb_f32_to_f16(float f) {
    lb_u32 x = lb_as_u32(f);
    lb_u32 sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (x >= 0x47800000u) return sign | 0x7c00u;  // >= 65536: inf
    if (x < 0x38800000u) {                        // below 2^-14: f16 subnormal (or zero)
        return sign | (lb_u32)(lb_i32)lb_rintf(lb_as_float(x) * 0x1p24f);
    }
    lb_u32 r = x - 0x38000000u;                   // rebias 127 -> 15
    r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;    // round to nearest even (may carry to inf)
    return sign | r;
}
