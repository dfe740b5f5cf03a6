package model

import (
	"fmt"

	"github.com/aprqa/apr/refuse"
)

// qwen35moe (Qwen3.5 mixture of experts): qwen35's hybrid stack (Gated
// DeltaNet and gated full attention, IMROPE; qwen35.go) whose dense FFN is
// replaced in every layer by softmax-routed SwiGLU experts (top
// expert_used_count, weights renormalised over the chosen experts) plus a
// shared SwiGLU expert whose output is multiplied by
// sigmoid(ffn_gate_inp_shexp · x), one logit per token, and added. As
// llama.cpp's src/models/qwen35moe.cpp defines it.

// FFNMoEShared is qwen35moe's feed-forward kind: routed experts plus a
// sigmoid-gated shared expert.
const FFNMoEShared = "moe_shared_gated"

// Roles of a qwen35moe layer's feed-forward tensors in Layer.Ext (the router
// and the separate expert tensors are the Layer's GateInp, GateExps, UpExps
// and DownExps).
const (
	RoleGateUpExps   = "ffn_gate_up_exps"   // [n_embd, 2·expert_ff, n_expert]: each expert's gate rows then its up rows (instead of GateExps and UpExps)
	RoleShexpGateInp = "ffn_gate_inp_shexp" // [n_embd]: the shared expert's gate, one logit per token
	RoleShexpGate    = "ffn_gate_shexp"     // [n_embd, shared_ff]
	RoleShexpUp      = "ffn_up_shexp"       // [n_embd, shared_ff]
	RoleShexpDown    = "ffn_down_shexp"     // [shared_ff, n_embd]
)

// Trace op names of the qwen35moe feed-forward block, reported by every
// engine that runs it (llama.cpp's callback names).
const (
	OpMoEOut    = "ffn_moe_out"        // the routed experts' weighted sum
	OpShexpOut  = "ffn_shexp"          // the shared expert's SwiGLU output, before its gate
	OpShexpGate = "shared_expert_gate" // the shared expert's gate logit (one value), before the sigmoid
)

func init() {
	RegisterArch("qwen35moe", func(b *Binder, s *Spec) error { return loadQwen35Hybrid(b, s, true) })
}

// readQwen35MoE reads the expert hyper-parameters of qwen35moe as llama.cpp
// does: expert_count and expert_used_count required,
// expert_feed_forward_length defaulting to feed_forward_length /
// expert_used_count, expert_shared_feed_forward_length to
// feed_forward_length. Softmax gating and renormalised top-k weights are
// fixed by the architecture (llama.cpp's graph passes them as constants and
// reads neither expert_weights_norm nor expert_weights_scale nor
// expert_gating_func for it), so those keys are not read.
func readQwen35MoE(b *Binder, s *Spec, q *Qwen35) error {
	var err error
	if s.NExpert, err = b.Uint("expert_count", 1, MaxExperts); err != nil {
		return err
	}
	if s.NExpertUsed, err = b.Uint("expert_used_count", 1, MaxExperts); err != nil {
		return err
	}
	if s.NExpertUsed > s.NExpert {
		return refuse.New(By, "%s = %d must be in [1, %s = %d]", b.Key("expert_used_count"), s.NExpertUsed, b.Key("expert_count"), s.NExpert)
	}
	if !b.Has("expert_feed_forward_length") && s.NFF/s.NExpertUsed == 0 {
		return refuse.New(By, "expert width unknown: neither %q nor %q is present", b.Key("expert_feed_forward_length"), b.Key("feed_forward_length"))
	}
	if s.NFFExpert, err = b.OptUint("expert_feed_forward_length", 1, MaxFF, s.NFF/s.NExpertUsed,
		"llama.cpp: expert_feed_forward_length defaults to feed_forward_length / expert_used_count"); err != nil {
		return err
	}
	if !b.Has("expert_shared_feed_forward_length") && s.NFF == 0 {
		return refuse.New(By, "shared expert width unknown: neither %q nor %q is present", b.Key("expert_shared_feed_forward_length"), b.Key("feed_forward_length"))
	}
	if q.NFFShexp, err = b.OptUint("expert_shared_feed_forward_length", 1, MaxFF, s.NFF,
		"llama.cpp: expert_shared_feed_forward_length defaults to feed_forward_length"); err != nil {
		return err
	}
	s.NormTopKProb = true
	s.ExpertWeightsScale = 0
	s.ExpertGating = GatingSoftmax
	for i := range s.Layers {
		s.Layers[i].FFN = FFNMoEShared
	}
	return nil
}

// bindQwen35MoEFFN binds a qwen35moe layer's feed-forward tensors: the
// input norm post_attention_norm, the router, the experts (separate gate and
// up, or the fused gate_up, never both) and the shared expert with its gate.
func bindQwen35MoEFFN(b *Binder, s *Spec, q *Qwen35, l *Layer) error {
	p := func(n string) string { return fmt.Sprintf("blk.%d.%s", l.Index, n) }
	e, ne, ff, fs := int64(s.NEmbd), int64(s.NExpert), int64(s.NFFExpert), int64(q.NFFShexp)
	var err error
	if l.FFNNorm, err = b.Tensor(p("post_attention_norm.weight"), e); err != nil {
		return err
	}
	if l.GateInp, err = b.Tensor(p("ffn_gate_inp.weight"), e, ne); err != nil {
		return err
	}
	if l.DownExps, err = b.Tensor(p("ffn_down_exps.weight"), ff, e, ne); err != nil {
		return err
	}
	if l.Ext == nil {
		l.Ext = map[string]*Tensor{}
	}
	gu, err := b.OptTensor(p("ffn_gate_up_exps.weight"), e, 2*ff, ne)
	if err != nil {
		return err
	}
	if gu != nil {
		_, hasGate := b.f.Tensor(p("ffn_gate_exps.weight"))
		_, hasUp := b.f.Tensor(p("ffn_up_exps.weight"))
		if hasGate || hasUp {
			return refuse.New(By, "layer %d: both %q and separate ffn_gate_exps/ffn_up_exps are present; llama.cpp would use the fused one and leave the others unread",
				l.Index, p("ffn_gate_up_exps.weight"))
		}
		l.Ext[RoleGateUpExps] = gu
	} else {
		if l.GateExps, err = b.Tensor(p("ffn_gate_exps.weight"), e, ff, ne); err != nil {
			return err
		}
		if l.UpExps, err = b.Tensor(p("ffn_up_exps.weight"), e, ff, ne); err != nil {
			return err
		}
	}
	for _, t := range []struct {
		role, name string
		shape      []int64
	}{
		{RoleShexpGateInp, "ffn_gate_inp_shexp.weight", []int64{e}},
		{RoleShexpGate, "ffn_gate_shexp.weight", []int64{e, fs}},
		{RoleShexpUp, "ffn_up_shexp.weight", []int64{e, fs}},
		{RoleShexpDown, "ffn_down_shexp.weight", []int64{fs, e}},
	} {
		if l.Ext[t.role], err = b.Tensor(p(t.name), t.shape...); err != nil {
			return err
		}
	}
	return nil
}
