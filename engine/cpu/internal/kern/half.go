package kern

import "math"

// fp16 converts an IEEE binary16 value to float32 exactly. It is the
// branch-light form used by the pure-Go kernels for block scales: the
// exponent is rebased by multiplying with 2^112, which is exact for normal
// and subnormal halves; infinities and NaNs are handled apart.
func fp16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	if h&0x7c00 == 0x7c00 {
		return math.Float32frombits(sign | 0x7f800000 | uint32(h&0x3ff)<<13)
	}
	f := math.Float32frombits(uint32(h&0x7fff)<<13) * 0x1p112
	return math.Float32frombits(math.Float32bits(f) | sign)
}

// fp16At reads the little-endian half at b[0:2].
func fp16At(b []byte) float32 { return fp16(uint16(b[0]) | uint16(b[1])<<8) }

// fp32ToFP16 rounds f to the nearest binary16 value, ties to even, as the
// x86 F16C instruction VCVTPS2PH (imm 0) and ggml's scalar conversion do.
// Overflow gives ±Inf; NaN stays NaN (quiet).
func fp32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal half (or zero): shift the full significand into place
		// and round to nearest even on the bits shifted out.
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		rest := m & (1<<shift - 1)
		q := m >> shift
		if rest > half || (rest == half && q&1 == 1) {
			q++
		}
		return sign | uint16(q)
	}
	q := uint32(e)<<10 | mant>>13
	rest := mant & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && q&1 == 1) {
		q++ // may carry into the exponent, up to Inf: that is the right rounding
	}
	return sign | uint16(q)
}

// bf16 converts a bfloat16 value to float32 exactly.
func bf16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// fp32ToBF16 rounds f to bfloat16, ties to even, keeping NaNs quiet, as
// ggml's GGML_FP32_TO_BF16 does.
func fp32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 64
	}
	return uint16((b + (0x7fff + (b>>16)&1)) >> 16)
}

// e8m0Half returns 2^(x-128): the MXFP4 block scale, halved because ggml's
// E2M1 value table holds doubled values.
func e8m0Half(x uint8) float32 {
	if x < 2 {
		return math.Float32frombits(0x00200000 << x)
	}
	return math.Float32frombits(uint32(x-1) << 23)
}

// ue4m3Half returns half the value of an unsigned E4M3 scale (NVFP4), with
// 0 and 0x7f (NaN) read as zero, as ggml's ggml_ue4m3_to_fp32 does.
func ue4m3Half(x uint8) float32 {
	if x == 0 || x == 0x7f {
		return 0
	}
	exp := int(x>>3) & 0xf
	man := float32(x & 7)
	var raw float32
	if exp == 0 {
		raw = float32(math.Ldexp(float64(man), -9))
	} else {
		raw = float32(math.Ldexp(float64(1+man/8), exp-7))
	}
	return raw * 0.5
}

// e8m0HalfTab[x] = e8m0Half(x), for the assembly kernels.
var e8m0HalfTab = func() (t [256]float32) {
	for i := range t {
		t[i] = e8m0Half(uint8(i))
	}
	return
}()
