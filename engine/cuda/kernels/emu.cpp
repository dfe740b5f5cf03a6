// emu.cpp: a CUDA driver for machines without a GPU, for apr's tests. It is
// built as a shared library that exports the driver entry points apr binds
// (engine/cuda/internal/cu) and runs apr.cu's kernels, compiled for the CPU,
// block after block with each block's threads as cooperative fibers
// (__syncthreads and warp reductions switch between them). "Device" memory
// is host memory. It checks the engine's logic — launches, arguments,
// strides, every kernel's arithmetic — against the CPU engine and the
// reference on machines without a GPU; it proves nothing about speed or
// about nvcc's code generation, which only a GPU run does.
//
// Build: c++ -O2 -std=c++17 -shared -fPIC -o libcuda-emu.so emu.cpp
#define _GNU_SOURCE 1
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include <csetjmp>
#include <ctime>
#include <csignal>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "host.h"
#define __global__
#define __launch_bounds__(...)
#define __shared__ static // one block runs at a time: static is per block

struct dim3_ {
  unsigned x, y, z;
};

// ---- fibers -------------------------------------------------------------------
// Each thread of a block is a fiber with its own stack, started once with
// makecontext and switched with _setjmp/_longjmp afterwards (no signal-mask
// system call per switch). A fiber runs the current kernel for the current
// block, marks itself done and yields; the scheduler resumes it for the
// next block.
struct Fiber {
  ucontext_t uctx;
  jmp_buf buf;
  dim3_ tid;
  bool started, waiting, done;
  std::vector<char> stack;
};
static dim3_ blockIdx, blockDim, gridDim;
static Fiber *apr_cur;
static int apr_cur_index;
static jmp_buf apr_sched;
static ucontext_t apr_sched_uctx;
static std::vector<Fiber> fibers;
static std::vector<double> slots; // warp exchange, one per thread
static std::vector<char> dynShared;
static bool apr_sync_allowed;
#define threadIdx (apr_cur->tid)
#define DYN_SHARED(T, name) T *name = (T *)dynShared.data()

static void apr_yield() {
  if (!_setjmp(apr_cur->buf)) _longjmp(apr_sched, 1);
}
static void __syncthreads() {
  if (!apr_sync_allowed) {
    fprintf(stderr, "emu: __syncthreads in a kernel run without fibers\n");
    abort();
  }
  apr_cur->waiting = true;
  apr_yield();
}

// The warp reductions: every lane writes its value, the block meets, each
// lane combines its warp's 32 values in the butterfly's pairing order, the
// block meets again.
template <class T, class F> static T warp_reduce(T v, F op) {
  int t = apr_cur_index;
  slots[t] = (double)v;
  __syncthreads();
  int base = t & ~31;
  T vals[32];
  for (int i = 0; i < 32; i++) vals[i] = (T)slots[base + i];
  for (int o = 16; o > 0; o >>= 1) {
    T next[32];
    for (int i = 0; i < 32; i++) next[i] = op(vals[i], vals[i ^ o]);
    memcpy(vals, next, sizeof vals);
  }
  __syncthreads();
  return vals[t & 31];
}
static float warp_sum(float v) { return warp_reduce(v, [](float a, float b) { return a + b; }); }
static double warp_sumd(double v) { return warp_reduce(v, [](double a, double b) { return a + b; }); }
static float warp_max(float v) { return warp_reduce(v, [](float a, float b) { return fmaxf(a, b); }); }

// Blocks run one after another: a fence orders nothing more, and an atomic
// add is an add.
static void __threadfence() {}
static unsigned atomicAdd(unsigned *p, unsigned v) {
  unsigned o = *p;
  *p = o + v;
  return o;
}

#include "apr.cu"

