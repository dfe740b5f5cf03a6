// Package graph describes the forward pass of each architecture apr runs
// (llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe) once, over a Backend
// that provides the operations, so that the CPU engine and later a CUDA
// engine share one description of every model.
//
// # Conventions
//
// An activation is a Buf: Rows × Cols float32 values, row-major, one row per
// token; the rows of one Eval are consecutive positions. Ops write their dst
// in place and fully (buffers are reused between layers, so no op may rely
// on a dst being zero). Shapes that disagree are programmer errors and
// panic. Weights stay the backend's business (quantized, in the file's
// mapping, or on a device); the graph only names them.
//
// The graph reports the shared trace ops (model.Op*), qwen35's own ones
// (OpQ35*) and qwen35moe's feed-forward ones (OpMoEOut, OpShexpOut,
// OpShexpGate), the same names as the reference's, at the same places as
// the reference engine, so engines can be compared op by op.
package graph
