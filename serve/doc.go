// Package serve is apr serve: one resident model behind an OpenAI-compatible
// HTTP API (/v1/chat/completions, /v1/completions, /v1/models and
// /v1/models/{model}, /health, /metrics), with a scheduler that interleaves up to Parallel sequences, a
// session (KV cache) per slot, and prefix reuse between requests.
//
// # Conventions
//
// Every sequence is driven by engine/generate's Seq, the same sampling loop
// apr run uses, on its own session: a stream's token ids are the ids apr run
// gives for the same prompt, backend and sampling parameters (batch
// invariance; serve's tests prove it with 16 concurrent requests). Each
// scheduler step advances every active sequence by one forward pass, and on
// an engine that can (generate.AdvanceBatch over a model.BatchDecoder: the
// cpu engine) all of them share that pass: every decoding sequence's token
// and the waiting prompts' tokens (up to PrefillChunk of them, all prompts
// together) go through every weight once per step. apr_serve_batch_size
// counts the sequences each step advanced.
//
// Errors have OpenAI's shape ({"error": {"message", "type", "param",
// "code"}}) and name the field or position at fault.
package serve