// apr_imma: one lane's part of a warp's mma.sync (m16n8k32, or m16n8k16
// with a[2], a[3], b[1] zero), in the PTX fragment layouts (apr.cu,
// imma_k32): the warp's fragments are gathered (every lane writes its six
// words, the block meets), each lane sums its four elements of c exactly
// in int, the block meets again.
static std::vector<u32> immaX;
static void apr_imma(int *c, const u32 *a, const u32 *b, int k) {
  int n = blockDim.x * blockDim.y * blockDim.z, t = apr_cur_index;
  if ((int)immaX.size() < 6 * n) immaX.resize(6 * n); // the block's first caller, before any lane writes
  for (int i = 0; i < 4; i++) immaX[6 * t + i] = a[i];
  immaX[6 * t + 4] = b[0], immaX[6 * t + 5] = b[1];
  __syncthreads();
  int base = t & ~31, lane = t & 31, g = lane >> 2, tq = lane & 3;
  auto A = [&](int r, int kk) {
    int l = base + (r % 8) * 4 + (kk % 16) / 4, reg = (r >= 8) + 2 * (kk >= 16);
    return (int)(int8_t)(immaX[6 * l + reg] >> (8 * (kk % 4)));
  };
  auto B = [&](int kk, int col) {
    int l = base + col * 4 + (kk % 16) / 4, reg = 4 + (kk >= 16);
    return (int)(int8_t)(immaX[6 * l + reg] >> (8 * (kk % 4)));
  };
  int out[4];
  for (int e = 0; e < 4; e++) {
    int row = g + 8 * (e >> 1), col = 2 * tq + (e & 1), s = 0;
    for (int kk = 0; kk < k; kk++) s += A(row, kk) * B(kk, col);
    out[e] = c[e] + s;
  }
  __syncthreads();
  for (int e = 0; e < 4; e++) c[e] = out[e];
}

// ---- launching ------------------------------------------------------------------
static bool needsFibers(const std::string &name);
typedef void (*Call)(void *fn, void **params);
template <class... A> struct Launcher {
  template <size_t... I> static void go(void (*fn)(A...), void **p, std::index_sequence<I...>) {
    fn(*(typename std::remove_cv<typename std::remove_reference<A>::type>::type *)p[I]...);
  }
  static void call(void *fn, void **p) { go((void (*)(A...))fn, p, std::index_sequence_for<A...>{}); }
};
template <class... A> static Call launcherOf(void (*)(A...)) { return &Launcher<A...>::call; }
template <class... A> static int nargsOf(void (*)(A...)) { return (int)sizeof...(A); }

struct Kernel {
  void *fn;
  Call call;
  bool fibers;
  const char *name;
  int nargs;
};
static std::map<std::string, Kernel> &kernels() {
  static std::map<std::string, Kernel> k;
  return k;
}
#define REG(name) kernels()[#name] = Kernel{(void *)&name, launcherOf(&name), needsFibers(#name), #name, nargsOf(&name)};
#define REG_T(N, ID) REG(mv_##N) REG(mm_##N) REG(mmid_##N) REG(getrows_##N)
#define REG_MQ(N) REG(mq_##N)
static void registerAll() {
  if (!kernels().empty()) return;
  APR_TYPES(REG_T)
  APR_MQ_TYPES(REG_MQ)
  REG(k_round) REG(k_actfmt) REG(k_attgcfg)
  REG(k_zero) REG(k_add) REG(k_addvec) REG(k_swiglu) REG(k_sigmoid) REG(k_silu) REG(k_mulsigmoid)
  REG(k_softplusmul) REG(k_deinterleave) REG(k_wsum) REG(k_rmsnorm) REG(k_l2norm) REG(k_gatednorm) REG(k_softmax)
  REG(k_rope) REG(k_store) REG(k_attend) REG(k_attn) REG(k_attg1) REG(k_attg2) REG(k_attg4) REG(k_attg8) REG(k_attgr1) REG(k_attgr2) REG(k_attgr4) REG(k_attgr8) REG(k_attw1) REG(k_attw2) REG(k_attw4) REG(k_attw8) REG(k_attwr1) REG(k_attwr2) REG(k_attwr4) REG(k_attwr8) REG(k_flash1) REG(k_flash2) REG(k_flash4) REG(k_stream) REG(k_sumk) REG(k_conv) REG(k_delta) REG(k_deltaw2) REG(k_deltaw4) REG(k_deltaw8) REG(k_perturb)
}

