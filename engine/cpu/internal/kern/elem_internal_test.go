package kern

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// elemInputs returns groups of 8 values covering every path of ggml_v_expf:
// ordinary values, the two-factor scale (|n| in (126, 192]) and the
// flush (|n| > 192) on both sides, the ends of the range (88.38, −103.97),
// zeros, subnormals, infinities, NaN and random bit patterns.
func elemInputs() []float32 {
	rng := rand.New(rand.NewPCG(41, 42))
	var x []float32
	for i := 0; i < 1<<16; i++ {
		x = append(x, float32(rng.NormFloat64()*4))
	}
	for i := 0; i < 1<<14; i++ {
		x = append(x, float32(rng.Float64()*300-150))
	}
	for v := float32(-110); v < 95; v += 0.0137 {
		x = append(x, v)
	}
	for i := 0; i < 1<<14; i++ {
		x = append(x, math.Float32frombits(rng.Uint32()))
	}
	for _, c := range []float32{0, float32(math.Copysign(0, -1)), 88.37, 88.38, 88.39, 88.7228, 88.7229, -87.33, -87.34, -103.97, -103.98, -104,
		126 * 0.6931472, -126 * 0.6931472, 192 * 0.6931472, -192 * 0.6931472, 0x1p-149, -0x1p-149, 0x1p-126,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32} {
		for l := 0; l < 8; l++ {
			x = append(x, c)
		}
	}
	return x[:len(x)&^7]
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestElemGroupsAsmMatchGo: the group kernels in use (assembly on AVX2)
// give bit for bit what their Go twins give, for every input class.
func TestElemGroupsAsmMatchGo(t *testing.T) {
	x := elemInputs()
	u := make([]float32, len(x))
	rng := rand.New(rand.NewPCG(43, 44))
	for i := range u {
		u[i] = float32(rng.NormFloat64())
	}
	got, want := make([]float32, len(x)), make([]float32, len(x))
	siluGroups(got, x)
	siluGroupsGo(want, x)
	for i := range x {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("siluGroups(%g) = %g (%#08x), Go twin %g (%#08x)", x[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	swigluGroups(got, x, u)
	swigluGroupsGo(want, x, u)
	for i := range x {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("swigluGroups(%g, %g) = %g, Go twin %g", x[i], u[i], got[i], want[i])
		}
	}
	// Softmax: finite inputs below a max, every valid count of one group.
	f := make([]float32, 0, len(x))
	for _, v := range x {
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) && math.Abs(float64(v)) < 1e30 {
			f = append(f, v)
		}
	}
	f = f[:len(f)&^7]
	for _, mx := range []float32{0, 3.5, -20, 100} {
		for _, valid := range []int{len(f), len(f) - 3, 5, 0, -2} {
			gs := expSumGroups(got[:len(f)], f, mx, valid, 1.25)
			ws := expSumGroupsGo(want[:len(f)], f, mx, valid, 1.25)
			if math.Float64bits(gs) != math.Float64bits(ws) && !(gs != gs && ws != ws) {
				t.Fatalf("expSumGroups(max %g, valid %d) sum = %v, Go twin %v", mx, valid, gs, ws)
			}
			for i := range f {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("expSumGroups(max %g, valid %d)[%d] = %g, Go twin %g", mx, valid, i, got[i], want[i])
				}
			}
		}
	}
}

// TestVexpfWithinGGMLBound: the lane stays within ggml's documented error
// (1.45 ulp + 0.5) of the exponential over its normal range, and has
// ggml's special values.
func TestVexpfWithinGGMLBound(t *testing.T) {
	worst, at := 0.0, float32(0)
	for x := float32(-87.3); x < 88.3; x += 0.000917 {
		want := math.Exp(float64(x))
		w32 := float32(want)
		ulp := float64(math.Nextafter32(w32, float32(math.Inf(1))) - w32)
		if d := math.Abs(float64(vexpf(x))-want) / ulp; d > worst {
			worst, at = d, x
		}
	}
	if worst > 1.96 {
		t.Errorf("vexpf: %.3g ulp at %g, ggml documents ≤ 1.95", worst, at)
	}
	for _, c := range []struct {
		name    string
		x, want float32
	}{
		{"0", 0, 1}, {"-0", float32(math.Copysign(0, -1)), 1}, {"-inf", float32(math.Inf(-1)), 0},
		{"-104", -104, 0}, {"+inf", float32(math.Inf(1)), float32(math.Inf(1))}, {"89", 89, float32(math.Inf(1))},
	} {
		if got := vexpf(c.x); got != c.want {
			t.Errorf("vexpf(%s) = %g, want %g", c.name, got, c.want)
		}
	}
	if v := vexpf(float32(math.NaN())); v == v {
		t.Errorf("vexpf(NaN) = %g, want NaN", v)
	}
}

// TestFma32IsRoundedOnce: fma32 equals the exact a·b + c rounded once to
// float32 (nearest even), including sums whose float64 rounding lands on a
// float32 midpoint.
func TestFma32IsRoundedOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	check := func(a, b, c float32) {
		t.Helper()
		if got, want := fma32(a, b, c), exact(a, b, c); !sameBits(got, want) && !(got == 0 && want == 0) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#08x), exact %g (%#08x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	for i := 0; i < 200000; i++ {
		a := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
		b := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
		c := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
		check(a, b, c)
	}
	// Double-rounding traps: c = 1 + 2^-24 (a float32 midpoint after
	// rounding to float64) plus a tiny product of either sign.
	for _, p := range []float32{0x1p-60, -0x1p-60, 0x1p-80, -0x1p-80} {
		check(p, 1, 1+0x1p-23)
		check(p, 0x1p-1, 0x1.000002p0)
		check(0x1.000002p0, 0x1.000002p0, -1) // exact square past the midpoint
	}
	check(0x1.fffffep0, 0x1.000002p0, 0x1p-60)
	check(0x1.000002p0, 0x1.fffffep-1, -0x1p-80)
}
