package cpu

import (
	"math"
	"testing"
)

// TestExpf checks expf against math.Exp over its whole range, the special
// values, and the boundaries of its fast path.
func TestExpf(t *testing.T) {
	worst, at := 0.0, float32(0)
	for x := float32(-104); x < 89; x += 0.000917 {
		want := math.Exp(float64(x))
		got := float64(expf(x))
		if w32 := float32(want); w32 == 0 || math.IsInf(float64(w32), 0) {
			if got != float64(float32(want)) {
				t.Fatalf("expf(%g) = %g, want %g", x, got, float32(want))
			}
			continue
		}
		if want < 0x1p-126 { // subnormal results: math.Exp rounded to float32
			continue
		}
		if d := math.Abs(got-want) / want; d > worst {
			worst, at = d, x
		}
	}
	if worst > 2.4e-7 { // 2 ulp of float32
		t.Errorf("expf: relative error %.3g at %g (want ≤ 2.4e-7)", worst, at)
	}
	for _, c := range []struct {
		name string
		x    float32
		want float32
	}{
		{"zero", 0, 1},
		{"-inf", float32(math.Inf(-1)), 0},
		{"+inf", float32(math.Inf(1)), float32(math.Inf(1))},
		{"overflow", 89, float32(math.Inf(1))},
	} {
		if got := expf(c.x); got != c.want {
			t.Errorf("expf(%s) = %g, want %g", c.name, got, c.want)
		}
	}
	if !math.IsNaN(float64(expf(float32(math.NaN())))) {
		t.Errorf("expf(NaN) is not NaN")
	}
}
