// hostcheck.cpp compiles quant.cuh's device decoders for the CPU, so that
// engine/cuda's tests can hold every format's deq to ggml's to_float bit for
// bit without a GPU (TestDecodersOnHost builds and runs it with the host
// C++ compiler). Usage: hostcheck TYPE_ID ROWS COLS < blocks > floats.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define APR_HOST 1
#define __device__
#define __constant__
#define __forceinline__ inline
typedef unsigned short u16_;
static inline float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int x) { return bits_f((uint32_t)x); }
static inline float __uint_as_float(unsigned x) { return bits_f(x); }
static inline unsigned __float_as_uint(float x) { return f_bits(x); }
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
#include "quant.cuh"

template <class T> static void run(const std::vector<unsigned char> &in, int rows, int cols, std::vector<float> &out) {
  long long rb = (long long)cols / T::QK * T::TS;
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols / 32; c++) {
      float v[32];
      T::deq(&in[r * rb + (c / (T::QK / 32)) * T::TS], c % (T::QK / 32), v);
      memcpy(&out[(size_t)r * cols + 32 * c], v, sizeof v);
    }
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  int id = atoi(argv[1]), rows = atoi(argv[2]), cols = atoi(argv[3]);
  std::vector<unsigned char> in;
  unsigned char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) in.insert(in.end(), buf, buf + n);
  std::vector<float> out((size_t)rows * cols);
  switch (id) {
#define X(N, ID)                                                                                                   \
  case ID:                                                                                                         \
    if (in.size() != (size_t)rows * cols / N::QK * N::TS) return 3;                                                \
    run<N>(in, rows, cols, out);                                                                                   \
    break;
    APR_TYPES(X)
#undef X
  default:
    return 4;
  }
  fwrite(out.data(), sizeof(float), out.size(), stdout);
  return 0;
}
