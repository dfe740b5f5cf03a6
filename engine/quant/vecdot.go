package quant

import "fmt"

// vecDotTypes is ggml-cpu's vec_dot_type per weight type on x86-64: the
// format an activation row is converted to before a product with weights of
// that type (the kernel contracts' "activation", and engine/cpu's kernels'
// Act; a test holds the three to one another).
var vecDotTypes = map[Type]Type{
	F32: F32, F16: F16, BF16: BF16,
	Q4_0: Q8_0, Q5_0: Q8_0, Q8_0: Q8_0, MXFP4: Q8_0, NVFP4: Q8_0, IQ4_NL: Q8_0, Q1_0: Q8_0, Q2_0: Q8_0,
	Q4_1: Q8_1, Q5_1: Q8_1,
	Q2_K: Q8_K, Q3_K: Q8_K, Q4_K: Q8_K, Q5_K: Q8_K, Q6_K: Q8_K, IQ4_XS: Q8_K, TQ1_0: Q8_K, TQ2_0: Q8_K,
	IQ2_XXS: Q8_K, IQ2_XS: Q8_K, IQ2_S: Q8_K, IQ3_XXS: Q8_K, IQ3_S: Q8_K, IQ1_S: Q8_K, IQ1_M: Q8_K,
}

// VecDotType returns the activation format ggml-cpu converts an activation
// row to before a product with weights of type w (its vec_dot_type). A type
// that is not a weight type of any product is an error.
func VecDotType(w Type) (Type, error) {
	a, ok := vecDotTypes[w]
	if !ok {
		return 0, fmt.Errorf("quant: %s has no activation format (no product takes weights of this type)", w)
	}
	return a, nil
}

// RoundActivations writes to dst the activation row src as a product with
// weights of type w sees it in ggml-cpu: converted to VecDotType(w) (the
// x86 activation quantizers of this package, or F16/BF16 rounding) and back
// to float32. F32 weights leave it unchanged. scratch holds the converted
// row and is grown as needed; the returned slice is the scratch to pass
// next time. len(dst) must be len(src); dst may be src. NaN and infinities
// are refused by the quantizers, as ggml cannot represent them either.
func RoundActivations(w Type, src, dst []float32, scratch []byte) ([]byte, error) {
	a, err := VecDotType(w)
	if err != nil {
		return scratch, err
	}
	if len(dst) != len(src) {
		return scratch, fmt.Errorf("quant: round activations: dst has %d values, src %d", len(dst), len(src))
	}
	switch a {
	case F32:
		copy(dst, src)
		return scratch, nil
	case F16:
		for i, v := range src {
			dst[i] = FP16ToFP32(FP32ToFP16(v))
		}
		return scratch, nil
	case BF16:
		for i, v := range src {
			dst[i] = BF16ToFP32(FP32ToBF16(v))
		}
		return scratch, nil
	}
	n, ok := infos[a].RowBytes(int64(len(src)))
	if !ok {
		return scratch, fmt.Errorf("quant: round activations to %s: %d values is not a multiple of the block size %d", a, len(src), infos[a].BlockSize)
	}
	if int64(cap(scratch)) < n {
		scratch = make([]byte, n)
	}
	buf := scratch[:n]
	switch a {
	case Q8_0:
		err = QuantizeRowQ8_0(src, buf)
	case Q8_1:
		err = QuantizeRowQ8_1(src, buf)
	case Q8_K:
		err = QuantizeRowQ8_K(src, buf)
	}
	if err != nil {
		return scratch, err
	}
	return scratch, Dequantize(a, buf, dst)
}

// The Q4_1 and Q5_1 kernels take a block's min m times the activation
// block's stored sum s = fp16(d·Σq) (the Q8_1 block's second field), not
// times the sum of the block's dequantized values: a product in ggml
// numerics is Σ dequant(w)·dequant(act(x)) + Σ_blocks m·(s − Σ dequant(act)).
// MinSumCorrections and BlockMins give the two factors of that last sum.

// MinSumCorrections returns, when weights of type w take their blocks' mins
// times the activation's stored block sums (Q4_1, Q5_1), per block of src
// the stored sum minus the sum of the block's dequantized values; nil for
// every other weight type.
func MinSumCorrections(w Type, src []float32) ([]float64, error) {
	if w != Q4_1 && w != Q5_1 {
		return nil, nil
	}
	n, ok := infos[Q8_1].RowBytes(int64(len(src)))
	if !ok {
		return nil, fmt.Errorf("quant: %d values is not a multiple of the Q8_1 block size 32", len(src))
	}
	buf := make([]byte, n)
	if err := QuantizeRowQ8_1(src, buf); err != nil {
		return nil, err
	}
	out := make([]float64, len(src)/32)
	for b := range out {
		blk := buf[36*b : 36*b+36]
		d := half(blk, 0)
		var sum float64
		for j := range 32 {
			sum += float64(float32(int8(blk[4+j])) * d)
		}
		out[b] = float64(half(blk, 2)) - sum
	}
	return out, nil
}

// BlockMins writes to dst the min m of every block of a Q4_1 or Q5_1 row
// (both store it as the fp16 after the scale).
func BlockMins(w Type, row []byte, dst []float32) error {
	if w != Q4_1 && w != Q5_1 {
		return fmt.Errorf("quant: %s blocks have no min", w)
	}
	size := int(infos[w].TypeSize)
	if len(row) != size*len(dst) {
		return fmt.Errorf("quant: %s row of %d bytes for %d blocks", w, len(row), len(dst))
	}
	for b := range dst {
		dst[b] = half(row[size*b:], 2)
	}
	return nil
}
