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

#include "host.h"
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
