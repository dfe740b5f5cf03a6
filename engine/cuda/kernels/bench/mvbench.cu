// mvbench.cu: times the one-token product kernels (mv_<type> of apr.cu) on
// the decode step's shapes, inside CUDA graphs, for each threads-per-row
// (tpr), rows-per-slot (G) and cap on blocks per multiprocessor the host
// may choose, beside a plain streaming
// read of the same bytes. Each launch reads its own copy of the weights
// (enough copies to leave the L2 cache behind), as a decode step's layers
// do. Then a decode layer's four products in sequence (24 layers, each its
// own weights), launched plainly and early (pdl, as apr launches them),
// beside empty kernels in their places (what a launch costs with no work),
// and a phase trace of the sequence: per product, when its blocks start,
// the gap after the product before, its span, and how long a block spends
// in each phase (waiting, staging and normalising x, rounding it, the
// chunks' products, the reductions; apr.cu's MV_MARK points). A
// development tool for the GPU machine (not part of apr):
//
//   nvcc -O3 -fmad=false -arch=sm_90 -I engine/cuda/kernels -o /tmp/mvbench \
//       engine/cuda/kernels/bench/mvbench.cu && /tmp/mvbench [seq]
//
// -I another kernels directory times another version of the kernels (the
// launch arguments must be the same).
// The phase trace (the layer sequence's last runs): thread 0 of each of a
// product's first MK_B blocks reads the clocks at apr.cu's MV_MARK points,
// the launch found from its weights' address (g_lid: each 256-byte line of
// the sequence's weights to the launch that reads it). SM clock cycles for
// the phases inside a block; the global timer (ns) where blocks and
// launches are set against each other.
#define MK_B 1024
#define MK_N 8 // per block: globaltimer at 0, clock64 at marks 0..5, globaltimer at 5
__device__ unsigned long long *g_marks;
__device__ const unsigned char *g_wbase;
__device__ const int *g_lid;
__device__ long long g_wlines;
// The readings wait in shared memory; only the end's (mark 5) go out, after
// the block's work, so that the trace adds a clock read and a shared store
// per mark inside the product and a few loads at its end.
__device__ __forceinline__ void mv_mark(const unsigned char *W, int i) {
  __shared__ unsigned long long mk[MK_N];
  if (threadIdx.x != 0) return;
  unsigned long long c, g;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
  mk[1 + i] = c;
  if (i == 0 || i == 5) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    mk[i == 0 ? 0 : 7] = g;
  }
  if (i != 5 || blockIdx.x >= MK_B) return;
  unsigned long long *gm = g_marks;
  if (gm == nullptr) return;
  long long o = (long long)(W - g_wbase) >> 8;
  if (o < 0 || o >= g_wlines) return;
  int l = g_lid[o];
  if (l < 0) return;
  unsigned long long *m = gm + ((long long)l * MK_B + blockIdx.x) * MK_N;
  for (int j = 0; j < MK_N; j++) m[j] = mk[j];
}
#define MV_MARK(W, i) mv_mark(W, i)
#include "apr.cu"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e = (x);                                                                        \
    if (e != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));         \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

__global__ void fill(u32 *p, long long n, u32 seed, u32 scaleMask) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    u32 h = (u32)i * 0x9e3779b1u ^ seed;
    h ^= h >> 15, h *= 0x85ebca77u, h ^= h >> 13, h *= 0xc2b2ae3du, h ^= h >> 16;
    p[i] = h & scaleMask;
  }
}

// k_empty: a launch's cost alone (waits for the kernel before, as every
// kernel of apr's does, and writes one value so that it is not nothing).
__global__ void __launch_bounds__(128) k_empty(float *y) {
  extern __shared__ float sh[];
  pdl();
  sh[threadIdx.x] = (float)blockIdx.x;
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x == 0) y[0] = sh[5];
}

typedef void (*MV)(const u8 *, long long, int, int, const float *, float *, int, int, const float *, float *, const u8 *,
                   float *, int, const float *, const u8 *, float *, int, const float *, const float *, float, float *, int,
                   float *, const u8 *, float *, int, const float *);

struct Shape {
  const char *name;
  MV fn;
  int qk, ts; // values and bytes per block
  int rows[3], nmat, cols;
  bool norm, glu, res;
};

