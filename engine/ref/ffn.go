package ref

import (
	"sort"

	"github.com/aprqa/apr/engine/model"
)

func init() {
	RegisterFFN(model.FFNDense, newDense)
	RegisterFFN(model.FFNMoE, newMoE)
}

// dense is the SwiGLU feed-forward block: down(silu(gate·x) ⊙ up·x), with
// optional biases.
type dense struct {
	e *Engine
	l *model.Layer
}

func newDense(e *Engine, l *model.Layer) (FFN, error) { return &dense{e, l}, nil }

func (d *dense) Forward(tr tracer, x, out [][]float32, pos int) error {
	l := d.l
	n, ff := len(x), l.FFNGate.Rows()
	g, u := matrix2(n, ff), matrix2(n, ff)
	d.e.linear(l.FFNGate, l.FFNGateB, x, g)
	d.e.linear(l.FFNUp, l.FFNUpB, x, u)
	swiglu(g, u)
	d.e.linear(l.FFNDown, l.FFNDownB, g, out)
	return nil
}

// swiglu writes g[t][i] = silu(g[t][i]) · u[t][i].
func swiglu(g, u [][]float32) {
	for t := range g {
		for i, v := range g[t] {
			g[t][i] = float32(silu(float64(v)) * float64(u[t][i]))
		}
	}
}

// moe is the routed-experts block of llama.cpp's build_moe_ffn with softmax
// gating: probabilities over all experts, the top k by probability,
// their probabilities as weights (renormalised to sum 1 when the header says
// so, then scaled), and the weighted sum of the chosen experts' SwiGLU
// outputs.
type moe struct {
	e *Engine
	l *model.Layer
}

func newMoE(e *Engine, l *model.Layer) (FFN, error) { return &moe{e, l}, nil }

// weightsSumMin is ggml's clamp of the top-k weight sum (the smallest normal
// F16), which keeps the division finite.
const weightsSumMin = 6.103515625e-5

func (m *moe) Forward(tr tracer, x, out [][]float32, pos int) error {
	e, l, s := m.e, m.l, m.e.spec
	n, nExp, k := len(x), s.NExpert, s.NExpertUsed
	logits := matrix2(n, nExp)
	e.linear(l.GateInp, nil, x, logits)

	// Per token: the chosen experts and their weights.
	type pick struct {
		expert int
		w      float64
	}
	picks := make([][]pick, n)
	probs := make([]float64, nExp)
	probs32 := make([]float32, nExp)
	order := make([]int, nExp)
	for t := range logits {
		for i, v := range logits[t] {
			probs[i] = float64(v)
		}
		softmaxInPlace(probs)
		if tr.on() {
			for i, p := range probs {
				probs32[i] = float32(p)
			}
			tr.emit(model.OpRouter, pos+t, probs32)
		}
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return probs[order[a]] > probs[order[b]] })
		ps := make([]pick, k)
		var sum float64
		for j := range ps {
			ps[j] = pick{order[j], probs[order[j]]}
			sum += ps[j].w
		}
		if s.NormTopKProb {
			sum = max(sum, weightsSumMin)
			for j := range ps {
				ps[j].w /= sum
			}
		}
		if sc := s.ExpertWeightsScale; sc != 0 && sc != 1 {
			for j := range ps {
				ps[j].w *= sc
			}
		}
		picks[t] = ps
	}

	// Run each expert once over the tokens that chose it; accumulate in
	// expert order so that a batch and a single token add the same way.
	acc := make([][]float64, n)
	for t := range acc {
		acc[t] = make([]float64, s.NEmbd)
	}
	for ex := 0; ex < nExp; ex++ {
		var toks []int
		var ws []float64
		for t, ps := range picks {
			for _, p := range ps {
				if p.expert == ex {
					toks = append(toks, t)
					ws = append(ws, p.w)
				}
			}
		}
		if len(toks) == 0 {
			continue
		}
		xs := make([][]float32, len(toks))
		for i, t := range toks {
			xs[i] = x[t]
		}
		ff := s.NFFExpert
		up := matrix2(len(toks), ff)
		var h [][]float32
		if gu := l.Ext[model.RoleGateUpExps]; gu != nil {
			// Fused (qwen35moe): each expert's gate rows, then its up rows.
			both := matrix2(len(toks), 2*ff)
			e.linear(gu.Matrix(ex), nil, xs, both)
			h = matrix2(len(toks), ff)
			for i := range both {
				copy(h[i], both[i][:ff])
				copy(up[i], both[i][ff:])
			}
			swiglu(h, up)
		} else {
			e.linear(l.UpExps.Matrix(ex), nil, xs, up)
			if l.GateExps != nil {
				h = matrix2(len(toks), ff)
				e.linear(l.GateExps.Matrix(ex), nil, xs, h)
				swiglu(h, up)
			} else {
				h = up
				for i := range h {
					for j, v := range h[i] {
						h[i][j] = float32(silu(float64(v)))
					}
				}
			}
		}
		y := matrix2(len(toks), s.NEmbd)
		e.linear(l.DownExps.Matrix(ex), nil, h, y)
		for i, t := range toks {
			for d, v := range y[i] {
				acc[t][d] += ws[i] * float64(v)
			}
		}
	}
	for t := range out {
		for d := range out[t] {
			out[t][d] = float32(acc[t][d])
		}
	}
	return nil
}
