// Package quant knows every ggml tensor type: its layout (block size and
// bytes per block), how to dequantize it to float32 exactly as ggml does, and
// how to quantize float32 into it for the types apr writes.
//
// Dequantize reproduces ggml's to_float bit for bit for every type ggml can
// decode (F32, F16, BF16, the legacy Q4_0..Q8_0, Q1_0, Q2_0, the k-quants,
// the IQ1/IQ2/IQ3/IQ4 i-quants, the ternary TQ1_0/TQ2_0, MXFP4 and NVFP4);
// it also decodes Q8_1 (from its layout: ggml has no decoder for it) and
// converts F64 and the integer types I8..I64 to the nearest float32. It is the
// reference that every engine and kernel test compares against, so each
// decoder is a plain transcription of ggml's, keeping its order of float32
// operations (products that ggml rounds before an add are wrapped in
// float32(...) so that Go cannot fuse them).
//
// Quantize reproduces ggml_quantize_chunk with no importance matrix, byte for
// byte, for F16, BF16, Q1_0, Q2_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4 and
// NVFP4 (CanQuantize reports which). The imatrix-driven i-quants (IQ1, IQ2,
// IQ3) have no quantizer here and are refused with ErrNoQuantizer.
//
// QuantizeRowQ8_0, QuantizeRowQ8_1 and QuantizeRowQ8_K quantize activations
// the way llama.cpp's x86 CPU backend does before quantized dot products
// (its AVX quantize_row_q8_0/q8_1 round half to even with scale 127/amax,
// unlike the reference quantizers; Q8_K is the reference).
//
// The i-quant lattice grids are data transcribed from ggml's ggml-quants.c
// (see grids.go).
//
// # Conventions
//
// Rows are contiguous runs of blocks in ggml order (ne0 fastest). A length
// that is not a whole number of blocks is an error, never a partial decode.
// Functions that fill a dst slice write exactly len(dst) values and never
// allocate. A type id the registry does not know is refused with its number
// (wrapping ErrUnknownType); it is never decoded as some other type. Bad input
// gives an error, never a panic.
package quant
