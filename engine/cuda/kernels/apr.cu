// apr.cu: the CUDA engine's kernels, one per graph.Backend op (see
// engine/graph/backend.go for each op's math). Buffers are row-major F32
// with a row stride in values. Products compute in ggml numerics: x is
// first rounded to the weight type's activation format (ActOf, act_*: the
// CPU engine's and ggml-cpu's Q8_0, Q8_1, Q8_K, F16 or BF16 rounding),
// then multiplied by the weights, dequantized in registers (mv, mm) or as
// integers on the int8 tensor cores (mq).
//
// Built by `make kernels` (nvcc -ptx -arch=sm_90 -fmad=false) into
// engine/cuda/kernels.ptx; -fmad=false keeps every dequantized value equal
// to engine/quant's (tested bit for bit through GetRows).
#include "quant.cuh"

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

#ifndef DYN_SHARED
#define DYN_SHARED(T, name) extern __shared__ T name[]
#endif

// pdl: programmatic dependent launch (Hopper). The host launches a tape's
// kernels after its first with programmatic stream serialization
// (backend.go, direct), so that a kernel's blocks may become resident while
// the kernel before it still runs. Every kernel calls pdl before it reads or
// writes memory: griddepcontrol.wait returns once the kernel before has
// finished and its writes are visible (and that one waited for its own
// predecessor, so all before it have too); launch_dependents then lets the
// next kernel be scheduled. What a kernel may do before it, only mv_body
// does: prefetch its weights, which no kernel writes.
// ld_l2: a load from L2, past this SM's L1 (ld.global.cg): values other
// blocks of the running kernel wrote and published with __threadfence.
__device__ __forceinline__ float ld_l2(const float *p) {
#if !defined(APR_HOST) && defined(__CUDA_ARCH__)
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
#else
  return *(const volatile float *)p;
#endif
}

__device__ __forceinline__ void pdl() {
#if !defined(APR_HOST) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#define WARPS 4 // warps per block in the products: one weight row each

#ifndef APR_HOST // the host emulator (emu.cpp) brings its own warp reductions
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sumd(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
#endif

// block_sumd sums v over the block (blockDim.x a multiple of 32, ≤ 1024);
// every thread gets the sum. sh holds 32 doubles.
__device__ double block_sumd(double v, double *sh) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sumd(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  double s = lane < nw ? sh[lane] : 0.0;
  s = warp_sumd(s);
  return s;
}
__device__ float block_maxf(float v, float *sh) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  float s = lane < nw ? sh[lane] : -INFINITY;
  return warp_max(s);
}

// ---- products ----------------------------------------------------------------

// mm: Y[t][r] = Σ_c W[r][c]·X[t][c] for rows r < nrows, tokens t < ntok.
// A warp takes one weight row and the NT tokens of tile; its lanes take the
// row's 32-value chunks in turn. Grid: (ceil(nrows/WARPS), ceil(ntok/NT)),
// tile = blockIdx.y (mmid uses grid.y for its slots and passes tile 0).
template <class T, int NT>
__device__ void mm_body(const u8 *W, long long rowBytes, int nchunk, int cols, const float *X, int xs, float *Y, int ys,
                        int nrows, int ntok, int tile) {
  const int CPB = T::QK / 32;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int row = blockIdx.x * WARPS + warp;
  if (row >= nrows) return;
  int t0 = tile * NT;
  const u8 *wr = W + (long long)row * rowBytes;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t] = 0.f;
  for (int c = lane; c < nchunk; c += 32) {
    int lim = cols - 32 * c; // values in this chunk: 32 except maybe the last of an element format
    float v[32];
    if constexpr (Elem<T>::value) {
      if (lim < 32) {
        for (int j = 0; j < 32; j++) v[j] = j < lim ? T::elem(wr + (long long)c * T::TS, j) : 0.f;
      } else {
        T::deq(wr + (long long)c * T::TS, 0, v);
      }
    } else {
      T::deq(wr + (long long)(c / CPB) * T::TS, c % CPB, v);
    }
#pragma unroll
    for (int t = 0; t < NT; t++) {
      if (t0 + t < ntok) {
        const float *x = X + (long long)(t0 + t) * xs + 32 * c;
        float s = 0.f;
        if (lim >= 32) {
#pragma unroll
          for (int j = 0; j < 32; j++) s += v[j] * x[j];
        } else {
          for (int j = 0; j < lim; j++) s += v[j] * x[j];
        }
        acc[t] += s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; t++) {
    float s = warp_sum(acc[t]);
    if (lane == 0 && t0 + t < ntok) Y[(long long)(t0 + t) * ys + row] = s;
  }
}

// prefetch_line(p): p's 128-byte line into L2, by the calling thread.
__device__ __forceinline__ void prefetch_line(const void *p) {
#ifndef APR_HOST
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// ---- tensor cores --------------------------------------------------------------
// The prompt product multiplies on the tensor cores in TF32 (m16n16k8
// fragments through nvcuda::wmma), three products per pair of tiles
// ("3xTF32"): each F32 value v is split into big = tf32(v) and small =
// tf32(v − big), and a·b is taken as a_small·b_big + a_big·b_small +
// a_big·b_big, which leaves out only a_small·b_small (~2^-22 of the
// product): F32's accuracy at the tensor cores' rate, so that the product
// of the rounded x (k_round) adds no error of its own. Off the
// GPU (the host emulator, the clang check) a fragment is the whole tile in
// lane 0 of the warp, which does the warp's product and store.
#if defined(__NVCC__)
#include <mma.h>
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8, nvcuda::wmma::precision::tf32,
                               nvcuda::wmma::row_major>
    TcA;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 8, nvcuda::wmma::precision::tf32,
                               nvcuda::wmma::col_major>
    TcB;
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> TcC;
__device__ __forceinline__ float tc_round(float v) { return nvcuda::wmma::__float_to_tf32(v); }
template <class F> __device__ __forceinline__ void tc_load(F &f, const float *p, int ld) {
  nvcuda::wmma::load_matrix_sync(f, p, ld);
}
__device__ __forceinline__ void tc_zero(TcC &c) { nvcuda::wmma::fill_fragment(c, 0.f); }
__device__ __forceinline__ void tc_mma(TcC &c, const TcA &a, const TcB &b) { nvcuda::wmma::mma_sync(c, a, b, c); }
__device__ __forceinline__ void tc_store(float *p, const TcC &c, int ld) {
  nvcuda::wmma::store_matrix_sync(p, c, ld, nvcuda::wmma::mem_row_major);
}
__device__ __forceinline__ void tc_load_acc(TcC &c, const float *p, int ld) {
  nvcuda::wmma::load_matrix_sync(c, p, ld, nvcuda::wmma::mem_row_major);
}
// tc_owner: whether this thread holds fragment elements (all lanes here).
__device__ __forceinline__ bool tc_owner() { return true; }
#else
struct TcA { // 16×8, row-major: x[i·8 + k]
  static const int num_elements = 128;
  float x[128];
};
struct TcB { // 8×16, column-major: element (k, j) at x[j·8 + k]
  static const int num_elements = 128;
  float x[128];
};
struct TcC { // 16×16, row-major
  static const int num_elements = 256;
  float x[256];
};
// tc_round: cvt.rna.tf32.f32 (to nearest, ties away from zero; the low 13
// bits cleared), NaN and infinity kept.
__device__ __forceinline__ float tc_round(float v) {
  unsigned u = __float_as_uint(v);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return __uint_as_float(u);
}
__device__ __forceinline__ void tc_load(TcA &f, const float *p, int ld) {
  for (int i = 0; i < 16; i++)
    for (int k = 0; k < 8; k++) f.x[i * 8 + k] = p[i * ld + k];
}
__device__ __forceinline__ void tc_load(TcB &f, const float *p, int ld) {
  for (int j = 0; j < 16; j++)
    for (int k = 0; k < 8; k++) f.x[j * 8 + k] = p[j * ld + k];
}
__device__ __forceinline__ void tc_zero(TcC &c) {
  for (int i = 0; i < 256; i++) c.x[i] = 0.f;
}
__device__ __forceinline__ void tc_mma(TcC &c, const TcA &a, const TcB &b) {
  if ((threadIdx.x & 31) != 0) return;
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) {
      float s = c.x[i * 16 + j];
      for (int k = 0; k < 8; k++) s = __fmaf_rn(a.x[i * 8 + k], b.x[j * 8 + k], s);
      c.x[i * 16 + j] = s;
    }
}
__device__ __forceinline__ void tc_store(float *p, const TcC &c, int ld) {
  if ((threadIdx.x & 31) != 0) return;
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) p[i * ld + j] = c.x[i * 16 + j];
}
__device__ __forceinline__ void tc_load_acc(TcC &c, const float *p, int ld) {
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) c.x[i * 16 + j] = p[i * ld + j];
}
__device__ __forceinline__ bool tc_owner() { return (threadIdx.x & 31) == 0; }
#endif

// tc_split: f's values become their big parts, small gets the rest.
template <class F> __device__ __forceinline__ void tc_split(F &f, F &small) {
#pragma unroll
  for (int i = 0; i < f.num_elements; i++) {
    float v = f.x[i], b = tc_round(v);
    f.x[i] = b;
    small.x[i] = tc_round(v - b);
  }
}

// mmt: the tiled product of a prompt (ntok > 1 rows of X). A block of 128
// threads computes a tile of MM_BM weight rows × MM_BN tokens: per stage of
// MM_BK 32-value chunks, each thread dequantizes one row's chunk into shared
// memory (once for all MM_BN tokens) and loads its share of the tokens'
// values (all its loads issued before the first store); then warp w
// multiplies tokens 32·(w/2)… by rows 32·(w%2)… in 3xTF32 on the tensor
// cores (2×2 fragments of 16×16). The tile leaves through shared memory, a
// row of tokens at a time. Grid: (ceil(nrows/MM_BM), ceil(ntok/MM_BN),
// splits).
// __launch_bounds__(128, MM_MINB): registers for three blocks per
// multiprocessor. With it, the batched loads and mmSplits' four blocks per
// multiprocessor, pp512 measured 24.8k vs 23.7k tok/s (qwen2.5-0.5b Q4_K)
// and 16.5k vs 15.3k (qwen3.5-0.8b Q4_K) against the kernel before (H100,
// one run, medians of 5). Tried and slower there: each value's TF32 parts
// split once into shared memory (twice the fragment loads: 22.3k), and the
// stage's raw weight bytes staged with coalesced loads in flight during the
// products, dequantized from shared memory (22.3k; 18.4k at four blocks).
#define MM_BM 64
#define MM_BN 64
#ifndef MM_BK
#define MM_BK 2
#endif
#define MM_LD (32 * MM_BK + 4) // a staged row: a multiple of 4 floats, rows 16 apart 32-byte aligned
#define MM_XV (MM_BN * 8 * MM_BK / 128) // float4s of X per thread per stage
#ifndef MM_MINB
#define MM_MINB 3 // blocks resident per multiprocessor the registers must leave room for
#endif
// MM_INT 1: prompt products of IntForm formats (quant.cuh) take
// mmt_int_body; the others, Q4_K and Q5_K among them, mmt_body's three
// products (mmt_int_body says why the formats with mins stay there).
#ifndef MM_INT
#define MM_INT 1
#endif
// Tf32Exact<T>: every dequantized value of T is a TF32 value (F16's 11
// significant bits and BF16's 8 fit TF32's 11), and so is every value of
// x a product with T multiplies (k_round has rounded it to ActOf<T>: F16
// or BF16), so both fragments' small parts are zero and their products,
// which add exactly nothing, are left out: one tensor-core product per
// pair of tiles instead of three, the same sums.
// (MM_TF32X 0: all three anyway, for measuring what they cost.)
#ifndef MM_TF32X
#define MM_TF32X 1
#endif
template <class T> struct Tf32Exact { static const bool value = false; };
template <> struct Tf32Exact<F16> { static const bool value = MM_TF32X; };
template <> struct Tf32Exact<BF16> { static const bool value = MM_TF32X; };
template <class T>
__device__ __forceinline__ void deq_chunk(const u8 *wr, int cc, int cols, float *v) {
  const int CPB = T::QK / 32;
  if constexpr (Elem<T>::value) {
    int lim = cols - 32 * cc;
    if (lim < 32) {
      for (int j = 0; j < 32; j++) v[j] = j < lim ? T::elem(wr + (long long)cc * T::TS, j) : 0.f;
    } else {
      T::deq(wr + (long long)cc * T::TS, 0, v);
    }
  } else {
    T::deq(wr + (long long)(cc / CPB) * T::TS, cc % CPB, v);
  }
}

// The parts both prompt products (mmt_body, mmt_int_body) share.
//
// mm_split: split blockIdx.z's chunks [cbeg, cend) (grid.z > 1, when the
// tiles alone leave the device idle): the split writes its partial tile to
// P (ntok × nrows per split), which k_sumk adds in split order.
__device__ __forceinline__ void mm_split(int nchunk, int ntok, int nrows, float *P, float *&Y, int &ys, int &cbeg,
                                         int &cend) {
  int per = (nchunk + gridDim.z - 1) / gridDim.z;
  per = (per + MM_BK - 1) / MM_BK * MM_BK;
  cbeg = blockIdx.z * per, cend = nchunk < cbeg + per ? nchunk : cbeg + per;
  if (gridDim.z > 1) Y = P + (long long)blockIdx.z * ntok * nrows, ys = nrows;
}

// mm_stage_w: the thread's 32 values of a stage's weight chunk into its
// staged row (d, 16-byte aligned).
__device__ __forceinline__ void mm_stage_w(float *d, const float *v) {
  float4 *d4 = (float4 *)d;
#pragma unroll
  for (int j = 0; j < 8; j++) {
    float4 f = {v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]};
    d4[j] = f;
  }
}

// mm_stage_x: this thread's share of the stage's token values (tokens t0…,
// chunks c…) into Xs (rows ld floats apart): every load issued, then every
// store. Columns past cols or the split's last chunk are zero.
__device__ __forceinline__ void mm_stage_x(float *Xs, int ld, const float *X, int xs, bool vec, int t0, int ntok,
                                           int c, int cend, int cols) {
  int tid = threadIdx.x;
  int lim = cols < 32 * cend ? cols : 32 * cend; // the columns this stage may read
  float4 xv[MM_XV];
#pragma unroll
  for (int u = 0; u < MM_XV; u++) {
    int i = tid + 128 * u;
    int t = i / (8 * MM_BK), q = i % (8 * MM_BK), col = 32 * c + 4 * q;
    float4 x = {0.f, 0.f, 0.f, 0.f};
    if (t0 + t < ntok) {
      const float *xr = X + (long long)(t0 + t) * xs + col;
      if (vec && col + 4 <= lim) {
        x = *(const float4 *)xr;
      } else {
        x.x = col < lim ? xr[0] : 0.f;
        x.y = col + 1 < lim ? xr[1] : 0.f;
        x.z = col + 2 < lim ? xr[2] : 0.f;
        x.w = col + 3 < lim ? xr[3] : 0.f;
      }
    }
    xv[u] = x;
  }
#pragma unroll
  for (int u = 0; u < MM_XV; u++) {
    int i = tid + 128 * u;
    *(float4 *)&Xs[(i / (8 * MM_BK)) * ld + 4 * (i % (8 * MM_BK))] = xv[u];
  }
}

// mm_zero: a warp's 2×2 accumulator fragments, zeroed.
__device__ __forceinline__ void mm_zero(TcC (&acc)[2][2]) {
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) tc_zero(acc[i][j]);
}

// mm_out: the warp's 2×2 accumulator fragments (tokens wt…, rows wr…) leave
// through shared memory (Cs, MM_BN × MM_LD floats over the staged weights),
// a row of tokens at a time.
__device__ __forceinline__ void mm_out(TcC (&acc)[2][2], float *Cs, int wt, int wr, float *Y, int ys, int t0,
                                       int r0, int ntok, int nrows) {
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) tc_store(&Cs[(wt + 16 * i) * MM_LD + wr + 16 * j], acc[i][j], MM_LD);
  __syncthreads();
  for (int e = threadIdx.x; e < MM_BN * MM_BM; e += blockDim.x) {
    int t = e / MM_BM, r = e % MM_BM;
    if (t0 + t < ntok && r0 + r < nrows) Y[(long long)(t0 + t) * ys + r0 + r] = Cs[t * MM_LD + r];
  }
}

