package quant

import "math"

// FP16ToFP32 converts an IEEE half-precision value to float32 exactly, as
// ggml's ggml_compute_fp16_to_fp32 does: every finite half and infinity maps
// to the same value, and a NaN keeps its payload and comes back quiet (the
// float32 quiet bit is set, as ggml's multiply by 2^-112 does on x86).
func FP16ToFP32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f && mant == 0:
		return math.Float32frombits(sign | 0xff<<23)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | 0x400000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// FP32ToFP16 converts f to IEEE half precision with round-to-nearest-even,
// as ggml's GGML_FP32_TO_FP16 does: values beyond the half range become
// infinity, values below half the smallest subnormal become a signed zero,
// and every NaN becomes the quiet NaN 0x7e00 with f's sign.
func FP32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	// Unbiased exponent of f; float32 subnormals are far below the half range.
	e := exp - 127
	if e > 15 {
		return sign | 0x7c00
	}
	if e >= -14 { // normal half (rounding may carry into the exponent, even to infinity)
		h := uint32(e+15)<<10 | mant>>13
		rest := mant & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	// Subnormal half: value = m * 2^-24 with m = (1.mant) * 2^(e+24).
	if e < -25 {
		return sign // below half of the smallest subnormal
	}
	full := mant | 0x800000 // 24 significant bits, value = full * 2^(e-23)
	shift := uint32(-1 - e) // 2^-24 units: full >> (-(e-23) - 24) = full >> (-1-e)
	h := full >> shift
	rest := full & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rest > half || (rest == half && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// BF16ToFP32 converts a bfloat16 value to float32 exactly.
func BF16ToFP32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP32ToBF16 converts f to bfloat16 as ggml's ggml_compute_fp32_to_bf16
// does: round to nearest even (subnormals kept, overflow to infinity), and a
// NaN keeps its top payload bits and is forced quiet.
func FP32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + (u>>16)&1)) >> 16)
}

// e8m0Half returns half of the E8M0 scale e, that is 2^(e-128), as ggml's
// ggml_e8m0_to_fp32_half does (MXFP4 stores its E2M1 values doubled).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// ue4m3ToFP32 returns half of the unsigned E4M3 scale x (bias 7, 3 mantissa
// bits), as ggml's ggml_ue4m3_to_fp32 does; 0 and 0x7f (NaN) give 0. The top
// bit is ignored, exactly as there.
func ue4m3ToFP32(x uint8) float32 {
	if x == 0 || x == 0x7f {
		return 0
	}
	exp := int(x>>3) & 0xf
	man := int(x & 7)
	var raw float32
	if exp == 0 {
		raw = float32(math.Ldexp(float64(man), -9))
	} else {
		raw = float32(math.Ldexp(1+float64(man)/8, exp-7))
	}
	return raw * 0.5
}

// fp32ToUE4M3 encodes a positive scale as unsigned E4M3, as ggml's
// ggml_fp32_to_ue4m3 does (saturating at 448, rounding half up on the first
// dropped mantissa bit, non-positive and NaN giving 0).
func fp32ToUE4M3(x float32) uint8 {
	if !(x > 0) {
		return 0
	}
	if x > 448 {
		x = 448
	}
	bits := math.Float32bits(x)
	fexp := int(bits>>23&0xff) - 127
	fman := int(bits>>20) & 7
	uexp := fexp + 7
	if uexp <= 0 {
		man := int32(x*512 + 0.5)
		if man > 7 {
			man = 7
		}
		if man < 1 {
			return 0
		}
		return uint8(man)
	}
	if uexp >= 15 {
		return 0x7e
	}
	uman := fman + int(bits>>19)&1
	if uman > 7 {
		uman = 0
		uexp++
		if uexp >= 15 {
			return 0x7e
		}
	}
	return uint8(uexp<<3 | uman)
}
