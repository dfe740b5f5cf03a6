package ref

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func TestQ35ConvMatchesZeroPaddedConvolution(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ch, kernel, nT int
	}{
		{"kernel4", 5, 4, 9},
		{"kernel1", 3, 1, 4},
		{"shorter than kernel", 2, 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.kernel)))
			w := randVec(r, tc.ch*tc.kernel, 1)
			xs := make([][]float32, tc.nT)
			for i := range xs {
				xs[i] = randVec(r, tc.ch, 1)
			}
			state := make([]float32, tc.ch*(tc.kernel-1))
			for step, x := range xs {
				got := make([]float32, tc.ch)
				q35Conv(got, state, x, w, tc.kernel)
				for c := 0; c < tc.ch; c++ {
					var want float64
					for i := 0; i < tc.kernel; i++ {
						src := step - (tc.kernel - 1) + i
						if src >= 0 {
							want += float64(w[c*tc.kernel+i]) * float64(xs[src][c])
						}
					}
					if d := math.Abs(want - float64(got[c])); d > 1e-5 {
						t.Fatalf("q35Conv step %d channel %d = %g, want %g", step, c, got[c], want)
					}
				}
			}
		})
	}
}

func TestQ35L2Norm(t *testing.T) {
	x := []float32{3, 4}
	q35L2Norm(x, 1e-6)
	if maxAbsDiff(x, []float32{0.6, 0.8}) > 1e-7 {
		t.Errorf("q35L2Norm([3 4]) = %v, want [0.6 0.8]", x)
	}
	tiny := []float32{1e-8, 0}
	q35L2Norm(tiny, 1e-6) // the norm is below eps: divide by eps instead
	if math.Abs(float64(tiny[0])-1e-2) > 1e-9 {
		t.Errorf("q35L2Norm([1e-8 0], eps 1e-6) = %v, want [0.01 0]", tiny)
	}
}

func TestQ35GatedNorm(t *testing.T) {
	o := []float32{1, -1, 1, -1}
	w := []float32{1, 2, 3, 4}
	z := []float32{0, 1, -1, 100}
	q35GatedNorm(o, w, z, 0)
	want := []float32{0, float32(-2 * silu(1)), float32(3 * silu(-1)), -400}
	if maxAbsDiff(o, want) > 1e-4 {
		t.Errorf("q35GatedNorm = %v, want %v", o, want)
	}
}

// TestQ35DeltaStepMatchesMatrixForm checks the in-place rule against its
// matrix form S_t = exp(g)·S_{t-1}·(I − β k kᵀ) + β v kᵀ, o = S_t q / sqrt(dk).
func TestQ35DeltaStepMatchesMatrixForm(t *testing.T) {
	const dk, dv, steps = 6, 4, 5
	r := rand.New(rand.NewPCG(7, 7))
	S := make([]float32, dv*dk)
	M := make([]float64, dv*dk) // the matrix form, float64
	for step := 0; step < steps; step++ {
		q, k, v := randVec(r, dk, 1), randVec(r, dk, 1), randVec(r, dv, 1)
		q35L2Norm(q, 1e-6)
		q35L2Norm(k, 1e-6)
		g := float32(-r.Float64())
		beta := float32(r.Float64())
		out := make([]float32, dv)
		q35DeltaStep(S, out, q, k, v, g, beta)

		next := make([]float64, dv*dk)
		e := math.Exp(float64(g))
		for row := 0; row < dv; row++ {
			for c := 0; c < dk; c++ {
				// (S (I − β k kᵀ))[row][c] = S[row][c] − β (S[row]·k) k[c]
				var sk float64
				for j := 0; j < dk; j++ {
					sk += M[row*dk+j] * float64(k[j])
				}
				next[row*dk+c] = e*(M[row*dk+c]-float64(beta)*sk*float64(k[c])) + float64(beta)*float64(v[row])*float64(k[c])
			}
		}
		M = next
		for row := 0; row < dv; row++ {
			var o float64
			for c := 0; c < dk; c++ {
				o += M[row*dk+c] * float64(q[c])
			}
			o /= math.Sqrt(dk)
			if d := math.Abs(o - float64(out[row])); d > 1e-5 {
				t.Fatalf("q35DeltaStep step %d out[%d] = %g, matrix form %g", step, row, out[row], o)
			}
		}
	}
}

