// Package ref is apr's FP32 reference engine: a plain, readable forward pass
// for every architecture apr supports, used as the judge of the optimized
// engines.
//
// # Conventions
//
// Activations are float32; dot products, norms and softmax accumulate in
// float64. Weights are never expanded: each matrix row is dequantized from
// the mapped file (engine/quant) into a small buffer, used, and dropped.
// Tokens of one Eval are processed so that each weight row is dequantized
// once for all of them, and every token's arithmetic is the same whether it
// arrives in a batch or alone: feeding a prompt at once or token by token
// gives bit-identical logits.
//
// The package shares nothing of its math with engine/cpu or engine/cuda; it
// imports only the GGUF reader, the dequantizers and engine/model.
package ref
