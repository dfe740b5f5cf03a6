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