template <class T>
__device__ void mmt_body(const u8 *W, long long rowBytes, int nchunk, int cols, const float *X, int xs, float *Y,
                         int ys, int nrows, int ntok, float *P) {
  int cbeg, cend;
  mm_split(nchunk, ntok, nrows, P, Y, ys, cbeg, cend);
  __shared__ __align__(32) float Ws[MM_BM * MM_LD]; // Ws[r][k]; the output tile Cs[t][r] at the end
  __shared__ __align__(32) float Xs[MM_BN * MM_LD]; // Xs[t][k]
  int tid = threadIdx.x, w = tid >> 5;
  int r0 = blockIdx.x * MM_BM, t0 = blockIdx.y * MM_BN;
  int wt = (w >> 1) * 32, wr = (w & 1) * 32;
  TcC acc[2][2];
  mm_zero(acc);
  int rr = tid % MM_BM, kc = tid / MM_BM;
  bool vec = (xs & 3) == 0 && ((unsigned long long)X & 15) == 0;
  for (int c = cbeg; c < cend; c += MM_BK) {
    __syncthreads();
    {
      float v[32];
      int row = r0 + rr, cc = c + kc;
      if (row < nrows && cc < cend) {
        deq_chunk<T>(W + (long long)row * rowBytes, cc, cols, v);
      } else {
#pragma unroll
        for (int j = 0; j < 32; j++) v[j] = 0.f;
      }
      mm_stage_w(&Ws[rr * MM_LD + kc * 32], v);
    }
    mm_stage_x(Xs, MM_LD, X, xs, vec, t0, ntok, c, cend, cols);
    __syncthreads();
#pragma unroll 2
    for (int k = 0; k < 32 * MM_BK; k += 8) {
      TcA a[2], as[2];
      TcB b[2], bs[2];
#pragma unroll
      for (int i = 0; i < 2; i++) {
        tc_load(a[i], &Xs[(wt + 16 * i) * MM_LD + k], MM_LD);
        if constexpr (!Tf32Exact<T>::value) tc_split(a[i], as[i]);
        tc_load(b[i], &Ws[(wr + 16 * i) * MM_LD + k], MM_LD);
        if constexpr (!Tf32Exact<T>::value) tc_split(b[i], bs[i]);
      }
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
          if constexpr (!Tf32Exact<T>::value) tc_mma(acc[i][j], as[i], b[j]);
          if constexpr (!Tf32Exact<T>::value) tc_mma(acc[i][j], a[i], bs[j]);
          tc_mma(acc[i][j], a[i], b[j]);
        }
    }
  }
  mm_out(acc, Ws, wt, wr, Y, ys, t0, r0, ntok, nrows);
}

// mmt_int: mmt for IntForm formats. The stage holds each chunk's integers
// q (Ws, TF32 values exactly) and its halves' scales A (Wa). Per scale
// group (IntForm::GS values) a warp multiplies x's big and small TF32
// parts by q into fresh fragments (two products, no third: q has no small
// part), then adds A·(Σ q·x) into its accumulators, each element's weight
// row and token read from a fragment loaded from an index tile (the
// accumulator's layout is the library's; loading it learns it).
//
// Formats with mins (Q4_K, Q5_K: A·q − B) are not IntForm formats: two
// ways of taking B·(Σ x) into this kernel lost to mmt_body's three
// products, both at the 168-register cap of three blocks per
// multiprocessor, and were removed. On one H100, qwen3.5-0.8b Q4_K pp512
// measured 16,031 tok/s against 16,713 with B·Σx folded into each
// fragment element's group scaling (a 160-byte stack, 2026-12-06), and
// 16,437 against 16,628 with −B and Σx as one more 3xTF32 k-step (a
// 96-byte stack, 2026-12-07).
template <class T>
__device__ void mmt_int_body(const u8 *W, long long rowBytes, int nchunk, int cols, const float *X, int xs, float *Y,
                             int ys, int nrows, int ntok, float *P) {
  using I = IntForm<T>;
  const int CPB = T::QK / 32, K = 32 * MM_BK;
  int cbeg, cend;
  mm_split(nchunk, ntok, nrows, P, Y, ys, cbeg, cend);
  __shared__ __align__(32) float Ws[MM_BM * MM_LD];
  __shared__ __align__(32) float Xs[MM_BN * MM_LD];
  __shared__ float Wa[MM_BM][2 * MM_BK];
  __shared__ __align__(32) float idx[256];
  int tid = threadIdx.x, w = tid >> 5;
  int r0 = blockIdx.x * MM_BM, t0 = blockIdx.y * MM_BN;
  int wt = (w >> 1) * 32, wr = (w & 1) * 32;
  for (int e = tid; e < 256; e += blockDim.x) idx[e] = (float)e;
  __syncthreads();
  TcC rc; // element e of a fragment is (row, column) (rc.x[e] / 16, rc.x[e] % 16) of its tile
  tc_load_acc(rc, idx, 16);
  TcC acc[2][2];
  mm_zero(acc);
  int rr = tid % MM_BM, kc = tid / MM_BM;
  bool vec = (xs & 3) == 0 && ((unsigned long long)X & 15) == 0;
  for (int c = cbeg; c < cend; c += MM_BK) {
    __syncthreads();
    {
      float v[32], A[2] = {0.f, 0.f};
      int row = r0 + rr, cc = c + kc;
      if (row < nrows && cc < cend) {
        I::deqi(W + (long long)row * rowBytes + (long long)(cc / CPB) * T::TS, cc % CPB, v, A);
      } else {
#pragma unroll
        for (int j = 0; j < 32; j++) v[j] = 0.f;
      }
      mm_stage_w(&Ws[rr * MM_LD + kc * 32], v);
      Wa[rr][2 * kc] = A[0], Wa[rr][2 * kc + 1] = A[1];
    }
    mm_stage_x(Xs, MM_LD, X, xs, vec, t0, ntok, c, cend, cols);
    __syncthreads();
#pragma unroll
    for (int g0 = 0; g0 < K; g0 += I::GS) {
      TcC tmp[2][2];
      mm_zero(tmp);
#pragma unroll
      for (int k = g0; k < g0 + I::GS; k += 8) {
        TcA a[2], as[2];
        TcB b[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
          tc_load(a[i], &Xs[(wt + 16 * i) * MM_LD + k], MM_LD);
          tc_split(a[i], as[i]);
          tc_load(b[i], &Ws[(wr + 16 * i) * MM_LD + k], MM_LD);
        }
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
          for (int j = 0; j < 2; j++) {
            tc_mma(tmp[i][j], as[i], b[j]);
            tc_mma(tmp[i][j], a[i], b[j]);
          }
      }
      int h = g0 / 16;
      if (tc_owner()) {
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
          for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < TcC::num_elements; e++) {
              int wrow = wr + 16 * j + ((int)rc.x[e] & 15);
              acc[i][j].x[e] = acc[i][j].x[e] + tmp[i][j].x[e] * Wa[wrow][h];
            }
      }
    }
  }
  mm_out(acc, Ws, wt, wr, Y, ys, t0, r0, ntok, nrows);
}

// ---- prompt products on quantized activations (mq) ----------------------------------
// A prompt's products with MqForm weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
// Q6_K) round x first, as ggml-cpu does before its dot products: k_round
// writes each token's row in the weights' activation format (Q8_0, Q8_1 or Q8_K,
// quant.QuantizeRowQ8_0 and QuantizeRowQ8_K to the bit), and mq_<type>
// multiplies the weights' int8 integers by it on the tensor cores
// (mma.sync m16n8k32, s8·s8 into s32: exact), then scales each 32-value
// chunk's sums: y += d_x·A·Σ q·q_x − B·d_x·Σ q_x (two halves of 16 with
// their own A for Q6_K). That is the reference's ggml numerics
// (ref.NumericsGGML: Σ dequant(w)·dequant(act(x))) up to the order of the
// float additions. APR_CUDA_MQ=0 keeps these products on mm_<type> (k_round's
// values), except Q4_1 and Q5_1, whose mins only mq_<type> takes as ggml does.

// imma_k32 / imma_k16: c += a·b for a warp's 16×32 (16×16) int8 tile a
// (row-major) and 32×8 (16×8) tile b (column-major), the PTX fragment
// layouts: lane l = 4g + t holds a's rows g and g + 8, bytes 4t…4t+3 of
// columns 0–15 (a[0], a[1]) and 16–31 (a[2], a[3]), b's column g at rows
// 4t…4t+3 (b[0]) and 16 + 4t… (b[1]), c's rows g (c[0], c[1]) and g + 8
// (c[2], c[3]) at columns 2t and 2t + 1. The host emulator gathers the
// warp's fragments and computes each lane's c from them (emu.cpp).
#ifdef APR_HOST
static void apr_imma(int *c, const u32 *a, const u32 *b, int k);
__device__ __forceinline__ void imma_k32(int (&c)[4], const u32 (&a)[4], const u32 (&b)[2]) { apr_imma(c, a, b, 32); }
__device__ __forceinline__ void imma_k16(int (&c)[4], u32 a0, u32 a1, u32 b0) {
  u32 a[4] = {a0, a1, 0u, 0u}, b[2] = {b0, 0u};
  apr_imma(c, a, b, 16);
}
#else
__device__ __forceinline__ void imma_k32(int (&c)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void imma_k16(int (&c)[4], u32 a0, u32 a1, u32 b0) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a0), "r"(a1), "r"(b0));
}
#endif

// f2h_rn: x as an IEEE half (to nearest, ties to even; subnormals kept), as
// quant's FP32ToFP16 and cvt.rn.f16.f32 round it.
__device__ __forceinline__ unsigned short f2h_rn(float x) {
#ifdef APR_HOST
  u32 u = __float_as_uint(x), s = (u >> 16) & 0x8000u, e = (u >> 23) & 255, m = u & 0x7fffffu;
  if (e == 255) return (unsigned short)(s | 0x7c00u | (m ? 0x200u : 0u));
  if (e < 103) return (unsigned short)s; // below half the smallest subnormal
  u32 hm, rem, halfway;
  if (e < 113) { // a half subnormal
    m |= 0x800000u;
    int sh = 126 - (int)e;
    hm = m >> sh, rem = m & ((1u << sh) - 1), halfway = 1u << (sh - 1);
  } else {
    hm = ((e - 112) << 10) | (m >> 13), rem = m & 0x1fffu, halfway = 0x1000u;
    if (e > 142) return (unsigned short)(s | 0x7c00u);
  }
  if (rem > halfway || (rem == halfway && (hm & 1))) hm++;
  return (unsigned short)(s | hm); // a carry into the exponent is the right value (infinity past the largest)
#else
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
#endif
}

// ---- activations in ggml numerics --------------------------------------------------
// act_q8: the lane's value v of a 32-value chunk (one per lane) as
// quant.QuantizeRowQ8_0 (and Q8_1) round it: its code, and the chunk's d
// (fp16(amax/127); dr: amax/127 before that rounding, which Q8_1's sum
// s = fp16(dr·Σ q) takes); q = roundeven(v·(127/amax)), saturated. d·q is
// the value ggml numerics multiply (quant's dequantization).
__device__ __forceinline__ int act_q8(float v, float &d, float &dr) {
  float amax = warp_max(fabsf(v));
  dr = amax / 127.f;
  d = h2f(f2h_rn(dr));
  float id = amax != 0.f ? 127.f / amax : 0.f;
  float r = rintf(v * id);
  return r > 127.f ? 127 : (r < -128.f ? -128 : (int)r);
}
// act_q8k: a 256-value block, lane j holding values j, j + 32, … (v[i] is
// value 32i + j), as quant's Q8_K quantizer rounds it: max is the first
// value of the largest magnitude, iscale = −127/max, q = min(127,
// roundeven(iscale·x)), d = 1/iscale (an all-zero block: 0 and 0).
__device__ __forceinline__ void act_q8k(const float (&v)[8], int (&q)[8], float &d) {
  int lane = threadIdx.x & 31;
  float am = 0.f;
  int at = 1 << 30; // the first index of the lane's largest magnitude
#pragma unroll
  for (int i = 0; i < 8; i++)
    if (fabsf(v[i]) > am) am = fabsf(v[i]), at = 32 * i + lane;
  float amax = warp_max(am);
  bool top = amax != 0.f && am == amax;
  float first = -warp_max(top ? -(float)at : -(float)(1 << 30)); // the smallest such index
  float mine = 0.f;
#pragma unroll
  for (int i = 0; i < 8; i++) mine = top && 32 * i + lane == (int)first ? v[i] : mine;
  float mx = warp_sum(mine); // one lane's value, the rest zeros
  float iscale = amax != 0.f ? -127.f / mx : 0.f;
  d = amax != 0.f ? 1.f / iscale : 0.f;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    float r = rintf(iscale * v[i]);
    q[i] = r > 127.f ? 127 : (int)r;
  }
}
__device__ __forceinline__ float act_f16(float v) { return h2f(f2h_rn(v)); }
__device__ __forceinline__ float act_bf16(float v) {
  u32 u = __float_as_uint(v);
  u32 h = (u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 64u) : ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return __uint_as_float(h << 16);
}
// act_round<A>: nct 32-value chunks of x in place (chunk c at x + c·ld,
// 16-byte aligned; a decode step's staged x), the values in ggml numerics
// for activation format A, as act_q8 and act_q8k round them (the prompt's
// kernels), by the whole block: a thread per chunk, with no warp
// reduction in its chain (a decode product waits for it); Q8_K's blocks
// of eight chunks meet through scr (2 floats per chunk) at a barrier, so
// every thread calls it. Q8_1: each chunk's stored sum s to s[c].
template <int A> __device__ void act_round(float *x, int ld, int nct, float *s, float *scr) {
  if constexpr (A == ACT_F16 || A == ACT_BF16) {
    for (int i = threadIdx.x; i < nct * 32; i += blockDim.x) {
      float *p = x + (i >> 5) * ld + (i & 31);
      *p = A == ACT_F16 ? act_f16(*p) : act_bf16(*p);
    }
  } else if constexpr (A == ACT_Q8_0 || A == ACT_Q8_1) {
    for (int c = threadIdx.x; c < nct; c += blockDim.x) {
      float4 *p = (float4 *)(x + c * ld);
      float4 v[8];
      float m4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int k = 0; k < 8; k++) {
        v[k] = p[k];
        m4[0] = fmaxf(m4[0], fabsf(v[k].x)), m4[1] = fmaxf(m4[1], fabsf(v[k].y));
        m4[2] = fmaxf(m4[2], fabsf(v[k].z)), m4[3] = fmaxf(m4[3], fabsf(v[k].w));
      }
      float amax = fmaxf(fmaxf(m4[0], m4[1]), fmaxf(m4[2], m4[3]));
      float dr = amax / 127.f, d = h2f(f2h_rn(dr)), id = amax != 0.f ? 127.f / amax : 0.f, sum = 0.f;
      auto r8 = [&](float f) {
        float r = fminf(127.f, fmaxf(-128.f, rintf(f * id)));
        sum += r; // integers: exact
        return d * r;
      };
#pragma unroll
      for (int k = 0; k < 8; k++) {
        float4 o = {r8(v[k].x), r8(v[k].y), r8(v[k].z), r8(v[k].w)};
        p[k] = o;
      }
      if constexpr (A == ACT_Q8_1) s[c] = h2f(f2h_rn(dr * sum));
    }
  } else if constexpr (A == ACT_Q8_K) {
    // Each chunk's largest magnitude and its first value of it, then each
    // block's from its chunks' in order: the first value of the block's
    // largest magnitude, as quant's Q8_K quantizer finds it.
    for (int c = threadIdx.x; c < nct; c += blockDim.x) {
      const float *p = x + c * ld;
      float am = 0.f, mv = 0.f;
      for (int j = 0; j < 32; j++) {
        float f = p[j];
        if (fabsf(f) > am) am = fabsf(f), mv = f;
      }
      scr[2 * c] = am, scr[2 * c + 1] = mv;
    }
    __syncthreads();
    for (int c = threadIdx.x; c < nct; c += blockDim.x) {
      const float *b = scr + 2 * (c & ~7);
      float amax = 0.f, mx = 0.f;
#pragma unroll
      for (int i = 0; i < 8; i++)
        if (b[2 * i] > amax) amax = b[2 * i], mx = b[2 * i + 1];
      float iscale = amax != 0.f ? -127.f / mx : 0.f, d = amax != 0.f ? 1.f / iscale : 0.f;
      float4 *p = (float4 *)(x + c * ld);
#pragma unroll
      for (int k = 0; k < 8; k++) {
        float4 v = p[k];
        v.x = d * fminf(127.f, rintf(iscale * v.x)), v.y = d * fminf(127.f, rintf(iscale * v.y));
        v.z = d * fminf(127.f, rintf(iscale * v.z)), v.w = d * fminf(127.f, rintf(iscale * v.w));
        p[k] = v;
      }
    }
  }
}

