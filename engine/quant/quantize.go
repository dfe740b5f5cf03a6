package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrNoQuantizer is wrapped by Quantize's refusal of a known type that apr
// cannot encode (the imatrix-driven IQ1/IQ2/IQ3 types, the integer types,
// F64); CanQuantize tells in advance.
var ErrNoQuantizer = errors.New("quant: no quantizer for this type")

// Quantize encodes src into blocks of type t in dst, as ggml's
// ggml_quantize_chunk does with no importance matrix (the reference
// quantizers quantize_row_*_ref; for IQ4_NL and IQ4_XS the quantize_iq4_*
// path). Each quantizer keeps ggml's order of float32 operations so that its
// output matches ggml byte for byte; quantize_test.go checks that on the
// shared fixtures. F16, BF16 and F32 are plain conversions (ggml rounding).
//
// len(src) must be a multiple of the block size and dst must hold exactly
// its blocks. Quantized types refuse NaN and infinite inputs (ggml's output
// for them is undefined). Errors are returned, never panics; Quantize does
// not allocate.
func Quantize(t Type, src []float32, dst []byte) error {
	info, err := Lookup(t)
	if err != nil {
		return err
	}
	fn := quantizers[t]
	if fn == nil {
		return fmt.Errorf("%w: %s", ErrNoQuantizer, info.Name)
	}
	want, ok := info.RowBytes(int64(len(src)))
	if !ok {
		return fmt.Errorf("quant: quantize %s: %d values is not a multiple of the block size %d", info.Name, len(src), info.BlockSize)
	}
	if int64(len(dst)) != want {
		return fmt.Errorf("quant: quantize %s: %d values need %d bytes, got %d", info.Name, len(src), want, len(dst))
	}
	if info.Quantized {
		for i, v := range src {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("quant: quantize %s: value %d is %v; only finite values can be quantized", info.Name, i, v)
			}
		}
	}
	fn(src, dst)
	return nil
}

// CanQuantize reports whether Quantize supports t.
func CanQuantize(t Type) bool { return quantizers[t] != nil }

// quantizers holds one row encoder per supported type, called with whole
// blocks and a dst of exactly their size.
var quantizers = map[Type]func(src []float32, dst []byte){
	F32:    quantF32,
	F16:    quantF16,
	BF16:   quantBF16,
	Q1_0:   quantQ1_0,
	Q2_0:   quantQ2_0,
	Q4_0:   quantQ4_0,
	Q4_1:   quantQ4_1,
	Q5_0:   quantQ5_0,
	Q5_1:   quantQ5_1,
	Q8_0:   quantQ8_0,
	Q8_1:   quantQ8_1,
	MXFP4:  quantMXFP4,
	NVFP4:  quantNVFP4,
	Q2_K:   quantQ2_K,
	Q3_K:   quantQ3_K,
	Q4_K:   quantQ4_K,
	Q5_K:   quantQ5_K,
	Q6_K:   quantQ6_K,
	Q8_K:   quantQ8_K,
	IQ4_NL: quantIQ4_NL,
	IQ4_XS: quantIQ4_XS,
	TQ1_0:  quantTQ1_0,
	TQ2_0:  quantTQ2_0,
}

func put16(b []byte, i int, v uint16) { binary.LittleEndian.PutUint16(b[i:], v) }
func put32(b []byte, i int, v uint32) { binary.LittleEndian.PutUint32(b[i:], v) }
func putHalf(b []byte, i int, f float32) {
	binary.LittleEndian.PutUint16(b[i:], FP32ToFP16(f))
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// roundf rounds half away from zero, as C's roundf and lroundf do.
func roundf(x float32) float32 { return float32(math.Round(float64(x))) }

// sqrtf is the correctly rounded float32 square root (C's sqrtf).
func sqrtf(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// ---- plain types ------------------------------------------------------------

func quantF32(src []float32, dst []byte) {
	for i, v := range src {
		put32(dst, 4*i, math.Float32bits(v))
	}
}

// quantF16 is ggml_fp32_to_fp16_row.
func quantF16(src []float32, dst []byte) {
	for i, v := range src {
		put16(dst, 2*i, FP32ToFP16(v))
	}
}

// quantBF16 is ggml_fp32_to_bf16_row_ref.
func quantBF16(src []float32, dst []byte) {
	for i, v := range src {
		put16(dst, 2*i, FP32ToBF16(v))
	}
}

// ---- 32-value block types (and Q1_0, Q2_0) ----------------------------------

// quantQ1_0 is quantize_row_q1_0_ref: d = mean |x| over 128 values, one sign
// bit per value (set for x >= 0).
func quantQ1_0(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:128], dst[:18]
		var sumAbs float32
		for _, v := range x {
			sumAbs += abs32(v)
		}
		putHalf(y, 0, sumAbs/128)
		clear(y[2:])
		for j, v := range x {
			if v >= 0 {
				y[2+j/8] |= 1 << (j % 8)
			}
		}
		src, dst = src[128:], dst[18:]
	}
}

// quantQ2_0 is quantize_row_q2_0_ref: d = max |x|, codes round(x/d)+1
// clamped to 0..3.
func quantQ2_0(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:64], dst[:18]
		var amax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax = a
			}
		}
		d := amax
		var id float32
		if d > 0 {
			id = 1 / d
		}
		putHalf(y, 0, d)
		clear(y[2:])
		for j, v := range x {
			q := int32(roundf(v*id)) + 1
			q = min(max(q, 0), 3)
			y[2+j/4] |= uint8(q) << (2 * (j % 4))
		}
		src, dst = src[64:], dst[18:]
	}
}

