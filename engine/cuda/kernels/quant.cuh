// quant.cuh: the ggml block formats on the device. Each format is a struct
// with QK (values per block), TS (bytes per block) and deq(blk, sub, v),
// which writes the 32 values of chunk sub (0 ≤ sub < QK/32) of the block at
// blk to v — the same values engine/quant's Dequantize computes for them
// (the formulas below follow its decoders, which are ggml's to_float).
#pragma once
#ifndef APR_HOST // hostcheck.cpp compiles this file for the CPU (engine/cuda's tests)
#include "compat.cuh"
#endif
#include "grids.cuh"

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

#ifndef APR_HOST
__device__ __forceinline__ float h2f(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
#endif
__device__ __forceinline__ u16 ld16(const u8 *p) { return (u16)(p[0] | (p[1] << 8)); }
__device__ __forceinline__ u32 ld32(const u8 *p) {
  return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}
__device__ __forceinline__ float sgn(float v, u32 neg) { return neg ? -v : v; }

// ld128 loads 16 bytes at a 16-byte aligned p in one instruction (the
// element formats' chunks, when their rows are aligned).
struct alignas(16) u32x4 {
  u32 x, y, z, w;
};
#ifdef APR_HOST
__device__ __forceinline__ u32x4 ld128(const u8 *p) {
  u32x4 v;
  __builtin_memcpy(&v, p, 16);
  return v;
}
#else
__device__ __forceinline__ u32x4 ld128(const u8 *p) { return *(const u32x4 *)p; }
#endif
__device__ __forceinline__ bool aligned16(const u8 *p) { return ((unsigned long long)p & 15) == 0; }

__device__ __constant__ signed char kv_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                    1,    13,   25,  38,  53,  69,  89,  113};
__device__ __constant__ signed char kv_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

__device__ __forceinline__ float e8m0_half(u8 e) {
  if (e < 2) return __int_as_float(0x00200000 << e);
  return __int_as_float((int)((u32)(e - 1) << 23));
}
__device__ __forceinline__ float ue4m3(u8 x) {
  if (x == 0 || x == 0x7f) return 0.f;
  int ex = (x >> 3) & 0xf, man = x & 7;
  float raw = ex == 0 ? ldexpf((float)man, -9) : ldexpf(1.f + (float)man / 8.f, ex - 7);
  return raw * 0.5f;
}

// Element formats (F32, F16, BF16) also decode single values (elem), so
// that rows need not be whole 32-value chunks: the last chunk may be short.
template <class T, class = void> struct Elem { static const bool value = false; };
template <class T> struct Elem<T, decltype((void)T::ELEM, void())> { static const bool value = T::ELEM; };

