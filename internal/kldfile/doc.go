// Package kldfile reads and writes llama.cpp's log-probability files: what
// `llama-perplexity --kl-divergence-base FILE` writes while it measures a base
// model's perplexity, and what `llama-perplexity --kl-divergence` reads to
// compare another model with that base (tools/perplexity/perplexity.cpp).
//
// # Layout
//
// All numbers are little-endian:
//
//	"_logits_"                      8 bytes, the magic
//	n_ctx, n_vocab, n_chunk         int32 each
//	tokens                          n_chunk·n_ctx int32 token ids (the whole text's
//	                                tokens, BOS first when the model adds one)
//	records                         n_chunk·(n_ctx−1−n_ctx/2) of them, chunk by chunk
//
// A record is the scored position's log-probabilities over the vocabulary in
// RowLen(n_vocab) = 2·⌈n_vocab/2⌉+4 uint16 values: the float32 scale and the
// float32 min_log_prob (the first four uint16), then one uint16 q per token,
// then a zero pad when n_vocab is odd. Token i's log-probability is
// scale·q[i] + min_log_prob (float32 arithmetic). The scored positions are
// those of llama.cpp's perplexity: n_ctx/2 … n_ctx−2 of every chunk, each
// predicting the token after it.
//
// # Conventions
//
// Parse checks the whole layout before anything is allocated: the magic, every
// count against named limits, the file's length against what the counts imply,
// and every token id against n_vocab. A record's scale and min are checked
// when the record is read (Record), so a file of many gigabytes is not read
// through to open it. Errors are *FormatError naming the file, the byte
// offset and the field.
package kldfile
