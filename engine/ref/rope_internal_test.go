package ref

import (
	"math"
	"testing"

	"github.com/aprqa/apr/engine/model"
)

func ropeSpec(mode model.RopeType, dim int, sc model.RopeScaling) *model.Spec {
	if sc.FreqScale == 0 {
		sc.FreqScale, sc.Factor, sc.AttnFactor = 1, 1, 1
	}
	return &model.Spec{RopeType: mode, RopeDim: dim, RopeBase: 10000, RopeScaling: sc}
}

func ropeOnce(t *testing.T, s *model.Spec, x []float32, p int) []float32 {
	t.Helper()
	r, err := newRope(s)
	if err != nil {
		t.Fatal(err)
	}
	y := append([]float32(nil), x...)
	cos, sin := make([]float64, s.RopeDim/2), make([]float64, s.RopeDim/2)
	r.angles(p, cos, sin)
	r.rotate(y, cos, sin)
	return y
}

func ropeInput(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*1.7) + 0.1*float64(i))
	}
	return x
}

// TestRopePairs checks both orderings against the closed form: pair i turns
// by p·base^(-2i/dim); normal mode pairs (2i, 2i+1), NEOX (i, i+dim/2); values
// past dim are untouched.
func TestRopePairs(t *testing.T) {
	const head, dim, p = 12, 8, 5
	x := ropeInput(head)
	for _, mode := range []model.RopeType{model.RopeNorm, model.RopeNeox} {
		got := ropeOnce(t, ropeSpec(mode, dim, model.RopeScaling{}), x, p)
		want := append([]float32(nil), x...)
		for i := 0; i < dim/2; i++ {
			a, b := 2*i, 2*i+1
			if mode == model.RopeNeox {
				a, b = i, i+dim/2
			}
			th := p * math.Pow(10000, -2*float64(i)/dim)
			want[a] = float32(float64(x[a])*math.Cos(th) - float64(x[b])*math.Sin(th))
			want[b] = float32(float64(x[a])*math.Sin(th) + float64(x[b])*math.Cos(th))
		}
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-6 {
				t.Errorf("%s: value %d = %v, want %v", mode, i, got[i], want[i])
			}
		}
	}
}

// TestRopeLinearScaling: with linear scaling by factor 4, position 8 turns
// as unscaled position 2; YaRN with no extrapolation mix is linear scaling.
func TestRopeLinearScaling(t *testing.T) {
	x := ropeInput(16)
	plain := ropeOnce(t, ropeSpec(model.RopeNeox, 16, model.RopeScaling{}), x, 2)
	lin := model.RopeScaling{Type: "linear", Factor: 4, FreqScale: 0.25, AttnFactor: 1, OrigCtx: 4096}
	scaled := ropeOnce(t, ropeSpec(model.RopeNeox, 16, lin), x, 8)
	yarn0 := lin
	yarn0.Type, yarn0.BetaFast, yarn0.BetaSlow = "yarn", 32, 1
	yarnNoMix := ropeOnce(t, ropeSpec(model.RopeNeox, 16, yarn0), x, 8)
	for i := range plain {
		if math.Abs(float64(plain[i]-scaled[i])) > 1e-5 || scaled[i] != yarnNoMix[i] {
			t.Errorf("value %d: unscaled p=2 %v, linear ×4 p=8 %v, yarn without mix %v", i, plain[i], scaled[i], yarnNoMix[i])
		}
	}
	// With the mix, the fastest-turning pairs (below the correction range)
	// extrapolate: pair 0 turns as unscaled position 8, scaled by the YaRN
	// magnitude 1 + 0.1·ln(4).
	yarn := yarn0
	yarn.ExtFactor = 1
	got := ropeOnce(t, ropeSpec(model.RopeNeox, 16, yarn), x, 8)
	ref := ropeOnce(t, ropeSpec(model.RopeNeox, 16, model.RopeScaling{}), x, 8)
	m := 1 + 0.1*math.Log(4)
	for _, i := range []int{0, 8} {
		if math.Abs(float64(got[i])-m*float64(ref[i])) > 1e-5 {
			t.Errorf("yarn pair 0 value %d = %v, want %v", i, got[i], m*float64(ref[i]))
		}
	}
}