struct F32 {
  static const int QK = 32, TS = 128;
  static const bool ELEM = true;
  __device__ static float elem(const u8 *b, int j) { return ((const float *)b)[j]; }
  __device__ static void deq(const u8 *b, int, float *v) {
    if (aligned16(b)) {
#pragma unroll
      for (int k = 0; k < 8; k++) {
        u32x4 w = ld128(b + 16 * k);
        v[4 * k] = __uint_as_float(w.x), v[4 * k + 1] = __uint_as_float(w.y);
        v[4 * k + 2] = __uint_as_float(w.z), v[4 * k + 3] = __uint_as_float(w.w);
      }
      return;
    }
    const float *f = (const float *)b;
#pragma unroll
    for (int j = 0; j < 32; j++) v[j] = f[j];
  }
};
struct F16 {
  static const int QK = 32, TS = 64;
  static const bool ELEM = true;
  __device__ static float elem(const u8 *b, int j) { return h2f(((const u16 *)b)[j]); }
  __device__ static void deq(const u8 *b, int, float *v) {
    if (aligned16(b)) {
#pragma unroll
      for (int k = 0; k < 4; k++) {
        u32x4 w = ld128(b + 16 * k);
        u32 a[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
          v[8 * k + 2 * i] = h2f((u16)(a[i] & 0xffffu));
          v[8 * k + 2 * i + 1] = h2f((u16)(a[i] >> 16));
        }
      }
      return;
    }
    const u16 *h = (const u16 *)b;
#pragma unroll
    for (int j = 0; j < 32; j++) v[j] = h2f(h[j]);
  }
};
struct BF16 {
  static const int QK = 32, TS = 64;
  static const bool ELEM = true;
  __device__ static float elem(const u8 *b, int j) { return __uint_as_float((u32)((const u16 *)b)[j] << 16); }
  __device__ static void deq(const u8 *b, int, float *v) {
    if (aligned16(b)) {
#pragma unroll
      for (int k = 0; k < 4; k++) {
        u32x4 w = ld128(b + 16 * k);
        u32 a[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
          v[8 * k + 2 * i] = __uint_as_float(a[i] << 16);
          v[8 * k + 2 * i + 1] = __uint_as_float(a[i] & 0xffff0000u);
        }
      }
      return;
    }
    const u16 *h = (const u16 *)b;
#pragma unroll
    for (int j = 0; j < 32; j++) v[j] = __uint_as_float((u32)h[j] << 16);
  }
};
struct Q4_0 {
  static const int QK = 32, TS = 18;
  __device__ static void deq(const u8 *b, int, float *v) {
    float d = h2f(ld16(b));
#pragma unroll
    for (int j = 0; j < 16; j++) {
      u8 q = b[2 + j];
      v[j] = (float)((int)(q & 15) - 8) * d;
      v[j + 16] = (float)((int)(q >> 4) - 8) * d;
    }
  }
};
struct Q4_1 {
  static const int QK = 32, TS = 20;
  __device__ static void deq(const u8 *b, int, float *v) {
    float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
#pragma unroll
    for (int j = 0; j < 16; j++) {
      u8 q = b[4 + j];
      v[j] = (float)(q & 15) * d + m;
      v[j + 16] = (float)(q >> 4) * d + m;
    }
  }
};
struct Q5_0 {
  static const int QK = 32, TS = 22;
  __device__ static void deq(const u8 *b, int, float *v) {
    u8 qs[16];
    float d;
    u32 qh;
    if (((unsigned long long)b & 1) == 0) { // blocks of 22 bytes in rows of whole blocks: 2-aligned
      const u16 *h = (const u16 *)b;
      d = h2f(h[0]);
      qh = (u32)h[1] | ((u32)h[2] << 16);
#pragma unroll
      for (int j = 0; j < 8; j++) {
        u16 w = h[3 + j];
        qs[2 * j] = (u8)(w & 0xff), qs[2 * j + 1] = (u8)(w >> 8);
      }
    } else {
      d = h2f(ld16(b));
      qh = ld32(b + 2);
#pragma unroll
      for (int j = 0; j < 16; j++) qs[j] = b[6 + j];
    }
#pragma unroll
    for (int j = 0; j < 16; j++) {
      u8 q = qs[j];
      int h0 = (int)((qh >> j) << 4) & 0x10, h1 = (int)(qh >> (j + 12)) & 0x10;
      v[j] = (float)(((int)(q & 15) | h0) - 16) * d;
      v[j + 16] = (float)(((int)(q >> 4) | h1) - 16) * d;
    }
  }
};
struct Q5_1 {
  static const int QK = 32, TS = 24;
  __device__ static void deq(const u8 *b, int, float *v) {
    float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
    u32 qh = ld32(b + 4);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      u8 q = b[8 + j];
      int h0 = (int)((qh >> j) << 4) & 0x10, h1 = (int)(qh >> (j + 12)) & 0x10;
      v[j] = (float)((int)(q & 15) | h0) * d + m;
      v[j + 16] = (float)((int)(q >> 4) | h1) * d + m;
    }
  }
};
struct Q8_0 {
  static const int QK = 32, TS = 34;
  __device__ static void deq(const u8 *b, int, float *v) {
    if (((unsigned long long)b & 1) == 0) { // blocks of 34 bytes in rows of whole blocks: 2-aligned
      const u16 *h = (const u16 *)b;
      float d = h2f(h[0]);
#pragma unroll
      for (int j = 0; j < 16; j++) {
        u16 w = h[1 + j];
        v[2 * j] = (float)(signed char)(w & 0xff) * d;
        v[2 * j + 1] = (float)(signed char)(w >> 8) * d;
      }
      return;
    }
    float d = h2f(ld16(b));
#pragma unroll
    for (int j = 0; j < 32; j++) v[j] = (float)(signed char)b[2 + j] * d;
  }
};
struct MXFP4 {
  static const int QK = 32, TS = 17;
  __device__ static void deq(const u8 *b, int, float *v) {
    float d = e8m0_half(b[0]);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      u8 q = b[1 + j];
      v[j] = (float)kv_mxfp4[q & 15] * d;
      v[j + 16] = (float)kv_mxfp4[q >> 4] * d;
    }
  }
};
struct IQ4_NL {
  static const int QK = 32, TS = 18;
  __device__ static void deq(const u8 *b, int, float *v) {
    float d = h2f(ld16(b));
#pragma unroll
    for (int j = 0; j < 16; j++) {
      u8 q = b[2 + j];
      v[j] = d * (float)kv_iq4nl[q & 15];
      v[j + 16] = d * (float)kv_iq4nl[q >> 4];
    }
  }
};
struct Q1_0 {
  static const int QK = 128, TS = 18;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    u32 db = __float_as_uint(h2f(ld16(b)));
#pragma unroll
    for (int k = 0; k < 4; k++) {
      u8 bits = b[2 + 4 * sub + k];
#pragma unroll
      for (int i = 0; i < 8; i++) v[8 * k + i] = __uint_as_float(db ^ ((u32)((~bits >> i) & 1) << 31));
    }
  }
};
struct Q2_0 {
  static const int QK = 64, TS = 18;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    float d = h2f(ld16(b));
#pragma unroll
    for (int i = 0; i < 32; i++) {
      int j = 32 * sub + i;
      int q = (b[2 + j / 4] >> (2 * (j % 4))) & 3;
      v[i] = (float)(q - 1) * d;
    }
  }
};
struct NVFP4 {
  static const int QK = 64, TS = 36;
  __device__ static void deq(const u8 *b, int sub, float *v) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      int s = 2 * sub + h;
      float d = ue4m3(b[s]);
      const u8 *qs = b + 4 + 8 * s;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        v[16 * h + j] = (float)kv_mxfp4[qs[j] & 15] * d;
        v[16 * h + j + 8] = (float)kv_mxfp4[qs[j] >> 4] * d;
      }
    }
  }
};
struct TQ1_0 {
  static const int QK = 256, TS = 54;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    const u8 pow3[6] = {1, 3, 9, 27, 81, 243};
    float d = h2f(ld16(b + 52));
#pragma unroll
    for (int i = 0; i < 32; i++) {
      int k = 32 * sub + i, n;
      u8 q;
      if (k < 160) {
        n = k / 32;
        q = b[k % 32];
      } else if (k < 240) {
        n = (k - 160) / 16;
        q = b[32 + (k - 160) % 16];
      } else {
        n = (k - 240) / 4;
        q = b[48 + (k - 240) % 4];
      }
      u8 t = (u8)(q * pow3[n]);
      v[i] = (float)((int)(((u16)t * 3) >> 8) - 1) * d;
    }
  }
};
struct TQ2_0 {
  static const int QK = 256, TS = 66;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    float d = h2f(ld16(b + 64));
    int j = 32 * (sub / 4), l = sub % 4;
#pragma unroll
    for (int m = 0; m < 32; m++) v[m] = (float)((int)((b[j + m] >> (2 * l)) & 3) - 1) * d;
  }
};
struct Q2_K {
  static const int QK = 256, TS = 84;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    float d = h2f(ld16(b + 80)), dmin = h2f(ld16(b + 82));
    int n = sub / 4, sh = sub % 4, shift = 2 * sh;
    const u8 *q = b + 16 + 32 * n;
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      u8 sc = b[8 * n + 2 * sh + hf];
      float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
#pragma unroll
      for (int l = 0; l < 16; l++) v[16 * hf + l] = dl * (float)((q[l + 16 * hf] >> shift) & 3) - ml;
    }
  }
};
struct Q3_K {
  static const int QK = 256, TS = 110;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    const u32 kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    const u8 *s = b + 96;
    u32 a0 = ld32(s), a1 = ld32(s + 4), tmp = ld32(s + 8);
    u32 aux[4] = {(a0 & kmask2) | (((tmp >> 0) & kmask1) << 4), (a1 & kmask2) | (((tmp >> 2) & kmask1) << 4),
                  ((a0 >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4),
                  ((a1 >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)};
    float dAll = h2f(ld16(b + 108));
    int n = sub / 4, sh = sub % 4, shift = 2 * sh;
    u8 m = (u8)(1 << (4 * n + sh));
    const u8 *q = b + 32 + 32 * n;
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      int is = 8 * n + 2 * sh + hf;
      signed char sc = (signed char)(aux[is / 4] >> (8 * (is % 4)));
      float dl = dAll * (float)((int)sc - 32);
#pragma unroll
      for (int l = 0; l < 16; l++) {
        int x = (q[l + 16 * hf] >> shift) & 3;
        if ((b[l + 16 * hf] & m) == 0) x -= 4;
        v[16 * hf + l] = dl * (float)x;
      }
    }
  }
};
__device__ __forceinline__ void scale_min_k4(int j, const u8 *q, u8 &sc, u8 &m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
struct Q4_K {
  static const int QK = 256, TS = 144;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    u8 sc, m;
    scale_min_k4(sub, b + 4, sc, m);
    float d1 = d * (float)sc, m1 = dmin * (float)m;
    const u8 *q = b + 16 + 32 * (sub / 2);
    int shift = 4 * (sub % 2);
    if (aligned16(q)) { // rows of whole blocks at an aligned start: two 16-byte loads
      u32x4 a = ld128(q), c = ld128(q + 16);
      u32 w[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
#pragma unroll
      for (int l = 0; l < 32; l++) v[l] = d1 * (float)((w[l / 4] >> (8 * (l % 4) + shift)) & 15) - m1;
      return;
    }
#pragma unroll
    for (int l = 0; l < 32; l++) v[l] = d1 * (float)((q[l] >> shift) & 15) - m1;
  }
};
struct Q5_K {
  static const int QK = 256, TS = 176;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    u8 sc, m;
    scale_min_k4(sub, b + 4, sc, m);
    float d1 = d * (float)sc, m1 = dmin * (float)m;
    const u8 *qh = b + 16, *q = b + 48 + 32 * (sub / 2);
    int shift = 4 * (sub % 2);
    u8 u = (u8)(1 << sub);
#pragma unroll
    for (int l = 0; l < 32; l++) {
      int x = (q[l] >> shift) & 15;
      if (qh[l] & u) x += 16;
      v[l] = d1 * (float)x - m1;
    }
  }
};
struct Q6_K {
  static const int QK = 256, TS = 210;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    float d = h2f(ld16(b + 208));
    int n = sub / 4, k = sub % 4;
    const u8 *ql = b + 64 * n + (k & 1) * 32, *qh = b + 128 + 32 * n;
    const signed char *sc = (const signed char *)(b + 192 + 8 * n);
    int shift = (k >> 1) * 4;
#pragma unroll
    for (int l = 0; l < 32; l++) {
      int q = (int)(((ql[l] >> shift) & 15) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
      v[l] = d * (float)sc[l / 16 + 2 * k] * (float)q;
    }
  }
};
struct Q8_K {
  static const int QK = 256, TS = 292;
  __device__ static void deq(const u8 *b, int sub, float *v) {
    float d = __uint_as_float(ld32(b));
#pragma unroll
    for (int j = 0; j < 32; j++) v[j] = d * (float)(signed char)b[4 + 32 * sub + j];
  }
};
struct IQ4_XS {
  static const int QK = 256, TS = 136;
  __device__ static void deq(const u8 *b, int ib, float *v) {
    float d = h2f(ld16(b));
    u16 sh = ld16(b + 2);
    const u8 *sl = b + 4, *q = b + 8 + 16 * ib;
    int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4);
    float dl = d * (float)(ls - 32);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      v[j] = dl * (float)kv_iq4nl[q[j] & 15];
      v[j + 16] = dl * (float)kv_iq4nl[q[j] >> 4];
    }
  }
};
struct IQ2_XXS {
  static const int QK = 256, TS = 66;
  __device__ static void deq(const u8 *b, int ib, float *v) {
    float d = h2f(ld16(b));
    u32 a0 = ld32(b + 2 + 8 * ib), a1 = ld32(b + 6 + 8 * ib);
    float db = d * (0.5f + (float)(a1 >> 28)) * 0.25f;
#pragma unroll
    for (int l = 0; l < 4; l++) {
      const u8 *grid = g_iq2xxs[(a0 >> (8 * l)) & 255];
      u8 signs = g_ksigns[(a1 >> (7 * l)) & 127];
#pragma unroll
      for (int j = 0; j < 8; j++) v[8 * l + j] = sgn(db * (float)grid[j], (signs >> j) & 1);
    }
  }
};
struct IQ2_XS {
  static const int QK = 256, TS = 74;
  __device__ static void deq(const u8 *b, int ib, float *v) {
    float d = h2f(ld16(b));
    u8 sc = b[66 + ib];
    float db0 = d * (0.5f + (float)(sc & 15)) * 0.25f, db1 = d * (0.5f + (float)(sc >> 4)) * 0.25f;
#pragma unroll
    for (int l = 0; l < 4; l++) {
      u16 q = ld16(b + 2 + 2 * (4 * ib + l));
      const u8 *grid = g_iq2xs[q & 511];
      u8 signs = g_ksigns[q >> 9];
      float dl = l < 2 ? db0 : db1;
#pragma unroll
      for (int j = 0; j < 8; j++) v[8 * l + j] = sgn(dl * (float)grid[j], (signs >> j) & 1);
    }
  }
};
struct IQ2_S {
  static const int QK = 256, TS = 82;
  __device__ static void deq(const u8 *b, int ib, float *v) {
    float d = h2f(ld16(b));
    const u8 *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
    float db0 = d * (0.5f + (float)(scales[ib] & 15)) * 0.25f, db1 = d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f;
#pragma unroll
    for (int l = 0; l < 4; l++) {
      float dl = l < 2 ? db0 : db1;
      int idx = (int)qs[4 * ib + l] | (((int)qh[ib] << (8 - 2 * l)) & 0x300);
      const u8 *grid = g_iq2s[idx];
      u8 s = signs[4 * ib + l];
#pragma unroll
      for (int j = 0; j < 8; j++) v[8 * l + j] = sgn(dl * (float)grid[j], (s >> j) & 1);
    }
  }
};
struct IQ3_XXS {
  static const int QK = 256, TS = 98;
  __device__ static void deq(const u8 *b, int ib, float *v) {
    float d = h2f(ld16(b));
    const u8 *qs = b + 2;
    u32 aux = ld32(b + 66 + 4 * ib);
    float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
#pragma unroll
    for (int l = 0; l < 4; l++) {
      u8 signs = g_ksigns[(aux >> (7 * l)) & 127];
      const u8 *g1 = g_iq3xxs[qs[8 * ib + 2 * l]], *g2 = g_iq3xxs[qs[8 * ib + 2 * l + 1]];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        v[8 * l + j] = sgn(db * (float)g1[j], (signs >> j) & 1);
        v[8 * l + j + 4] = sgn(db * (float)g2[j], (signs >> (j + 4)) & 1);
      }
    }
  }
};
struct IQ3_S {
  static const int QK = 256, TS = 110;
  __device__ static void deq(const u8 *b, int ib, float *v) {
    float d = h2f(ld16(b));
    const u8 *q = b + 2 + 8 * ib, *sg = b + 74 + 4 * ib;
    int hb = b[66 + ib];
    u8 sc = b[106 + ib / 2];
    float db = d * (float)(1 + 2 * (int)((sc >> (4 * (ib % 2))) & 15));
#pragma unroll
    for (int l = 0; l < 4; l++) {
      const u8 *g1 = g_iq3s[(int)q[2 * l] | ((hb << (8 - 2 * l)) & 256)];
      const u8 *g2 = g_iq3s[(int)q[2 * l + 1] | ((hb << (7 - 2 * l)) & 256)];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        v[8 * l + j] = sgn(db * (float)g1[j], (sg[l] >> j) & 1);
        v[8 * l + j + 4] = sgn(db * (float)g2[j], (sg[l] >> (j + 4)) & 1);
      }
    }
  }
};
struct IQ1_S {
  static const int QK = 256, TS = 50;
  __device__ static void deq(const u8 *b, int ib, float *v) {
    float d = h2f(ld16(b));
    const u8 *qs = b + 2;
    u16 qh = ld16(b + 34 + 2 * ib);
    float dl = d * (float)(2 * (int)((qh >> 12) & 7) + 1);
    float delta = (qh & 0x8000) ? -0.125f : 0.125f;
#pragma unroll
    for (int l = 0; l < 4; l++) {
      const signed char *grid = g_iq1s[(int)qs[4 * ib + l] | ((int)((qh >> (3 * l)) & 7) << 8)];
#pragma unroll
      for (int j = 0; j < 8; j++) v[8 * l + j] = dl * ((float)grid[j] + delta);
    }
  }
};
struct IQ1_M {
  static const int QK = 256, TS = 56;
  __device__ static void deq(const u8 *b, int ib, float *v) {
    const u8 *qs = b, *qh = b + 32;
    u16 sc0 = ld16(b + 48), sc1 = ld16(b + 50), sc2 = ld16(b + 52), sc3 = ld16(b + 54);
    float d = h2f((u16)((sc0 >> 12) | ((sc1 >> 8) & 0x00f0) | ((sc2 >> 4) & 0x0f00) | (sc3 & 0xf000)));
    u16 scw = ib / 2 == 0 ? sc0 : ib / 2 == 1 ? sc1 : ib / 2 == 2 ? sc2 : sc3;
    u16 s = scw >> (6 * (ib % 2));
    float dl1 = d * (float)(2 * (int)(s & 7) + 1), dl2 = d * (float)(2 * (int)((s >> 3) & 7) + 1);
    int h0 = qh[2 * ib], h1 = qh[2 * ib + 1];
#pragma unroll
    for (int l = 0; l < 4; l++) {
      int hh = l < 2 ? h0 : h1;
      int idx = (int)qs[4 * ib + l] | ((l % 2 == 0 ? (hh << 8) : (hh << 4)) & 0x700);
      int bit = l % 2 == 0 ? (hh & 0x08) : (hh & 0x80);
      float delta = bit ? -0.125f : 0.125f;
      float dl = l < 2 ? dl1 : dl2;
      const signed char *grid = g_iq1s[idx];
#pragma unroll
      for (int j = 0; j < 8; j++) v[8 * l + j] = dl * ((float)grid[j] + delta);
    }
  }
};

