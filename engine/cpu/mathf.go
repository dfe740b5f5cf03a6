package cpu

// Scalar float32 functions of the forward pass, in the arithmetic ggml's CPU
// ops use (float32 values, float64 only where ggml sums in ggml_float).

// sumSq returns Σ x² as ggml's rms_norm and l2_norm sum it: each square in
// float32, added in order to one float64 total.
func sumSq(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v * v)
	}
	return s
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
