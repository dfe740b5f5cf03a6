package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
)

func testBackend(tb testing.TB, threads int) *backend {
	tb.Helper()
	be, err := newBackend(threads)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(be.close)
	return be
}

func randBuf(rng *rand.Rand, rows, cols int) *buf {
	b := &buf{d: make([]float32, rows*cols), rows: rows, cols: cols, stride: cols}
	for i := range b.d {
		b.d[i] = float32(rng.NormFloat64())
	}
	return b
}

// vec makes an element-wise weight of the values v.
func vec(v []float32) graph.Weight {
	return &vector{t: &model.Tensor{Name: "test", Type: quant.F32, Shape: []int64{int64(len(v))}}, v: v}
}

// ropeRef rotates one head by the closed form of ggml's rope in float64:
// θ_i = p·base^(−2i/n) / factor_i, YaRN-mixed when ext ≠ 0.
func ropeRef(x []float64, p int, r *graph.Rope, ff []float32) {
	n := r.NRot
	corr := [2]float64{}
	if r.ExtFactor != 0 {
		cd := func(b float64) float64 {
			return float64(n) * math.Log(float64(r.OrigCtx)/(b*2*math.Pi)) / (2 * math.Log(float64(r.Base)))
		}
		corr = [2]float64{max(0, math.Floor(cd(float64(r.BetaFast)))), min(float64(n-1), math.Ceil(cd(float64(r.BetaSlow))))}
	}
	total := r.Sections[0] + r.Sections[1] + r.Sections[2] + r.Sections[3]
	for i := 0; i < n/2; i++ {
		extrap := float64(p) * math.Pow(float64(r.Base), -2*float64(i)/float64(n))
		if r.Mode == model.RopeIMRope && total > 0 {
			sec, s := i%total, r.Sections
			if !(sec%3 == 1 && sec < 3*s[1] || sec%3 == 2 && sec < 3*s[2] || sec%3 == 0 && sec < 3*s[0]) {
				extrap = 0
			}
		}
		if ff != nil {
			extrap /= float64(ff[i])
		}
		theta := float64(r.FreqScale) * extrap
		ms := float64(r.AttnFactor)
		if r.ExtFactor != 0 {
			y := (float64(i) - corr[0]) / max(0.001, corr[1]-corr[0])
			ramp := (1 - min(1, max(0, y))) * float64(r.ExtFactor)
			theta = theta*(1-ramp) + extrap*ramp
			ms *= 1 + 0.1*math.Log(1/float64(r.FreqScale))
		}
		c, s := math.Cos(theta)*ms, math.Sin(theta)*ms
		a, b := i, i+n/2
		if r.Mode == model.RopeNorm {
			a, b = 2*i, 2*i+1
		}
		x0, x1 := x[a], x[b]
		x[a], x[b] = x0*c-x1*s, x0*s+x1*c
	}
}