static Kernel *curKernel;
static void **curParams;
static void fiberMain() {
  for (;;) {
    curKernel->call(curKernel->fn, curParams);
    apr_cur->done = true;
    apr_yield();
  }
}

// Kernels that meet at barriers or exchange values within a warp run as
// fibers; the others run their threads one after another.
static bool needsFibers(const std::string &name) {
  static const char *prefixes[] = {"mv_", "mm_", "mmid_", "k_rmsnorm", "k_l2norm", "k_gatednorm", "k_softmax", "k_attend", "k_attn", "k_attg", "k_attw", "k_flash", "k_conv", "k_delta", "mq_", "k_round"};
  for (const char *p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

static void runBlock(Kernel *k, void **params, bool withFibers) {
  int n = blockDim.x * blockDim.y * blockDim.z;
  curKernel = k;
  curParams = params;
  auto tidOf = [](int i) {
    return dim3_{(unsigned)(i % blockDim.x), (unsigned)(i / blockDim.x % blockDim.y), (unsigned)(i / (blockDim.x * blockDim.y))};
  };
  if (!withFibers) {
    static Fiber plain;
    apr_sync_allowed = false;
    for (int i = 0; i < n; i++) {
      plain.tid = tidOf(i);
      apr_cur = &plain;
      apr_cur_index = i;
      k->call(k->fn, params);
    }
    return;
  }
  apr_sync_allowed = true;
  if ((int)fibers.size() < n) fibers.resize(n);
  if ((int)slots.size() < n + 32) slots.assign(n + 32, 0.0);
  for (int i = 0; i < n; i++) {
    fibers[i].tid = tidOf(i);
    fibers[i].waiting = fibers[i].done = false;
  }
  for (;;) {
    int live = 0, waiting = 0;
    for (int i = 0; i < n; i++) {
      Fiber &f = fibers[i];
      if (f.done) continue;
      if (!f.waiting) {
        apr_cur = &f;
        apr_cur_index = i;
        if (!_setjmp(apr_sched)) {
          if (!f.started) {
            f.started = true;
            f.stack.resize(256 << 10);
            getcontext(&f.uctx);
            f.uctx.uc_stack.ss_sp = f.stack.data();
            f.uctx.uc_stack.ss_size = f.stack.size();
            f.uctx.uc_link = nullptr;
            makecontext(&f.uctx, fiberMain, 0);
            swapcontext(&apr_sched_uctx, &f.uctx);
          } else {
            _longjmp(f.buf, 1);
          }
        }
      }
      if (!f.done) {
        live++;
        if (f.waiting) waiting++;
      }
    }
    if (live == 0) break;
    if (waiting == live)
      for (int i = 0; i < n; i++) fibers[i].waiting = false;
  }
}

// ---- device memory ----------------------------------------------------------------
// Each allocation is a mapping of its own: a PROT_NONE guard page, the data
// pages, a PROT_NONE guard page, with the allocation's end (rounded up to 4
// bytes) at the upper guard page. A kernel that reads or writes past the end
// of a buffer (or before its start) faults at once, and the fault handler
// (onFault) names the kernel, its grid, the block and thread, and the
// allocation, and aborts: what compute-sanitizer's memcheck reports on a GPU,
// where the same access is an illegal address that surfaces later, at the
// next driver call. Mappings are placed at increasing addresses and never
// reused, so memory used after cuMemFree faults too.
struct Region {
  uintptr_t base; // the mapping, guard pages included
  size_t mapLen;
  uintptr_t p; // the allocation
  size_t n;
  unsigned long long seq; // the launch count when it was allocated
};
static std::map<uintptr_t, Region> live;  // by p
static std::map<uintptr_t, Region> freed; // by base, for the fault report
static uintptr_t nextMap = (uintptr_t)0x200000000000ull;
static size_t pageSize;
static unsigned long long launches; // kernels launched so far

// The operation running now (a kernel or a copy), on which thread: a fault
// on that thread while it runs is the emulated device's.
static const char *opName;
static pid_t opTid;
static dim3_ opGrid, opBlock;
static bool opKernel;
static struct sigaction oldSegv, oldBus;

static const Region *regionNear(uintptr_t a, bool *isFreed) {
  *isFreed = false;
  auto it = live.upper_bound(a);
  const Region *best = nullptr;
  uintptr_t dist = ~(uintptr_t)0;
  auto consider = [&](const Region &r, bool f) {
    uintptr_t d = a < r.p ? r.p - a : a >= r.p + r.n ? a - (r.p + r.n) + 1 : 0;
    if (d < dist) dist = d, best = &r, *isFreed = f;
  };
  if (it != live.end()) consider(it->second, false);
  if (it != live.begin()) consider(std::prev(it)->second, false);
  auto ft = freed.upper_bound(a);
  if (ft != freed.begin()) {
    const Region &r = std::prev(ft)->second;
    if (a >= r.base && a < r.base + r.mapLen) consider(r, true);
  }
  return best;
}

// With APR_CUDA_EMU_FAULT=sticky a fault in a kernel does not abort: the
// launch returns as a GPU's does (the fault is asynchronous there) and
// every later call on the context fails with CUDA_ERROR_ILLEGAL_ADDRESS, as
// on a GPU, where the error is sticky; the report is printed all the same.
static bool stickyMode, sticky;
static sigjmp_buf faultJump;
static bool faultJumpSet;
#define CHECK_STICKY() \
  do {                 \
    if (sticky) return 700; \
  } while (0)

static void onFault(int sig, siginfo_t *si, void *uc) {
  if (opName && opTid == (pid_t)syscall(SYS_gettid)) {
    static char msg[1024];
    uintptr_t a = (uintptr_t)si->si_addr;
    int n = snprintf(msg, sizeof msg, "emu: illegal address %#lx in %s (launch %llu", (unsigned long)a, opName, launches);
    if (opKernel)
      n += snprintf(msg + n, sizeof msg - n, ", grid (%u,%u,%u) block (%u,%u,%u), at block (%u,%u,%u) thread (%u,%u,%u)",
                    opGrid.x, opGrid.y, opGrid.z, opBlock.x, opBlock.y, opBlock.z, blockIdx.x, blockIdx.y, blockIdx.z,
                    apr_cur ? apr_cur->tid.x : 0, apr_cur ? apr_cur->tid.y : 0, apr_cur ? apr_cur->tid.z : 0);
    n += snprintf(msg + n, sizeof msg - n, "): ");
    bool f;
    const Region *r = regionNear(a, &f);
    if (!r)
      n += snprintf(msg + n, sizeof msg - n, "no device allocation near it\n");
    else if (f)
      n += snprintf(msg + n, sizeof msg - n, "byte %ld of a FREED allocation of %zu bytes at %#lx (allocated before launch %llu)\n",
                    (long)(a - r->p), r->n, (unsigned long)r->p, r->seq);
    else if (a < r->p)
      n += snprintf(msg + n, sizeof msg - n, "%lu bytes BEFORE the allocation of %zu bytes at %#lx (allocated before launch %llu)\n",
                    (unsigned long)(r->p - a), r->n, (unsigned long)r->p, r->seq);
    else
      n += snprintf(msg + n, sizeof msg - n, "byte %lu of the allocation of %zu bytes at %#lx (%lu past its end; allocated before launch %llu)\n",
                    (unsigned long)(a - r->p), r->n, (unsigned long)r->p, (unsigned long)(a - r->p - r->n), r->seq);
    if (write(2, msg, n > (int)sizeof msg ? sizeof msg : n) < 0) {}
    if (stickyMode && opKernel && faultJumpSet) siglongjmp(faultJump, 1);
    abort();
  }
  // not the emulated device's fault (the Go runtime's nil checks, say): the
  // handler that was there before ours decides
  struct sigaction *old = sig == SIGSEGV ? &oldSegv : &oldBus;
  if (old->sa_flags & SA_SIGINFO) {
    old->sa_sigaction(sig, si, uc);
  } else if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {
    signal(sig, SIG_DFL); // the access faults again and kills the process
  } else {
    old->sa_handler(sig);
  }
}

static void installFaultHandler() {
  static bool done;
  if (done) return;
  done = true;
  pageSize = (size_t)sysconf(_SC_PAGESIZE);
  const char *mode = getenv("APR_CUDA_EMU_FAULT");
  stickyMode = mode && strcmp(mode, "sticky") == 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = onFault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigfillset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &oldSegv);
  sigaction(SIGBUS, &sa, &oldBus);
}

struct Op {
  Op(const char *name, bool kernel) {
    opName = name, opKernel = kernel, opTid = (pid_t)syscall(SYS_gettid);
  }
  ~Op() { opName = nullptr, opTid = 0; }
};

// inside reports whether [p, p+n) lies in one live allocation.
static bool inside(uintptr_t p, size_t n) {
  auto it = live.upper_bound(p);
  if (it == live.begin()) return false;
  const Region &r = std::prev(it)->second;
  return p >= r.p && p + n <= r.p + r.n;
}

// ---- the driver API -------------------------------------------------------------
static size_t allocated;
static size_t capacity = (size_t)16 << 30;

extern "C" {
typedef int CUresult;
CUresult cuInit(unsigned) {
  installFaultHandler();
  return 0;
}
CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return 0;
}
CUresult cuDeviceGetCount(int *n) {
  *n = 1;
  return 0;
}
CUresult cuDeviceGet(int *d, int) {
  *d = 0;
  return 0;
}
CUresult cuDeviceGetName(char *name, int len, int) {
  snprintf(name, len, "apr host emulator (engine/cuda/kernels/emu.cpp, no GPU)");
  return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *b, int) {
  *b = capacity;
  return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int) {
  // The multiprocessor count comes from APR_CUDA_EMU_SMS (default 1): the
  // engine sizes some launches by it, and the tests run both ways.
  int sms = 1;
  if (const char *e = getenv("APR_CUDA_EMU_SMS")) sms = atoi(e) > 0 ? atoi(e) : 1;
  *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? sms : 0;
  return 0;
}
static int ctxDummy;
CUresult cuDevicePrimaryCtxRetain(void **c, int) {
  *c = &ctxDummy;
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
CUresult cuCtxSetCurrent(void *) { return 0; }
static struct Graph *capturingGraph();
CUresult cuCtxSynchronize() {
  CHECK_STICKY();
  return capturingGraph() ? 900 : 0;
}
// aprEmuSetMemory sets the emulated device's memory (tests of the
// engine's refusals when a model or a KV cache does not fit).
void aprEmuSetMemory(size_t bytes) { capacity = bytes; }
CUresult cuMemGetInfo_v2(size_t *freeB, size_t *total) {
  CHECK_STICKY();
  *total = capacity;
  *freeB = *total > allocated ? *total - allocated : 0;
  return 0;
}
CUresult cuModuleLoadData(void **m, const void *) {
  CHECK_STICKY();
  registerAll();
  *m = &kernels();
  return 0;
}
CUresult cuModuleUnload(void *) { return 0; }
CUresult cuModuleGetFunction(void **f, void *, const char *name) {
  CHECK_STICKY();
  auto it = kernels().find(name);
  if (it == kernels().end()) return 500; // CUDA_ERROR_NOT_FOUND
  *f = &it->second;
  return 0;
}
CUresult cuFuncSetAttribute(void *, int, int) { return 0; }
// The blocks a multiprocessor holds at once: APR_CUDA_EMU_RESIDENT (default
// 4, what an H100 or H200 holds of mv_<type>: 128 threads of 128 registers)
// for every kernel. The engine sizes the one-token products by it; results
// do not depend on it. 0 (a kernel too large to run) must be refused at load.
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *, int, size_t) {
  CHECK_STICKY();
  int r = 4;
  if (const char *e = getenv("APR_CUDA_EMU_RESIDENT")) r = atoi(e) >= 0 ? atoi(e) : 4;
  *n = r;
  return 0;
}
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) {
  CHECK_STICKY();
  if (allocated + n > capacity) return 2; // CUDA_ERROR_OUT_OF_MEMORY
  installFaultHandler();
  size_t data = (n + 3) & ~(size_t)3;
  size_t dataPages = (data + pageSize - 1) / pageSize;
  if (dataPages == 0) dataPages = 1;
  size_t mapLen = (dataPages + 2) * pageSize;
  void *m = mmap((void *)nextMap, mapLen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return 2;
  uintptr_t base = (uintptr_t)m;
  nextMap = base + mapLen + pageSize; // never reuse an address; keep a hole between mappings
  if (mprotect((void *)(base + pageSize), dataPages * pageSize, PROT_READ | PROT_WRITE) != 0) {
    munmap(m, mapLen);
    return 2;
  }
  uintptr_t u = base + pageSize + dataPages * pageSize - data;
  // poison: a kernel that reads memory nothing wrote sees NaN, not zero
  for (size_t i = 0; i + 4 <= n; i += 4) memcpy((char *)u + i, "\xff\xff\xc0\x7f", 4);
  *p = (uint64_t)u;
  live[u] = Region{base, mapLen, u, n, launches};
  allocated += n;
  return 0;
}
CUresult cuMemFree_v2(uint64_t p) {
  CHECK_STICKY();
  if (!p) return 0;
  auto it = live.find((uintptr_t)p);
  if (it == live.end()) return 1;
  Region r = it->second;
  allocated -= r.n;
  live.erase(it);
  munmap((void *)r.base, r.mapLen);
  freed[r.base] = r;
  return 0;
}
// The copies refuse a range outside one live allocation (the driver's
// CUDA_ERROR_INVALID_VALUE), saying so on stderr.
static CUresult badCopy(const char *call, uint64_t p, size_t n) {
  fprintf(stderr, "emu: %s of %zu bytes at %#llx: not inside one live device allocation\n", call, n, (unsigned long long)p);
  return 1;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) {
  CHECK_STICKY();
  if (capturingGraph()) return 900;
  if (!inside(dst, n)) return badCopy("cuMemcpyHtoD", dst, n);
  Op op("cuMemcpyHtoD", false);
  memcpy((void *)(uintptr_t)dst, src, n);
  return 0;
}
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) {
  CHECK_STICKY();
  if (capturingGraph()) return 900;
  if (!inside(src, n)) return badCopy("cuMemcpyDtoH", src, n);
  Op op("cuMemcpyDtoH", false);
  memcpy(dst, (void *)(uintptr_t)src, n);
  return 0;
}
// Page-locked host memory is ordinary memory here; the asynchronous copy
// runs at once, like every queued operation of the emulator. A copy from
// memory that cuMemAllocHost did not return is refused: the engine must
// stage what it copies asynchronously in pinned memory (a pageable source
// would make the driver wait for the stream).
// APR_CUDA_EMU_PIN_MAX=N: a request for more than N bytes fails as out of
// memory (CUDA_ERROR_OUT_OF_MEMORY), for the paths that must do without.
static std::map<uintptr_t, size_t> pinned;
CUresult cuMemAllocHost_v2(void **p, size_t n) {
  CHECK_STICKY();
  if (const char *e = getenv("APR_CUDA_EMU_PIN_MAX"); e && *e)
    if (n > (size_t)strtoull(e, nullptr, 10)) return 2;
  *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
  if (!*p) return 2;
  pinned[(uintptr_t)*p] = n;
  return 0;
}
CUresult cuMemFreeHost(void *p) {
  auto it = pinned.find((uintptr_t)p);
  if (it == pinned.end()) return 1;
  pinned.erase(it);
  free(p);
  return 0;
}
static bool isPinned(const void *p, size_t n) {
  auto it = pinned.upper_bound((uintptr_t)p);
  if (it == pinned.begin()) return false;
  --it;
  return (uintptr_t)p >= it->first && (uintptr_t)p + n <= it->first + it->second;
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n, void *) {
  CHECK_STICKY();
  if (capturingGraph()) return 900;
  if (!inside(dst, n)) return badCopy("cuMemcpyHtoDAsync", dst, n);
  if (!isPinned(src, n)) {
    fprintf(stderr, "emu: cuMemcpyHtoDAsync of %zu bytes from host memory cuMemAllocHost did not return\n", n);
    return 1;
  }
  Op op("cuMemcpyHtoDAsync", false);
  memcpy((void *)(uintptr_t)dst, src, n);
  return 0;
}
CUresult cuMemcpyDtoD_v2(uint64_t dst, uint64_t src, size_t n) {
  CHECK_STICKY();
  if (!inside(dst, n)) return badCopy("cuMemcpyDtoD (destination)", dst, n);
  if (!inside(src, n)) return badCopy("cuMemcpyDtoD (source)", src, n);
  Op op("cuMemcpyDtoD", false);
  memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
  return 0;
}
// APR_CUDA_EMU_SKIP=1 launches nothing (every kernel returns at once, its
// outputs unwritten): what remains of a run is the host's side — recording,
// packing, graph capture and replay, copies — timed on its own (a developer
// measuring the engine's host overhead; results are garbage by design).
// The kernels that report how the kernels were built (k_attgcfg: AG_L,
// which the backend reads at load to size k_attg's splits; k_actfmt) still
// run: without them the load refuses, and nothing could be timed.
static bool skipKernels() {
  static int skip = -1;
  if (skip < 0) skip = getenv("APR_CUDA_EMU_SKIP") && strcmp(getenv("APR_CUDA_EMU_SKIP"), "1") == 0;
  return skip == 1;
}

