// host.h: what the device code needs from CUDA when it is compiled for the
// CPU (hostcheck.cpp, emu.cpp): the keywords as nothing, the bit casts, and
// the half-to-float conversion nvcc's code gets from cvt.f32.f16.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#define APR_HOST 1
#define __device__
#define __constant__
#define __forceinline__ inline

static inline float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline float __int_as_float(int x) { return bits_f((uint32_t)x); }
static inline float __uint_as_float(unsigned x) { return bits_f(x); }
static inline unsigned __float_as_uint(float x) {
  unsigned u;
  memcpy(&u, &x, 4);
  return u;
}
// h2f: IEEE half to float, exactly (subnormals, infinities; a NaN stays a
// quiet NaN as the PTX conversion makes it).
static inline float h2f(unsigned short h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
  if (e == 0) {
    if (m == 0) return bits_f(s);
    float v = std::ldexp((float)m, -24);
    return s ? -v : v;
  }
  if (e == 31) return bits_f(s | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
  return bits_f(s | ((e + 112) << 23) | (m << 13));
}

// The vector type, the fused multiply-add and the byte permute the products
// use.
#define __align__(n) __attribute__((aligned(n)))
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
// __byte_perm(x, y, s): byte n of the result is byte (s >> 4n) & 7 of y:x
// (the selectors' sign-replicate bit is not used by the kernels).
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  uint64_t v = ((uint64_t)y << 32) | x;
  unsigned r = 0;
  for (int n = 0; n < 4; n++) r |= (unsigned)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
}
