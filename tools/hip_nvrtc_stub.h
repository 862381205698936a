// Stand-ins for what NVRTC provides, so tools/hip_compile_check.sh can type-check the NVIDIA
// branch of lowbit_hip.h with clang -x cuda -fsyntax-only (no CUDA SDK). Declarations only.
#define __CUDACC_RTC__ 1
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __forceinline__ __attribute__((always_inline)) inline
#include "__clang_cuda_builtin_vars.h"
struct int4 { int x, y, z, w; } __attribute__((aligned(16)));
struct float4 { float x, y, z, w; } __attribute__((aligned(16)));
extern "C" __device__ int __dp4a(int, int, int);
extern "C" __device__ unsigned __byte_perm(unsigned, unsigned, unsigned);
extern "C" __device__ float __shfl_xor_sync(unsigned, float, int, int);
extern "C" __device__ float roundf(float);
extern "C" __device__ float rintf(float);
extern "C" __device__ float fabsf(float);
extern "C" __device__ float fmaxf(float, float);
extern "C" __device__ float __uint_as_float(unsigned);
extern "C" __device__ unsigned __float_as_uint(float);
extern "C" __device__ void __syncthreads();
extern "C" __device__ void __syncwarp(unsigned = 0xffffffffu);
#define __align__(n) __attribute__((aligned(n)))
extern "C" __device__ unsigned long long __cvta_generic_to_shared(const void*);