static float timeGraph(cudaStream_t st, cudaGraphExec_t ge, int launches) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaStreamSynchronize(st));
  float best = 1e30f;
  for (int r = 0; r < 5; r++) {
    CK(cudaEventRecord(a, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    best = ms < best ? ms : best;
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return best * 1000.f / launches; // µs per launch
}

// timeLaunches captures launch(0) … launch(n − 1) into one graph and
// returns timeGraph's µs per launch index.
template <class F> static float timeLaunches(cudaStream_t st, int n, F launch) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int l = 0; l < n; l++) launch(l);
  CK(cudaStreamEndCapture(st, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  float us = timeGraph(st, ge, n);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return us;
}

// slots is the host's block count for shape s with tpr threads per row and
// G rows per slot (glu: the rows of the first matrix, paired with the
// second's).
static int slots(const Shape &s, int tpr, int G) {
  int rpb = 128 / tpr, blocks = 0;
  for (int i = 0; i < (s.glu ? 1 : s.nmat); i++) blocks += (s.rows[i] + rpb * G - 1) / (rpb * G);
  return blocks;
}

// launchMV launches shape s's product with tpr threads per row, G rows per
// slot and at most cap blocks (0: one per slot) on weights w; bias (may be
// null) for the normalised products that are not gate/up.
// pdl: launched early (programmatic stream serialization), as apr's
// engine launches a tape's kernels after its first on sm_90.
static void launchMV(const Shape &s, const u8 *w, int tpr, int G, int cap, float *x, float *y, float *y1, float *y2,
                     float *res, float *nw, float *nout, float *glu, float *bias, cudaStream_t st, bool pdl = false) {
  int nc = s.cols / 32, blocks = slots(s, tpr, G);
  long long rb = (long long)(s.cols / s.qk) * s.ts;
  if (cap && blocks > cap) blocks = cap;
  const u8 *w1 = s.nmat > 1 ? w + rb * s.rows[0] : nullptr;
  const u8 *w2 = s.nmat > 2 ? w1 + rb * s.rows[1] : nullptr;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(128), cfg.stream = st;
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at, cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, s.fn, w, rb, nc, s.cols, (const float *)x, y, s.rows[0], tpr,
                        (const float *)(s.norm && !s.glu ? bias : nullptr), s.res ? res : nullptr, w1, y1,
                        s.nmat > 1 ? s.rows[1] : 0, (const float *)nullptr, w2, y2, s.nmat > 2 ? s.rows[2] : 0,
                        (const float *)nullptr, (const float *)(s.norm ? nw : nullptr), 1e-6f,
                        s.norm ? nout : nullptr, (G << 4) | (s.norm ? 1 : 0), s.glu ? glu : nullptr,
                        (const u8 *)nullptr, (float *)nullptr, 0, (const float *)nullptr));
}

