// Package serve is apr serve: one resident model behind an OpenAI-compatible
// HTTP API (/v1/chat/completions, /v1/completions, /v1/models, /health,
// /metrics), with a scheduler that interleaves up to Parallel sequences, a
// session (KV cache) per slot, and prefix reuse between requests.
//
// # Conventions
//
// Every sequence is driven by engine/generate's Seq, the same sampling loop
// apr run uses, on its own session: a stream's token ids are the ids apr run
// gives for the same prompt, backend and sampling parameters (batch
// invariance; serve's tests prove it with 16 concurrent requests). The
// scheduler advances every active sequence by one forward pass per step (a
// decode token, or a prefill chunk of PrefillChunk tokens) one session after
// the other: the engines evaluate one session at a time today, so a step's
// sequences share the step, not the matrix products. apr_serve_batch_size
// counts the sequences each step advanced.
//
// Errors have OpenAI's shape ({"error": {"message", "type", "param",
// "code"}}) and name the field or position at fault.
package serve