// ---- one chunk of a row times F32 activations (the decode products) --------
// Dot<T>::dot(blk, sub, x, xsum) = Σ_j v[j]·x[j] over the 32 values v of
// chunk sub of the block at blk, for the formats whose values are a scale
// times small integer codes (plus a min for Q4_K). Where deq would convert
// every code to a float and scale it before the product, these turn four
// codes at a time into floats exactly (each byte under the exponent of 2^23:
// one byte permute, then one add that takes away 2^23 and the format's
// offset), multiply them with x in four independent fused multiply-add
// chains (x 16-byte aligned, read as float4) and apply the scales once per
// chunk (Q6_K: per half); xsum is Σ x over the chunk (Q4_K's min term).
// The sums are the same products in another order, far inside the plain
// tier (tested against deq in engine/cuda TestProducts). Formats without a
// Dot take deq and the same four chains (mv_chunk in apr.cu).
template <class T> struct Dot {
  static const bool has = false, xsum = false;
};
// code(w, k, off): byte k of w as a float, minus off − 2^23.
__device__ __forceinline__ float code(u32 w, int k, float off) {
  return __int_as_float((int)__byte_perm(w, 0x4B000000u, 0x7650u | (u32)k)) - off;
}
// dot4(w, x, acc, off): acc[k] += (byte k of w − off + 2^23)·x[k].
__device__ __forceinline__ void dot4(u32 w, float4 x, float *acc, float off) {
  acc[0] = __fmaf_rn(code(w, 0, off), x.x, acc[0]);
  acc[1] = __fmaf_rn(code(w, 1, off), x.y, acc[1]);
  acc[2] = __fmaf_rn(code(w, 2, off), x.z, acc[2]);
  acc[3] = __fmaf_rn(code(w, 3, off), x.w, acc[3]);
}
__device__ __forceinline__ float sum4(const float *acc) { return (acc[0] + acc[1]) + (acc[2] + acc[3]); }
// u32 of two little-endian u16 at a 2-aligned p.
__device__ __forceinline__ u32 ld32h(const u8 *p) {
  const u16 *h = (const u16 *)p;
  return (u32)h[0] | ((u32)h[1] << 16);
}
// ld_hw<N>: a 2-aligned block at b (Q4_0, Q5_0, Q8_0: 18, 22 and 34
// bytes) as the bits of its d (the u16 at b) and the N words at b + 2,
// b + 6, …, from N + 1 aligned 4-byte loads instead of ld32h's 2N 2-byte
// ones: the words from b rounded down to 4 bytes, each wanted word the 4
// bytes 2 or 4 past one's start (a funnel shift of two neighbours). A block
// at b ≡ 0 (mod 4) is read 2 bytes past its end: a tensor's last one needs
// them in its allocation (backend.go's weightPad).
// (LD_HW 0: ld16 and ld32h as before, for an A/B.)
#ifndef LD_HW
#define LD_HW 1
#endif
template <int N> __device__ __forceinline__ void ld_hw(const u8 *b, u16 &d, u32 *w) {
  if (!LD_HW) {
    d = ld16(b);
#pragma unroll
    for (int j = 0; j < N; j++) w[j] = ld32h(b + 2 + 4 * j);
    return;
  }
  unsigned long long a = (unsigned long long)b;
  const u32 *p = (const u32 *)(a & ~3ull);
  u32 s = (u32)(a & 2) * 8; // 0 or 16: d's bits in the first word
  u32 W[N + 1];
#pragma unroll
  for (int j = 0; j <= N; j++) W[j] = p[j];
  d = (u16)(W[0] >> s);
#pragma unroll
  for (int j = 0; j < N; j++) w[j] = (u32)((((unsigned long long)W[j + 1] << 32) | W[j]) >> (16 + s));
}
// spread4(t): bit k of t (k < 4) to bit 4 of byte k (Q5_0's fifth bits).
__device__ __forceinline__ u32 spread4(u32 t) { return ((t & 15u) * 0x02040810u) & 0x10101010u; }

