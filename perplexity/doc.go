// Package perplexity scores a model over text as llama.cpp's llama-perplexity
// does (tools/perplexity/perplexity.cpp): the text's tokens in chunks of n_ctx,
// each chunk evaluated from an empty cache with its first token replaced by
// BOS (when the model adds one), the second half of every chunk scored; the
// estimate PPL = x ± y; the base file that --kl-divergence-base writes; and
// the KL-divergence statistics of a model against such a file.
//
// The statistics are oracle's (oracle.Perplexity, oracle.KLD), the file format
// internal/kldfile's, the chunked evaluation engine/generate's (EvalChunks);
// this package opens the model once and ties them together for apr
// perplexity, apr kld and the kld falsifier.
package perplexity
