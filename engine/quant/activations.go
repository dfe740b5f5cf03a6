package quant

import (
	"fmt"
	"math"
)

// Activation quantization as llama.cpp's CPU backend does it before a
// quantized dot product (ggml-cpu's from_float of the weight type's
// vec_dot_type). On x86-64 with AVX or AVX2 (the build that produced apr's
// expected logits) ggml-cpu's quantize_row_q8_0 and quantize_row_q8_1 are
// not the reference quantizers: they scale by id = 127/amax (not 1/d) and
// round half to even (vroundps), where quantize_row_q8_*_ref multiplies by
// 1/d and rounds half away from zero. The two differ by one code in rare
// values. quantize_row_q8_K on x86 is the reference quantizer.
//
// Each function quantizes a whole row (len(src) a multiple of the block
// size, dst exactly its blocks), refuses NaN and infinities, never panics and
// never allocates.

// QuantizeRowQ8_0 quantizes activations to Q8_0 blocks as ggml-cpu's x86
// AVX/AVX2 quantize_row_q8_0 does (for Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4
// weights): d = amax/127 stored as fp16, q = roundeven(x * (127/amax)).
// Quantize(Q8_0, ...) is the reference quantizer instead.
func QuantizeRowQ8_0(src []float32, dst []byte) error {
	if err := checkRow(Q8_0, src, dst); err != nil {
		return err
	}
	for len(src) > 0 {
		x, y := src[:32], dst[:34]
		d, id := simdQ8Scale(x)
		putHalf(y, 0, d)
		for j, v := range x {
			y[2+j] = uint8(int8(simdRound(v * id)))
		}
		src, dst = src[32:], dst[34:]
	}
	return nil
}

// QuantizeRowQ8_1 quantizes activations to Q8_1 blocks as ggml-cpu's x86
// AVX/AVX2 quantize_row_q8_1 does (for Q4_1 and Q5_1 weights): as
// QuantizeRowQ8_0, plus s = fp16(d * sum(q)) with the float32 d.
func QuantizeRowQ8_1(src []float32, dst []byte) error {
	if err := checkRow(Q8_1, src, dst); err != nil {
		return err
	}
	for len(src) > 0 {
		x, y := src[:32], dst[:36]
		d, id := simdQ8Scale(x)
		putHalf(y, 0, d)
		var sum int32
		for j, v := range x {
			q := simdRound(v * id)
			y[4+j] = uint8(int8(q))
			sum += q
		}
		putHalf(y, 2, d*float32(sum))
		src, dst = src[32:], dst[36:]
	}
	return nil
}

// QuantizeRowQ8_K quantizes activations to Q8_K blocks as ggml-cpu does for
// the k-quant, IQ and TQ weights; on x86 that is quantize_row_q8_K_ref, so
// this is Quantize(Q8_K, ...).
func QuantizeRowQ8_K(src []float32, dst []byte) error { return Quantize(Q8_K, src, dst) }

func checkRow(t Type, src []float32, dst []byte) error {
	info := infos[t]
	want, ok := info.RowBytes(int64(len(src)))
	if !ok {
		return fmt.Errorf("quant: quantize row %s: %d values is not a multiple of the block size %d", info.Name, len(src), info.BlockSize)
	}
	if int64(len(dst)) != want {
		return fmt.Errorf("quant: quantize row %s: %d values need %d bytes, got %d", info.Name, len(src), want, len(dst))
	}
	for i, v := range src {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("quant: quantize row %s: value %d is %v; only finite values can be quantized", info.Name, i, v)
		}
	}
	return nil
}

// simdQ8Scale returns d = amax/127 and id = 127/amax (0 for an all-zero
// block), as ggml-cpu's AVX code computes them.
func simdQ8Scale(x []float32) (d, id float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d = amax / 127
	if amax != 0 {
		id = 127 / amax
	}
	return d, id
}

// simdRound rounds half to even and saturates to int8, as vroundps
// (_MM_ROUND_NEAREST), vcvtps2dq and the saturating packs do.
func simdRound(f float32) int32 {
	r := math.RoundToEven(float64(f))
	return int32(max(-128, min(127, r)))
}
