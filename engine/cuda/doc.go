// Package cuda is apr's CUDA engine: the shared graph description
// (engine/graph) on a graph.Backend whose buffers, weights and KV caches
// live in device memory, driven through the CUDA driver API loaded at run
// time (internal/cu, purego over libcuda.so.1: apr builds with
// CGO_ENABLED=0 and runs on machines without CUDA, where this backend is
// refused with the reason).
//
// The kernels are CUDA C under kernels/, compiled by `make kernels` (nvcc
// on a CUDA machine) into kernels.ptx, which is embedded and records the
// sha256 of the sources it came from; a test fails when they disagree.
//
// # Conventions
//
// Buffers are row-major F32 with a row stride; products dequantize each
// 32-value chunk of a weight row in registers and multiply it with F32
// activations; element-wise ops follow engine/graph's definitions. Every
// op is queued on the default stream in order; Read waits for it.
package cuda
