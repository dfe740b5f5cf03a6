package graph

import (
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/refuse"
)

func init() {
	RegisterFFN(model.FFNDense, newDense)
	RegisterFFN(model.FFNMoE, newMoE)
}

// dense is the SwiGLU block: down(silu(gate·x) ⊙ up·x), optional biases.
type dense struct {
	gate, up, down    Weight
	gateB, upB, downB Weight
	ff                int
}

func newDense(m *Model, l *model.Layer) (FFN, error) {
	d := &dense{}
	var err error
	if d.gate, err = m.Matrix(l, "ffn_gate", l.FFNGate); err != nil {
		return nil, err
	}
	if d.up, err = m.Matrix(l, "ffn_up", l.FFNUp); err != nil {
		return nil, err
	}
	if d.down, err = m.Matrix(l, "ffn_down", l.FFNDown); err != nil {
		return nil, err
	}
	if d.gateB, err = m.OptVector(l.FFNGateB); err != nil {
		return nil, err
	}
	if d.upB, err = m.OptVector(l.FFNUpB); err != nil {
		return nil, err
	}
	if d.downB, err = m.OptVector(l.FFNDownB); err != nil {
		return nil, err
	}
	d.ff = l.FFNGate.Rows()
	return d, nil
}

// FFNRows is the most rows a feed-forward block multiplies at once: longer
// batches go through in chunks, which keeps the FFN's wide intermediate
// buffers small (each chunk streams the FFN's weights once more).
const FFNRows = 128

// ffnRows is the most rows a feed-forward block multiplies at once on c's
// backend: FFNRows, or the backend's larger UBatch (the CUDA engine's
// products fill the device only with more rows at once).
func (c *Ctx) ffnRows() int { return max(FFNRows, ubatch(c.B)) }

func (d *dense) Forward(c *Ctx, x, out Buf) error {
	b := c.B
	for r0, step := 0, c.ffnRows(); r0 < c.N; r0 += step {
		r1 := min(c.N, r0+step)
		xs, os := b.View(x, r0, r1, 0, x.Cols()), b.View(out, r0, r1, 0, out.Cols())
		g, u := c.BufRows("ffn.gate", r1-r0, d.ff), c.BufRows("ffn.up", r1-r0, d.ff)
		if err := b.MatMuls(xs, []Buf{g, u}, []Weight{d.gate, d.up}); err != nil {
			return err
		}
		if d.gateB != nil {
			b.AddVec(g, d.gateB)
		}
		if d.upB != nil {
			b.AddVec(u, d.upB)
		}
		b.SwiGLU(g, g, u)
		if err := b.MatMul(os, d.down, g); err != nil {
			return err
		}
		if d.downB != nil {
			b.AddVec(os, d.downB)
		}
	}
	return nil
}

// moe is llama.cpp's build_moe_ffn with softmax gating: router
// probabilities over all experts, the k most probable, their probabilities
// as weights (renormalised to sum 1 when the header says so, the sum
// clamped below by ggml's 6.1e-5, then scaled), each chosen expert's SwiGLU
// and the weighted sum in slot order.
type moe struct {
	router, gate, up, down Weight
	gateUp                 Weight // fused gate and up (qwen35moe's ffn_gate_up_exps) instead of gate and up, or nil
	nExp, k, ff, nEmbd     int
	norm                   bool
	scale                  float32
}

// weightsSumMin is ggml's clamp of the top-k weight sum (the smallest normal
// F16), which keeps the division finite.
const weightsSumMin = 6.103515625e-5

func newMoE(m *Model, l *model.Layer) (FFN, error) {
	s := m.Spec
	if s.ExpertGating != model.GatingSoftmax {
		return nil, refuse.New(By, "layer %d: MoE gating %q is not implemented by the graph (softmax only)", l.Index, s.ExpertGating)
	}
	if l.ExpProbsB != nil {
		return nil, refuse.New(By, "layer %d: MoE selection bias (exp_probs_b) is not implemented by the graph", l.Index)
	}
	if s.NExpertUsed < 1 || s.NExpertUsed > s.NExpert {
		return nil, refuse.New(By, "layer %d: %d experts used of %d", l.Index, s.NExpertUsed, s.NExpert)
	}
	f := &moe{nExp: s.NExpert, k: s.NExpertUsed, ff: s.NFFExpert, nEmbd: s.NEmbd, norm: s.NormTopKProb, scale: float32(s.ExpertWeightsScale)}
	var err error
	if f.router, err = m.Matrix(l, "ffn_gate_inp", l.GateInp); err != nil {
		return nil, err
	}
	if gu := l.Ext[model.RoleGateUpExps]; gu != nil {
		if f.gateUp, err = m.Matrix(l, model.RoleGateUpExps, gu); err != nil {
			return nil, err
		}
	} else {
		if f.gate, err = m.Matrix(l, "ffn_gate_exps", l.GateExps); err != nil {
			return nil, err
		}
		if f.up, err = m.Matrix(l, "ffn_up_exps", l.UpExps); err != nil {
			return nil, err
		}
	}
	if f.down, err = m.Matrix(l, "ffn_down_exps", l.DownExps); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *moe) Forward(c *Ctx, x, out Buf) error {
	b := c.B
	for r0, step := 0, c.ffnRows(); r0 < c.N; r0 += step {
		r1 := min(c.N, r0+step)
		if err := f.chunk(c, b.View(x, r0, r1, 0, x.Cols()), b.View(out, r0, r1, 0, out.Cols()), c.Pos+r0); err != nil {
			return err
		}
	}
	return nil
}

// chunk runs the block over the rows of x (positions pos…).
func (f *moe) chunk(c *Ctx, x, out Buf, pos int) error {
	b := c.B
	n, k := x.Rows(), f.k
	probs := c.BufRows("moe.probs", n, f.nExp)
	if err := b.MatMul(probs, f.router, x); err != nil {
		return err
	}
	b.Softmax(probs)
	c.EmitAt(model.OpRouter, pos, probs)
	ids := make([]int32, n*k)
	w := make([]float32, n*k)
	b.TopK(probs, k, ids, w)
	for t := 0; t < n; t++ {
		wt := w[t*k : (t+1)*k]
		if f.norm {
			var sum float32
			for _, v := range wt {
				sum += v
			}
			sum = max(sum, weightsSumMin)
			for j := range wt {
				wt[j] /= sum
			}
		}
		if f.scale != 0 && f.scale != 1 {
			for j := range wt {
				wt[j] *= f.scale
			}
		}
	}
	var gate Buf
	if f.gateUp != nil {
		// One product per slot; the gate is its first ff columns, up the rest
		// (llama.cpp's views of ffn_moe_gate_up).
		gu := c.BufRows("moe.gate_up", n*k, 2*f.ff)
		if err := b.MatMulID(gu, f.gateUp, x, ids, k); err != nil {
			return err
		}
		gate = b.View(gu, 0, n*k, 0, f.ff)
		b.SwiGLU(gate, gate, b.View(gu, 0, n*k, f.ff, 2*f.ff))
	} else {
		up := c.BufRows("moe.up", n*k, f.ff)
		gate = c.BufRows("moe.gate", n*k, f.ff)
		if err := b.MatMulID(up, f.up, x, ids, k); err != nil {
			return err
		}
		if err := b.MatMulID(gate, f.gate, x, ids, k); err != nil {
			return err
		}
		b.SwiGLU(gate, gate, up)
	}
	y := c.BufRows("moe.y", n*k, f.nEmbd)
	if err := b.MatMulID(y, f.down, gate, ids, k); err != nil {
		return err
	}
	b.WeightedSum(out, y, w, k)
	return nil
}