// TestRope checks every RoPE mode, frequency factors, partial rotation and
// YaRN against the closed form, for positions up to 1000.
func TestRope(t *testing.T) {
	be := testBackend(t, 2)
	ff := make([]float32, 16)
	for i := range ff {
		ff[i] = 1 + float32(i)/4
	}
	base := graph.Rope{NRot: 32, HeadDim: 32, Base: 10000, FreqScale: 1, AttnFactor: 1, OrigCtx: 4096, BetaFast: 32, BetaSlow: 1}
	cases := []struct {
		name string
		mod  func(r *graph.Rope)
		ff   []float32
	}{
		{"norm", func(r *graph.Rope) { r.Mode = model.RopeNorm }, nil},
		{"neox", func(r *graph.Rope) { r.Mode = model.RopeNeox }, nil},
		{"neox partial", func(r *graph.Rope) { r.Mode, r.NRot, r.HeadDim = model.RopeNeox, 16, 48 }, nil},
		{"norm with factors", func(r *graph.Rope) { r.Mode = model.RopeNorm; r.Factors = vec(ff) }, ff},
		{"linear scaling", func(r *graph.Rope) { r.Mode, r.FreqScale = model.RopeNeox, 0.25 }, nil},
		{"yarn", func(r *graph.Rope) {
			r.Mode, r.FreqScale, r.ExtFactor, r.AttnFactor, r.Base = model.RopeNeox, 0.125, 1, 1, 1e6
		}, nil},
		{"imrope text", func(r *graph.Rope) {
			r.Mode, r.NRot, r.HeadDim, r.Base, r.Sections = model.RopeIMRope, 16, 64, 1e7, [4]int{3, 3, 2, 0}
		}, nil},
		{"imrope with an e section", func(r *graph.Rope) {
			r.Mode, r.NRot, r.HeadDim, r.Sections = model.RopeIMRope, 32, 32, [4]int{2, 2, 2, 4}
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := base
			c.mod(&r)
			rng := rand.New(rand.NewPCG(1, 2))
			heads := 3
			x := randBuf(rng, 40, heads*r.HeadDim)
			want := make([][]float64, x.rows)
			const pos0 = 960
			for row := range want {
				want[row] = make([]float64, x.cols)
				for i, v := range x.row(row) {
					want[row][i] = float64(v)
				}
				for h := 0; h < heads; h++ {
					ropeRef(want[row][h*r.HeadDim:(h+1)*r.HeadDim], pos0+row, &r, c.ff)
				}
			}
			be.Rope(x, pos0, &r)
			worst := 0.0
			for row := range want {
				for i, v := range x.row(row) {
					worst = max(worst, math.Abs(float64(v)-want[row][i]))
				}
			}
			// float32 angles built by repeated multiplication, as ggml does,
			// drift by ~1e-4 rad at position 1000 (measured ≤ 8.5e-5).
			t.Logf("%s worst %.3g", c.name, worst)
			if worst > 5e-4 {
				t.Errorf("Rope %s: largest difference from the closed form %.3g", c.name, worst)
			}
		})
	}
}

