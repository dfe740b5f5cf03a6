package ref

import (
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/refuse"
)

// qwen35moe's feed-forward block, as llama.cpp's src/models/qwen35moe.cpp
// builds it: the routed experts of build_moe_ffn (softmax over all experts,
// the top k, weights renormalised over them; the engine's moe block) plus a
// shared SwiGLU expert multiplied by sigmoid(ffn_gate_inp_shexp · x) and
// added. The mixers are qwen35's (qwen35.go).

func init() { RegisterFFN(model.FFNMoEShared, newMoEShared) }

type moeShared struct {
	e      *Engine
	l      *model.Layer
	routed *moe
}

func newMoEShared(e *Engine, l *model.Layer) (FFN, error) {
	s := e.spec
	if s.ExpertGating != model.GatingSoftmax || s.NExpertUsed < 1 || s.NExpertUsed > s.NExpert {
		return nil, refuse.New(By, "layer %d: MoE gating %q with %d of %d experts is not what qwen35moe computes", l.Index, s.ExpertGating, s.NExpertUsed, s.NExpert)
	}
	if l.GateInp == nil || l.DownExps == nil || (l.Ext[model.RoleGateUpExps] == nil && (l.GateExps == nil || l.UpExps == nil)) {
		return nil, refuse.New(By, "layer %d: the routed experts' tensors are not bound", l.Index)
	}
	for _, role := range []string{model.RoleShexpGateInp, model.RoleShexpGate, model.RoleShexpUp, model.RoleShexpDown} {
		if l.Ext[role] == nil {
			return nil, refuse.New(By, "layer %d: shared-expert tensor %q is not bound", l.Index, role)
		}
	}
	return &moeShared{e: e, l: l, routed: &moe{e, l}}, nil
}

func (m *moeShared) Forward(tr tracer, x, out [][]float32, pos int) error {
	e, l := m.e, m.l
	n, nEmbd := len(x), e.spec.NEmbd
	routed := matrix2(n, nEmbd)
	if err := m.routed.Forward(tr, x, routed, pos); err != nil {
		return err
	}
	ff := l.Ext[model.RoleShexpGate].Rows()
	g, u := matrix2(n, ff), matrix2(n, ff)
	e.linear(l.Ext[model.RoleShexpGate], nil, x, g)
	e.linear(l.Ext[model.RoleShexpUp], nil, x, u)
	swiglu(g, u)
	y := matrix2(n, nEmbd)
	e.linear(l.Ext[model.RoleShexpDown], nil, g, y)
	// The gate is a vector: one row of n_embd values, one logit per token.
	logit := matrix2(n, 1)
	e.linear(l.Ext[model.RoleShexpGateInp], nil, x, logit)
	for t := range out {
		tr.emit(model.OpMoEOut, pos+t, routed[t])
		tr.emit(model.OpShexpOut, pos+t, y[t])
		tr.emit(model.OpShexpGate, pos+t, logit[t])
		s := q35Sigmoid(float64(logit[t][0]))
		for d := range out[t] {
			out[t][d] = float32(float64(routed[t][d]) + s*float64(y[t][d]))
		}
	}
	return nil
}