#define TWO23 8388608.f
template <> struct Dot<Q4_0> { // 18-byte blocks: 2-aligned
  static const bool has = true, xsum = false;
  __device__ static float dot(const u8 *b, int, const float *x, float) {
    const float4 *x4 = (const float4 *)x;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    u16 dh;
    u32 q[4];
    ld_hw<4>(b, dh, q);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      u32 w = q[i];
      dot4(w & 0x0F0F0F0Fu, x4[i], acc, TWO23 + 8.f);
      dot4((w >> 4) & 0x0F0F0F0Fu, x4[4 + i], acc, TWO23 + 8.f);
    }
    return h2f(dh) * sum4(acc);
  }
};
template <> struct Dot<Q5_0> { // 22-byte blocks: 2-aligned
  static const bool has = true, xsum = false;
  __device__ static float dot(const u8 *b, int, const float *x, float) {
    const float4 *x4 = (const float4 *)x;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    u16 dh;
    u32 q[5]; // qh, then the codes' four words
    ld_hw<5>(b, dh, q);
    u32 qh = q[0];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      u32 w = q[1 + i];
      dot4((w & 0x0F0F0F0Fu) | spread4(qh >> (4 * i)), x4[i], acc, TWO23 + 16.f);
      dot4(((w >> 4) & 0x0F0F0F0Fu) | spread4(qh >> (16 + 4 * i)), x4[4 + i], acc, TWO23 + 16.f);
    }
    return h2f(dh) * sum4(acc);
  }
};
// Q4_1, Q5_1: d·Σ q·x + m·xs, xs the chunk's stored sum s of its Q8_1
// activations (apr.cu's act_round), as ggml-cpu's kernels take the min.
template <> struct Dot<Q4_1> { // 20-byte blocks: 4-aligned
  static const bool has = true, xsum = true;
  __device__ static float dot(const u8 *b, int, const float *x, float xs) {
    const float4 *x4 = (const float4 *)x;
    float d = h2f(ld16(b)), m = h2f(ld16(b + 2)), acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      u32 w = ld32h(b + 4 + 4 * i);
      dot4(w & 0x0F0F0F0Fu, x4[i], acc, TWO23);
      dot4((w >> 4) & 0x0F0F0F0Fu, x4[4 + i], acc, TWO23);
    }
    return d * sum4(acc) + m * xs;
  }
};
template <> struct Dot<Q5_1> { // 24-byte blocks: 4-aligned
  static const bool has = true, xsum = true;
  __device__ static float dot(const u8 *b, int, const float *x, float xs) {
    const float4 *x4 = (const float4 *)x;
    float d = h2f(ld16(b)), m = h2f(ld16(b + 2)), acc[4] = {0.f, 0.f, 0.f, 0.f};
    u32 qh = ld32h(b + 4);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      u32 w = ld32h(b + 8 + 4 * i);
      dot4((w & 0x0F0F0F0Fu) | spread4(qh >> (4 * i)), x4[i], acc, TWO23);
      dot4(((w >> 4) & 0x0F0F0F0Fu) | spread4(qh >> (16 + 4 * i)), x4[4 + i], acc, TWO23);
    }
    return d * sum4(acc) + m * xs;
  }
};
template <> struct Dot<Q8_0> { // 34-byte blocks: 2-aligned
  static const bool has = true, xsum = false;
  __device__ static float dot(const u8 *b, int, const float *x, float) {
    const float4 *x4 = (const float4 *)x;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    u16 dh;
    u32 w[8];
    ld_hw<8>(b, dh, w);
#pragma unroll
    for (int i = 0; i < 8; i++) dot4(w[i] ^ 0x80808080u, x4[i], acc, TWO23 + 128.f);
    return h2f(dh) * sum4(acc);
  }
};
template <> struct Dot<Q4_K> {
  static const bool has = true, xsum = true;
  __device__ static float dot(const u8 *b, int sub, const float *x, float xs) {
    const float4 *x4 = (const float4 *)x;
    float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    u8 sc, m;
    scale_min_k4(sub, b + 4, sc, m);
    const u8 *q = b + 16 + 32 * (sub / 2);
    int shift = 4 * (sub % 2);
    u32 w[8];
    if (aligned16(q)) {
      u32x4 a = ld128(q), c = ld128(q + 16);
      w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = c.x, w[5] = c.y, w[6] = c.z, w[7] = c.w;
    } else {
#pragma unroll
      for (int i = 0; i < 8; i++) w[i] = ld32(q + 4 * i);
    }
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 8; i++) dot4((w[i] >> shift) & 0x0F0F0F0Fu, x4[i], acc, TWO23);
    return (d * (float)sc) * sum4(acc) - (dmin * (float)m) * xs;
  }
};
template <> struct Dot<Q6_K> { // 210-byte blocks: 2-aligned
  static const bool has = true, xsum = false;
  __device__ static float dot(const u8 *b, int sub, const float *x, float) {
    const float4 *x4 = (const float4 *)x;
    float d = h2f(((const u16 *)(b + 208))[0]);
    int n = sub / 4, k = sub % 4;
    const u8 *ql = b + 64 * n + (k & 1) * 32, *qh = b + 128 + 32 * n;
    const signed char *sc = (const signed char *)(b + 192 + 8 * n);
    int shift = (k >> 1) * 4;
    float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 8; i++) {
      u32 l = (ld32h(ql + 4 * i) >> shift) & 0x0F0F0F0Fu, h = ld32h(qh + 4 * i);
      h = (k < 2 ? h << (4 - 2 * k) : h >> (2 * k - 4)) & 0x30303030u;
      dot4(l | h, x4[i], i < 4 ? a0 : a1, TWO23 + 32.f);
    }
    return d * ((float)sc[2 * k] * sum4(a0) + (float)sc[2 * k + 1] * sum4(a1));
  }
};
#undef TWO23

