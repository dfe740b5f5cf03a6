// Package tokenizer turns text into token ids and back for every GGUF
// vocabulary apr runs, built from the file's tokenizer.ggml.* keys. It is the
// one tokenizer of apr: every verb and every engine uses it.
//
// It reproduces llama.cpp's tokenizer (src/llama-vocab.cpp, src/unicode.cpp)
// id for id: byte-level BPE (tokenizer.ggml.model = "gpt2") with the
// pre-tokenizer named by tokenizer.ggml.pre, SentencePiece (model "llama")
// with scores and byte fallback, the partition of special tokens that runs
// before either, and the attributes and end-of-generation set llama.cpp
// derives while loading a vocabulary. Other models, and pre-tokenizers it
// does not implement, are refused by name.
//
// # Conventions
//
// Ids are int32, as in llama.cpp. A Tokenizer is immutable after New and safe
// for concurrent use; each Encode borrows pooled scratch space with its own
// word cache.
//
// Piece and the StreamDecoder give token_to_piece(special=true) bytes
// exactly; Decode gives llama_detokenize(remove_special=false,
// unparse_special=true) without its lossy space clean-up, so a SentencePiece
// vocabulary drops the one space Encode put in front.
//
// Where apr knowingly differs from llama.cpp:
//   - Invalid UTF-8 in byte-level BPE: llama.cpp turns each bad byte into
//     U+FFFD before merging; apr splits words exactly as llama.cpp does (a bad
//     byte counts as U+FFFD) but keeps the bytes, so every byte string
//     survives Encode then Decode. Valid UTF-8 gives identical ids.
//   - Character classes come from Go's unicode tables (Unicode 15.0.0), mapped
//     category for category to llama.cpp's flags (unicode-data.cpp, generated
//     from a 15.x UnicodeData); code points added after 15.0 may be classed
//     differently.
//   - Where llama.cpp picks among several tokens in hash-map order (special
//     tokens of equal length, the first end-of-turn or FIM token by text),
//     apr takes the lowest id.
package tokenizer