// k_round: token rows of X (xs apart, cols values, nc chunks) in ggml
// numerics for activation format fmt (ACT_*), for a prompt's products:
// with R, the rounded values (rows rs apart), which mm_<type> and
// mmid_<type> multiply; else (fmt ACT_Q8_0, ACT_Q8_1 or ACT_Q8_K) the
// codes for mq_<type>: Q (rows qs bytes apart), and D and S per token and
// chunk (nc apart), the d the chunk's codes are multiplied by (Q8_K: its
// block's) and the chunk's sum (Q8_0: d·Σ q; Q8_1: its stored s,
// fp16(dr·Σ q); Q8_K: Σ q, in units of the block's d, which mq_body
// multiplies once per block). Grid (ceil(nc / 8), ntok) blocks of 256
// threads: a warp per chunk (Q8_0, Q8_1) or per 256-value block (Q8_K; grid
// ceil(nc / 64)), a thread per value (F16, BF16: grid ceil(cols / 256)).
extern "C" __global__ void __launch_bounds__(256)
    k_round(const float *X, int xs, int ntok, int cols, int nc, int fmt, float *R, int rs, signed char *Q, int qs,
            float *D, float *S) {
  pdl();
  int tok = blockIdx.y, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float *x = X + (long long)tok * xs;
  float *r = R ? R + (long long)tok * rs : nullptr;
  signed char *q = Q + (long long)tok * qs;
  if (fmt == ACT_F16 || fmt == ACT_BF16) { // (F32 weights take x itself: no launch)
    for (int i = blockIdx.x * 256 + threadIdx.x; i < cols && i < (blockIdx.x + 1) * 256; i += 256)
      r[i] = fmt == ACT_F16 ? act_f16(x[i]) : act_bf16(x[i]);
    return;
  }
  if (fmt == ACT_Q8_K) {
    int b = blockIdx.x * 8 + w; // chunks 8b … 8b + 7
    bool in = 8 * b < nc;
    float v[8], d, sums[8];
    int qi[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = in ? x[256 * b + 32 * i + lane] : 0.f;
    act_q8k(v, qi, d);
    if (r) {
      if (in)
#pragma unroll
        for (int i = 0; i < 8; i++) r[256 * b + 32 * i + lane] = d * (float)qi[i];
      return;
    }
#pragma unroll
    for (int i = 0; i < 8; i++) sums[i] = warp_sum((float)qi[i]); // integers: exact in any order
    if (!in) return;
#pragma unroll
    for (int i = 0; i < 8; i++) q[256 * b + 32 * i + lane] = (signed char)qi[i];
    if (lane < 8) {
      float sl = sums[0];
#pragma unroll
      for (int i = 1; i < 8; i++) sl = lane == i ? sums[i] : sl;
      long long o = (long long)tok * nc + 8 * b + lane;
      D[o] = d, S[o] = sl;
    }
    return;
  }
  int c = blockIdx.x * 8 + w;
  float v = c < nc ? x[32 * c + lane] : 0.f, d, dr;
  int qi = act_q8(v, d, dr);
  if (r) {
    if (c < nc) r[32 * c + lane] = d * (float)qi;
    return;
  }
  float sum = warp_sum((float)qi);
  if (c >= nc) return;
  q[32 * c + lane] = (signed char)qi;
  if (lane == 0) D[(long long)tok * nc + c] = d, S[(long long)tok * nc + c] = fmt == ACT_Q8_1 ? h2f(f2h_rn(dr * sum)) : d * sum;
}

// fill244: a warp's 2×4 mma tiles of 4 elements each, set to v.
template <class V> __device__ __forceinline__ void fill244(V (&x)[2][4][4], V v) {
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) x[i][j][e] = v;
}
#define MQ_BM 64
#define MQ_BN 64
#define MQ_BK 8 // chunks per stage: one Q8_K block
static_assert(MQ_BM * MQ_BK == 4 * 128, "a stage's weight chunks: four per thread");
#define MQ_LD (32 * MQ_BK + 16) // bytes: 16-byte aligned, a row's words 4 banks past the row before
template <class T>
__device__ void mq_body(const u8 *W, long long rowBytes, int nchunk, const signed char *Q, int qs, const float *D,
                        const float *S, float *Y, int ys, int nrows, int ntok, float *P) {
  using F = MqForm<T>;
  const int CPB = T::QK / 32;
  int per = (nchunk + gridDim.z - 1) / gridDim.z;
  per = (per + MQ_BK - 1) / MQ_BK * MQ_BK;
  int cbeg = blockIdx.z * per, cend = nchunk < cbeg + per ? nchunk : cbeg + per;
  if (gridDim.z > 1) Y = P + (long long)blockIdx.z * ntok * nrows, ys = nrows;
  __shared__ __align__(16) u8 Ws[MQ_BM * MQ_LD];
  __shared__ __align__(16) u8 Xs[MQ_BN * MQ_LD];
  __shared__ float Wa[MQ_BK][3][MQ_BM]; // A0, A1, B per chunk and row
  __shared__ float Xa[MQ_BK][2][MQ_BN]; // d_x, d_x·Σ q_x per chunk and token
  int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  int r0 = blockIdx.x * MQ_BM, t0 = blockIdx.y * MQ_BN;
  int wt = (w >> 1) * 32, wr = (w & 1) * 32;
  // K8: x in Q8_K, one d_x per stage (a 256-value block): each chunk's sums
  // go to sacc in units of it, multiplied by it once per stage.
  constexpr bool K8 = ActOf<T>::v == ACT_Q8_K;
  float acc[2][4][4], sacc[2][4][4];
  fill244(acc, 0.f), fill244(sacc, 0.f);
  pdl();
  for (int c0 = cbeg; c0 < cend; c0 += MQ_BK) {
    __syncthreads();
    // The weights: thread tid takes chunk tid % 8 of rows tid / 8, + 16,
    // + 32, + 48, so that eight lanes read one row's stage, contiguous bytes
    // (a lane per row instead, each its own row's chunks, measured 5–13%
    // slower at pp512 on an H100, 2026-12-07).
#pragma unroll
    for (int s = 0; s < MQ_BK / 2; s++) {
      int rr = tid / MQ_BK + (128 / MQ_BK) * s, kc = tid % MQ_BK, row = r0 + rr, cc = c0 + kc;
      u32 wq[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
      float A[2] = {0.f, 0.f}, B = 0.f;
      if (row < nrows && cc < cend) F::ints(W + (long long)row * rowBytes + (long long)(cc / CPB) * T::TS, cc % CPB, wq, A, B);
      u32x4 *d = (u32x4 *)&Ws[rr * MQ_LD + 32 * kc];
      d[0] = u32x4{wq[0], wq[1], wq[2], wq[3]};
      d[1] = u32x4{wq[4], wq[5], wq[6], wq[7]};
      Wa[kc][0][rr] = A[0], Wa[kc][1][rr] = A[1], Wa[kc][2][rr] = B;
    }
    // The tokens' integers: 16-byte pieces, MQ_BN rows of MQ_BK·2.
#pragma unroll
    for (int u = 0; u < MQ_BN * MQ_BK * 2 / 128; u++) {
      int i = tid + 128 * u, tk = i / (2 * MQ_BK), p = i % (2 * MQ_BK), cc = c0 + p / 2;
      u32x4 v = {0u, 0u, 0u, 0u};
      if (t0 + tk < ntok && cc < cend) v = *(const u32x4 *)(Q + (long long)(t0 + tk) * qs + 16 * (c0 * 2 + p));
      *(u32x4 *)&Xs[tk * MQ_LD + 16 * p] = v;
    }
#pragma unroll
    for (int u = 0; u < MQ_BN * MQ_BK / 128; u++) {
      int i = tid + 128 * u, tk = i / MQ_BK, kc = i % MQ_BK, cc = c0 + kc;
      bool in = t0 + tk < ntok && cc < cend;
      Xa[kc][0][tk] = in ? D[(long long)(t0 + tk) * nchunk + cc] : 0.f;
      Xa[kc][1][tk] = in ? S[(long long)(t0 + tk) * nchunk + cc] : 0.f;
    }
    __syncthreads();
    int nk = cend - c0 < MQ_BK ? cend - c0 : MQ_BK;
    for (int kc = 0; kc < nk; kc++) {
      u32 a[2][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const u8 *p = &Ws[(wr + 16 * i + g) * MQ_LD + 32 * kc + 4 * t];
        a[i][0] = *(const u32 *)p, a[i][1] = *(const u32 *)(p + 8 * MQ_LD);
        a[i][2] = *(const u32 *)(p + 16), a[i][3] = *(const u32 *)(p + 8 * MQ_LD + 16);
      }
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const u8 *p = &Xs[(wt + 8 * j + g) * MQ_LD + 32 * kc + 4 * t];
        b[j][0] = *(const u32 *)p, b[j][1] = *(const u32 *)(p + 16);
      }
      int c[2][4][4], c1[2][4][4];
      fill244(c, 0), fill244(c1, 0);
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          if constexpr (F::GS == 32) {
            imma_k32(c[i][j], a[i], b[j]);
          } else {
            imma_k16(c[i][j], a[i][0], a[i][1], b[j][0]);
            imma_k16(c1[i][j], a[i][2], a[i][3], b[j][1]);
          }
        }
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
          int rl = wr + 16 * i + g + 8 * hf;
          float A0 = Wa[kc][0][rl], A1 = Wa[kc][1][rl], B = Wa[kc][2][rl];
#pragma unroll
          for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e1 = 0; e1 < 2; e1++) {
              int tl = wt + 8 * j + 2 * t + e1, e = 2 * hf + e1;
              if constexpr (K8) {
                // d_x is the stage's: the chunk's sums in units of it.
                float v = __fmaf_rn(A0, (float)c[i][j][e], sacc[i][j][e]);
                if constexpr (F::GS != 32) v = __fmaf_rn(A1, (float)c1[i][j][e], v);
                if constexpr (F::mins) v = __fmaf_rn(-B, Xa[kc][1][tl], v);
                sacc[i][j][e] = v;
              } else {
                float v = __fmaf_rn(A0 * Xa[kc][0][tl], (float)c[i][j][e], acc[i][j][e]);
                if constexpr (F::mins) v = __fmaf_rn(-B, Xa[kc][1][tl], v);
                acc[i][j][e] = v;
              }
            }
        }
    }
    if constexpr (K8) {
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[i][j][e] = __fmaf_rn(Xa[0][0][wt + 8 * j + 2 * t + (e & 1)], sacc[i][j][e], acc[i][j][e]);
      fill244(sacc, 0.f);
    }
  }
  // Out through shared memory (Cs[token][row], MQ_BM + 4 floats a row, over Ws).
  __syncthreads();
  float *Cs = (float *)Ws;
  const int CL = MQ_BM + 4;
  static_assert(MQ_BN * CL * 4 <= MQ_BM * MQ_LD, "the output tile fits over Ws");
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) Cs[(wt + 8 * j + 2 * t + (e & 1)) * CL + wr + 16 * i + g + 8 * (e >> 1)] = acc[i][j][e];
  __syncthreads();
  for (int e = tid; e < MQ_BN * MQ_BM; e += blockDim.x) {
    int tk = e / MQ_BM, r = e % MQ_BM;
    if (t0 + tk < ntok && r0 + r < nrows) Y[(long long)(t0 + tk) * ys + r0 + r] = Cs[tk * CL + r];
  }
}
#define APR_MQ(N)                                                                                               \
  extern "C" __global__ void __launch_bounds__(128) mq_##N(const u8 *W, long long rb, int nc, const signed char *Q, \
                                                           int qs, const float *D, const float *S, float *Y, int ys, \
                                                           int nr, int nt, float *P) {                         \
    mq_body<N>(W, rb, nc, Q, qs, D, S, Y, ys, nr, nt, P);                                                       \
  }
// APR_MQ_TYPES(X): the formats with mq_<type> (MqForm), X(name); backend.go's
// mqTypes lists the same.
#define APR_MQ_TYPES(X) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q4_K) X(Q5_K) X(Q6_K)
APR_MQ_TYPES(APR_MQ)

// k_actfmt: for each format of APR_TYPES, its ggml type id and ActOf (out[2i],
// out[2i + 1]), for TestActivationFormats to hold against quant.VecDotType.
// One thread.
extern "C" __global__ void k_actfmt(int *out) {
  int i = 0;
#define ACTFMT(N, ID) out[2 * i] = ID, out[2 * i + 1] = ActOf<N>::v, i++;
  APR_TYPES(ACTFMT)
#undef ACTFMT
}

// mv: Y[0][r] = Σ_c W[r][c]·X[0][c] for rows r < nrows and one token (a
// decode step). tpr threads (32, 64 or 128: one to four warps of the
// block) share a row and take its 32-value chunks in turn, so that rows of
// many chunks (ffn_down) still spread over enough warps. X is staged in
// shared memory MV_TILE chunks at a time, each chunk's 32 values padded to
// MV_XS floats: the lanes, each reading its own chunk as float4s, hit
// different banks in every quarter warp (read from global memory, 32 lanes
// 128 bytes apart touch 32 lines per load); for the formats with a min, the
// chunk's sum of x beside it. Each chunk's product is Dot<T>'s (quant.cuh)
// or deq's values in four fused multiply-add chains (mv_chunk). Grid: the
// blocks of each matrix (ceil(nrows / (128/tpr·G))) in turn.
#define MV_TILE 160
#define MV_XS 36
#define MV_ST 8 // values of x each thread stages per trip to memory
#ifndef MV_V4
#define MV_V4 1
#endif
#define MV_ST4 5 // float4s of x each thread stages per trip to memory (MV_V4)
// MV_PF: how many slots ahead a block asks L2 for its rows (prefetch_l2):
// with 1, the rows of its next slot stream in while it multiplies this
// one's (a matrix of more slots than a wave, such as the LM head, takes
// several slots a block); 0 asks for each slot's rows as it starts it.
#ifndef MV_PF
#define MV_PF 1
#endif
// MV_ACT 0: x is not rounded to the weights' activation format (act_round):
// not ggml numerics; only for measuring what the rounding costs.
#ifndef MV_ACT
#define MV_ACT 1
#endif
//
// One launch serves what a decode step does with one X (backend.go, fuse),
// each the same float arithmetic the separate kernels do, so that results
// do not change:
//   - up to four matrices of one type and width (MatMuls: q, k, v; gate,
//     up; qwen35's qkv, z, beta, alpha), W1/W2/W3 with their own outputs
//     and row counts (nr1 = 0: none);
//   - bias (AddVec: y += bias[r]) per matrix, and res (Add: res[r] += y)
//     for a single matrix;
//   - the RMSNorm that produced X (nflags & 1): X is then the norm's input
//     x, every block normalises it as k_rmsnorm does (the sum of squares
//     in double over the same 128 threads in the same order), and block 0
//     writes the normalised row to nout, where the norm would have;
//   - the SwiGLU of gate and up (glu ≠ 0, two matrices of equal rows,
//     paired: a block takes the same rows of both), glu[r] = silu(y0)·y1.
template <class T>
__device__ __forceinline__ float mv_chunk(const u8 *wr, int cc, int cols, const float *x, float xsum) {
  if constexpr (Dot<T>::has) {
    const int CPB = T::QK / 32;
    return Dot<T>::dot(wr + (long long)(cc / CPB) * T::TS, cc % CPB, x, xsum);
  } else {
    float v[32];
    deq_chunk<T>(wr, cc, cols, v);
    const float4 *x4 = (const float4 *)x;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float4 xv = x4[i];
      acc[0] = __fmaf_rn(v[4 * i], xv.x, acc[0]);
      acc[1] = __fmaf_rn(v[4 * i + 1], xv.y, acc[1]);
      acc[2] = __fmaf_rn(v[4 * i + 2], xv.z, acc[2]);
      acc[3] = __fmaf_rn(v[4 * i + 3], xv.w, acc[3]);
    }
    return sum4(acc);
  }
}

