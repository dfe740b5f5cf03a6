// Package cpu is apr's optimized CPU engine: the architectures described
// once in engine/graph, run on a CPU backend whose matrix products go
// through the kernel registry of internal/kern (quantized weights read in
// place from the file's mapping, or, for the packed kernels, from a copy
// repacked once at load that takes the file pages' place; activations
// quantized as ggml does), spread over a pool of threads, with the prompt
// processed as one batch.
//
// # Conventions
//
// Activations are float32, row-major, one row per token. The KV cache is
// F32. Register makes it backend "cpu" of model.OpenBackend (engine/backends
// calls it for the program).
package cpu
