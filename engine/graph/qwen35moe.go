package graph

import (
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/refuse"
)

// qwen35moe's feed-forward block (llama.cpp's src/models/qwen35moe.cpp):
// the routed experts of the moe block plus a shared SwiGLU expert
// multiplied by sigmoid(ffn_gate_inp_shexp · x), one logit per token, and
// added. Written with the Backend's existing ops only: the gate is a matrix
// of one row, and its sigmoid scales the shared expert's rows through
// WeightedSum with one slot. The mixers are qwen35's (qwen35.go).

func init() { RegisterFFN(model.FFNMoEShared, newMoEShared) }

type moeShared struct {
	routed         *moe
	gate, up, down Weight // the shared expert
	gateInp        Weight // ffn_gate_inp_shexp as a 1 × n_embd matrix
	ff, nEmbd      int
	w              []float32 // sigmoid of the gate per row, read back for WeightedSum
}

func newMoEShared(m *Model, l *model.Layer) (FFN, error) {
	r, err := newMoE(m, l)
	if err != nil {
		return nil, err
	}
	f := &moeShared{routed: r.(*moe), nEmbd: m.Spec.NEmbd}
	if f.gate, err = m.Matrix(l, model.RoleShexpGate, l.Ext[model.RoleShexpGate]); err != nil {
		return nil, err
	}
	if f.up, err = m.Matrix(l, model.RoleShexpUp, l.Ext[model.RoleShexpUp]); err != nil {
		return nil, err
	}
	if f.down, err = m.Matrix(l, model.RoleShexpDown, l.Ext[model.RoleShexpDown]); err != nil {
		return nil, err
	}
	g := l.Ext[model.RoleShexpGateInp]
	if g == nil || len(g.Shape) != 1 || g.Cols() != m.Spec.NEmbd {
		return nil, refuse.New(By, "layer %d: the shared expert's gate %q is not bound as a vector of %d values", l.Index, model.RoleShexpGateInp, m.Spec.NEmbd)
	}
	// The same bytes viewed as a matrix of one row (ggml's mul_mat of a 1-D
	// weight gives one value per token).
	row := &model.Tensor{Name: g.Name, Type: g.Type, Shape: []int64{g.Shape[0], 1}, Data: g.Data, RowBytes: g.RowBytes}
	if f.gateInp, err = m.B.Matrix(row); err != nil {
		return nil, err
	}
	f.ff = l.Ext[model.RoleShexpGate].Rows()
	return f, nil
}

func (f *moeShared) Forward(c *Ctx, x, out Buf) error {
	b := c.B
	for r0, step := 0, c.ffnRows(); r0 < c.N; r0 += step {
		r1 := min(c.N, r0+step)
		n, pos := r1-r0, c.Pos+r0
		xs, os := b.View(x, r0, r1, 0, x.Cols()), b.View(out, r0, r1, 0, out.Cols())
		if err := f.routed.chunk(c, xs, os, pos); err != nil {
			return err
		}
		c.EmitAt(model.OpMoEOut, pos, os)

		g, u := c.BufRows("shexp.gate", n, f.ff), c.BufRows("shexp.up", n, f.ff)
		if err := b.MatMuls(xs, []Buf{g, u}, []Weight{f.gate, f.up}); err != nil {
			return err
		}
		b.SwiGLU(g, g, u)
		y := c.BufRows("shexp.y", n, f.nEmbd)
		if err := b.MatMul(y, f.down, g); err != nil {
			return err
		}
		c.EmitAt(model.OpShexpOut, pos, y)
		lg := c.BufRows("shexp.logit", n, 1)
		if err := b.MatMul(lg, f.gateInp, xs); err != nil {
			return err
		}
		c.EmitAt(model.OpShexpGate, pos, lg)
		b.Sigmoid(lg)
		if cap(f.w) < n {
			f.w = make([]float32, n)
		}
		w := f.w[:n]
		for r := range w {
			b.Read(lg, r, w[r:r+1])
		}
		gated := c.BufRows("shexp.gated", n, f.nEmbd)
		b.WeightedSum(gated, y, w, 1)
		b.Add(os, gated)
	}
	return nil
}