__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// MV_G is the most rows a row slot takes (nflags >> 4: 1, 2 or 4): each
// x chunk staged in shared memory then serves G rows' chunks, whose weight
// loads are independent (in flight together), and the x tile is staged
// once for G times the rows. Each row's sum is still its lane's chunks in
// order, then the warp's and the block's reductions: G does not change
// results.
#define MV_G 4
// MV_MARK(W, i): a clock reading at phase i of a product's block (0 entry,
// 1 after pdl, 2 x staged and normalised, 3 x rounded, 4 the chunks'
// products, 5 the end), for kernels/bench/mvbench.cu's phase trace (a
// development tool); nothing in apr's kernels.
#ifndef MV_MARK
#define MV_MARK(W, i)
#endif
// prefetch_l2(p, n): the 128-byte lines of [p, p + n) into the L2 cache, a
// line per thread of the block in turn (a hint: nothing waits for it). A
// product's block asks for its rows first, so that the weights come from
// DRAM while it stages and normalises x.
__device__ __forceinline__ void prefetch_l2(const u8 *p, long long n) {
#ifndef APR_HOST
  unsigned long long e = (unsigned long long)p + (unsigned long long)n;
  for (unsigned long long q = ((unsigned long long)p & ~127ull) + 128ull * threadIdx.x; q < e; q += 128ull * blockDim.x)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(q));
#endif
}


template <class T>
__device__ void mv_body(const u8 *W, long long rowBytes, int nchunk, int cols, const float *X, float *Y, int nrows,
                        int tpr, const float *bias, float *res, const u8 *W1, float *Y1, int nr1, const float *bias1,
                        const u8 *W2, float *Y2, int nr2, const float *bias2, const float *nw, float eps, float *nout,
                        int nflags, float *glu, const u8 *W3, float *Y3, int nr3, const float *bias3) {
  __shared__ __align__(16) float xs[MV_TILE * MV_XS];
  __shared__ float xsum[MV_TILE];
  __shared__ float ascr[2 * MV_TILE]; // act_round's (Q8_K)
  __shared__ __align__(16) float nws[MV_TILE * 32];
  __shared__ float part[2][MV_G][4];
  __shared__ double nsh[32];
  int G = (nflags >> 4) & 15;
  int rpb = 128 / tpr, rpbG = rpb * G;
  int sub = threadIdx.x % tpr, rl = threadIdx.x / tpr;
  // Slots: G·rpb rows of one matrix each, the matrices' in turn (glu: the
  // same rows of W and W1 together). A block takes slots blockIdx.x,
  // blockIdx.x + gridDim.x, …; when x fits one tile (nchunk ≤ MV_TILE) it
  // is staged once for all of them.
  int b0 = (nrows + rpbG - 1) / rpbG, b1 = glu ? 0 : (nr1 + rpbG - 1) / rpbG, b2 = glu ? 0 : (nr2 + rpbG - 1) / rpbG;
  int b3 = glu ? 0 : (nr3 + rpbG - 1) / rpbG;
  int ntiles = (nchunk + MV_TILE - 1) / MV_TILE;
  bool norm = nflags & 1, staged = false;
  bool v4 = (cols & 3) == 0 && ((unsigned long long)X & 15) == 0 && (!nw || ((unsigned long long)nw & 15) == 0) &&
            (!nout || ((unsigned long long)nout & 15) == 0);
  // The slot's rows of weights into L2, then wait for the kernel before
  // (pdl): when this one was launched early, the weights stream in while
  // that kernel finishes.
  auto slotRows = [&](int slot, const u8 *&Wm, float *&Ym, const float *&bm, int &nm) {
    int b = slot;
    Wm = W, Ym = Y, bm = bias, nm = nrows;
    if (b >= b0 + b1 + b2) {
      b -= b0 + b1 + b2, Wm = W3, Ym = Y3, bm = bias3, nm = nr3;
    } else if (b >= b0 + b1) {
      b -= b0 + b1, Wm = W2, Ym = Y2, bm = bias2, nm = nr2;
    } else if (b >= b0) {
      b -= b0, Wm = W1, Ym = Y1, bm = bias1, nm = nr1;
    }
    return b;
  };
  auto prefetch = [&](int slot) {
    const u8 *Wm;
    float *Ym;
    const float *bm;
    int nm;
    int b = slotRows(slot, Wm, Ym, bm, nm);
    int r0 = b * rpbG, n = (nm < r0 + rpbG ? nm : r0 + rpbG) - r0;
    prefetch_l2(Wm + (long long)r0 * rowBytes, (long long)n * rowBytes);
    if (glu) prefetch_l2(W1 + (long long)r0 * rowBytes, (long long)n * rowBytes);
  };
  MV_MARK(W, 0);
  // The first MV_PF slots' rows (at least the first slot's), before the wait.
  for (int k = 0; k < (MV_PF > 1 ? MV_PF : 1); k++)
    if (blockIdx.x + k * gridDim.x < b0 + b1 + b2 + b3) prefetch(blockIdx.x + k * gridDim.x);
  pdl();
  MV_MARK(W, 1);
  // The norm (nflags & 1): its scale is k_rmsnorm's to the bit (the sum of
  // squares in double, each thread its columns threadIdx.x + 128·k in
  // order), and so is x·scale·nw. When x fits one tile, x and nw are staged
  // together (one trip to memory) and normalised in place; otherwise the
  // sum of squares comes first, from X.
  float scale = 1.f;
  if (norm && ntiles > 1) {
    double q = 0;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) q += (double)X[i] * (double)X[i];
    q = block_sumd(q, nsh);
    float mean = (float)(q / cols);
    scale = 1.f / sqrtf(mean + eps);
  }
  for (int slot = blockIdx.x; slot < b0 + b1 + b2 + b3; slot += gridDim.x) {
    const u8 *Wm;
    float *Ym;
    const float *bm;
    int nm;
    int b = slotRows(slot, Wm, Ym, bm, nm);
    if (MV_PF == 0 && slot != blockIdx.x) prefetch(slot);
    if (MV_PF > 0 && slot + MV_PF * gridDim.x < b0 + b1 + b2 + b3) prefetch(slot + MV_PF * gridDim.x);
    int base = b * rpbG + rl;
    // The slot's first row's bias and residual, read now so that their
    // loads overlap staging x and the products instead of following the
    // reductions (rows g > 0 read theirs after them; the products that take
    // a bias or a residual mostly run at G 1).
    // The residual is this kernel's to write (res aliases nothing the
    // product reads or writes: backend.go, fuseResidual).
    float bias0 = 0.f, res0 = 0.f;
    if (sub == 0 && base < nm) {
      if (bm) bias0 = bm[base];
      if (res) res0 = res[base];
    }
    const u8 *wr[MV_G], *wr1[MV_G];
#pragma unroll
    for (int g = 0; g < MV_G; g++) {
      int row = base + g * rpb;
      bool live = g < G && row < nm;
      wr[g] = Wm + (long long)(live ? row : 0) * rowBytes;
      wr1[g] = glu ? W1 + (long long)(live ? row : 0) * rowBytes : nullptr;
    }
    float acc[MV_G], acc1[MV_G];
#pragma unroll
    for (int g = 0; g < MV_G; g++) acc[g] = 0.f, acc1[g] = 0.f;
    for (int c0 = 0; c0 < nchunk; c0 += MV_TILE) {
      int nct = nchunk - c0 < MV_TILE ? nchunk - c0 : MV_TILE;
      if (ntiles > 1 || !staged) {
        __syncthreads();
        // MV_ST values per thread in flight: their loads are issued
        // together, then stored (one trip to memory per MV_ST, not per value).
        // MV_V4: MV_ST4 float4s of x (and of the norm's weights) instead, when
        // both rows are 16-byte aligned and cols a multiple of 4: a row of
        // 4,864 values (ffn_down) in two trips instead of five.
#if MV_V4
        if (v4) {
          for (int f0 = threadIdx.x; f0 < nct * 8; f0 += MV_ST4 * blockDim.x) {
            float4 v[MV_ST4], w[MV_ST4];
#pragma unroll
            for (int u = 0; u < MV_ST4; u++) {
              int f = f0 + u * blockDim.x, col = c0 * 32 + 4 * f;
              bool in = f < nct * 8 && col < cols;
              float4 z = {0.f, 0.f, 0.f, 0.f}, o = {1.f, 1.f, 1.f, 1.f};
              v[u] = in ? *(const float4 *)(X + col) : z;
              w[u] = in && norm && nw ? *(const float4 *)(nw + col) : o;
            }
#pragma unroll
            for (int u = 0; u < MV_ST4; u++) {
              int f = f0 + u * blockDim.x, col = c0 * 32 + 4 * f, i = 4 * f;
              if (f >= nct * 8) break;
              float4 x = v[u];
              if (norm && col < cols) {
                if (ntiles == 1) {
                  if (nw) *(float4 *)&nws[i] = w[u];
                } else {
                  float4 y = w[u];
                  x.x = nw ? (x.x * scale) * y.x : x.x * scale;
                  x.y = nw ? (x.y * scale) * y.y : x.y * scale;
                  x.z = nw ? (x.z * scale) * y.z : x.z * scale;
                  x.w = nw ? (x.w * scale) * y.w : x.w * scale;
                  if (blockIdx.x == 0) *(float4 *)(nout + col) = x;
                }
              }
              *(float4 *)&xs[(i >> 5) * MV_XS + (i & 31)] = x;
            }
          }
          if (norm && ntiles == 1) __syncthreads(); // the sum below reads columns other threads staged
        } else
#endif
        for (int i0 = threadIdx.x; i0 < nct * 32; i0 += MV_ST * blockDim.x) {
          float v[MV_ST], w[MV_ST];
#pragma unroll
          for (int u = 0; u < MV_ST; u++) {
            int i = i0 + u * blockDim.x, col = c0 * 32 + i;
            bool in = i < nct * 32 && col < cols;
            v[u] = in ? X[col] : 0.f;
            w[u] = in && norm && nw ? nw[col] : 1.f;
          }
#pragma unroll
          for (int u = 0; u < MV_ST; u++) {
            int i = i0 + u * blockDim.x, col = c0 * 32 + i;
            if (i >= nct * 32) break;
            float x = v[u];
            if (norm && col < cols) {
              if (ntiles == 1) {
                if (nw) nws[i] = w[u];
              } else {
                x = nw ? (x * scale) * w[u] : x * scale;
                if (blockIdx.x == 0) nout[col] = x;
              }
            }
            xs[(i >> 5) * MV_XS + (i & 31)] = x;
          }
        }
        if (norm && ntiles == 1) {
          // Each thread's columns are the ones it staged (MV_V4: after a
          // barrier): its sum of squares needs no barrier before it, the
          // block's does.
          double q = 0;
          for (int i = threadIdx.x; i < cols; i += blockDim.x) {
            float v = xs[(i >> 5) * MV_XS + (i & 31)];
            q += (double)v * (double)v;
          }
          q = block_sumd(q, nsh);
          float mean = (float)(q / cols);
          scale = 1.f / sqrtf(mean + eps);
          for (int i = threadIdx.x; i < cols; i += blockDim.x) {
            float *p = &xs[(i >> 5) * MV_XS + (i & 31)];
            float v = nw ? (*p * scale) * nws[i] : *p * scale;
            *p = v;
            if (blockIdx.x == 0) nout[i] = v;
          }
        }
        __syncthreads();
        MV_MARK(W, 2);
#if MV_ACT
        if constexpr (ActOf<T>::v != ACT_NONE) {
          // x in ggml numerics (after the norm, whose output nout keeps F32).
          act_round<ActOf<T>::v>(xs, MV_XS, nct, xsum, ascr); // Q8_1: xsum is each chunk's s
          __syncthreads();
        }
#endif
        if constexpr (Dot<T>::xsum && !(MV_ACT && ActOf<T>::v == ACT_Q8_1)) {
          for (int c = threadIdx.x; c < nct; c += blockDim.x) {
            const float *xc = xs + c * MV_XS;
            float a = 0.f;
            for (int j = 0; j < 32; j++) a += xc[j];
            xsum[c] = a;
          }
          __syncthreads();
        }
        MV_MARK(W, 3);
      }
      for (int c = sub; c < nct; c += tpr) {
        float xsc = Dot<T>::xsum ? xsum[c] : 0.f;
#pragma unroll
        for (int g = 0; g < MV_G; g++) {
          if (g < G && base + g * rpb < nm) {
            acc[g] += mv_chunk<T>(wr[g], c0 + c, cols, xs + c * MV_XS, xsc);
            if (glu) acc1[g] += mv_chunk<T>(wr1[g], c0 + c, cols, xs + c * MV_XS, xsc);
          }
        }
      }
    }
    staged = true;
    MV_MARK(W, 4);
#pragma unroll
    for (int g = 0; g < MV_G; g++) {
      if (g >= G) break;
      acc[g] = warp_sum(acc[g]);
      if (glu) acc1[g] = warp_sum(acc1[g]);
    }
    if (tpr > 32) {
      int wpr = tpr / 32;
      __syncthreads();
      if ((threadIdx.x & 31) == 0) {
#pragma unroll
        for (int g = 0; g < MV_G; g++)
          if (g < G) part[0][g][threadIdx.x >> 5] = acc[g], part[1][g][threadIdx.x >> 5] = acc1[g];
      }
      __syncthreads();
#pragma unroll
      for (int g = 0; g < MV_G; g++) {
        if (g >= G) break;
        acc[g] = 0.f, acc1[g] = 0.f;
        for (int w = 0; w < wpr; w++) acc[g] += part[0][g][rl * wpr + w], acc1[g] += part[1][g][rl * wpr + w];
      }
    }
    if (sub != 0) continue;
#pragma unroll
    for (int g = 0; g < MV_G; g++) {
      int row = base + g * rpb;
      if (g >= G || row >= nm) break;
      float a = acc[g], a1 = acc1[g];
      if (bm) a = a + (g == 0 ? bias0 : bm[row]);
      if (glu) {
        if (bias1) a1 = a1 + bias1[row];
        // Y0 and Y1 as the products left them, then SwiGLU's output (which
        // may be Y0 itself).
        Ym[row] = a;
        Y1[row] = a1;
        glu[row] = silu(a) * a1;
        continue;
      }
      Ym[row] = a;
      if (res) res[row] = (g == 0 ? res0 : res[row]) + a;
    }
  }
  MV_MARK(W, 5);
}

// mmid: ggml's mul_mat_id. Output slot s (grid.y) multiplies expert ids[s]
// (its matrix at W + ids[s]·expBytes) by X row xrow = s / xdiv.
template <class T>
__device__ void mmid_body(const u8 *W, long long expBytes, long long rowBytes, int nchunk, int cols, const int *ids,
                          int xdiv, const float *X, int xs, float *Y, int ys, int nrows) {
  int s = blockIdx.y;
  const u8 *We = W + (long long)ids[s] * expBytes;
  mm_body<T, 1>(We, rowBytes, nchunk, cols, X + (long long)(s / xdiv) * xs, xs, Y + (long long)s * ys, ys, nrows, 1, 0);
}

// getrows: dst[r] = W[ids[r]], dequantized; grid (ceil(nchunk/128), n).
template <class T>
__device__ void getrows_body(const u8 *W, long long rowBytes, int nchunk, int cols, const int *ids, float *D, int ds) {
  const int CPB = T::QK / 32;
  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c >= nchunk) return;
  const u8 *wr = W + (long long)ids[r] * rowBytes;
  float *d = D + (long long)r * ds + 32 * c;
  int lim = cols - 32 * c;
  if constexpr (Elem<T>::value) {
    if (lim < 32) {
      for (int j = 0; j < lim; j++) d[j] = T::elem(wr + (long long)c * T::TS, j);
      return;
    }
  }
  float v[32];
  T::deq(wr + (long long)(c / CPB) * T::TS, c % CPB, v);
#pragma unroll
  for (int j = 0; j < 32; j++) d[j] = v[j];
}

