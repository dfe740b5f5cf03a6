package cpu

import "math"

// The scalar definition of ggml-cpu's AVX2+FMA element-wise lanes, which
// engine/cpu computed with before kern had them: the reference the tests
// hold kern.SiLU, kern.SwiGLU, kern.SoftMax and kern.ExpSum to, bit for
// bit.

// fma32 is a float32 fused multiply-add (round(a·b + c) once): a·b is exact
// in float64 and the sum is rounded to float64 then to float32, which
// differs from a single rounding only when the float64 sum lands exactly
// halfway between two float32 values (about one case in 2²⁹).
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// vexpf is one lane of ggml_v_expf (ggml-cpu vec.h, AVX2+FMA: ARM's
// optimized-routines expf, max error 1.45 ulp + 0.5): x = n·ln2 + b with n
// rounded by adding 1.5·2²³, a degree-5 polynomial in b, the exponent
// added to the bits, and a two-factor scale when |n| > 126.
func vexpf(x float32) float32 {
	const r = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + 0x3f800000)
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, 0x1.ffffecp-1*b)
	an := abs32(n)
	if !(an > 126) {
		return fma32(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	if an > 192 {
		return s1 * s1
	}
	s2 := math.Float32frombits(e - g)
	return fma32(s2, j, s2) * s1
}

// vsilu is one lane of ggml_v_silu: x/(1 + ggml_v_expf(−x)).
func vsilu(x float32) float32 { return x / (1 + vexpf(0-x)) }

// tailSilu is ggml_silu_f32, which ggml uses past the last group of 8.
func tailSilu(x float32) float32 { return x / (1 + libmExpf(-x)) }

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// swigluRow is ggml_vec_swiglu_f32: dst = silu(g)·u.
func swigluRow(dst, g, u []float32) {
	g, u = g[:len(dst)], u[:len(dst)]
	n8 := len(dst) &^ 7
	for i := 0; i < n8; i++ {
		dst[i] = vsilu(g[i]) * u[i]
	}
	for i := n8; i < len(dst); i++ {
		dst[i] = tailSilu(g[i]) * u[i]
	}
}

// siluRow is ggml_vec_silu_f32, in place.
func siluRow(x []float32) {
	n8 := len(x) &^ 7
	for i := 0; i < n8; i++ {
		x[i] = vsilu(x[i])
	}
	for i := n8; i < len(x); i++ {
		x[i] = tailSilu(x[i])
	}
}

// expSumRow is ggml_vec_soft_max_f32 continuing the running sum: x[i] =
// e^(x[i] − mx), added to sum by groups of 8 (each group's lanes added as
// the AVX2 code adds them, then to the float64 total), the tail with libm's
// expf. Values from index valid on are masked: they become 0 and add 0, as
// ggml's −∞ mask does.
func expSumRow(x []float32, mx float32, valid int, sum float64) float64 {
	n8 := len(x) &^ 7
	for i := 0; i < n8; i += 8 {
		var v [8]float32
		for l := range v {
			if i+l < valid {
				v[l] = vexpf(x[i+l] - mx)
			}
			x[i+l] = v[l]
		}
		// _mm256 hi+lo, then movehl, then movehdup, as ggml reduces.
		a0, a1, a2, a3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
		sum += float64((a0 + a2) + (a1 + a3))
	}
	for i := n8; i < len(x); i++ {
		var e float32
		if i < valid {
			e = libmExpf(x[i] - mx)
		}
		x[i] = e
		sum += float64(e)
	}
	return sum
}
