// Package gguf reads and writes GGUF files, the container llama.cpp uses for
// models: a header of metadata and tensor infos, then aligned tensor data.
//
// # Conventions
//
// Open maps a file read-only; parsing touches only the header, and tensor data
// is a zero-copy view into the mapping. Every count, length and offset is
// checked before it is used; a bad file gets a *FormatError naming the file,
// the byte offset and the problem. Tensor shapes are in ggml order (ne0, the
// contiguous dimension, first).
package gguf
