// Package tokenizer turns text into token ids and back for every GGUF
// vocabulary apr runs, built from the file's tokenizer.ggml.* keys. It is the
// one tokenizer of apr: every verb and every engine uses it.
//
// It reproduces llama.cpp's tokenizer (src/llama-vocab.cpp, src/unicode.cpp)
// id for id: byte-level BPE (tokenizer.ggml.model = "gpt2") with the
// pre-tokenizer named by tokenizer.ggml.pre, SentencePiece (model "llama")
// with scores and byte fallback, and the partition of special tokens that
// runs before either.
//
// # Conventions
//
// Ids are int32, as in llama.cpp. A Tokenizer is immutable after New and safe
// for concurrent use. Decode returns exact bytes; where a text is not valid
// UTF-8, byte-level BPE keeps its bytes (llama.cpp would replace each invalid
// byte by U+FFFD), so encoding then decoding gives back every byte string.
// Character classes come from Go's unicode tables (Unicode 15.0.0), mapped to
// llama.cpp's flags (unicode-data.cpp) category for category.
package tokenizer
