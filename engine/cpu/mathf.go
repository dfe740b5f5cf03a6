package cpu

import "math"

// Scalar float32 functions of the forward pass, in the arithmetic ggml's CPU
// ops use (float32 values, float64 only where ggml sums in ggml_float).

// expf returns e^x for float32 x within about 1 ulp: Cody–Waite reduction
// x = n·ln2 + r, |r| ≤ ln2/2, a degree-6 polynomial for e^r (the Cephes
// expf coefficients), then the exponent set from n. n is rounded by adding
// 1.5·2²³, which leaves it in the low bits of the sum. Outside (−87, 88),
// where the result is subnormal, overflows, or x is ±Inf, it defers to
// math.Exp. NaN gives NaN.
func expf(x float32) float32 {
	if !(x > -87 && x < 88) {
		return float32(math.Exp(float64(x)))
	}
	const magic = 12582912 // 1.5·2²³
	t := x*1.44269504088896341 + magic
	fn := t - magic
	n := int32(math.Float32bits(t)) - 0x4B400000
	r := x - fn*0.693359375
	r -= fn * -2.12194440e-4
	z := r * r
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*z + r + 1
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// silu is x·sigmoid(x) as ggml_silu_f32: x/(1+e^(−x)).
func silu(x float32) float32 { return x / (1 + expf(-x)) }

// sigmoid is 1/(1+e^(−x)).
func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

// softplus is ggml's: x above 20 passes through, else log(1+eˣ).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// sumSq returns Σ x² accumulated in float64, as ggml's norms do.
func sumSq(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a, b, c, d := x[i], x[i+1], x[i+2], x[i+3]
		s0 += float64(a * a)
		s1 += float64(b * b)
		s2 += float64(c * c)
		s3 += float64(d * d)
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i] * x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// dot32 returns Σ a·b in float32 with eight accumulators.
func dot32(a, b []float32) float32 {
	b = b[:len(a)]
	var s [8]float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s[0] += a[i] * b[i]
		s[1] += a[i+1] * b[i+1]
		s[2] += a[i+2] * b[i+2]
		s[3] += a[i+3] * b[i+3]
		s[4] += a[i+4] * b[i+4]
		s[5] += a[i+5] * b[i+5]
		s[6] += a[i+6] * b[i+6]
		s[7] += a[i+7] * b[i+7]
	}
	for ; i < len(a); i++ {
		s[0] += a[i] * b[i]
	}
	return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))
}