// TestOps checks the element-wise and small ops against plain float64
// loops.
func TestOps(t *testing.T) {
	be := testBackend(t, 2)
	rng := rand.New(rand.NewPCG(3, 4))
	close := func(name string, got []float32, want []float64, tol float64) {
		t.Helper()
		for i := range want {
			if d := math.Abs(float64(got[i]) - want[i]); d > tol*(1+math.Abs(want[i])) {
				t.Fatalf("%s[%d] = %g, want %g", name, i, got[i], want[i])
			}
		}
	}
	t.Run("rmsnorm per head", func(t *testing.T) {
		x := randBuf(rng, 5, 64)
		w := make([]float32, 16)
		for i := range w {
			w[i] = float32(rng.Float64() + 0.5)
		}
		d := randBuf(rng, 5, 64)
		be.RMSNorm(d, x, vec(w), 16, 1e-6)
		for r := 0; r < 5; r++ {
			want := make([]float64, 64)
			for g := 0; g < 4; g++ {
				var ss float64
				for _, v := range x.row(r)[g*16 : g*16+16] {
					ss += float64(v) * float64(v)
				}
				sc := 1 / math.Sqrt(ss/16+1e-6)
				for i := 0; i < 16; i++ {
					want[g*16+i] = float64(x.row(r)[g*16+i]) * sc * float64(w[i])
				}
			}
			close("RMSNorm", d.row(r), want, 1e-6)
		}
	})
	t.Run("topk", func(t *testing.T) {
		x := randBuf(rng, 7, 33)
		x.row(2)[5], x.row(2)[9] = 9, 9 // a tie keeps the lower index first
		k := 4
		ids, vals := make([]int32, 7*k), make([]float32, 7*k)
		be.TopK(x, k, ids, vals)
		for r := 0; r < 7; r++ {
			idx := make([]int, 33)
			for i := range idx {
				idx[i] = i
			}
			row := x.row(r)
			sort.SliceStable(idx, func(a, b int) bool { return row[idx[a]] > row[idx[b]] })
			for j := 0; j < k; j++ {
				if int(ids[r*k+j]) != idx[j] || vals[r*k+j] != row[idx[j]] {
					t.Fatalf("TopK row %d slot %d: %d (%g), want %d (%g)", r, j, ids[r*k+j], vals[r*k+j], idx[j], row[idx[j]])
				}
			}
		}
	})
	t.Run("deinterleave", func(t *testing.T) {
		src := randBuf(rng, 3, 24)
		a, b := randBuf(rng, 3, 12), randBuf(rng, 3, 12)
		be.Deinterleave(src, 4, a, b)
		for r := 0; r < 3; r++ {
			for h := 0; h < 3; h++ {
				for i := 0; i < 4; i++ {
					if a.row(r)[h*4+i] != src.row(r)[h*8+i] || b.row(r)[h*4+i] != src.row(r)[h*8+4+i] {
						t.Fatalf("Deinterleave row %d head %d", r, h)
					}
				}
			}
		}
	})
	t.Run("softmax", func(t *testing.T) {
		x := randBuf(rng, 2, 50)
		want := make([][]float64, 2)
		for r := range want {
			var mx, sum float64 = math.Inf(-1), 0
			for _, v := range x.row(r) {
				mx = max(mx, float64(v))
			}
			for _, v := range x.row(r) {
				sum += math.Exp(float64(v) - mx)
			}
			for _, v := range x.row(r) {
				want[r] = append(want[r], math.Exp(float64(v)-mx)/sum)
			}
		}
		be.Softmax(x)
		for r := range want {
			close("Softmax", x.row(r), want[r], 1e-6)
		}
	})
	t.Run("row ops spread over threads equal one thread", func(t *testing.T) {
		one := testBackend(t, 1)
		const rows, cols = 200, 1024 // above forRows' threshold
		w := make([]float32, cols)
		for i := range w {
			w[i] = float32(rng.Float64() + 0.5)
		}
		rp := &graph.Rope{Mode: model.RopeNeox, NRot: 64, HeadDim: 128, Base: 10000, FreqScale: 1, AttnFactor: 1}
		x, y := randBuf(rng, rows, cols), randBuf(rng, rows, cols)
		var outs [2][]float32
		for i, b := range []*backend{one, be} {
			d := &buf{d: append([]float32(nil), x.d...), rows: rows, cols: cols, stride: cols}
			n := randBuf(rng, rows, cols)
			b.Add(d, y)
			b.RMSNorm(n, d, vec(w), cols, 1e-6)
			b.Rope(n, 17, rp)
			b.SwiGLU(d, n, y)
			b.SiLU(d)
			outs[i] = d.d
		}
		for i := range outs[0] {
			if outs[0][i] != outs[1][i] {
				t.Fatalf("value %d: 1 thread %g, 2 threads %g", i, outs[0][i], outs[1][i])
			}
		}
	})
	t.Run("weighted sum", func(t *testing.T) {
		y := randBuf(rng, 6, 10)
		w := []float32{0.5, 0.25, 0.25, 1, -1, 2}
		d := randBuf(rng, 2, 10)
		be.WeightedSum(d, y, w, 3)
		for tkn := 0; tkn < 2; tkn++ {
			want := make([]float64, 10)
			for j := 0; j < 3; j++ {
				for i := range want {
					want[i] += float64(w[tkn*3+j]) * float64(y.row(tkn*3 + j)[i])
				}
			}
			close("WeightedSum", d.row(tkn), want, 1e-6)
		}
	})
}

