package kern

import (
	"encoding/binary"
	"math"
)

// Activation block layouts (bytes), as ggml's block_q8_0, block_q8_1 and
// block_q8_K.
const (
	q80Bytes = 34  // fp16 d, int8 qs[32]
	q81Bytes = 36  // fp16 d, fp16 s (= d·Σqs), int8 qs[32]
	q8KBytes = 292 // float32 d, int8 qs[256], int16 bsums[16]
)

// QuantizeQ8_0 quantizes x into Q8_0 blocks in dst, as ggml-cpu's x86
// quantize_row_q8_0 does (the path llama.cpp takes on every AVX machine):
// per block of 32, amax = max|x|, d = amax/127 stored as fp16 (round to
// nearest even), id = 127/amax (0 when amax is 0), q = round-half-even(x·id).
//
// This differs from ggml's portable quantize_row_q8_0_ref (d and 1/d, roundf
// with ties away from zero) only where x·id lands within an ulp of a
// half-integer; apr follows the code llama.cpp actually runs on amd64.
//
// len(x) must be a multiple of 32 and len(dst) = len(x)/32·34; it panics
// otherwise (a programmer error).
func QuantizeQ8_0(x []float32, dst []byte) {
	if len(x)%32 != 0 || len(dst) != len(x)/32*q80Bytes {
		panic("kern: QuantizeQ8_0: bad lengths")
	}
	quantizeQ8_0(x, dst)
}

func quantizeQ8_0Go(x []float32, dst []byte) {
	for len(x) >= 32 {
		b := dst[:q80Bytes]
		xs := x[:32]
		amax := float32(0)
		for _, v := range xs {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		id := float32(0)
		if amax != 0 {
			id = 127 / amax
		}
		binary.LittleEndian.PutUint16(b, fp32ToFP16(d))
		for j, v := range xs {
			b[2+j] = byte(x86Int8(v * id))
		}
		x, dst = x[32:], dst[q80Bytes:]
	}
}

// QuantizeQ8_1 quantizes x into Q8_1 blocks as ggml-cpu's x86
// quantize_row_q8_1 does: as QuantizeQ8_0, plus s = fp16(d·Σq) with the sum
// taken over the rounded integers.
//
// len(x) must be a multiple of 32 and len(dst) = len(x)/32·36.
func QuantizeQ8_1(x []float32, dst []byte) {
	if len(x)%32 != 0 || len(dst) != len(x)/32*q81Bytes {
		panic("kern: QuantizeQ8_1: bad lengths")
	}
	for len(x) >= 32 {
		b := dst[:q81Bytes]
		xs := x[:32]
		amax := float32(0)
		for _, v := range xs {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		id := float32(0)
		if amax != 0 {
			id = 127 / amax
		}
		sum := int32(0)
		for j, v := range xs {
			q := x86Int32(v * id)
			sum += q
			b[4+j] = byte(sat8(q))
		}
		binary.LittleEndian.PutUint16(b, fp32ToFP16(d))
		binary.LittleEndian.PutUint16(b[2:], fp32ToFP16(d*float32(sum)))
		x, dst = x[32:], dst[q81Bytes:]
	}
}

// QuantizeQ8_K quantizes x into Q8_K blocks exactly as ggml's
// quantize_row_q8_K_ref (which ggml-cpu uses on x86 too): per block of 256,
// max is the element of largest magnitude (first one on ties), iscale =
// -127/max, q = min(127, round-half-even(iscale·x)), d = 1/iscale as float32,
// bsums[j] = Σ q[16j:16j+16]. An all-zero block gets d = 0, q = 0, bsums = 0.
//
// len(x) must be a multiple of 256 and len(dst) = len(x)/256·292.
func QuantizeQ8_K(x []float32, dst []byte) {
	if len(x)%256 != 0 || len(dst) != len(x)/256*q8KBytes {
		panic("kern: QuantizeQ8_K: bad lengths")
	}
	quantizeQ8_K(x, dst)
}

func quantizeQ8_KGo(x []float32, dst []byte) {
	for len(x) >= 256 {
		b := dst[:q8KBytes]
		xs := x[:256]
		var mx, amax float32
		for _, v := range xs {
			if a := abs32(v); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			clear(b)
			x, dst = x[256:], dst[q8KBytes:]
			continue
		}
		iscale := -127 / mx
		qs := b[4:260]
		for j, v := range xs {
			qs[j] = byte(int8(min(127, nearestInt(iscale*v))))
		}
		for j := 0; j < 16; j++ {
			s := int32(0)
			for _, q := range qs[16*j : 16*j+16] {
				s += int32(int8(q))
			}
			binary.LittleEndian.PutUint16(b[260+2*j:], uint16(int16(s)))
		}
		binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
		x, dst = x[256:], dst[q8KBytes:]
	}
}

// ConvertF16 rounds x to binary16 (nearest even) into dst, 2 bytes each, as
// ggml-cpu's fp32→fp16 conversion (F16C) does for F16 weights' activations.
func ConvertF16(x []float32, dst []byte) {
	if len(dst) != 2*len(x) {
		panic("kern: ConvertF16: bad lengths")
	}
	convertF16(x, dst)
}

func convertF16Go(x []float32, dst []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(dst[2*i:], fp32ToFP16(v))
	}
}

// ConvertBF16 rounds x to bfloat16 (nearest even) into dst, as ggml-cpu's
// fp32→bf16 conversion does for BF16 weights' activations.
func ConvertBF16(x []float32, dst []byte) {
	if len(dst) != 2*len(x) {
		panic("kern: ConvertBF16: bad lengths")
	}
	for i, v := range x {
		binary.LittleEndian.PutUint16(dst[2*i:], fp32ToBF16(v))
	}
}

// ConvertF32 stores x as little-endian float32 bytes: the "activation
// format" of F32 weights, kept so every kernel sees its activation as bytes.
func ConvertF32(x []float32, dst []byte) {
	if len(dst) != 4*len(x) {
		panic("kern: ConvertF32: bad lengths")
	}
	for i, v := range x {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// x86Int32 converts v to int32 as VCVTPS2DQ does under the default rounding
// mode: nearest, ties to even; NaN and values outside int32 give the
// "integer indefinite" 0x80000000.
func x86Int32(v float32) int32 {
	r := math.RoundToEven(float64(v))
	if !(r >= -0x1p31 && r < 0x1p31) {
		return math.MinInt32
	}
	return int32(r)
}

// sat8 narrows with signed saturation, as VPACKSSDW then VPACKSSWB do.
func sat8(q int32) int8 { return int8(max(-128, min(127, q))) }

// x86Int8 is ggml-cpu's x86 float → int8 step: convert, then saturate.
func x86Int8(v float32) int8 { return sat8(x86Int32(v)) }

// nearestInt is ggml's nearest_int: adding 1.5·2^23 rounds to nearest even
// for |f| < 2^22 and leaves the integer in the low mantissa bits. It is
// reproduced bit for bit, including what it gives outside that range.
func nearestInt(f float32) int32 {
	i := int32(math.Float32bits(f + 12582912))
	return i&0x007fffff - 0x00400000
}

// The activation converters in use. The amd64 build replaces them with
// assembly when the CPU has AVX2; the replacements are tested bit-exact
// against these Go forms.
var (
	quantizeQ8_0 = quantizeQ8_0Go
	quantizeQ8_K = quantizeQ8_KGo
	convertF16   = convertF16Go
)
