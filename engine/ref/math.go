package ref

import "math"

// dot returns Σ a[i]·b[i], accumulated in float64. len(b) must be at least
// len(a).
func dot(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i]) * float64(b[i])
		s1 += float64(a[i+1]) * float64(b[i+1])
		s2 += float64(a[i+2]) * float64(b[i+2])
		s3 += float64(a[i+3]) * float64(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i]) * float64(b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// dot64 is dot over values already widened to float64: the same products
// (exact) summed in the same order, so the same result, without widening
// every value for every product (linear widens each row and token once).
func dot64(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// widen writes v as float64s into dst (nil: a new slice) and returns it.
func widen(v []float32, dst []float64) []float64 {
	if dst == nil {
		dst = make([]float64, len(v))
	}
	dst = dst[:len(v)]
	for i, f := range v {
		dst[i] = float64(f)
	}
	return dst
}

// rmsNorm writes dst = x / sqrt(mean(x²) + eps) ⊙ w (w nil: no weight).
// dst may alias x.
func rmsNorm(dst, x, w []float32, eps float64) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := 1 / math.Sqrt(ss/float64(len(x))+eps)
	if w == nil {
		for i, v := range x {
			dst[i] = float32(float64(v) * scale)
		}
		return
	}
	for i, v := range x {
		dst[i] = float32(float64(v) * scale * float64(w[i]))
	}
}

// silu is x·sigmoid(x).
func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// softmaxInPlace turns x into probabilities (float64, max-subtracted).
func softmaxInPlace(x []float64) {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(v - m)
		x[i] = e
		sum += e
	}
	for i := range x {
		x[i] /= sum
	}
}

// addTo adds b to a element-wise.
func addTo(a, b []float32) {
	b = b[:len(a)]
	for i := range a {
		a[i] += b[i]
	}
}

// matrix2 allocates n rows of m float32s in one block.
func matrix2(n, m int) [][]float32 {
	buf := make([]float32, n*m)
	out := make([][]float32, n)
	for i := range out {
		out[i] = buf[i*m : (i+1)*m : (i+1)*m]
	}
	return out
}
