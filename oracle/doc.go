// Package oracle compares engine outputs: metrics over float32 vectors (cosine,
// max-abs and relative error, NMSE, KL divergence of softmaxes, top-k overlap,
// argmax equality), per-position comparison of logit sequences (with
// excluded positions reported apart, and an argmax margin), named
// tolerances, the first divergent (layer, op, position) between two
// engines' traces, and a mixture of experts' router near-ties
// (RouterNearTies): the positions a comparison of logits excludes because
// noise may swap an expert there.
//
// # Conventions
//
// Inputs are float32; every sum is accumulated in float64. The second
// argument is the reference (want). NaN or Inf anywhere is an error naming the
// vector and index (ErrNonFinite), never a number that compares as a pass; a
// zero vector where a norm is divided by is ErrZeroVector. oracle compares
// numbers: it runs no engine.
package oracle