static void runLaunch(Kernel *k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, void **params) {
  if (skipKernels() && strcmp(k->name, "k_attgcfg") != 0 && strcmp(k->name, "k_actfmt") != 0) {
    launches++;
    return;
  }
  gridDim = dim3_{gx, gy, gz};
  blockDim = dim3_{bx, by, bz};
  // 64 guard bytes past the launch's dynamic shared memory: a kernel that
  // writes beyond what the host sized for it is stopped and named (on the
  // device it would corrupt its neighbour's or fault).
  dynShared.assign(shared + 64, 0);
  memset(dynShared.data() + shared, 0xa5, 64);
  launches++;
  Op op(k->name, true);
  opGrid = gridDim, opBlock = blockDim;
  if (sigsetjmp(faultJump, 1)) {
    // a fault in sticky mode: the block's fibers are abandoned mid-kernel
    // (their stacks are set up afresh for the next launch)
    faultJumpSet = false;
    sticky = true;
    for (Fiber &fb : fibers) fb.started = false;
    return;
  }
  faultJumpSet = true;
  for (unsigned z = 0; z < gz; z++)
    for (unsigned y = 0; y < gy; y++)
      for (unsigned x = 0; x < gx; x++) {
        blockIdx = dim3_{x, y, z};
        runBlock(k, params, k->fibers);
        for (unsigned i = 0; i < 64; i++)
          if ((unsigned char)dynShared[shared + i] != 0xa5) {
            fprintf(stderr, "emu: %s wrote byte %u of its dynamic shared memory, which has %u bytes\n", k->name,
                    shared + i, shared);
            abort();
          }
      }
  faultJumpSet = false;
}