// With β = 1 and no decay the delta rule stores v under k exactly: S·k = v.
func TestQ35DeltaStepWritesValueUnderKey(t *testing.T) {
	const dk, dv = 8, 3
	r := rand.New(rand.NewPCG(3, 9))
	S := randVec(r, dk*dv, 1)
	k, v := randVec(r, dk, 1), randVec(r, dv, 1)
	q35L2Norm(k, 1e-6)
	q := append([]float32(nil), k...)
	out := make([]float32, dv)
	q35DeltaStep(S, out, q, k, v, 0, 1)
	want := make([]float32, dv)
	for i := range v {
		want[i] = float32(float64(v[i]) / math.Sqrt(dk))
	}
	if d := maxAbsDiff(out, want); d > 1e-5 {
		t.Errorf("q35DeltaStep(β=1, g=0, q=k) = %v, want v/sqrt(dk) = %v", out, want)
	}
}

func TestQ35RopeComponents(t *testing.T) {
	for _, tc := range []struct {
		name string
		sec  q35RopeSections
		want []int
	}{
		{"fixture [3,3,2,0]", q35RopeSections{3, 3, 2, 0}, []int{0, 1, 2, 0, 1, 2, 0, 1}},
		{"e section", q35RopeSections{1, 1, 1, 2}, []int{0, 1, 2, 3, 3}},
		{"t only", q35RopeSections{4, 0, 0, 0}, []int{0, 3, 3, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, w := range tc.want {
				if got := tc.sec.q35Component(i); got != w {
					t.Errorf("q35Component(%d) with %v = %d, want %d", i, tc.sec, got, w)
				}
			}
		})
	}
}

func TestQ35RopeIsNeoxRopeForText(t *testing.T) {
	const hd, nRot, base = 12, 8, 1e4
	r := rand.New(rand.NewPCG(5, 5))
	x := randVec(r, hd, 1)
	cos, sin := make([]float64, nRot/2), make([]float64, nRot/2)
	got := append([]float32(nil), x...)
	const p = 7
	q35Angles([4]int{p, p, p, 0}, nRot, q35RopeSections{2, 1, 1, 0}, base, cos, sin)
	q35Rotate(got, cos, sin)
	want := append([]float32(nil), x...)
	for i := 0; i < nRot/2; i++ {
		th := p * math.Pow(base, -2*float64(i)/nRot)
		a, b := float64(x[i]), float64(x[i+nRot/2])
		want[i] = float32(a*math.Cos(th) - b*math.Sin(th))
		want[i+nRot/2] = float32(a*math.Sin(th) + b*math.Cos(th))
	}
	if d := maxAbsDiff(got, want); d > 1e-6 {
		t.Errorf("q35Rotate(q35Angles(7)) = %v, want NEOX rope %v", got, want)
	}
	zero := append([]float32(nil), x...)
	q35Angles([4]int{}, nRot, q35RopeSections{2, 1, 1, 0}, base, cos, sin)
	q35Rotate(zero, cos, sin)
	if d := maxAbsDiff(zero, x); d != 0 {
		t.Errorf("rope at position 0 changed x by %g", d)
	}
	// A pair driven by the e component (position 0 for text) does not turn.
	eOnly := append([]float32(nil), x...)
	q35Angles([4]int{p, p, p, 0}, nRot, q35RopeSections{0, 0, 1, 3}, base, cos, sin)
	q35Rotate(eOnly, cos, sin)
	if eOnly[0] != x[0] || eOnly[nRot/2] != x[nRot/2] {
		t.Errorf("pair 0 under sections [0 0 1 3] turned: (%g,%g) → (%g,%g)", x[0], x[nRot/2], eOnly[0], eOnly[nRot/2])
	}
}