// TestConvAndDeltaRule checks the Gated DeltaNet recurrences against plain
// float64 loops, fed in one batch and in two pieces (the state carries).
func TestConvAndDeltaRule(t *testing.T) {
	be := testBackend(t, 2)
	rng := rand.New(rand.NewPCG(5, 6))
	const K, ch, n = 4, 24, 9
	wv := make([]float32, K*ch)
	for i := range wv {
		wv[i] = float32(rng.NormFloat64())
	}
	w := &vector{t: &model.Tensor{Name: "conv", Type: quant.F32, Shape: []int64{K, ch}}, v: wv}
	x := randBuf(rng, n, ch)
	for _, split := range []int{n, 4} {
		t.Run(fmt.Sprintf("conv split %d", split), func(t *testing.T) {
			state := &buf{d: make([]float32, (K-1)*ch), rows: K - 1, cols: ch, stride: ch}
			out := randBuf(rng, n, ch)
			be.Conv(be.View(out, 0, split, 0, ch), be.View(x, 0, split, 0, ch), state, w)
			if split < n {
				be.Conv(be.View(out, split, n, 0, ch), be.View(x, split, n, 0, ch), state, w)
			}
			for tk := 0; tk < n; tk++ {
				want := make([]float64, ch)
				for c := 0; c < ch; c++ {
					for i := 0; i < K; i++ {
						if src := tk - K + 1 + i; src >= 0 {
							want[c] += float64(wv[c*K+i]) * float64(x.row(src)[c])
						}
					}
				}
				for c := range want {
					if d := math.Abs(float64(out.row(tk)[c]) - want[c]); d > 1e-5 {
						t.Fatalf("Conv token %d channel %d = %g, want %g", tk, c, out.row(tk)[c], want[c])
					}
				}
			}
		})
	}
	const nK, nV, hk = 2, 4, 8
	q, k, v := randBuf(rng, n, nK*hk), randBuf(rng, n, nK*hk), randBuf(rng, n, nV*hk)
	be.L2Norm(q, hk, 1e-6)
	be.L2Norm(k, hk, 1e-6)
	g, beta := randBuf(rng, n, nV), randBuf(rng, n, nV)
	for i := range g.d {
		g.d[i] = -float32(math.Abs(float64(g.d[i])))
	}
	be.Sigmoid(beta)
	want := make([][]float64, n)
	S := make([]float64, nV*hk*hk)
	for tk := 0; tk < n; tk++ {
		want[tk] = make([]float64, nV*hk)
		for j := 0; j < nV; j++ {
			kh := j % nK
			Sj := S[j*hk*hk : (j+1)*hk*hk]
			qs, ks := q.row(tk)[kh*hk:(kh+1)*hk], k.row(tk)[kh*hk:(kh+1)*hk]
			for r := 0; r < hk; r++ {
				row := Sj[r*hk : (r+1)*hk]
				var sk float64
				for c := range row {
					row[c] *= math.Exp(float64(g.row(tk)[j]))
					sk += row[c] * float64(ks[c])
				}
				d := float64(beta.row(tk)[j]) * (float64(v.row(tk)[j*hk+r]) - sk)
				var sq float64
				for c := range row {
					row[c] += d * float64(ks[c])
					sq += row[c] * float64(qs[c])
				}
				want[tk][j*hk+r] = sq / math.Sqrt(hk)
			}
		}
	}
	near := func(t *testing.T, name string, got []float32, want []float64, tol float64) {
		t.Helper()
		for i := range want {
			if d := math.Abs(float64(got[i]) - want[i]); d > tol*(1+math.Abs(want[i])) {
				t.Fatalf("%s[%d] = %g, want %g", name, i, got[i], want[i])
			}
		}
	}
	for _, split := range []int{n, 5} {
		t.Run(fmt.Sprintf("delta rule split %d", split), func(t *testing.T) {
			state := &buf{d: make([]float32, nV*hk*hk), rows: nV, cols: hk * hk, stride: hk * hk}
			out := randBuf(rng, n, nV*hk)
			for _, p := range [][2]int{{0, split}, {split, n}} {
				if p[0] == p[1] {
					continue
				}
				vw := func(b *buf) *buf { return be.View(b, p[0], p[1], 0, b.cols).(*buf) }
				be.DeltaRule(vw(out), vw(q), vw(k), vw(v), vw(g), vw(beta), state, hk)
			}
			for tk := range want {
				near(t, fmt.Sprintf("DeltaRule token %d", tk), out.row(tk), want[tk], 1e-5)
			}
		})
	}
}