// Streams and graphs: the emulator runs every launch at once, in order, so
// a stream is a token; a stream being captured records its launches (each
// argument's 8-byte slot copied, as the driver copies the values) instead
// of running them, and a graph launch runs the recording.
struct Rec {
  Kernel *k;
  unsigned g[3], b[3], shared;
  std::vector<uint64_t> args;
};
struct Graph {
  std::vector<Rec> recs;
};
static Graph *capturing;
static int streamDummy;
CUresult cuStreamCreate(void **s, unsigned) {
  *s = &streamDummy;
  return 0;
}
CUresult cuStreamSynchronize(void *) {
  CHECK_STICKY();
  return capturing ? 900 : 0;
} // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
CUresult cuStreamBeginCapture_v2(void *, int) {
  if (capturing) return 1;
  capturing = new Graph;
  return 0;
}
CUresult cuStreamEndCapture(void *, void **g) {
  if (!capturing) return 1;
  *g = capturing;
  capturing = nullptr;
  return 0;
}
CUresult cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long) {
  *e = new Graph(*(Graph *)g);
  return 0;
}
CUresult cuGraphDestroy(void *g) {
  delete (Graph *)g;
  return 0;
}
CUresult cuGraphExecDestroy(void *e) {
  delete (Graph *)e;
  return 0;
}
CUresult cuGraphLaunch(void *e, void *) {
  CHECK_STICKY();
  if (capturing) return 1;
  for (Rec &r : ((Graph *)e)->recs) {
    std::vector<void *> p(r.args.size());
    for (size_t i = 0; i < p.size(); i++) p[i] = &r.args[i];
    runLaunch(r.k, r.g[0], r.g[1], r.g[2], r.b[0], r.b[1], r.b[2], r.shared, p.data());
  }
  return 0;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *, void **params, void **) {
  CHECK_STICKY();
  Kernel *k = (Kernel *)f;
  if (bx * by * bz > 1024 || bx * by * bz == 0) return 1;
  if (capturing) {
    Rec r{k, {gx, gy, gz}, {bx, by, bz}, shared, std::vector<uint64_t>(k->nargs)};
    for (int i = 0; i < k->nargs; i++) memcpy(&r.args[i], params[i], 8);
    capturing->recs.push_back(std::move(r));
    return 0;
  }
  runLaunch(k, gx, gy, gz, bx, by, bz, shared, params);
  return 0;
}
// cuLaunchKernelEx: cuda.h's CUlaunchConfig and CUlaunchAttribute as the
// Go side lays them out (internal/cu); the only attribute apr passes is
// programmatic stream serialization (6), allowed (1). The emulator runs
// every launch to its end before the next, so an early launch is an
// ordinary one here: what it checks is the layout.
struct LaunchAttr {
  unsigned id, pad;
  unsigned char value[64];
};
struct LaunchConfig {
  unsigned g[3], b[3], shared, pad;
  void *stream;
  LaunchAttr *attrs;
  unsigned nattrs, pad2;
};
static_assert(sizeof(LaunchConfig) == 56 && sizeof(LaunchAttr) == 72, "CUlaunchConfig layout");
CUresult cuLaunchKernelEx(const LaunchConfig *c, void *f, void **params, void **extra) {
  if (!c || (c->nattrs && !c->attrs)) return 1;
  for (unsigned i = 0; i < c->nattrs; i++)
    if (c->attrs[i].id != 6 || c->attrs[i].value[0] != 1) return 1;
  return cuLaunchKernel(f, c->g[0], c->g[1], c->g[2], c->b[0], c->b[1], c->b[2], c->shared, c->stream, params, extra);
}
static Graph *capturingGraph() { return capturing; }
// Events record the host's clock (every launch has finished when the call
// returns, so the difference is the kernels' time on the emulator).
// liveEvents counts the events created and not destroyed
// (aprEmuLiveEvents: tests that an engine releases what it creates).
static long liveEvents;
long aprEmuLiveEvents() { return liveEvents; }
CUresult cuEventCreate(void **e, unsigned) {
  *e = new double(0);
  liveEvents++;
  return 0;
}
CUresult cuEventDestroy_v2(void *e) {
  if (!e) return 1;
  delete (double *)e;
  liveEvents--;
  return 0;
}
CUresult cuEventRecord(void *e, void *) {
  CHECK_STICKY();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *(double *)e = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  return 0;
}
CUresult cuEventSynchronize(void *) {
  CHECK_STICKY();
  return 0;
}
CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b) {
  *ms = (float)(*(double *)b - *(double *)a);
  return 0;
}
CUresult cuGetErrorName(int r, const char **s) {
  *s = r == 0 ? "CUDA_SUCCESS" : r == 1 ? "CUDA_ERROR_INVALID_VALUE" : r == 2 ? "CUDA_ERROR_OUT_OF_MEMORY"
       : r == 500 ? "CUDA_ERROR_NOT_FOUND" : r == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS"
       : r == 900 ? "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
}