#define APR_PRODUCTS(N, ID)                                                                                    \
  extern "C" __global__ void __launch_bounds__(128)                                                            \
      mv_##N(const u8 *W, long long rb, int nc, int cols, const float *X, float *Y, int nr, int tpr,          \
             const float *bias, float *res, const u8 *W1, float *Y1, int nr1, const float *bias1, const u8 *W2,    \
             float *Y2, int nr2, const float *bias2, const float *nw, float eps, float *nout, int nflags,          \
             float *glu, const u8 *W3, float *Y3, int nr3, const float *bias3) {                               \
    mv_body<N>(W, rb, nc, cols, X, Y, nr, tpr, bias, res, W1, Y1, nr1, bias1, W2, Y2, nr2, bias2, nw, eps, nout, \
               nflags, glu, W3, Y3, nr3, bias3);                                                               \
  }                                                                                                            \
  extern "C" __global__ void __launch_bounds__(128, MM_MINB)                                                   \
      mm_##N(const u8 *W, long long rb, int nc, int cols, const float *X, int xs, float *Y, int ys, int nr, int nt,  \
             float *P) {                                                                                       \
    pdl();                                                                                                     \
    if constexpr (MM_INT && IntForm<N>::has)                                 \
      mmt_int_body<N>(W, rb, nc, cols, X, xs, Y, ys, nr, nt, P);                                               \
    else                                                                                                       \
      mmt_body<N>(W, rb, nc, cols, X, xs, Y, ys, nr, nt, P);                                                   \
  }                                                                                                            \
  extern "C" __global__ void __launch_bounds__(128)                                                            \
      mmid_##N(const u8 *W, long long eb, long long rb, int nc, int cols, const int *ids, int xdiv, const float *X, \
               int xs, float *Y, int ys, int nr) {                                                             \
    pdl();                                                                                                     \
    mmid_body<N>(W, eb, rb, nc, cols, ids, xdiv, X, xs, Y, ys, nr);                                            \
  }                                                                                                            \
  extern "C" __global__ void getrows_##N(const u8 *W, long long rb, int nc, int cols, const int *ids, float *D,  \
                                         int ds) {                                                             \
    pdl();                                                                                                     \
    getrows_body<N>(W, rb, nc, cols, ids, D, ds);                                                              \
  }
APR_TYPES(APR_PRODUCTS)

// ---- element-wise --------------------------------------------------------------
// Element-wise kernels take a grid-stride loop over rows·cols.

#define EACH(rows, cols)                                                                                            \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)(rows) * (cols);            \
       i += (long long)gridDim.x * blockDim.x)

// k_sumk: d[t][r] = Σ_s P[s][t][r] in split order (the prompt product's
// split over chunks, mmt_body).
extern "C" __global__ void k_sumk(float *d, int ds, const float *P, int splits, int rows, int cols) {
  pdl();
  EACH(rows, cols) {
    long long t = i / cols, r = i % cols;
    float s = P[i];
    for (int k = 1; k < splits; k++) s += P[(long long)k * rows * cols + i];
    d[t * ds + r] = s;
  }
}
extern "C" __global__ void k_zero(float *d, int ds, int rows, int cols) {
  pdl();
  EACH(rows, cols) { d[(i / cols) * ds + i % cols] = 0.f; }
}
extern "C" __global__ void k_add(float *d, int ds, const float *x, int xs, int rows, int cols) {
  pdl();
  EACH(rows, cols) { d[(i / cols) * ds + i % cols] += x[(i / cols) * xs + i % cols]; }
}
extern "C" __global__ void k_addvec(float *d, int ds, const float *v, int rows, int cols) {
  pdl();
  EACH(rows, cols) { d[(i / cols) * ds + i % cols] += v[i % cols]; }
}
extern "C" __global__ void k_swiglu(float *d, int ds, const float *g, int gs, const float *u, int us, int rows,
                                    int cols) {
  pdl();
  EACH(rows, cols) {
    long long r = i / cols, c = i % cols;
    d[r * ds + c] = silu(g[r * gs + c]) * u[r * us + c];
  }
}
extern "C" __global__ void k_sigmoid(float *d, int ds, int rows, int cols) {
  pdl();
  EACH(rows, cols) {
    float *p = d + (i / cols) * ds + i % cols;
    *p = sigm(*p);
  }
}
extern "C" __global__ void k_silu(float *d, int ds, int rows, int cols) {
  pdl();
  EACH(rows, cols) {
    float *p = d + (i / cols) * ds + i % cols;
    *p = silu(*p);
  }
}
extern "C" __global__ void k_mulsigmoid(float *d, int ds, const float *g, int gs, int rows, int cols) {
  pdl();
  EACH(rows, cols) { d[(i / cols) * ds + i % cols] *= sigm(g[(i / cols) * gs + i % cols]); }
}
// k_softplusmul: d = softplus(d + bias)·a; with sg, also sg = sigmoid(sg)
// over its rows × sgcols (a Sigmoid folded in: backend.go, SoftplusMul),
// work items past rows·cols.
extern "C" __global__ void k_softplusmul(float *d, int ds, const float *bias, const float *a, int rows, int cols,
                                         float *sg, int sgs, int sgcols) {
  pdl();
  EACH(rows, cols + sgcols) {
    if (i >= (long long)rows * cols) {
      long long j = i - (long long)rows * cols;
      float *p = sg + (j / sgcols) * sgs + j % sgcols;
      *p = sigm(*p);
      continue;
    }
    float *p = d + (i / cols) * ds + i % cols;
    float u = *p + bias[i % cols];
    float sp = u > 20.f ? u : logf(1.f + expf(u));
    *p = sp * a[i % cols];
  }
}
// k_deinterleave: src row = runs of width values for dst0, dst1, ….
extern "C" __global__ void k_deinterleave(const float *s, int ss, int rows, int cols, int width, int nd, float *d0,
                                          int s0, float *d1, int s1, float *d2, int s2, float *d3, int s3) {
  pdl();
  EACH(rows, cols) {
    long long r = i / cols, c = i % cols;
    int run = (int)(c / width), k = run % nd;
    long long off = (long long)(run / nd) * width + c % width;
    float v = s[r * ss + c];
    if (k == 0) d0[r * s0 + off] = v;
    else if (k == 1) d1[r * s1 + off] = v;
    else if (k == 2) d2[r * s2 + off] = v;
    else d3[r * s3 + off] = v;
  }
}
// k_wsum: d[t] = Σ_j w[t·k+j]·y[t·k+j], j in order.
extern "C" __global__ void k_wsum(float *d, int ds, const float *y, int ys, const float *w, int k, int rows,
                                  int cols) {
  pdl();
  EACH(rows, cols) {
    long long t = i / cols, c = i % cols;
    float s = y[(t * k) * ys + c] * w[t * k];
    for (int j = 1; j < k; j++) s += y[(t * k + j) * ys + c] * w[t * k + j];
    d[t * ds + c] = s;
  }
}

// ---- row-wise (one block per row and group) ---------------------------------------

// k_rmsnorm: per group of each row, y = (x·1/sqrt(mean(x²)+eps))·w; the sum
// of squares in double as ggml's. Grid: rows·(cols/group) blocks.
extern "C" __global__ void k_rmsnorm(float *d, int ds, const float *x, int xs, const float *w, int cols, int group,
                                     float eps) {
  pdl();
  __shared__ double sh[32];
  int ng = cols / group;
  long long r = blockIdx.x / ng;
  int g0 = (blockIdx.x % ng) * group;
  const float *xr = x + r * xs + g0;
  float *dr = d + r * ds + g0;
  double s = 0;
  for (int i = threadIdx.x; i < group; i += blockDim.x) s += (double)xr[i] * (double)xr[i];
  s = block_sumd(s, sh);
  float mean = (float)(s / group);
  float scale = 1.f / sqrtf(mean + eps);
  for (int i = threadIdx.x; i < group; i += blockDim.x) dr[i] = w ? (xr[i] * scale) * w[i] : xr[i] * scale;
}
// k_l2norm: x / max(‖x‖, eps) per group.
extern "C" __global__ void k_l2norm(float *d, int ds, int cols, int group, float eps) {
  pdl();
  __shared__ double sh[32];
  int ng = cols / group;
  long long r = blockIdx.x / ng;
  float *dr = d + r * ds + (blockIdx.x % ng) * group;
  double s = 0;
  for (int i = threadIdx.x; i < group; i += blockDim.x) s += (double)dr[i] * (double)dr[i];
  s = block_sumd(s, sh);
  float scale = 1.f / fmaxf(sqrtf((float)s), eps);
  __syncthreads();
  for (int i = threadIdx.x; i < group; i += blockDim.x) dr[i] *= scale;
}
// k_gatednorm: o = rmsnorm(o)·w·silu(z) per group.
extern "C" __global__ void k_gatednorm(float *o, int os, const float *z, int zs, const float *w, int cols, int group,
                                       float eps) {
  pdl();
  __shared__ double sh[32];
  int ng = cols / group;
  long long r = blockIdx.x / ng;
  int g0 = (blockIdx.x % ng) * group;
  float *orow = o + r * os + g0;
  const float *zr = z + r * zs + g0;
  double s = 0;
  for (int i = threadIdx.x; i < group; i += blockDim.x) s += (double)orow[i] * (double)orow[i];
  s = block_sumd(s, sh);
  float scale = 1.f / sqrtf((float)(s / group) + eps);
  __syncthreads();
  for (int i = threadIdx.x; i < group; i += blockDim.x) orow[i] = ((orow[i] * scale) * w[i]) * silu(zr[i]);
}
// k_softmax: each row to probabilities (max, e^(x−max) summed in double,
// times 1/Σ).
extern "C" __global__ void k_softmax(float *d, int ds, int cols) {
  pdl();
  __shared__ double sh[32];
  __shared__ float shf[32];
  float *r = d + (long long)blockIdx.x * ds;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) mx = fmaxf(mx, r[i]);
  mx = block_maxf(mx, shf);
  double s = 0;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    float e = expf(r[i] - mx);
    r[i] = e;
    s += e;
  }
  s = block_sumd(s, sh);
  float inv = (float)(1.0 / s);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) r[i] *= inv;
}

// ---- RoPE ---------------------------------------------------------------------------

// The position arguments (pos0) are read from device memory so that a
// decode step captured into a CUDA graph replays at the next position
// (the host writes the position before launching the graph).

// k_rope rotates pair i of every head of row r by θ = (pos0+r)·thetaScale^i
// (the power built by repeated float multiplication, as ggml-cpu does),
// divided by ff[i] when given, mixed by YaRN when extFactor ≠ 0; IMROPE
// zeroes θ of the pairs whose section is e. mode: 0 norm (2i, 2i+1), else
// (i, i+nrot/2). One thread per (row, head, pair).
//
// One launch may carry what follows a decode step's query rotation
// (backend.go, fuse): the key rotation (x2, cols2 > 0), and the store of
// the rotated keys and of the values into the cache at pos0 (Kc ≠ 0: K
// [ctx][cols2], V [ctx][vdim]) — the rotating thread writes its pair to
// the cache too, other threads copy the unrotated key columns and the
// values. Each value is the one the separate kernels would write.
__device__ __forceinline__ void rope_pair(float *x, long long xs, int headDim, long long r, int h, int p, int pos0,
                                          int mode, int nrot, float thetaScale, float freqScale, float extFactor,
                                          float attnFactor, float corr0, float corr1, const float *ff, int imrope,
                                          int sec0, int sec1, int sec2, int sec3, float *cache) {
  int pairs = nrot / 2;
  float theta = (float)(pos0 + r);
  for (int k = 0; k < p; k++) theta *= thetaScale;
  if (imrope) {
    int total = sec0 + sec1 + sec2 + sec3;
    if (total > 0) {
      int sector = p % total;
      bool keep = (sector % 3 == 1 && sector < 3 * sec1) || (sector % 3 == 2 && sector < 3 * sec2) ||
                  (sector % 3 == 0 && sector < 3 * sec0);
      if (!keep) theta = 0.f;
    }
  }
  if (ff) theta /= ff[p];
  float thInterp = freqScale * theta, th = thInterp, msc = attnFactor;
  if (extFactor != 0.f) {
    float y = ((float)p - corr0) / fmaxf(0.001f, corr1 - corr0);
    float ramp = (1.f - fminf(1.f, fmaxf(0.f, y))) * extFactor;
    th = thInterp * (1.f - ramp) + theta * ramp;
    msc *= 1.f + 0.1f * logf(1.f / freqScale);
  }
  double sn, cs;
  sincos((double)th, &sn, &cs);
  float c = (float)cs * msc, s = (float)sn * msc;
  float *v = x + r * xs + (long long)h * headDim;
  int a = mode == 0 ? 2 * p : p, b = mode == 0 ? 2 * p + 1 : p + pairs;
  float x0 = v[a], x1 = v[b];
  float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
  v[a] = y0;
  v[b] = y1;
  if (cache) {
    float *cv = cache + (long long)h * headDim;
    cv[a] = y0;
    cv[b] = y1;
  }
}

extern "C" __global__ void k_rope(float *x, int xs, int rows, int cols, const int *pos0p, int mode, int nrot,
                                  int headDim, float thetaScale, float freqScale, float extFactor, float attnFactor,
                                  float corr0, float corr1, const float *ff, int imrope, int sec0, int sec1, int sec2,
                                  int sec3, float *x2, int x2s, int cols2, float *Kc, float *Vc, const float *v, int vs,
                                  int vdim) {
  pdl();
  int pos0 = *pos0p;
  int pairs = nrot / 2, heads = cols / headDim, heads2 = cols2 / headDim;
  long long n1 = (long long)rows * heads * pairs, n2 = (long long)rows * heads2 * pairs;
  int sw = Kc ? (cols2 > vdim ? cols2 : vdim) : 0;
  long long n3 = (long long)rows * sw;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n1 + n2 + n3;
       i += (long long)gridDim.x * blockDim.x) {
    if (i < n1) {
      long long r = i / (heads * pairs);
      rope_pair(x, xs, headDim, r, (int)((i / pairs) % heads), (int)(i % pairs), pos0, mode, nrot, thetaScale,
                freqScale, extFactor, attnFactor, corr0, corr1, ff, imrope, sec0, sec1, sec2, sec3, nullptr);
    } else if (i < n1 + n2) {
      long long j = i - n1;
      long long r = j / (heads2 * pairs);
      rope_pair(x2, x2s, headDim, r, (int)((j / pairs) % heads2), (int)(j % pairs), pos0, mode, nrot, thetaScale,
                freqScale, extFactor, attnFactor, corr0, corr1, ff, imrope, sec0, sec1, sec2, sec3,
                Kc ? Kc + (pos0 + r) * (long long)cols2 : nullptr);
    } else {
      long long j = i - n1 - n2;
      long long r = j / sw;
      int c = (int)(j % sw);
      if (c < cols2 && c % headDim >= nrot) Kc[(pos0 + r) * (long long)cols2 + c] = x2[r * x2s + c];
      if (c < vdim) Vc[(pos0 + r) * (long long)vdim + c] = v[r * vs + c];
    }
  }
}

// ---- attention ----------------------------------------------------------------------

// k_store copies key and value rows to positions pos0… of the cache
// (K: [ctx][kdim], V: [ctx][vdim]).
extern "C" __global__ void k_store(float *K, float *V, const float *k, int ks, const float *v, int vs, int rows,
                                   const int *pos0p, int kdim, int vdim) {
  pdl();
  int pos0 = *pos0p;
  int w = kdim > vdim ? kdim : vdim;
  EACH(rows, w) {
    long long r = i / w;
    int c = (int)(i % w);
    if (c < kdim) K[(pos0 + r) * (long long)kdim + c] = k[r * ks + c];
    if (c < vdim) V[(pos0 + r) * (long long)vdim + c] = v[r * vs + c];
  }
}

// k_attend: block (query row r, head h) over positions 0..pos0+r: scores
// scale·q·k_j, a softmax (max, e^(s−max) summed in double), then
// Σ_j p_j·v_j. S is scratch of ctxCap floats per block.
extern "C" __global__ void k_attend(float *out, int os, const float *q, int qs, const float *K, const float *V,
                                    const int *pos0p, int nhead, int nkv, int hk, int hv, float scale, float *S,
                                    int ctxCap) {
  pdl();
  int pos0 = *pos0p;
  __shared__ double sh[32];
  __shared__ float shf[32];
  int r = blockIdx.x / nhead, h = blockIdx.x % nhead;
  int g = h / (nhead / nkv);
  int np = pos0 + r + 1;
  const float *qr = q + (long long)r * qs + (long long)h * hk;
  float *s = S + (long long)blockIdx.x * ctxCap;
  int kdim = nkv * hk, vdim = nkv * hv;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < np; j += blockDim.x) {
    const float *kj = K + (long long)j * kdim + (long long)g * hk;
    float d = 0.f;
    for (int c = 0; c < hk; c++) d += qr[c] * kj[c];
    d *= scale;
    s[j] = d;
    mx = fmaxf(mx, d);
  }
  mx = block_maxf(mx, shf);
  double sum = 0;
  for (int j = threadIdx.x; j < np; j += blockDim.x) {
    float e = expf(s[j] - mx);
    s[j] = e;
    sum += e;
  }
  sum = block_sumd(sum, sh);
  float inv = (float)(1.0 / sum);
  __syncthreads();
  for (int c = threadIdx.x; c < hv; c += blockDim.x) {
    float acc = 0.f;
    const float *vc = V + (long long)g * hv + c;
    for (int j = 0; j < np; j++) acc += s[j] * vc[(long long)j * vdim];
    out[(long long)r * os + (long long)h * hv + c] = acc * inv;
  }
}