// absMaxSigned returns the value of largest magnitude (the first one on ties)
// and that magnitude, as ggml's "if (amax < fabsf(v)) { amax = ...; max = v; }".
func absMaxSigned(x []float32) (maxv, amax float32) {
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, maxv = a, v
		}
	}
	return maxv, amax
}

// quantQ4_0 is quantize_row_q4_0_ref: d = max/-8, codes trunc(x/d + 8.5)
// capped at 15.
func quantQ4_0(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:32], dst[:18]
		maxv, _ := absMaxSigned(x)
		d := maxv / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, 0, d)
		for j := range 16 {
			x0, x1 := float32(x[j]*id), float32(x[16+j]*id) // rounded before the add, as in C
			xi0 := uint8(min(15, truncI8(x0+8.5)))
			xi1 := uint8(min(15, truncI8(x1+8.5)))
			y[2+j] = xi0 | xi1<<4
		}
		src, dst = src[32:], dst[18:]
	}
}

// truncI8 converts like C's (int8_t)f on x86-64: truncate toward zero to an
// int (cvttss2si), then keep the low 8 bits.
func truncI8(f float32) int32 { return int32(int8(truncI32(f))) }

// truncI32 converts like x86-64's cvttss2si: truncation toward zero, and the
// "integer indefinite" 0x80000000 for NaN and out-of-range values.
func truncI32(f float32) int32 {
	if !(f > -2147483904 && f < 2147483648) { // NaN or outside int32 after truncation
		return math.MinInt32
	}
	return int32(f)
}

// minMax returns the smallest and largest value, starting from ±FLT_MAX as
// ggml's Q4_1/Q5_1 reference quantizers do.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// quantQ4_1 is quantize_row_q4_1_ref: d = (max-min)/15, m = min, codes
// trunc((x-min)/d + 0.5) capped at 15.
func quantQ4_1(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:32], dst[:20]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, 0, d)
		putHalf(y, 2, lo)
		for j := range 16 {
			x0, x1 := float32((x[j]-lo)*id), float32((x[16+j]-lo)*id)
			xi0 := uint8(min(15, truncI8(x0+0.5)))
			xi1 := uint8(min(15, truncI8(x1+0.5)))
			y[4+j] = xi0 | xi1<<4
		}
		src, dst = src[32:], dst[20:]
	}
}

// quantQ5_0 is quantize_row_q5_0_ref: d = max/-16, codes trunc(x/d + 16.5)
// capped at 31, fifth bits in qh.
func quantQ5_0(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:32], dst[:22]
		maxv, _ := absMaxSigned(x)
		d := maxv / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, 0, d)
		var qh uint32
		for j := range 16 {
			x0, x1 := float32(x[j]*id), float32(x[16+j]*id) // rounded before the add, as in C
			xi0 := uint8(min(31, truncI8(x0+16.5)))
			xi1 := uint8(min(31, truncI8(x1+16.5)))
			y[6+j] = xi0&0xf | (xi1&0xf)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		put32(y, 2, qh)
		src, dst = src[32:], dst[22:]
	}
}

// quantQ5_1 is quantize_row_q5_1_ref: d = (max-min)/31, m = min, codes
// (uint8)((x-min)/d + 0.5).
func quantQ5_1(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:32], dst[:24]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, 0, d)
		putHalf(y, 2, lo)
		var qh uint32
		for j := range 16 {
			x0, x1 := float32((x[j]-lo)*id), float32((x[16+j]-lo)*id)
			xi0 := uint8(truncI32(x0 + 0.5))
			xi1 := uint8(truncI32(x1 + 0.5))
			y[8+j] = xi0&0xf | (xi1&0xf)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		put32(y, 4, qh)
		src, dst = src[32:], dst[24:]
	}
}

// amaxOf returns max |x| as ggml's "amax = MAX(amax, fabsf(v))".
func amaxOf(x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := abs32(v); amax <= a { // MAX(amax, a) = amax > a ? amax : a
			amax = a
		}
	}
	return amax
}

// quantQ8_0 is quantize_row_q8_0_ref: d = max|x|/127, codes round(x/d).
// It is also ggml's activation quantization for Q4_0, Q5_0, Q8_0, IQ4_NL and
// MXFP4 dot products (quantize_row_q8_0's reference semantics).
func quantQ8_0(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:32], dst[:34]
		d := amaxOf(x) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, 0, d)
		for j, v := range x {
			y[2+j] = uint8(int8(roundf(v * id)))
		}
		src, dst = src[32:], dst[34:]
	}
}

// quantQ8_1 is quantize_row_q8_1_ref: as Q8_0, plus s = d*sum(q) in fp16.
// It is ggml's activation quantization for Q4_1 and Q5_1 dot products.
func quantQ8_1(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:32], dst[:36]
		d := amaxOf(x) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, 0, d)
		var sum int32
		for j := range 16 {
			q0 := int8(roundf(x[j] * id))
			q1 := int8(roundf(x[16+j] * id))
			y[4+j], y[20+j] = uint8(q0), uint8(q1)
			sum += int32(q0) + int32(q1)
		}
		putHalf(y, 2, float32(sum)*d)
		src, dst = src[32:], dst[36:]
	}
}
