// compat.cuh lets `make kernels-check` compile the kernels with clang on a
// machine without the CUDA toolkit (syntax and type checks only); nvcc, which
// builds the PTX that apr embeds, defines all of this itself.
#pragma once
#if defined(__clang__) && !defined(__NVCC__)
#include <stdint.h>
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __attribute__((always_inline)) inline
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#include <__clang_cuda_builtin_vars.h>
__device__ static inline float __shfl_xor_sync(unsigned mask, float v, int lane) {
  return __nvvm_shfl_sync_bfly_f32(mask, v, lane, 0x1f);
}
__device__ static inline double __shfl_xor_sync(unsigned mask, double v, int lane) {
  long long x = __builtin_bit_cast(long long, v);
  int lo = __nvvm_shfl_sync_bfly_i32(mask, (int)x, lane, 0x1f);
  int hi = __nvvm_shfl_sync_bfly_i32(mask, (int)(x >> 32), lane, 0x1f);
  return __builtin_bit_cast(double, ((long long)hi << 32) | (unsigned)lo);
}
extern "C" __device__ float expf(float);
extern "C" __device__ float logf(float);
extern "C" __device__ float sqrtf(float);
extern "C" __device__ double sqrt(double);
extern "C" __device__ void sincos(double, double *, double *);
extern "C" __device__ float fmaxf(float, float);
extern "C" __device__ float fminf(float, float);
extern "C" __device__ float ldexpf(float, int);
#define INFINITY __builtin_inff()
#define __align__(n) __attribute__((aligned(n)))
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
__device__ static inline float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__device__ static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) { return __nvvm_prmt(x, y, s); }
__device__ static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __nvvm_atom_add_gen_i((int *)p, (int)v); }
__device__ static inline void __threadfence() { __nvvm_membar_gl(); }
__device__ static inline float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
__device__ static inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
__device__ static inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
#endif