// k_flash: a prompt's attention (n > 1 query rows), flash-style. Block
// (x: query rows FL_Q·x …, taken last rows first; y: head h) walks the
// positions 0 … pos0 + its last row in tiles of FL_K, staging each tile's
// keys and values in shared memory once for all its rows (the next tile's
// are loaded into registers while the current one is computed); warp w
// owns rows FL_R·w … and keeps each row's running max m, sum l and output
// o (lane: columns lane, lane+32, …) in registers. Per tile, lane j scores
// position j0+j for the warp's rows (scale·q·k in column order; positions
// past a row's own are −∞), the rows' maxima move m, o and l are scaled by
// e^(m_old − m_new), and o += Σ_j e^(s_j − m)·v_j in position order.
// out = o / l. Dynamic shared memory (flashSmem in backend.go): Q (FL_Q
// rows of hk), the keys (FL_K rows of 4·kq4: an odd number of float4s, so
// that each lane's float4 reads hit their own banks), the values (FL_K
// rows of hv) and the warps' weights (FL_Q·FL_K). hk and hv multiples of
// 4, at most 32·HC (k_flash1, 2, 4: FL_HV = 128 at most); the products
// are fused multiply-adds.
#define FL_Q 16
#define FL_K 32
#define FL_R 4
#define FL_HV 128
template <int HC> // 32·HC ≥ hk and hv: each lane's output columns, HC/2 float4s of a tile per thread
__device__ void flash_body(float *out, int os, const float *q, int qs, const float *K, const float *V,
                           const int *pos0p, int nhead, int nkv, int hk, int hv, float scale, int n, float *fsh) {
  const int FL_P = 2 * HC;
  int hk4 = hk >> 2, hv4 = hv >> 2;
  int kq4 = hk4 + ((hk4 & 1) ? 2 : 1); // a key row's float4s: odd
  float *Qs = fsh;                      // [FL_Q][hk]
  float *Ks = Qs + FL_Q * hk;           // [FL_K][4·kq4]
  float *Vs = Ks + FL_K * 4 * kq4;      // [FL_K][hv]
  float *Ps = Vs + FL_K * hv;           // [FL_Q][FL_K]
  int pos0 = *pos0p;
  int h = blockIdx.y, g = h / (nhead / nkv);
  int t0 = (gridDim.x - 1 - blockIdx.x) * FL_Q;
  int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  long long kdim = (long long)nkv * hk, vdim = (long long)nkv * hv;
  int rows = n - t0 < FL_Q ? n - t0 : FL_Q;
  for (int i = tid; i < FL_Q * hk; i += blockDim.x) {
    int t = i / hk, c = i % hk;
    Qs[i] = t < rows ? q[(long long)(t0 + t) * qs + (long long)h * hk + c] : 0.f;
  }
  // This thread's float4s of a tile: key (row kj, float4 kc) and value (vj, vc).
  int kj[FL_P], kc[FL_P], vj[FL_P], vc[FL_P];
#pragma unroll
  for (int u = 0; u < FL_P; u++) {
    int f = tid + 128 * u;
    kj[u] = f < FL_K * hk4 ? f / hk4 : FL_K, kc[u] = f < FL_K * hk4 ? f % hk4 : 0;
    vj[u] = f < FL_K * hv4 ? f / hv4 : FL_K, vc[u] = f < FL_K * hv4 ? f % hv4 : 0;
  }
  const float *Kg = K + (long long)g * hk, *Vg = V + (long long)g * hv;
  float4 kn[FL_P], vn[FL_P];
  int npos = pos0 + t0 + rows; // positions 0 … npos−1 serve the block's rows
#define FL_LOAD(j0)                                                                                           \
  _Pragma("unroll") for (int u = 0; u < FL_P; u++) {                                                        \
    float4 z = {0.f, 0.f, 0.f, 0.f};                                                                         \
    kn[u] = kj[u] < FL_K && (j0) + kj[u] < npos ? *(const float4 *)(Kg + ((j0) + kj[u]) * kdim + 4 * kc[u]) : z; \
    vn[u] = vj[u] < FL_K && (j0) + vj[u] < npos ? *(const float4 *)(Vg + ((j0) + vj[u]) * vdim + 4 * vc[u]) : z; \
  }
  FL_LOAD(0)
  float m[FL_R], l[FL_R], o[FL_R][HC];
#pragma unroll
  for (int i = 0; i < FL_R; i++) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int cc = 0; cc < HC; cc++) o[i][cc] = 0.f;
  }
  for (int j0 = 0; j0 < npos; j0 += FL_K) {
    int nk = npos - j0 < FL_K ? npos - j0 : FL_K;
    __syncthreads(); // the last tile's readers are done
#pragma unroll
    for (int u = 0; u < FL_P; u++) {
      if (kj[u] < FL_K) *(float4 *)&Ks[(kj[u] * kq4 + kc[u]) * 4] = kn[u];
      if (vj[u] < FL_K) *(float4 *)&Vs[vj[u] * hv + 4 * vc[u]] = vn[u];
    }
    __syncthreads();
    if (j0 + FL_K < npos) {
      FL_LOAD(j0 + FL_K)
    }
    float sc[FL_R];
#pragma unroll
    for (int i = 0; i < FL_R; i++) sc[i] = 0.f;
    const float *kr = Ks + lane * kq4 * 4;
#pragma unroll 4
    for (int c = 0; c < hk; c += 4) {
      float4 kv = *(const float4 *)(kr + c);
#pragma unroll
      for (int i = 0; i < FL_R; i++) {
        float4 qv = *(const float4 *)&Qs[(w * FL_R + i) * hk + c];
        sc[i] = __fmaf_rn(qv.x, kv.x, sc[i]);
        sc[i] = __fmaf_rn(qv.y, kv.y, sc[i]);
        sc[i] = __fmaf_rn(qv.z, kv.z, sc[i]);
        sc[i] = __fmaf_rn(qv.w, kv.w, sc[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < FL_R; i++) {
      int t = w * FL_R + i;
      bool ok = t < rows && lane < nk && j0 + lane <= pos0 + t0 + t;
      float s = ok ? sc[i] * scale : -INFINITY;
      float mn = fmaxf(m[i], warp_max(s));
      float p = s == -INFINITY ? 0.f : expf(s - mn);
      float corr = m[i] == -INFINITY ? 0.f : expf(m[i] - mn);
      l[i] = l[i] * corr + warp_sum(p);
      m[i] = mn;
#pragma unroll
      for (int cc = 0; cc < HC; cc++) o[i][cc] *= corr;
      Ps[t * FL_K + lane] = p;
    }
    __syncthreads(); // (a warp reads only its own rows' weights)
    for (int j = 0; j < nk; j++) {
      float vv[HC];
#pragma unroll
      for (int cc = 0; cc < HC; cc++) {
        int c = lane + 32 * cc;
        vv[cc] = c < hv ? Vs[j * hv + c] : 0.f;
      }
#pragma unroll
      for (int i = 0; i < FL_R; i++) {
        float p = Ps[(w * FL_R + i) * FL_K + j];
#pragma unroll
        for (int cc = 0; cc < HC; cc++) o[i][cc] = __fmaf_rn(p, vv[cc], o[i][cc]);
      }
    }
  }
#undef FL_LOAD
#pragma unroll
  for (int i = 0; i < FL_R; i++) {
    int t = w * FL_R + i;
    if (t >= rows) continue;
    float inv = 1.f / l[i];
#pragma unroll
    for (int cc = 0; cc < HC; cc++) {
      int c = lane + 32 * cc;
      if (c < hv) out[(long long)(t0 + t) * os + (long long)h * hv + c] = o[i][cc] * inv;
    }
  }
}

#define FLASH(HC)                                                                                              \
  extern "C" __global__ void __launch_bounds__(128)                                                            \
      k_flash##HC(float *out, int os, const float *q, int qs, const float *K, const float *V, const int *pos0p, \
                  int nhead, int nkv, int hk, int hv, float scale, int n) {                                    \
    pdl();                                                                                                     \
    DYN_SHARED(float, fsh);                                                                                    \
    flash_body<HC>(out, os, q, qs, K, V, pos0p, nhead, nkv, hk, hv, scale, n, fsh);                          \
  }
FLASH(1)
FLASH(2)
FLASH(4)
#undef FLASH

// k_attn: attention split over positions (flash-decoding). Block (x: query
// row r and head h, y: split s) takes positions s·ATT_L … s·ATT_L+ATT_L−1
// of 0..pos0+r: its scores scale·q·k_j (one thread per position, the dot
// in column order), their max m_s, e_j = e^(score−m_s) and their sum l_s
// (in double), and a_s = Σ_j e_j·v_j (warp w takes every fourth position,
// in order, lane the columns lane, lane+32, …; the four warps' sums added
// in warp order). Splits past the last position return at once. When the
// row's positions fill one split, its block writes a_s/l_s; otherwise each
// writes (m_s, l_s, a_s) to P, and the last to finish (a counter in cnt,
// reset for the next launch) combines them: M = max m_s,
// out = Σ_s e^(m_s−M)·a_s / Σ_s e^(m_s−M)·l_s (in double).
// hv ≤ ATT_HV (the host keeps k_attend for wider heads).
#define ATT_L 64
#define ATT_HV 256
extern "C" __global__ void __launch_bounds__(128)
    k_attn(float *out, int os, const float *q, int qs, const float *K, const float *V, const int *pos0p, int nhead,
           int nkv, int hk, int hv, float scale, float *P, unsigned *cnt) {
  pdl();
  __shared__ float e[ATT_L];
  __shared__ float red[4][ATT_HV];
  __shared__ double sh[32];
  __shared__ float shf[32];
  __shared__ int last;
  int pos0 = *pos0p;
  int s = blockIdx.y;
  int r = blockIdx.x / nhead, h = blockIdx.x % nhead;
  int g = h / (nhead / nkv);
  int np = pos0 + r + 1;
  int j0 = s * ATT_L;
  if (j0 >= np) return;
  int nsplit = (np + ATT_L - 1) / ATT_L; // the splits holding positions
  int kdim = nkv * hk, vdim = nkv * hv;
  int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  int rec = hv + 2; // a split's record in P: m, l, a[hv]
  float *Pb = P + (long long)blockIdx.x * gridDim.y * rec;
  int n = np - j0 < ATT_L ? np - j0 : ATT_L;
  const float *qr = q + (long long)r * qs + (long long)h * hk;
  float d = -INFINITY;
  if (tid < n) {
    const float *kj = K + (long long)(j0 + tid) * kdim + (long long)g * hk;
    float acc = 0.f;
    if ((hk & 3) == 0 && (((unsigned long long)kj | (unsigned long long)qr) & 15) == 0) {
      // The same sum in the same order, from 16-byte loads.
#pragma unroll 16
      for (int c = 0; c < hk; c += 4) {
        float4 kv = *(const float4 *)(kj + c), qv = *(const float4 *)(qr + c);
        acc += qv.x * kv.x;
        acc += qv.y * kv.y;
        acc += qv.z * kv.z;
        acc += qv.w * kv.w;
      }
    } else {
#pragma unroll 8
      for (int c = 0; c < hk; c++) acc += qr[c] * kj[c];
    }
    d = acc * scale;
  }
  float mx = block_maxf(d, shf);
  double l = 0;
  if (tid < ATT_L) {
    float ev = tid < n ? expf(d - mx) : 0.f;
    e[tid] = ev;
    l = ev;
  }
  l = block_sumd(l, sh); // its barriers also publish e
  float a[ATT_HV / 32];
#pragma unroll
  for (int i = 0; i < ATT_HV / 32; i++) a[i] = 0.f;
#pragma unroll 4
  for (int t = w; t < n; t += 4) {
    float et = e[t];
    const float *vj = V + (long long)(j0 + t) * vdim + (long long)g * hv;
#pragma unroll
    for (int i = 0; i < ATT_HV / 32; i++) {
      int c = lane + 32 * i;
      if (c < hv) a[i] += et * vj[c];
    }
  }
#pragma unroll
  for (int i = 0; i < ATT_HV / 32; i++) {
    int c = lane + 32 * i;
    if (c < hv) red[w][c] = a[i];
  }
  __syncthreads();
  if (nsplit == 1) {
    float inv = (float)(1.0 / l);
    for (int c = tid; c < hv; c += blockDim.x)
      out[(long long)r * os + (long long)h * hv + c] = (((red[0][c] + red[1][c]) + red[2][c]) + red[3][c]) * inv;
    return;
  }
  float *rp = Pb + (long long)s * rec;
  for (int c = tid; c < hv; c += blockDim.x) rp[2 + c] = ((red[0][c] + red[1][c]) + red[2][c]) + red[3][c];
  if (tid == 0) rp[0] = mx, rp[1] = (float)l;
  // The last block of (r, h) to finish combines the splits.
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(&cnt[blockIdx.x], 1u) == (unsigned)(nsplit - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  // The combine, spread over the block: each thread reads every 128th
  // split's record from L2 (ld_l2: the other blocks wrote them, this SM's
  // L1 may hold stale lines); M by block_maxf, Σ_s e^(m_s−M)·l_s in double
  // by block_sumd, and out[c] by (part, c) threads, each summing every
  // parts-th split in order, the parts added in order.
  float m = -INFINITY;
  for (int k = tid; k < nsplit; k += blockDim.x) m = fmaxf(m, ld_l2(Pb + (long long)k * rec));
  float M = block_maxf(m, shf);
  double L = 0;
  for (int k = tid; k < nsplit; k += blockDim.x)
    L += (double)ld_l2(Pb + (long long)k * rec + 1) * (double)expf(ld_l2(Pb + (long long)k * rec) - M);
  L = block_sumd(L, sh);
  float inv = (float)(1.0 / L);
  int parts = hv <= 32 ? 4 : hv <= 64 ? 2 : 1;
  int part = tid / (blockDim.x / parts), c0 = tid % (blockDim.x / parts);
  for (int c = c0; c < hv; c += blockDim.x / parts) {
    float acc = 0.f;
#pragma unroll 4
    for (int k = part; k < nsplit; k += parts) {
      const float *p = Pb + (long long)k * rec;
      acc += expf(ld_l2(p) - M) * ld_l2(p + 2 + c);
    }
    red[part][c] = acc;
  }
  __syncthreads();
  for (int c = tid; c < hv; c += blockDim.x) {
    float acc = red[0][c];
    for (int q = 1; q < parts; q++) acc += red[q][c];
    out[(long long)r * os + (long long)h * hv + c] = acc * inv;
  }
  if (tid == 0) cnt[blockIdx.x] = 0;
}

// k_attg: one decode row's attention, a block per KV group and split of
// AG_L positions (grid (nkv, splits)), for all G = nhead/nkv query heads of
// the group at once, so that each key and value row is read once per
// block, not once per head as k_attn does. Block: AG_T threads. Scores:
// AG_TP = AG_T/AG_L threads per position, each an AG_TP-th of the key's
// float4s against every head's query (staged in shared memory), the parts
// added in order; weights e = exp(s − m_h) per head (warp h: max, then the
// sum in double); values: warp w takes positions w, w + 8, …, lane the
// columns lane, lane + 32, …, for every head; the warps' sums added in
// warp order.
// One split: out = a/l. Otherwise each block writes its heads' m, l (PM)
// and a (PA, 16-byte aligned rows of hv) and the last of the group to
// finish (cnt[g]) combines them: M = max m_s, out = Σ_s e^(m_s−M)·a_s /
// Σ_s e^(m_s−M)·l_s, the weights e^(m_s−M) kept in shared memory, the
// a_s read as float4s over (part, column) threads, the parts added in
// order. The host takes it for G ≤ AG_MAXG, G·hk ≤ AG_QS, G·hv ≤ AG_AS,
// hk and hv multiples of 4 and G·splits ≤ AG_WS.
#ifndef AG_L
#define AG_L 64 // positions per split: 32, 64, 128 or 256 (the host reads it, k_attgcfg)
#endif
#define AG_T 256
#define AG_TP (AG_T / AG_L) // threads per position in the scores
#ifndef AG_CU
#define AG_CU 8 // the combine's loads in flight per thread
#endif
static_assert(AG_L % 32 == 0 && AG_T % AG_L == 0 && AG_L / (AG_T / 32) >= 1, "AG_L: 32, 64, 128 or 256");
constexpr int agCU = AG_CU;
#define AG_MAXG 8
#define AG_QS 2048
#define AG_AS 1024
#define AG_WS (AG_T / 32 / 2 * AG_AS) // the combine's weights (G·splits), in red's first half
__device__ __forceinline__ float4 ld_l2x4(const float *p) {
#if !defined(APR_HOST) && defined(__CUDA_ARCH__)
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
#else
  const volatile float *q = (const volatile float *)p;
  float4 v;
  v.x = q[0], v.y = q[1], v.z = q[2], v.w = q[3];
  return v;
#endif
}
// What k_attgr takes of the decode row's rotation and store (k_rope's
// arguments; its head width is hk): the keys kx and values vx of the row.
struct AttgRope {
  float *kx;
  const float *vx;
  int mode, nrot;
  float thetaScale, freqScale, extFactor, attnFactor, corr0, corr1;
  const float *ff;
  int imrope, sec0, sec1, sec2, sec3;
};
// ROPE (k_attgr): the block also does what the k_rope launch before it
// would (backend.go, foldRope), each value as k_rope computes it: the block
// whose split holds pos0 rotates its group's key of the row (rope_pair,
// into kx and the cache), copies the unrotated key columns and the values
// into the cache, before the barrier after which it reads them (no other
// block reads row pos0 of this group); every block rotates its copy of the
// group's queries in shared memory; the block that writes out (the only
// one, or the combining last) writes the rotated queries back to q, after
// every block of the group has read them.
template <int HVC, bool ROPE> // 32·HVC ≥ hv: each lane's value columns
__device__ void attg_body(float *out, float *q, float *K, float *V, const int *pos0p, int nhead, int nkv, int hk,
                          int hv, float scale, float *PM, float *PA, unsigned *cnt, const AttgRope &rp) {
  // The split's cached keys and values into L2 before waiting for the
  // kernel before (pdl): the rows below pos0 were written by earlier
  // steps, whose kernels have all finished once this one runs (every
  // kernel waits for its predecessor before it lets the next one start);
  // pos0 is staged before the tape's first kernel. (H100, q2.5-0.5b Q4_K
  // tg128 at depth 4096: 656 -> 682 tok/s.)
  {
    int np = *pos0p + 1, j0 = blockIdx.y * AG_L, n = np - j0 < AG_L ? np - j0 : AG_L;
    int kdim = nkv * hk, vdim = nkv * hv, lk = (hk * 4 + 127) / 128, lv = (hv * 4 + 127) / 128;
    for (int i = threadIdx.x; i < n * (lk + lv); i += AG_T) {
      int p = i / (lk + lv), l = i % (lk + lv);
      const float *r = l < lk ? K + (long long)(j0 + p) * kdim + (long long)blockIdx.x * hk + 32 * l
                              : V + (long long)(j0 + p) * vdim + (long long)blockIdx.x * hv + 32 * (l - lk);
      prefetch_line(r);
    }
  }
  pdl();
  __shared__ __align__(16) float qs[AG_QS];
  __shared__ float sc[AG_MAXG][AG_L];
  __shared__ __align__(16) float red[AG_T / 32][AG_AS];
  __shared__ double hl[AG_MAXG];
  __shared__ float hm[AG_MAXG];
  __shared__ int last;
  int pos0 = *pos0p;
  int g = blockIdx.x, s = blockIdx.y, G = nhead / nkv, h0 = g * G;
  int np = pos0 + 1, j0 = s * AG_L;
  if (j0 >= np) return;
  int nsplit = (np + AG_L - 1) / AG_L;
  int n = np - j0 < AG_L ? np - j0 : AG_L;
  int kdim = nkv * hk, vdim = nkv * hv;
  int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  if constexpr (ROPE) {
    if (pos0 < j0 + AG_L) {
      float *Kr = K + (long long)pos0 * kdim;
      for (int p = tid; p < rp.nrot / 2; p += AG_T)
        rope_pair(rp.kx, 0, hk, 0, g, p, pos0, rp.mode, rp.nrot, rp.thetaScale, rp.freqScale, rp.extFactor,
                  rp.attnFactor, rp.corr0, rp.corr1, rp.ff, rp.imrope, rp.sec0, rp.sec1, rp.sec2, rp.sec3, Kr);
      for (int c = rp.nrot + tid; c < hk; c += AG_T) Kr[(long long)g * hk + c] = rp.kx[(long long)g * hk + c];
      for (int c = tid; c < hv; c += AG_T)
        V[(long long)pos0 * vdim + (long long)g * hv + c] = rp.vx[(long long)g * hv + c];
    }
  }
  for (int i = tid; i < G * hk; i += AG_T) qs[i] = q[(long long)h0 * hk + i];
  __syncthreads();
  if constexpr (ROPE) {
    int pairs = rp.nrot / 2;
    for (int i = tid; i < G * pairs; i += AG_T)
      rope_pair(qs, 0, hk, 0, i / pairs, i % pairs, pos0, rp.mode, rp.nrot, rp.thetaScale, rp.freqScale, rp.extFactor,
                rp.attnFactor, rp.corr0, rp.corr1, rp.ff, rp.imrope, rp.sec0, rp.sec1, rp.sec2, rp.sec3, nullptr);
    __syncthreads();
  }
  // Scores: thread (p, sub) takes float4s sub, sub + AG_TP, … of key p.
  {
    int p = tid / AG_TP, sub = tid % AG_TP, h4 = hk >> 2;
    float acc[AG_MAXG];
#pragma unroll
    for (int h = 0; h < AG_MAXG; h++) acc[h] = 0.f;
    if (p < n) {
      const float4 *k4 = (const float4 *)(K + (long long)(j0 + p) * kdim + (long long)g * hk);
      const float4 *q4 = (const float4 *)qs;
#pragma unroll 4
      for (int f = sub; f < h4; f += AG_TP) {
        float4 kv = k4[f];
#pragma unroll
        for (int h = 0; h < AG_MAXG; h++) {
          if (h < G) {
            float4 qv = q4[h * h4 + f];
            acc[h] = __fmaf_rn(qv.x, kv.x, acc[h]);
            acc[h] = __fmaf_rn(qv.y, kv.y, acc[h]);
            acc[h] = __fmaf_rn(qv.z, kv.z, acc[h]);
            acc[h] = __fmaf_rn(qv.w, kv.w, acc[h]);
          }
        }
      }
    }
#pragma unroll
    for (int h = 0; h < AG_MAXG; h++)
      if (h < G) (&red[0][0])[(h * AG_L + p) * AG_TP + sub] = acc[h];
  }
  __syncthreads();
  for (int i = tid; i < G * AG_L; i += AG_T) {
    int h = i / AG_L, p = i % AG_L;
    const float *r = &red[0][0] + i * AG_TP;
    float d = r[0];
#pragma unroll
    for (int k = 1; k < AG_TP; k++) d += r[k];
    sc[h][p] = p < n ? d * scale : -INFINITY;
  }
  __syncthreads();
  // Weights: warp h (every warp reduces, as the emulator needs; warps
  // past G discard theirs).
  {
    int h = w < G ? w : 0;
    float v[AG_L / 32], e[AG_L / 32];
#pragma unroll
    for (int k = 0; k < AG_L / 32; k++) v[k] = sc[h][lane + 32 * k];
    float m = v[0];
#pragma unroll
    for (int k = 1; k < AG_L / 32; k++) m = fmaxf(m, v[k]);
    m = warp_max(m);
    double l = 0;
#pragma unroll
    for (int k = 0; k < AG_L / 32; k++) {
      e[k] = lane + 32 * k < n ? expf(v[k] - m) : 0.f;
      l = k ? l + (double)e[k] : (double)e[k];
    }
    l = warp_sumd(l);
    __syncthreads();
    if (w < G) {
#pragma unroll
      for (int k = 0; k < AG_L / 32; k++) sc[h][lane + 32 * k] = e[k];
      if (lane == 0) hm[h] = m, hl[h] = l;
    }
  }
  __syncthreads();
  // Values: warp w takes positions w, w + 8, …
  float a[AG_MAXG][HVC];
#pragma unroll
  for (int h = 0; h < AG_MAXG; h++)
#pragma unroll
    for (int i = 0; i < HVC; i++) a[h][i] = 0.f;
#pragma unroll
  for (int u = 0; u < AG_L / (AG_T / 32); u++) {
    int t = w + (AG_T / 32) * u;
    if (t < n) {
      const float *vj = V + (long long)(j0 + t) * vdim + (long long)g * hv;
      float v[HVC];
#pragma unroll
      for (int i = 0; i < HVC; i++) v[i] = lane + 32 * i < hv ? vj[lane + 32 * i] : 0.f;
#pragma unroll
      for (int h = 0; h < AG_MAXG; h++) {
        if (h < G) {
          float e = sc[h][t];
#pragma unroll
          for (int i = 0; i < HVC; i++) a[h][i] = __fmaf_rn(e, v[i], a[h][i]);
        }
      }
    }
  }
  __syncthreads(); // red's scores are read
#pragma unroll
  for (int h = 0; h < AG_MAXG; h++)
#pragma unroll
    for (int i = 0; i < HVC; i++)
      if (h < G && lane + 32 * i < hv) red[w][h * hv + lane + 32 * i] = a[h][i];
  __syncthreads();
  long long rec = (long long)(g * gridDim.y + s) * G; // this split's first head record
  for (int i = tid; i < G * hv; i += AG_T) {
    float acc = red[0][i];
#pragma unroll
    for (int k = 1; k < AG_T / 32; k++) acc += red[k][i];
    int h = i / hv, c = i % hv;
    if (nsplit == 1)
      out[(long long)(h0 + h) * hv + c] = acc * (float)(1.0 / hl[h]);
    else
      PA[(rec + h) * hv + c] = acc;
  }
  if (nsplit == 1) {
    if constexpr (ROPE)
      for (int i = tid; i < G * hk; i += AG_T) q[(long long)h0 * hk + i] = qs[i];
    return;
  }
  if (tid < G) PM[2 * (rec + tid)] = hm[tid], PM[2 * (rec + tid) + 1] = (float)hl[tid];
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(&cnt[g], 1u) == (unsigned)(nsplit - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  // The combine. Warp h: M_h, L_h and the weights e^(m_s−M_h) (wt, in red).
  float *wt = &red[0][0];
  long long base = (long long)g * gridDim.y * G;
  {
    int h = w < G ? w : 0;
    float m = -INFINITY;
    for (int k = lane; k < nsplit; k += 32) m = fmaxf(m, ld_l2(PM + 2 * (base + (long long)k * G + h)));
    float M = warp_max(m);
    double L = 0;
    for (int k = lane; k < nsplit; k += 32) {
      const float *r = PM + 2 * (base + (long long)k * G + h);
      float e = expf(ld_l2(r) - M);
      if (w < G) wt[h * nsplit + k] = e;
      L += (double)ld_l2(r + 1) * (double)e;
    }
    L = warp_sumd(L);
    if (w < G && lane == 0) hl[h] = L;
  }
  __syncthreads();
  // out[h][c..c+3] by (part, float4 column) threads, part taking every
  // parts-th split in order.
  int f4 = G * hv / 4, parts = AG_T / f4 < 1 ? 1 : (AG_T / f4 > 8 ? 8 : AG_T / f4);
  float4 *racc = (float4 *)&red[AG_T / 32 / 2][0]; // past wt (≤ AG_WS floats)
  for (int i = tid; i < f4 * parts; i += AG_T) {
    int part = i / f4, f = i % f4, h = (4 * f) / hv;
    float4 acc = {0.f, 0.f, 0.f, 0.f};
#pragma unroll agCU
    for (int k = part; k < nsplit; k += parts) {
      float e = wt[h * nsplit + k];
      float4 v = ld_l2x4(PA + (base + (long long)k * G) * hv + 4 * f);
      acc.x = __fmaf_rn(e, v.x, acc.x);
      acc.y = __fmaf_rn(e, v.y, acc.y);
      acc.z = __fmaf_rn(e, v.z, acc.z);
      acc.w = __fmaf_rn(e, v.w, acc.w);
    }
    racc[part * f4 + f] = acc;
  }
  __syncthreads();
  for (int f = tid; f < f4; f += AG_T) {
    float4 acc = racc[f];
    for (int k = 1; k < parts; k++) {
      float4 b = racc[k * f4 + f];
      acc.x += b.x, acc.y += b.y, acc.z += b.z, acc.w += b.w;
    }
    int h = (4 * f) / hv;
    float inv = (float)(1.0 / hl[h]);
    float *o = out + (long long)h0 * hv + 4 * f;
    o[0] = acc.x * inv, o[1] = acc.y * inv, o[2] = acc.z * inv, o[3] = acc.w * inv;
  }
  if constexpr (ROPE)
    for (int i = tid; i < G * hk; i += AG_T) q[(long long)h0 * hk + i] = qs[i];
  if (tid == 0) cnt[g] = 0;
}
// k_attgcfg: AG_L, which the host reads to size k_attg's splits.
extern "C" __global__ void k_attgcfg(int *out) { out[0] = AG_L; }
#define ATTG(HC)                                                                                               \
  extern "C" __global__ void __launch_bounds__(AG_T)                                                          \
      k_attg##HC(float *out, float *q, float *K, float *V, const int *pos0p, int nhead, int nkv, int hk, int hv, \
                 float scale, float *PM, float *PA, unsigned *cnt) {                                           \
    attg_body<HC, false>(out, q, K, V, pos0p, nhead, nkv, hk, hv, scale, PM, PA, cnt, AttgRope{});            \
  }                                                                                                            \
  extern "C" __global__ void __launch_bounds__(AG_T)                                                          \
      k_attgr##HC(float *out, float *q, float *K, float *V, const int *pos0p, int nhead, int nkv, int hk, int hv, \
                  float scale, float *PM, float *PA, unsigned *cnt, float *kx, const float *vx, int mode, int nrot,  \
                  float thetaScale, float freqScale, float extFactor, float attnFactor, float corr0, float corr1,   \
                  const float *ff, int imrope, int sec0, int sec1, int sec2, int sec3) {                         \
    attg_body<HC, true>(out, q, K, V, pos0p, nhead, nkv, hk, hv, scale, PM, PA, cnt,                           \
                        AttgRope{kx, vx, mode, nrot, thetaScale, freqScale, extFactor, attnFactor, corr0, corr1,  \
                                 ff, imrope, sec0, sec1, sec2, sec3});                                          \
  }
ATTG(1)
ATTG(2)
ATTG(4)
ATTG(8)

// k_attw: one decode row's attention over a short context (pos0 + 1 ≤
// AW_MAXP positions), a block of AW_T threads per query head (grid: nhead):
// no split and no combine, where k_attg's chain of barriers over a group's
// splits dominates at a few hundred positions. Thread t scores positions
// t, t + AW_T (the key's float4s in order, eight loads in flight, four
// sums added in order); the weights e^(s − m) go to shared memory (their
// sum in double, the warps' in order); warp w sums the value columns lane,
// lane + 32, … over positions w, w + 4, … (eight rows in flight), and the
// four warps' sums are added in warp order. ROPE: the block also does the
// k_rope launch before it (backend.go, foldRope) for its head: it rotates
// its head's query and its own copy of the group's key of the row
// (rope_pair, as k_rope does), scores position pos0 with that copy and the
// row's values (vx), and writes the query back; the group's last block to
// have read kx (cnt[g]) writes the rotated key to kx and the cache and the
// values to the cache. Without ROPE the row is already in the cache.
#define AW_MAXP 256
#define AW_T 128
template <int HC, bool ROPE> // 32·HC ≥ hk and hv
__device__ void attw_body(float *out, float *q, float *K, float *V, const int *pos0p, int nhead, int nkv, int hk,
                          int hv, float scale, unsigned *cnt, const AttgRope &rp) {
  int h = blockIdx.x, G = nhead / nkv, g = h / G, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  int kdim = nkv * hk, vdim = nkv * hv;
  {
    // The cached rows below pos0 into L2 before waiting for the kernel
    // before (pdl; no kernel of this step writes them).
    int np = *pos0p, lk = (hk * 4 + 127) / 128, lv = (hv * 4 + 127) / 128;
    for (int i = tid; i < np * (lk + lv); i += AW_T) {
      int p = i / (lk + lv), l = i % (lk + lv);
      prefetch_line(l < lk ? K + (long long)p * kdim + (long long)g * hk + 32 * l
                           : V + (long long)p * vdim + (long long)g * hv + 32 * (l - lk));
    }
  }
  pdl();
  __shared__ __align__(16) float qs[32 * HC];
  __shared__ __align__(16) float ks[32 * HC];
  __shared__ float vs[32 * HC];
  __shared__ float es[AW_MAXP];
  __shared__ float red[AW_T / 32][32 * HC];
  __shared__ float wm[AW_T / 32];
  __shared__ double wl[AW_T / 32];
  __shared__ int last;
  int pos0 = *pos0p, np = pos0 + 1;
  for (int c = tid; c < hk; c += AW_T) qs[c] = q[(long long)h * hk + c];
  if constexpr (ROPE) {
    for (int c = tid; c < hk; c += AW_T) ks[c] = rp.kx[(long long)g * hk + c];
    for (int c = tid; c < hv; c += AW_T) vs[c] = rp.vx[(long long)g * hv + c];
  }
  __syncthreads();
  if constexpr (ROPE) {
    int pairs = rp.nrot / 2;
    for (int i = tid; i < 2 * pairs; i += AW_T)
      rope_pair(i < pairs ? qs : ks, 0, hk, 0, 0, i % pairs, pos0, rp.mode, rp.nrot, rp.thetaScale, rp.freqScale,
                rp.extFactor, rp.attnFactor, rp.corr0, rp.corr1, rp.ff, rp.imrope, rp.sec0, rp.sec1, rp.sec2, rp.sec3,
                nullptr);
    __threadfence();
    __syncthreads();
    // Every read of kx is done: count this block, and the group's last
    // writes the row.
    if (tid == 0) last = atomicAdd(&cnt[g], 1u) == (unsigned)(G - 1);
    __syncthreads();
    if (last) {
      __threadfence();
      float *Kr = K + (long long)pos0 * kdim + (long long)g * hk, *Vr = V + (long long)pos0 * vdim + (long long)g * hv;
      for (int c = tid; c < hk; c += AW_T) Kr[c] = ks[c], rp.kx[(long long)g * hk + c] = ks[c];
      for (int c = tid; c < hv; c += AW_T) Vr[c] = vs[c];
      if (tid == 0) cnt[g] = 0;
    }
    for (int c = tid; c < hk; c += AW_T) q[(long long)h * hk + c] = qs[c];
  }
  // Scores.
  const float4 *q4 = (const float4 *)qs;
  int h4 = hk >> 2;
  float m = -INFINITY;
  for (int p = tid; p < np; p += AW_T) {
    const float4 *k4 = ROPE && p == pos0 ? (const float4 *)ks : (const float4 *)(K + (long long)p * kdim + (long long)g * hk);
    float4 a = {0.f, 0.f, 0.f, 0.f};
    for (int f0 = 0; f0 < h4; f0 += 8) {
      float4 kv[8];
#pragma unroll
      for (int j = 0; j < 8; j++) {
        float4 z = {0.f, 0.f, 0.f, 0.f};
        kv[j] = f0 + j < h4 ? k4[f0 + j] : z;
      }
#pragma unroll
      for (int j = 0; j < 8; j++) {
        if (f0 + j >= h4) break;
        float4 qv = q4[f0 + j];
        a.x = __fmaf_rn(qv.x, kv[j].x, a.x);
        a.y = __fmaf_rn(qv.y, kv[j].y, a.y);
        a.z = __fmaf_rn(qv.z, kv[j].z, a.z);
        a.w = __fmaf_rn(qv.w, kv[j].w, a.w);
      }
    }
    float sc = (((a.x + a.y) + a.z) + a.w) * scale;
    es[p] = sc;
    m = fmaxf(m, sc);
  }
  m = warp_max(m);
  if (lane == 0) wm[w] = m;
  __syncthreads();
  m = wm[0];
#pragma unroll
  for (int i = 1; i < AW_T / 32; i++) m = fmaxf(m, wm[i]);
  double l = 0;
  for (int p = tid; p < np; p += AW_T) {
    float e = expf(es[p] - m);
    es[p] = e;
    l += (double)e;
  }
  l = warp_sumd(l);
  if (lane == 0) wl[w] = l;
  __syncthreads();
  l = wl[0];
#pragma unroll
  for (int i = 1; i < AW_T / 32; i++) l += wl[i];
  // Values: warp w, positions w, w + 4, … (the row's own from vs).
  float acc[HC];
#pragma unroll
  for (int i = 0; i < HC; i++) acc[i] = 0.f;
  const float *Vg = V + (long long)g * hv;
  for (int p0 = w; p0 < np; p0 += 8 * (AW_T / 32)) {
    float vv[8][HC];
#pragma unroll
    for (int u = 0; u < 8; u++) {
      int p = p0 + u * (AW_T / 32);
      const float *vr = ROPE && p == pos0 ? vs : Vg + (long long)p * vdim;
#pragma unroll
      for (int i = 0; i < HC; i++) vv[u][i] = p < np && lane + 32 * i < hv ? vr[lane + 32 * i] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < 8; u++) {
      int p = p0 + u * (AW_T / 32);
      if (p >= np) break;
      float e = es[p];
#pragma unroll
      for (int i = 0; i < HC; i++) acc[i] = __fmaf_rn(e, vv[u][i], acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < HC; i++)
    if (lane + 32 * i < hv) red[w][lane + 32 * i] = acc[i];
  __syncthreads();
  float inv = (float)(1.0 / l);
  for (int c = tid; c < hv; c += AW_T) {
    float a = red[0][c];
#pragma unroll
    for (int k = 1; k < AW_T / 32; k++) a += red[k][c];
    out[(long long)h * hv + c] = a * inv;
  }
}
#define ATTW(HC)                                                                                               \
  extern "C" __global__ void __launch_bounds__(AW_T)                                                          \
      k_attw##HC(float *out, float *q, float *K, float *V, const int *pos0p, int nhead, int nkv, int hk, int hv, \
                 float scale, unsigned *cnt) {                                                                 \
    attw_body<HC, false>(out, q, K, V, pos0p, nhead, nkv, hk, hv, scale, cnt, AttgRope{});                    \
  }                                                                                                            \
  extern "C" __global__ void __launch_bounds__(AW_T)                                                          \
      k_attwr##HC(float *out, float *q, float *K, float *V, const int *pos0p, int nhead, int nkv, int hk, int hv, \
                  float scale, unsigned *cnt, float *kx, const float *vx, int mode, int nrot, float thetaScale,    \
                  float freqScale, float extFactor, float attnFactor, float corr0, float corr1, const float *ff,   \
                  int imrope, int sec0, int sec1, int sec2, int sec3) {                                          \
    attw_body<HC, true>(out, q, K, V, pos0p, nhead, nkv, hk, hv, scale, cnt,                                   \
                        AttgRope{kx, vx, mode, nrot, thetaScale, freqScale, extFactor, attnFactor, corr0, corr1,  \
                                 ff, imrope, sec0, sec1, sec2, sec3});                                          \
  }
ATTW(1)
ATTW(2)
ATTW(4)
ATTW(8)

// k_stream reads n 16-byte words (apr bench --stream on the device: the
// read bandwidth a decode step is bound by); the sum goes to sink so that
// the loads stay.
extern "C" __global__ void k_stream(const u32x4 *p, long long n, u32 *sink) {
  pdl();
  u32 acc = 0;
  long long st = (long long)gridDim.x * blockDim.x, i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * st < n; i += 4 * st) { // four loads in flight per thread
    u32x4 a = p[i], b = p[i + st], c = p[i + 2 * st], d = p[i + 3 * st];
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += st) {
    u32x4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc; // rarely true: keeps the loads without a write per thread
}

// ---- Gated DeltaNet ---------------------------------------------------------------------

// k_conv: per channel, the causal depthwise convolution over the K−1 kept
// inputs and the n new ones; the state keeps the last K−1. Block: 32
// channels (lanes) × 8 token slots (warps); warp y takes tokens y, y+8, …,
// each output Σ_i x(t−K+1+i)·w_i in i order (x(τ) for τ < 0 from the
// state), then warp 0 shifts the state (K ≤ 16). silu ≠ 0: each output is
// silu(s) (a SiLU folded in: backend.go, SiLU).
extern "C" __global__ void __launch_bounds__(256) k_conv(float *out, int os, const float *x, int xs, float *st, int ss,
                                                         const float *w, int n, int ch, int K, int silu_) {
  pdl();
  int c = blockIdx.x * 32 + (threadIdx.x & 31), y = threadIdx.x >> 5;
  bool on = c < ch;
  const float *wc = w + (long long)c * K;
  for (int t = y; on && t < n; t += 8) {
    float s = 0.f;
    for (int i = 0; i < K; i++) {
      int tau = t - (K - 1) + i;
      float xi = tau >= 0 ? x[(long long)tau * xs + c] : st[(long long)(K - 1 + tau) * ss + c];
      s += xi * wc[i];
    }
    out[(long long)t * os + c] = silu_ ? silu(s) : s;
  }
  __syncthreads(); // every read of the old state is done
  if (on && y == 0) {
    for (int i = 0; i < K - 1; i++) {
      int tau = n - (K - 1) + i; // st[i] ← x(τ); for τ < 0 the state's later row, not yet overwritten
      st[(long long)i * ss + c] = tau >= 0 ? x[(long long)tau * xs + c] : st[(long long)(K - 1 + tau) * ss + c];
    }
  }
}

// k_delta: the gated delta rule, token by token. Block j is value head j
// (key head j mod nK); thread rr owns state rows rr, rr+blockDim, …:
// S_r ← e^g·S_r; d = beta·(v_r − S_r·k); S_r += d·k; out_r = S_r·q/sqrt(hk).
extern "C" __global__ void k_delta(float *out, int os, const float *q, int qs, const float *k, int ks, const float *v,
                                   int vs, const float *g, int gs, const float *beta, int bs, float *S, int n, int nK,
                                   int hk, int hv, float scale) {
  pdl();
  DYN_SHARED(float, kq); // k then q of the current token (2·hk)
  int j = blockIdx.x, kh = j % nK;
  float *Sj = S + (long long)j * hv * hk;
  for (int t = 0; t < n; t++) {
    __syncthreads();
    for (int c = threadIdx.x; c < hk; c += blockDim.x) {
      kq[c] = k[(long long)t * ks + (long long)kh * hk + c];
      kq[hk + c] = q[(long long)t * qs + (long long)kh * hk + c];
    }
    __syncthreads();
    float decay = expf(g[(long long)t * gs + j]), b = beta[(long long)t * bs + j];
    for (int rr = threadIdx.x; rr < hv; rr += blockDim.x) {
      float *Sr = Sj + (long long)rr * hk;
      float sk = 0.f;
      for (int c = 0; c < hk; c++) {
        float x = Sr[c] * decay;
        Sr[c] = x;
        sk += x * kq[c];
      }
      float d = b * (v[(long long)t * vs + (long long)j * hv + rr] - sk);
      float o = 0.f;
      for (int c = 0; c < hk; c++) {
        float x = Sr[c] + d * kq[c];
        Sr[c] = x;
        o += x * kq[hk + c];
      }
      out[(long long)t * os + (long long)j * hv + rr] = o * scale;
    }
  }
}

// k_deltaw: the gated delta rule as k_delta computes it, with the state in
// registers: block (x: value head j, y: rows 4·DL_R·y …) gives each warp
// DL_R state rows, whose columns lane, lane+32, … (hk ≤ 32·C: k_deltaw2,
// 4, 8) its lanes hold for all n tokens; S_r·k and S_r·q are the lanes' partial sums added
// by warp_sum (the lanes' products fused multiply-adds). The next token's
// k, q, v, g and beta are loaded while the current one is computed. Rows past hv compute zeros and store nothing.
#define DL_R 4
template <int DL_C>
__device__ void deltaw_body(float *out, int os, const float *q, int qs, const float *k, int ks, const float *v, int vs,
                            const float *g, int gs, const float *beta, int bs, float *S, int n, int nK, int hk, int hv,
                            float scale) {
  int j = blockIdx.x, kh = j % nK;
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  int r0 = blockIdx.y * (4 * DL_R) + w * DL_R;
  float *Sj = S + (long long)j * hv * hk;
  float st[DL_R][DL_C];
#pragma unroll
  for (int i = 0; i < DL_R; i++)
#pragma unroll
    for (int cc = 0; cc < DL_C; cc++) {
      int r = r0 + i, c = lane + 32 * cc;
      st[i][cc] = r < hv && c < hk ? Sj[(long long)r * hk + c] : 0.f;
    }
  const float *kp = k + (long long)kh * hk, *qp = q + (long long)kh * hk, *vp = v + (long long)j * hv + r0;
  float kn[DL_C], qn[DL_C], vn[DL_R], gn = 0.f, bn = 0.f;
  // load(t): token t's operands into the *n registers.
#define DL_LOAD(t)                                                                                           \
  do {                                                                                                       \
    _Pragma("unroll") for (int cc = 0; cc < DL_C; cc++) {                                                   \
      int c = lane + 32 * cc;                                                                                \
      kn[cc] = c < hk ? kp[(long long)(t) * ks + c] : 0.f;                                                  \
      qn[cc] = c < hk ? qp[(long long)(t) * qs + c] : 0.f;                                                  \
    }                                                                                                        \
    _Pragma("unroll") for (int i = 0; i < DL_R; i++) vn[i] = r0 + i < hv ? vp[(long long)(t) * vs + i] : 0.f; \
    gn = g[(long long)(t) * gs + j];                                                                         \
    bn = beta[(long long)(t) * bs + j];                                                                      \
  } while (0)
  if (n > 0) DL_LOAD(0);
  for (int t = 0; t < n; t++) {
    float kv[DL_C], qv[DL_C], vr[DL_R];
#pragma unroll
    for (int cc = 0; cc < DL_C; cc++) kv[cc] = kn[cc], qv[cc] = qn[cc];
#pragma unroll
    for (int i = 0; i < DL_R; i++) vr[i] = vn[i];
    float decay = expf(gn), b = bn;
    if (t + 1 < n) DL_LOAD(t + 1);
    float sk[DL_R];
#pragma unroll
    for (int i = 0; i < DL_R; i++) {
      float s = 0.f;
#pragma unroll
      for (int cc = 0; cc < DL_C; cc++) {
        float x = st[i][cc] * decay;
        st[i][cc] = x;
        s = __fmaf_rn(x, kv[cc], s);
      }
      sk[i] = s;
    }
#pragma unroll
    for (int i = 0; i < DL_R; i++) sk[i] = warp_sum(sk[i]);
    float so[DL_R];
#pragma unroll
    for (int i = 0; i < DL_R; i++) {
      float d = b * (vr[i] - sk[i]), s = 0.f;
#pragma unroll
      for (int cc = 0; cc < DL_C; cc++) {
        float x = __fmaf_rn(d, kv[cc], st[i][cc]);
        st[i][cc] = x;
        s = __fmaf_rn(x, qv[cc], s);
      }
      so[i] = s;
    }
#pragma unroll
    for (int i = 0; i < DL_R; i++) {
      float o = warp_sum(so[i]);
      if (lane == 0 && r0 + i < hv) out[(long long)t * os + (long long)j * hv + r0 + i] = o * scale;
    }
  }
#undef DL_LOAD
#pragma unroll
  for (int i = 0; i < DL_R; i++)
#pragma unroll
    for (int cc = 0; cc < DL_C; cc++) {
      int r = r0 + i, c = lane + 32 * cc;
      if (r < hv && c < hk) Sj[(long long)r * hk + c] = st[i][cc];
    }
}

#define DELTAW(C)                                                                                              \
  extern "C" __global__ void __launch_bounds__(128)                                                            \
      k_deltaw##C(float *out, int os, const float *q, int qs, const float *k, int ks, const float *v, int vs,   \
                  const float *g, int gs, const float *beta, int bs, float *S, int n, int nK, int hk, int hv,    \
                  float scale) {                                                                               \
    pdl();                                                                                                     \
    deltaw_body<C>(out, os, q, qs, k, ks, v, vs, g, gs, beta, bs, S, n, nK, hk, hv, scale);                  \
  }
DELTAW(2)
DELTAW(4)
DELTAW(8)
#undef DELTAW

// ---- planted defects (falsifiers only) -----------------------------------------------

// k_perturb multiplies column c of every row by f: the CUDA falsifiers plant
// it after one op of one layer to prove that F2 and the bisect catch a
// wrong kernel.
extern "C" __global__ void k_perturb(float *d, int ds, int rows, int c, float f) {
  pdl();
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) d[(long long)r * ds + c] *= f;
}
