// Package quant knows every ggml tensor type: its layout (block size and
// bytes per block), how to dequantize it to float32 exactly as ggml does, and
// how to quantize float32 into it for the types apr writes.
//
// # Conventions
//
// Rows are contiguous runs of blocks in ggml order (ne0 fastest). Functions
// that fill a dst slice write exactly len(dst) values and never allocate.
// A type id the registry does not know is refused with its number; it is never
// decoded as some other type.
package quant
