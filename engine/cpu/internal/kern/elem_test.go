package kern_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
)

// The engine's element-wise forms (engine/cpu/ggmlmath.go at the time of
// writing: ggml lane for lane, the float32 fma through float64), kept here
// as the reference the kern functions must reproduce bit for bit.

func engFma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

func engVexpf(x float32) float32 {
	const r = 0x1.8p23
	z := engFma32(x, 0x1.715476p+0, r)
	n := z - r
	b := engFma32(-n, 0x1.7f7d1cp-20, engFma32(-n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + 0x3f800000)
	u := b * b
	j := engFma32(engFma32(engFma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, engFma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, 0x1.ffffecp-1*b)
	an := float32(math.Abs(float64(n)))
	if !(an > 126) {
		return engFma32(j, k, k)
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
	return engFma32(s2, j, s2) * s1
}

func engExpf(x float32) float32  { return float32(math.Exp(float64(x))) }
func engVsilu(x float32) float32 { return x / (1 + engVexpf(0-x)) }
func engSilu(x float32) float32  { return x / (1 + engExpf(-x)) }

func engSwiglu(dst, g, u []float32) {
	n8 := len(dst) &^ 7
	for i := range dst {
		if i < n8 {
			dst[i] = engVsilu(g[i]) * u[i]
		} else {
			dst[i] = engSilu(g[i]) * u[i]
		}
	}
}

func engExpSum(x []float32, mx float32, valid int, sum float64) float64 {
	n8 := len(x) &^ 7
	for i := 0; i < n8; i += 8 {
		var v [8]float32
		for l := range v {
			if i+l < valid {
				v[l] = engVexpf(x[i+l] - mx)
			}
			x[i+l] = v[l]
		}
		a0, a1, a2, a3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
		sum += float64((a0 + a2) + (a1 + a3))
	}
	for i := n8; i < len(x); i++ {
		var e float32
		if i < valid {
			e = engExpf(x[i] - mx)
		}
		x[i] = e
		sum += float64(e)
	}
	return sum
}

func same(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b) }

func elemRow(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

var elemLengths = []int{0, 1, 7, 8, 9, 15, 16, 17, 64, 896, 4867}

// TestSwiGLUAndSiLUMatchEngine: SwiGLU and SiLU give bit for bit the
// engine's ggml forms (vector lane for whole groups of 8, libm expf past
// them), for lengths with and without a tail and activations from small to
// saturating.
func TestSwiGLUAndSiLUMatchEngine(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, n := range elemLengths {
		for _, scale := range []float64{0.5, 4, 40} {
			t.Run(fmt.Sprintf("n=%d/scale=%g", n, scale), func(t *testing.T) {
				g, u := elemRow(rng, n, scale), elemRow(rng, n, 1)
				got, want := make([]float32, n), make([]float32, n)
				kern.SwiGLU(got, g, u)
				engSwiglu(want, g, u)
				for i := range got {
					if !same(got[i], want[i]) {
						t.Fatalf("SwiGLU[%d] (gate %g, up %g) = %g (%#08x), engine %g (%#08x)", i, g[i], u[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
				kern.SiLU(got, g)
				for i := range got {
					w := engSilu(g[i])
					if i < n&^7 {
						w = engVsilu(g[i])
					}
					if !same(got[i], w) {
						t.Fatalf("SiLU[%d] (%g) = %g, engine %g", i, g[i], got[i], w)
					}
				}
			})
		}
	}
}

// TestSoftMaxMatchesEngine: SoftMax and ExpSum (masked tails, a running
// sum) give the engine's values and float64 sum bit for bit.
func TestSoftMaxMatchesEngine(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	for _, n := range elemLengths {
		for _, valid := range []int{n, n - 1, n / 2, 3, 0} {
			t.Run(fmt.Sprintf("n=%d/valid=%d", n, valid), func(t *testing.T) {
				x := elemRow(rng, n, 6)
				mx := float32(math.Inf(-1))
				for _, v := range x {
					mx = max(mx, v)
				}
				want := append([]float32(nil), x...)
				wsum := engExpSum(want, mx, valid, 0.5)
				got := make([]float32, n)
				gsum := kern.ExpSum(got, x, mx, valid, 0.5)
				if gsum != wsum {
					t.Fatalf("ExpSum sum = %v, engine %v", gsum, wsum)
				}
				for i := range got {
					if !same(got[i], want[i]) {
						t.Fatalf("ExpSum[%d] (%g − %g) = %g, engine %g", i, x[i], mx, got[i], want[i])
					}
				}
				if valid == n {
					if s, w := kern.SoftMax(got, x, mx), engExpSum(append([]float32(nil), x...), mx, n, 0); s != w {
						t.Fatalf("SoftMax sum = %v, engine %v", s, w)
					}
				}
			})
		}
	}
}

// TestExpSumPiecesEqualWhole: a row split into pieces of 64 values (the
// engine's KV tiles) and summed through ExpSum's running sum gives the
// values and the sum of one call over the row.
func TestExpSumPiecesEqualWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	x := elemRow(rng, 5*64, 3)
	const valid = 4*64 + 21
	whole := make([]float32, len(x))
	want := kern.ExpSum(whole, x, 2, valid, 0)
	pieces := make([]float32, len(x))
	var got float64
	for p := 0; p < 5; p++ {
		got = kern.ExpSum(pieces[64*p:64*(p+1)], x[64*p:64*(p+1)], 2, valid-64*p, got)
	}
	if got != want {
		t.Errorf("ExpSum in pieces: sum %v, whole row %v", got, want)
	}
	for i := range x {
		if !same(pieces[i], whole[i]) {
			t.Fatalf("ExpSum in pieces [%d] = %g, whole row %g", i, pieces[i], whole[i])
		}
		if i >= valid && whole[i] != 0 {
			t.Fatalf("ExpSum[%d] past valid = %g, want 0", i, whole[i])
		}
	}
}

// TestElemInPlace: dst may be the input.
func TestElemInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(57, 58))
	g, u := elemRow(rng, 37, 3), elemRow(rng, 37, 1)
	want := make([]float32, len(g))
	kern.SwiGLU(want, g, u)
	got := append([]float32(nil), g...)
	kern.SwiGLU(got, got, u)
	for i := range got {
		if !same(got[i], want[i]) {
			t.Fatalf("SwiGLU in place [%d] = %g, want %g", i, got[i], want[i])
		}
	}
	s := append([]float32(nil), g...)
	want2 := make([]float32, len(g))
	ws := kern.SoftMax(want2, g, 1)
	if gs := kern.SoftMax(s, s, 1); gs != ws {
		t.Fatalf("SoftMax in place sum = %v, want %v", gs, ws)
	}
	for i := range s {
		if !same(s[i], want2[i]) {
			t.Fatalf("SoftMax in place [%d] = %g, want %g", i, s[i], want2[i])
		}
	}
}

// TestElemGuardValues: known values of each function.
func TestElemGuardValues(t *testing.T) {
	inf := float32(math.Inf(1))
	x := []float32{0, 1, -1, 30, -30, 100, -100, inf, -inf, 0, 0, 2, 0.5}
	got := make([]float32, len(x))
	kern.SiLU(got, x)
	for i, v := range x {
		want := float64(v) / (1 + math.Exp(-float64(v)))
		switch {
		case v == -inf || v == -100:
			want = 0 // ggml: −x/(1+e^x) underflows or is x/∞
		case v == inf:
			want = math.Inf(1)
		}
		if d := math.Abs(float64(got[i]) - want); d > 4e-7*math.Abs(want) && !(math.IsInf(want, 1) && math.IsInf(float64(got[i]), 1)) {
			t.Errorf("SiLU(%g) = %g, want %g", v, got[i], want)
		}
	}
	e := make([]float32, 16)
	ones := make([]float32, 16)
	for i := range ones {
		ones[i] = 3
	}
	if s := kern.SoftMax(e, ones, 3); s != 16 {
		t.Errorf("SoftMax of 16 equal values: sum %v, want 16", s)
	}
	for i, v := range e {
		if v != 1 {
			t.Errorf("SoftMax of equal values [%d] = %g, want 1", i, v)
		}
	}
	masked := []float32{0, -inf, 0, -inf, 0, -inf, 0, -inf, 0}
	if s := kern.SoftMax(e[:9], masked, 0); s != 5 {
		t.Errorf("SoftMax with −∞ entries: sum %v, want 5", s)
	}
	sg := make([]float32, 3)
	kern.Sigmoid(sg, []float32{0, 100, -100})
	if sg[0] != 0.5 || sg[1] != 1 || sg[2] > 1e-43 {
		t.Errorf("Sigmoid(0, 100, −100) = %v, want [0.5 1 ~0]", sg)
	}
}

func TestElemPanicsOnBadLengths(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"SiLU", func() { kern.SiLU(make([]float32, 3), make([]float32, 4)) }},
		{"SwiGLU", func() { kern.SwiGLU(make([]float32, 4), make([]float32, 4), make([]float32, 3)) }},
		{"SoftMax", func() { kern.SoftMax(make([]float32, 3), make([]float32, 4), 0) }},
		{"ExpSum", func() { kern.ExpSum(make([]float32, 5), make([]float32, 4), 0, 4, 0) }},
		{"Sigmoid", func() { kern.Sigmoid(make([]float32, 5), make([]float32, 4)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with mismatched lengths did not panic", c.name)
				}
			}()
			c.f()
		})
	}
}

// BenchmarkElem: the element-wise functions on a qwen2.5-0.5b FFN row
// (4864 values) and an attention row of 512 scores, against the engine's
// scalar forms.
func BenchmarkElem(b *testing.B) {
	rng := rand.New(rand.NewPCG(59, 60))
	g, u := elemRow(rng, 4864, 3), elemRow(rng, 4864, 1)
	dst := make([]float32, 4864)
	b.Run("SwiGLU/4864", func(b *testing.B) {
		b.SetBytes(4 * 4864)
		for b.Loop() {
			kern.SwiGLU(dst, g, u)
		}
	})
	b.Run("SwiGLU/4864/engine-go", func(b *testing.B) {
		b.SetBytes(4 * 4864)
		for b.Loop() {
			engSwiglu(dst, g, u)
		}
	})
	s := elemRow(rng, 512, 3)
	b.Run("SoftMax/512", func(b *testing.B) {
		b.SetBytes(4 * 512)
		for b.Loop() {
			kern.SoftMax(dst[:512], s, 9)
		}
	})
	b.Run("SoftMax/512/engine-go", func(b *testing.B) {
		b.SetBytes(4 * 512)
		for b.Loop() {
			copy(dst, s)
			engExpSum(dst[:512], 9, 512, 0)
		}
	})
}
