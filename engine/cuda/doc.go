// Package cuda is apr's CUDA engine: the shared graph description
// (engine/graph) on a graph.Backend whose buffers, weights and KV caches
// live in device memory, driven through the CUDA driver API loaded at run
// time (internal/cu, purego over libcuda.so.1: apr builds with
// CGO_ENABLED=0 and runs on machines without CUDA, where this backend is
// refused with the reason).
//
// The kernels are CUDA C under kernels/, compiled by `make kernels` (nvcc
// on a CUDA machine) into kernels.fatbin (sm_90 code and PTX), which is
// embedded; kernels.fatbin.sum records the sha256 of the sources it came
// from, a test fails when they disagree, and the engine refuses it.
//
// # Conventions
//
// Buffers are row-major F32 with a row stride. The engine computes in ggml
// numerics (the reference's ref.NumericsGGML): every product rounds its
// activations to its weight type's activation format (quant.VecDotType,
// apr.cu's act_* to the bit of engine/quant's quantizers). A decode step's
// products (mv_<type>) round x as they stage it and multiply the weights
// dequantized in registers; a prompt's products with the MqForm types
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) multiply the weights'
// integers by k_round's int8 codes on the tensor cores (mq_<type>), the
// others the dequantized weights by k_round's rounded x in 3xTF32
// (mm_<type>; one product where neither side has a small part: F16 and
// BF16 weights by x rounded to F16 and BF16; two for the integers of
// Q4_0, Q5_0, Q8_0 and Q6_K under APR_CUDA_MQ=0, mmt_int_body);
// element-wise ops follow engine/graph's definitions. Every op is queued
// on the backend's stream in order; Read waits for it. Inside an Eval the
// queued kernels run in parts as they are recorded (backend.go, push),
// each part a CUDA graph once seen before. On sm_90 a tape's
// kernels after its first are launched early (programmatic dependent
// launch) and each waits for the one before it (apr.cu's pdl) before it
// touches memory. Some ops have more
// than one kernel, chosen by shape, each tested against the op's math:
// attention (k_attw1/2/4/8 for a decode row over at most 256 positions, a
// block per query head, k_attwr1/2/4/8 when the row's rotation and KV store
// fold into it; k_attg1/2/4/8 for longer ones, a block per KV group and
// split, k_attgr1/2/4/8 with the rotation folded;
// k_attn with APR_CUDA_ATTG=0, past k_attg's limits, and for prompt
// rows of heads wider than 128; k_flash1/2/4 for a prompt's rows; k_attend
// for heads wider than k_attn's) and the delta rule (k_deltaw2/4/8
// by key-head width, k_delta past 256).
package cuda
