package cli

import (
	"math/rand/v2"
	"testing"
)

// TestBootstrapCI: the interval of constant data is that constant; for
// spread data it holds the mean, lies within [min, max], narrows as the
// sample grows, and is the same for the same seed.
func TestBootstrapCI(t *testing.T) {
	if got := bootstrapCI([]float64{0.1, 0.1, 0.1}, 0.95, 2000, 1); got != [2]float64{0.1, 0.1} {
		t.Errorf("bootstrapCI(constant 0.1) = %v, want [0.1, 0.1]", got)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	width := func(n int) float64 {
		v := make([]float64, n)
		var sum float64
		for i := range v {
			v[i] = 100 + 10*rng.NormFloat64()
			sum += v[i]
		}
		ci := bootstrapCI(v, 0.95, 4000, 3)
		if mean := sum / float64(n); !(ci[0] <= mean && mean <= ci[1]) {
			t.Errorf("n=%d: CI %v does not hold the mean %g", n, ci, mean)
		}
		if again := bootstrapCI(v, 0.95, 4000, 3); again != ci {
			t.Errorf("n=%d: CI %v then %v with the same seed", n, ci, again)
		}
		return ci[1] - ci[0]
	}
	if w5, w500 := width(5), width(500); !(w500 < w5) {
		t.Errorf("CI width %g for 500 values is not below %g for 5", w500, w5)
	}
}