// IntForm<T>: formats whose 32-value chunk is A·q with small integers q
// (|q| < 2^11, so each is a TF32 value exactly) and per-half scales A: the
// prompt product (apr.cu's mmt_int_body, MM_INT) multiplies the integers
// on the tensor cores, two products per pair of tiles instead of three,
// and applies A to each group's sums. A is the float deq multiplies q by,
// computed the same way (Q6_K: d·sc); deqi writes q as floats and A[h] for
// h = 0 (values 0–15) and 1 (16–31). GS: the values one scale covers (16
// or 32; A[0] = A[1] for 32). Formats with mins (Q4_K, Q5_K: A·q − B) are
// not IntForm formats (mmt_int_body says why).
template <class T> struct IntForm { static const bool has = false; static const int GS = 32; };
// IntForm32: a format of one scale d per 32-value block (Q4_0, Q5_0,
// Q8_0), its integers from Q(block, q).
template <class Q> struct IntForm32 {
  static const bool has = true;
  static const int GS = 32;
  __device__ static void deqi(const u8 *b, int, float *q, float *A) {
    Q::ints(b, q);
    A[0] = A[1] = h2f(ld16(b));
  }
};
struct IntQ4_0 {
  __device__ static void ints(const u8 *b, float *q) {
#pragma unroll
    for (int j = 0; j < 16; j++) {
      u8 v = b[2 + j];
      q[j] = (float)((int)(v & 15) - 8);
      q[j + 16] = (float)((int)(v >> 4) - 8);
    }
  }
};
struct IntQ5_0 {
  __device__ static void ints(const u8 *b, float *q) {
    u32 qh = ld32(b + 2);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      u8 v = b[6 + j];
      int h0 = (int)((qh >> j) << 4) & 0x10, h1 = (int)(qh >> (j + 12)) & 0x10;
      q[j] = (float)(((int)(v & 15) | h0) - 16);
      q[j + 16] = (float)(((int)(v >> 4) | h1) - 16);
    }
  }
};
struct IntQ8_0 {
  __device__ static void ints(const u8 *b, float *q) {
#pragma unroll
    for (int j = 0; j < 32; j++) q[j] = (float)(signed char)b[2 + j];
  }
};
template <> struct IntForm<Q4_0> : IntForm32<IntQ4_0> {};
template <> struct IntForm<Q5_0> : IntForm32<IntQ5_0> {};
template <> struct IntForm<Q8_0> : IntForm32<IntQ8_0> {};
template <> struct IntForm<Q6_K> {
  static const bool has = true;
  static const int GS = 16;
  __device__ static void deqi(const u8 *b, int sub, float *q, float *A) {
    float d = h2f(ld16(b + 208));
    int n = sub / 4, k = sub % 4;
    const u8 *ql = b + 64 * n + (k & 1) * 32, *qh = b + 128 + 32 * n;
    const signed char *sc = (const signed char *)(b + 192 + 8 * n);
    int shift = (k >> 1) * 4;
#pragma unroll
    for (int l = 0; l < 32; l++) q[l] = (float)((int)(((ql[l] >> shift) & 15) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32);
    A[0] = d * (float)sc[2 * k], A[1] = d * (float)sc[1 + 2 * k];
  }
};

// ActOf<T>::v: the format ggml-cpu rounds an activation row to before a
// product with weights of type T (its vec_dot_type on x86-64, quant.VecDotType;
// TestActivationFormats holds the two to each other): the CUDA engine
// computes in the reference's ggml numerics (ref.NumericsGGML), so every
// product rounds x so first (apr.cu: act_*).
enum { ACT_NONE = 0, ACT_F16 = 1, ACT_BF16 = 2, ACT_Q8_0 = 3, ACT_Q8_1 = 4, ACT_Q8_K = 5 };
template <class T> struct ActOf { static const int v = ACT_Q8_K; }; // the k-quants, IQ and TQ formats
template <> struct ActOf<F32> { static const int v = ACT_NONE; };
template <> struct ActOf<F16> { static const int v = ACT_F16; };
template <> struct ActOf<BF16> { static const int v = ACT_BF16; };
template <> struct ActOf<Q4_0> { static const int v = ACT_Q8_0; };
template <> struct ActOf<Q5_0> { static const int v = ACT_Q8_0; };
template <> struct ActOf<Q8_0> { static const int v = ACT_Q8_0; };
template <> struct ActOf<MXFP4> { static const int v = ACT_Q8_0; };
template <> struct ActOf<NVFP4> { static const int v = ACT_Q8_0; };
template <> struct ActOf<IQ4_NL> { static const int v = ACT_Q8_0; };
template <> struct ActOf<Q1_0> { static const int v = ACT_Q8_0; };
template <> struct ActOf<Q2_0> { static const int v = ACT_Q8_0; };
template <> struct ActOf<Q4_1> { static const int v = ACT_Q8_1; };
template <> struct ActOf<Q5_1> { static const int v = ACT_Q8_1; };

// MqForm<T>: formats whose prompt products multiply their integers by the
// activations' (apr.cu's mq_body, on the int8 tensor cores): a 32-value
// chunk is A[j/16]·q[j] − B with int8 integers q, as deq computes it (A =
// d·sc and B = dmin·m as floats, the same products), x rounded to ActOf<T>
// (Q8_0, Q8_1 or Q8_K) by k_round; GS: the values one scale covers (16 or 32);
// mins: B is not always 0. ints writes the chunk's integers packed four to a
// word (q[0] in the low byte of w[0]), A[0], A[1] and B.
template <class T> struct MqForm { static const bool has = false; };
// ld8w: the 32 bytes at p as eight words, in two 16-byte loads where p is
// 16-byte aligned (the k-quants' rows of whole blocks), else byte by byte.
__device__ __forceinline__ void ld8w(const u8 *p, u32 *w) {
  if (aligned16(p)) {
    u32x4 a = ld128(p), c = ld128(p + 16);
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = c.x, w[5] = c.y, w[6] = c.z, w[7] = c.w;
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; j++) w[j] = ld32(p + 4 * j);
}
// vsub4: a − b in each byte, modulo 256 (no borrow between bytes).
__device__ __forceinline__ u32 vsub4(u32 a, u32 b) { return ((a | 0x80808080u) - (b & 0x7f7f7f7fu)) ^ ((a ^ ~b) & 0x80808080u); }
// MqNibble: Q4_0, Q4_1, Q5_0 and Q5_1, a 32-value block of 4-bit codes
// (bytes at QS: value j's low nibble, value j + 16's high one), their fifth
// bits at QH (QH < 0: none), minus OFF, d at byte 0 and (MINS) m at byte 2:
// value d·q + m, so B = −m.
template <int QS, int QH, int OFF, bool MINS> struct MqNibble {
  static const bool has = true, mins = MINS;
  static const int GS = 32;
  __device__ static void ints(const u8 *b, int, u32 *w, float *A, float &B) {
    u32 qh = 0u, q[5];
    if constexpr (!MINS) { // Q4_0, Q5_0: 2-aligned blocks, their words from aligned loads
      static_assert(MINS || QS == (QH >= 0 ? 6 : 2), "qh (if any), then the codes, from byte 2");
      u16 dh;
      ld_hw<QH >= 0 ? 5 : 4>(b, dh, q);
      A[0] = A[1] = h2f(dh), B = 0.f;
      if constexpr (QH >= 0) qh = q[0];
    } else {
      if constexpr (QH >= 0) qh = ld32h(b + QH);
#pragma unroll
      for (int j = 0; j < 4; j++) q[j + (QH >= 0)] = ld32h(b + QS + 4 * j);
      A[0] = A[1] = h2f(ld16(b)), B = -h2f(ld16(b + 2));
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      u32 v = q[j + (QH >= 0)], lo = v & 0x0f0f0f0fu, hi = (v >> 4) & 0x0f0f0f0fu;
      if (QH >= 0) lo |= spread4(qh >> (4 * j)), hi |= spread4(qh >> (16 + 4 * j));
      w[j] = vsub4(lo, OFF * 0x01010101u), w[j + 4] = vsub4(hi, OFF * 0x01010101u);
    }
  }
};
template <> struct MqForm<Q4_0> : MqNibble<2, -1, 8, false> {};
template <> struct MqForm<Q4_1> : MqNibble<4, -1, 0, true> {};
template <> struct MqForm<Q5_0> : MqNibble<6, 2, 16, false> {};
template <> struct MqForm<Q5_1> : MqNibble<8, 4, 0, true> {};
template <> struct MqForm<Q8_0> {
  static const bool has = true, mins = false;
  static const int GS = 32;
  __device__ static void ints(const u8 *b, int, u32 *w, float *A, float &B) {
    u16 d;
    ld_hw<8>(b, d, w);
    A[0] = A[1] = h2f(d), B = 0.f;
  }
};
template <> struct MqForm<Q4_K> {
  static const bool has = true, mins = true;
  static const int GS = 32;
  __device__ static void ints(const u8 *b, int sub, u32 *w, float *A, float &B) {
    float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    u8 sc, m;
    scale_min_k4(sub, b + 4, sc, m);
    A[0] = A[1] = d * (float)sc, B = dmin * (float)m;
    const u8 *q = b + 16 + 32 * (sub / 2);
    int shift = 4 * (sub % 2);
    u32 v[8];
    ld8w(q, v);
#pragma unroll
    for (int j = 0; j < 8; j++) w[j] = (v[j] >> shift) & 0x0f0f0f0fu;
  }
};
template <> struct MqForm<Q5_K> {
  static const bool has = true, mins = true;
  static const int GS = 32;
  __device__ static void ints(const u8 *b, int sub, u32 *w, float *A, float &B) {
    float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    u8 sc, m;
    scale_min_k4(sub, b + 4, sc, m);
    A[0] = A[1] = d * (float)sc, B = dmin * (float)m;
    const u8 *qh = b + 16, *q = b + 48 + 32 * (sub / 2);
    int shift = 4 * (sub % 2);
    u32 v[8], hv[8];
    ld8w(q, v);
    ld8w(qh, hv);
#pragma unroll
    for (int j = 0; j < 8; j++) w[j] = ((v[j] >> shift) & 0x0f0f0f0fu) | (((hv[j] >> sub) & 0x01010101u) << 4);
  }
};
template <> struct MqForm<Q6_K> {
  static const bool has = true, mins = false;
  static const int GS = 16;
  __device__ static void ints(const u8 *b, int sub, u32 *w, float *A, float &B) {
    float d = h2f(ld16(b + 208));
    int n = sub / 4, k = sub % 4;
    const u8 *ql = b + 64 * n + (k & 1) * 32, *qh = b + 128 + 32 * n;
    const signed char *sc = (const signed char *)(b + 192 + 8 * n);
    int shift = (k >> 1) * 4;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      u32 lo = (ld32h(ql + 4 * j) >> shift) & 0x0f0f0f0fu, hi = ((ld32h(qh + 4 * j) >> (2 * k)) & 0x03030303u) << 4;
      w[j] = vsub4(lo | hi, 0x20202020u);
    }
    A[0] = d * (float)sc[2 * k], A[1] = d * (float)sc[1 + 2 * k], B = 0.f;
  }
};

// APR_TYPES(X) lists every format with its ggml type id: X(name, id).
#define APR_TYPES(X)                                                                                       \
  X(F32, 0) X(F16, 1) X(Q4_0, 2) X(Q4_1, 3) X(Q5_0, 6) X(Q5_1, 7) X(Q8_0, 8) X(Q2_K, 10) X(Q3_K, 11)         \
      X(Q4_K, 12) X(Q5_K, 13) X(Q6_K, 14) X(Q8_K, 15) X(IQ2_XXS, 16) X(IQ2_XS, 17) X(IQ3_XXS, 18)           \
          X(IQ1_S, 19) X(IQ4_NL, 20) X(IQ3_S, 21) X(IQ2_S, 22) X(IQ4_XS, 23) X(IQ1_M, 29) X(BF16, 30)       \
              X(TQ1_0, 34) X(TQ2_0, 35) X(MXFP4, 39) X(NVFP4, 40) X(Q1_0, 41) X(Q2_0, 42)
