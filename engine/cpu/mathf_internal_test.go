package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
)

// TestVexpf checks the ggml_v_expf lane against math.Exp within the error
// ggml documents for it (1.45 ulp + 0.5), including the two-factor scale
// near the ends of the range, and its special values: 0 below −103.97
// and for −∞, +∞ above 88.38, NaN for NaN.
func TestVexpf(t *testing.T) {
	ulp := func(v float32) float64 {
		return float64(math.Float32frombits(math.Float32bits(v)+1) - v)
	}
	worst, at := 0.0, float32(0)
	for x := float32(-103); x < 88.3; x += 0.000917 {
		want := float32(math.Exp(float64(x)))
		if want < 0x1p-126 { // subnormal results: not held to the ulp bound
			continue
		}
		if d := math.Abs(float64(vexpf(x)-want)) / ulp(want); d > worst {
			worst, at = d, x
		}
	}
	if worst > 2 {
		t.Errorf("vexpf: %.3g ulp at %g (ggml documents ≤ 1.95)", worst, at)
	}
	for _, c := range []struct {
		name string
		x    float32
		want float32
	}{
		{"zero", 0, 1},
		{"one", 1, float32(math.E)},
		{"-inf", float32(math.Inf(-1)), 0},
		{"below the range", -104, 0},
		{"+inf", float32(math.Inf(1)), float32(math.Inf(1))},
		{"above the range", 89, float32(math.Inf(1))},
	} {
		if got := vexpf(c.x); math.Abs(float64(got-c.want)) > 1e-7*float64(c.want) && !(got == c.want) {
			t.Errorf("vexpf(%s) = %g, want %g", c.name, got, c.want)
		}
	}
	if !math.IsNaN(float64(vexpf(float32(math.NaN())))) {
		t.Errorf("vexpf(NaN) is not NaN")
	}
}

// TestRowFunctions: the reference rows use the vector lane for groups of 8,
// libm's expf for the tail, and add each group's lanes in ggml's order; and
// kern's SiLU, SwiGLU, SoftMax and ExpSum (what the engine runs) equal them
// bit for bit, on every length of tail, with masks, running sums and values
// far out in both directions (the two-factor scale, overflow, underflow).
func TestRowFunctions(t *testing.T) {
	x := make([]float32, 21)
	for i := range x {
		x[i] = float32(i)/3 - 3
	}
	s := append([]float32(nil), x...)
	siluRow(s)
	for i, v := range x {
		want := vsilu(v)
		if i >= 16 {
			want = tailSilu(v)
		}
		if s[i] != want {
			t.Errorf("siluRow[%d] = %g, want %g", i, s[i], want)
		}
	}
	e := append([]float32(nil), x...)
	sum := expSumRow(e, 2, 19, 0)
	var want float64
	for g := 0; g < 16; g += 8 {
		var v [8]float32
		for l := range v {
			v[l] = vexpf(x[g+l] - 2)
		}
		want += float64(((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])))
	}
	for i := 16; i < 19; i++ {
		want += float64(libmExpf(x[i] - 2))
	}
	if sum != want || e[19] != 0 || e[20] != 0 || e[17] != libmExpf(x[17]-2) {
		t.Errorf("expSumRow: sum %v want %v; masked %g %g", sum, want, e[19], e[20])
	}

	rng := rand.New(rand.NewPCG(5, 6))
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for _, n := range []int{1, 7, 8, 9, 21, 64, 4864, 4867} {
		for _, scale := range []float64{1, 8, 60, 110} {
			g, u := make([]float32, n), make([]float32, n)
			for i := range g {
				g[i], u[i] = float32(rng.NormFloat64()*scale), float32(rng.NormFloat64())
			}
			name := fmt.Sprintf("%d values of scale %g", n, scale)
			want, got := make([]float32, n), make([]float32, n)
			swigluRow(want, g, u)
			kern.SwiGLU(got, g, u)
			for i := range want {
				if !same(got[i], want[i]) {
					t.Fatalf("kern.SwiGLU, %s: [%d] = %g, reference %g", name, i, got[i], want[i])
				}
			}
			copy(want, g)
			siluRow(want)
			kern.SiLU(got, g)
			for i := range want {
				if !same(got[i], want[i]) {
					t.Fatalf("kern.SiLU, %s: [%d] = %g, reference %g", name, i, got[i], want[i])
				}
			}
			mx := g[0]
			for _, v := range g {
				mx = max(mx, v)
			}
			for _, valid := range []int{n, n / 2, n - 1, 0} {
				copy(want, g)
				ws := expSumRow(want, mx, valid, 0.5)
				gs := kern.ExpSum(got, g, mx, valid, 0.5)
				if gs != ws {
					t.Fatalf("kern.ExpSum, %s, %d valid: sum %v, reference %v", name, valid, gs, ws)
				}
				for i := range want {
					if !same(got[i], want[i]) {
						t.Fatalf("kern.ExpSum, %s, %d valid: [%d] = %g, reference %g", name, valid, i, got[i], want[i])
					}
				}
			}
		}
	}
}