int main(int argc, char **argv) {
  bool sweep = argc < 2; // mvbench seq: the layer sequence only
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // qwen2.5-0.5b's decode step (hidden 896, 2 kv heads of 64, ffn 4864,
  // vocabulary 151936) at the types apr synth and llama-quantize give it.
  std::vector<Shape> shapes = {
      {"qkv Q5_0", mv_Q5_0, 32, 22, {896, 128, 128}, 3, 896, true, false, false},
      {"o Q5_0", mv_Q5_0, 32, 22, {896, 0, 0}, 1, 896, false, false, true},
      {"gate/up Q5_0", mv_Q5_0, 32, 22, {4864, 4864, 0}, 2, 896, true, true, false},
      {"down Q4_K", mv_Q4_K, 256, 144, {896, 0, 0}, 1, 4864, false, false, true},
      {"down Q6_K", mv_Q6_K, 256, 210, {896, 0, 0}, 1, 4864, false, false, true},
      {"lm Q5_0", mv_Q5_0, 32, 22, {151936, 0, 0}, 1, 896, true, false, false},
      {"qkv Q8_0", mv_Q8_0, 32, 34, {896, 128, 128}, 3, 896, true, false, false},
      {"gate/up Q8_0", mv_Q8_0, 32, 34, {4864, 4864, 0}, 2, 896, true, true, false},
      {"down Q8_0", mv_Q8_0, 32, 34, {896, 0, 0}, 1, 4864, false, false, true},
      {"lm Q8_0", mv_Q8_0, 32, 34, {151936, 0, 0}, 1, 896, true, false, false},
      {"gate/up F16", mv_F16, 32, 64, {4864, 4864, 0}, 2, 896, true, true, false},
      {"down F16", mv_F16, 32, 64, {896, 0, 0}, 1, 4864, false, false, true},
      // qwen3.5-0.8b (hidden 1024, ffn 3584, vocabulary 248320) at Q4_K:
      // a Gated DeltaNet layer's qkv, z and beta; gate/up; down; the output.
      {"q35 qkvz Q4_K", mv_Q4_K, 256, 144, {6144, 2048, 16}, 3, 1024, true, false, false},
      {"q35 g/u Q4_K", mv_Q4_K, 256, 144, {3584, 3584, 0}, 2, 1024, true, true, false},
      {"q35 down Q4_K", mv_Q4_K, 256, 144, {1024, 0, 0}, 1, 3584, false, false, true},
      {"q35 lm Q4_K", mv_Q4_K, 256, 144, {248320, 0, 0}, 1, 1024, true, false, false},
  };
  int cfg[][2] = {{32, 1}, {32, 2}, {32, 4}, {64, 1}, {64, 2}, {128, 1}, {128, 2}, {128, 4}};
  int caps[] = {0, 4, 8, 16}; // blocks per multiprocessor at most (0: one block per slot)
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *x, *y, *nw, *glu, *nout, *y1, *y2, *res;
  CK(cudaMalloc(&x, 4 << 20));
  CK(cudaMalloc(&nw, 4 << 20));
  CK(cudaMalloc(&y, 4 << 20));
  CK(cudaMalloc(&y1, 4 << 20));
  CK(cudaMalloc(&y2, 4 << 20));
  CK(cudaMalloc(&glu, 4 << 20));
  CK(cudaMalloc(&nout, 4 << 20));
  CK(cudaMalloc(&res, 4 << 20));
  fill<<<64, 256, 0, st>>>((u32 *)x, 1 << 20, 7, 0xbe7fffffu); // |x| < 0.5
  fill<<<64, 256, 0, st>>>((u32 *)nw, 1 << 20, 9, 0x3e7fffffu);
  u32 *sink;
  CK(cudaMalloc(&sink, 16));
  printf("device: %d multiprocessors; µs per launch inside a graph (best of 5 replays)\n", sms);
  for (auto &s : shapes) {
    if (!sweep) break;
    long long rb = (long long)(s.cols / s.qk) * s.ts, per = 0;
    for (int i = 0; i < s.nmat; i++) per += rb * s.rows[i];
    int copies = (int)((512ll << 20) / per);
    copies = copies < 1 ? 1 : copies > 128 ? 128 : copies;
    u8 *w;
    long long tot = per * copies;
    CK(cudaMalloc(&w, tot + 16));
    // every 16 bits masked to 0x3bff: any half a scale reads is finite and
    // below 1 (the codes are random either way).
    fill<<<1024, 256, 0, st>>>((u32 *)w, tot / 4, 11, 0x3bff3bffu);
    CK(cudaStreamSynchronize(st));
    int launches = copies < 64 ? 64 : copies;
    printf("%-13s %7.2f MB/launch, %3d copies:", s.name, per / 1e6, copies);
    // streaming floor
    {
      long long n = per / 16;
      int blocks = (int)((n + 255) / 256);
      blocks = blocks > sms * 16 ? sms * 16 : blocks;
      float us = timeLaunches(st, launches, [&](int l) {
        k_stream<<<blocks, 256, 0, st>>>((const u32x4 *)(w + (l % copies) * per), n, sink);
      });
      printf(" stream %.2f µs (%.0f GB/s) |", us, per / us / 1e3);
    }
    for (int cap : caps)
    for (auto &c : cfg) {
      int tpr = c[0], G = c[1];
      if (cap && slots(s, tpr, G) <= cap * sms) continue; // the same launch as without a cap
      float us = timeLaunches(st, launches, [&](int l) {
        launchMV(s, w + (l % copies) * per, tpr, G, cap * sms, x, y, y1, y2, res, nw, nout, glu, nullptr, st);
      });
      if (cap) printf(" %d/%d/c%d %.2f", tpr, G, cap, us);
      else printf(" %d/%d %.2f", tpr, G, us);
    }
    printf("\n");
    fflush(stdout);
    CK(cudaFree(w));
  }
  // A decode step's products in order, 24 layers each with its own weights
  // (qwen2.5-0.5b at Q4_K: q/k/v, o, gate/up Q5_0, down Q4_K; the host's
  // choice of tpr, G and cap): per layer, against the sum of the same
  // launches timed one kind at a time above — what switching kernels costs.
  // With a one-block kernel between the products (as rope and attention
  // sit between them), and each kind alone in the same 24-layer graph.
  {
    int kinds[4] = {0, 1, 2, 3}, tprs[4] = {32, 32, 32, 64}, Gs[4] = {1, 1, 2, 1};
    const int L = 24;
    long long per[4], tot = 0;
    for (int k = 0; k < 4; k++) {
      const Shape &s = shapes[kinds[k]];
      long long rb = (long long)(s.cols / s.qk) * s.ts;
      per[k] = 0;
      for (int i = 0; i < s.nmat; i++) per[k] += rb * s.rows[i];
      per[k] = (per[k] + 255) / 256 * 256;
      tot += per[k];
    }
    u8 *w;
    CK(cudaMalloc(&w, tot * L));
    fill<<<1024, 256, 0, st>>>((u32 *)w, tot * L / 4, 13, 0x3bff3bffu);
    float *bias;
    CK(cudaMalloc(&bias, 4 << 20));
    fill<<<64, 256, 0, st>>>((u32 *)bias, 1 << 20, 17, 0xbe7fffffu);
    CK(cudaStreamSynchronize(st));
    // variant 0: the four kinds in turn; 1: with a one-block kernel after
    // each; 2..5: kind variant-2 alone, 24 launches; 6, 7: 0 and 1 launched
    // early (pdl), as apr launches them.
    // 8, 9: empty kernels in the products' places (their grids, blocks and
    // shared memory), early and not: what a launch costs with no work.
    int mvShared = 0;
    {
      cudaFuncAttributes fa;
      CK(cudaFuncGetAttributes(&fa, mv_Q5_0));
      mvShared = (int)fa.sharedSizeBytes;
      printf("mv_Q5_0: %d registers, %d bytes of shared memory, %d of local\n", fa.numRegs, mvShared,
             (int)fa.localSizeBytes);
      CK(cudaFuncSetAttribute(k_empty, cudaFuncAttributeMaxDynamicSharedMemorySize, mvShared));
      int nb = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, mv_Q5_0, 128, 0));
      printf("mv_Q5_0: %d blocks resident per multiprocessor\n", nb);
    }
    auto seq = [&](int variant, int l) {
      long long off = tot * l;
      bool pdl = variant >= 6 && variant != 9;
      int v = variant >= 8 ? 8 : pdl ? variant - 6 : variant;
      for (int k = 0; k < 4; k++) {
        if (v == 8) {
          cudaLaunchConfig_t cfg = {};
          cudaLaunchAttribute at[1];
          int blocks = slots(shapes[kinds[k]], tprs[k], Gs[k]);
          cfg.gridDim = dim3(blocks < 8 * sms ? blocks : 8 * sms), cfg.blockDim = dim3(128), cfg.stream = st;
          cfg.dynamicSmemBytes = mvShared;
          at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
          at[0].val.programmaticStreamSerializationAllowed = 1;
          cfg.attrs = at, cfg.numAttrs = pdl ? 1 : 0;
          CK(cudaLaunchKernelEx(&cfg, k_empty, y));
        } else if (v < 2 || v - 2 == k)
          launchMV(shapes[kinds[k]], w + off, tprs[k], Gs[k], 8 * sms, x, y, y1, y2, res, nw, nout, glu, bias, st, pdl);
        if (v == 1) k_stream<<<1, 32, 0, st>>>((const u32x4 *)x, 2, sink);
        off += per[k];
      }
    };
    const char *names[] = {"4 products", "4 products + 1-block kernels", "q/k/v alone", "o alone", "gate/up alone",
                           "down alone", "4 products, pdl", "4 products + 1-block, pdl", "4 empty kernels, pdl",
                           "4 empty kernels"};
    for (int variant = 0; variant < 10; variant++) {
      float us = timeLaunches(st, L, [&](int l) { seq(variant, l); });
      printf("layer sequence, %-30s %7.2f µs per layer\n", names[variant], us);
    }
    // The phase trace of variants 1 and 7 (one replay after a warm one).
    {
      long long lines = tot * L / 256;
      std::vector<int> lid(lines, -1);
      for (int l = 0; l < L; l++) {
        long long off = tot * l;
        for (int k = 0; k < 4; k++) {
          for (long long o = off / 256; o < (off + per[k]) / 256; o++) lid[o] = 4 * l + k;
          off += per[k];
        }
      }
      int *dlid;
      unsigned long long *dm;
      size_t mbytes = (size_t)4 * L * MK_B * MK_N * 8;
      CK(cudaMalloc(&dlid, lines * 4));
      CK(cudaMemcpy(dlid, lid.data(), lines * 4, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&dm, mbytes));
      const unsigned char *wb = w;
      CK(cudaMemcpyToSymbol(g_wbase, &wb, sizeof wb));
      CK(cudaMemcpyToSymbol(g_lid, &dlid, sizeof dlid));
      CK(cudaMemcpyToSymbol(g_wlines, &lines, sizeof lines));
      int khz;
      CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
      std::vector<unsigned long long> hm((size_t)4 * L * MK_B * MK_N);
      for (int variant : {1, 7}) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int l = 0; l < L; l++) seq(variant, l);
        CK(cudaStreamEndCapture(st, &g));
        cudaGraphExec_t ge;
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, st)); // warm
        CK(cudaMemsetAsync(dm, 0, mbytes, st));
        CK(cudaMemcpyToSymbolAsync(g_marks, &dm, sizeof dm, 0, cudaMemcpyHostToDevice, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaStreamSynchronize(st));
        unsigned long long *nul = nullptr;
        CK(cudaMemcpyToSymbol(g_marks, &nul, sizeof nul));
        CK(cudaMemcpy(hm.data(), dm, mbytes, cudaMemcpyDeviceToHost));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
        // Per launch: its blocks' start spread, the gap after the product
        // before it ended, its span, and each phase's median over blocks
        // (cycles at the clock the blocks measured: cycles over global ns).
        const int NS = 10;
        std::vector<double> st_[4][NS];
        double prevEnd = 0;
        for (int l = 0; l < L; l++)
          for (int k = 0; k < 4; k++) {
            unsigned long long *m = &hm[(size_t)(4 * l + k) * MK_B * MK_N];
            double g0 = 1e300, g5 = 0, gmed;
            std::vector<double> starts, ph[5], mhz;
            int nb = 0;
            for (int b = 0; b < MK_B; b++) {
              unsigned long long *e = m + (size_t)b * MK_N;
              if (!e[0] || !e[7]) continue;
              nb++;
              g0 = std::min(g0, (double)e[0]), g5 = std::max(g5, (double)e[7]);
              starts.push_back((double)e[0]);
              if (e[7] > e[0]) mhz.push_back((double)(e[6] - e[1]) / (double)(e[7] - e[0]) * 1e3);
              for (int i = 0; i < 5; i++) ph[i].push_back((double)(e[2 + i] - e[1 + i]));
            }
            if (!nb) continue;
            auto med = [](std::vector<double> v) {
              if (v.empty()) return 0.0;
              std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
              return v[v.size() / 2];
            };
            auto mx = [](const std::vector<double> &v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
            double clk = mhz.empty() ? khz / 1e3 : med(mhz); // MHz
            gmed = med(starts);
            double row[NS] = {(double)nb, (gmed - g0) / 1e3, l || k ? (g0 - prevEnd) / 1e3 : 0, (g5 - g0) / 1e3, clk};
            for (int i = 0; i < 5; i++) row[5 + i] = med(ph[i]) / clk;
            (void)mx;
            for (int i = 0; i < NS; i++) st_[k][i].push_back(row[i]);
            prevEnd = g5;
          }
        const char *kn[] = {"q/k/v", "o", "gate/up", "down"};
        printf("phase trace, %s (median over the 24 layers; µs):\n", names[variant]);
        printf("  %-8s %6s %7s %7s %7s %6s | %7s %7s %7s %7s %7s\n", "product", "blocks", "spread", "gap", "span", "MHz",
               "entry>1", "stage", "round", "dot", "reduce");
        for (int k = 0; k < 4; k++) {
          double r[NS];
          for (int i = 0; i < NS; i++) {
            std::vector<double> v = st_[k][i];
            std::sort(v.begin(), v.end());
            r[i] = v.empty() ? 0 : v[v.size() / 2];
          }
          printf("  %-8s %6.0f %7.2f %7.2f %7.2f %6.0f | %7.2f %7.2f %7.2f %7.2f %7.2f\n", kn[k], r[0], r[1], r[2], r[3],
                 r[4], r[5], r[6], r[7], r[8], r[9]);
        }
        fflush(stdout);
      }
      CK(cudaFree(dm));
      CK(cudaFree(dlid));
    }
    CK(cudaFree(w));
  }
  return 0;
}
