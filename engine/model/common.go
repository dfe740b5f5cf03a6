package model

import (
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/refuse"
)

// Common pieces of the transformer architectures, used by the ArchFuncs in
// archs.go and available to architectures registered elsewhere (qwen35).

// ReadCommon reads the hyper-parameters every transformer architecture here
// shares: context, embedding, layers, heads, head dims, RoPE, RMS epsilon and
// vocabulary size. It fills s and one Layer per block (Index, NHead, NHeadKV;
// Kind LayerAttention and FFN FFNDense until the architecture says
// otherwise). rope is the architecture's RoPE mode (llama_model_rope_type).
func (b *Binder) ReadCommon(s *Spec, rope RopeType) error {
	var err error
	if s.NCtxTrain, err = b.Uint("context_length", 1, MaxCtx); err != nil {
		return err
	}
	if s.NEmbd, err = b.Uint("embedding_length", 1, MaxEmbd); err != nil {
		return err
	}
	if s.NLayer, err = b.Uint("block_count", 1, MaxLayers); err != nil {
		return err
	}
	heads, err := b.PerLayer("attention.head_count", s.NLayer, 1, MaxHeads, true, nil, "")
	if err != nil {
		return err
	}
	kv, err := b.PerLayer("attention.head_count_kv", s.NLayer, 0, MaxHeads, false, heads,
		"llama.cpp: head_count_kv defaults to head_count")
	if err != nil {
		return err
	}
	s.Layers = make([]Layer, s.NLayer)
	for i := range s.Layers {
		l := &s.Layers[i]
		l.Index, l.Kind, l.FFN = i, LayerAttention, FFNDense
		l.NHead, l.NHeadKV = heads[i], kv[i]
		s.NHead = max(s.NHead, l.NHead)
		s.NHeadKV = max(s.NHeadKV, l.NHeadKV)
	}
	// llama.cpp sizes heads from layer 0's head count.
	h0 := heads[0]
	if s.HeadDimK, err = b.OptUint("attention.key_length", 1, MaxHeadDim, s.NEmbd/h0,
		"llama.cpp: key_length defaults to embedding_length/head_count"); err != nil {
		return err
	}
	if s.HeadDimV, err = b.OptUint("attention.value_length", 1, MaxHeadDim, s.NEmbd/h0,
		"llama.cpp: value_length defaults to embedding_length/head_count"); err != nil {
		return err
	}
	if s.HeadDimK == 0 || s.HeadDimV == 0 {
		return refuse.New(By, "head dimension is 0 (embedding_length %d, head_count %d, no key_length/value_length)", s.NEmbd, h0)
	}
	for i := range s.Layers {
		l := &s.Layers[i]
		if l.NHeadKV == 0 || l.NHead%l.NHeadKV != 0 {
			return refuse.New(By, "layer %d: %q = %d does not divide %q = %d",
				i, b.Key("attention.head_count_kv"), l.NHeadKV, b.Key("attention.head_count"), l.NHead)
		}
	}
	if s.RMSEps, err = b.Float("attention.layer_norm_rms_epsilon"); err != nil {
		return err
	}
	if !(s.RMSEps > 0 && s.RMSEps < 1) {
		return refuse.New(By, "hyper-parameter %q = %g is outside (0, 1)", b.Key("attention.layer_norm_rms_epsilon"), s.RMSEps)
	}
	s.AttnScale = 1 / math.Sqrt(float64(s.HeadDimK))
	if err := b.readRope(s, rope); err != nil {
		return err
	}
	return b.readVocab(s)
}

func (b *Binder) readRope(s *Spec, rope RopeType) error {
	var err error
	s.RopeType = rope
	if s.RopeBase, err = b.OptFloat("rope.freq_base", 10000, "llama.cpp: rope.freq_base defaults to 10000"); err != nil {
		return err
	}
	if !(s.RopeBase > 0) {
		return refuse.New(By, "hyper-parameter %q = %g is not positive", b.Key("rope.freq_base"), s.RopeBase)
	}
	if s.RopeDim, err = b.OptUint("rope.dimension_count", 0, MaxHeadDim, s.HeadDimK,
		"llama.cpp: rope.dimension_count defaults to key_length"); err != nil {
		return err
	}
	if s.RopeDim%2 != 0 || s.RopeDim > s.HeadDimK {
		return refuse.New(By, "hyper-parameter %q = %d must be even and at most the key head size %d",
			b.Key("rope.dimension_count"), s.RopeDim, s.HeadDimK)
	}
	sc := &s.RopeScaling
	typ, err := b.OptString("rope.scaling.type", "none", "")
	if err != nil {
		return err
	}
	factor := 0.0
	if b.Has("rope.scaling.factor") {
		if factor, err = b.Float("rope.scaling.factor"); err != nil {
			return err
		}
	} else if b.Has("rope.scale_linear") {
		if factor, err = b.Float("rope.scale_linear"); err != nil {
			return err
		}
	}
	if factor < 0 {
		return refuse.New(By, "hyper-parameter %q = %g is negative", b.Key("rope.scaling.factor"), factor)
	}
	sc.Type, sc.Factor, sc.FreqScale = typ, 1, 1
	switch typ {
	case "none":
		// llama.cpp: never scale when the type is none.
	case "linear", "yarn":
		if factor != 0 {
			sc.Factor, sc.FreqScale = factor, 1/factor
		}
	default:
		// longrope and anything else: not implemented here; refuse rather than
		// run unscaled.
		return refuse.New(By, "hyper-parameter %q = %q: RoPE scaling of that kind is not supported", b.Key("rope.scaling.type"), typ)
	}
	if sc.OrigCtx, err = b.OptUint("rope.scaling.original_context_length", 1, MaxCtx, s.NCtxTrain, ""); err != nil {
		return err
	}
	if sc.AttnFactor, err = b.OptFloat("rope.scaling.attn_factor", 1, ""); err != nil {
		return err
	}
	ext := 0.0
	if typ == "yarn" {
		ext = 1
	}
	if sc.ExtFactor, err = b.OptFloat("rope.scaling.yarn_ext_factor", ext, ""); err != nil {
		return err
	}
	if sc.BetaFast, err = b.OptFloat("rope.scaling.yarn_beta_fast", 32, ""); err != nil {
		return err
	}
	if sc.BetaSlow, err = b.OptFloat("rope.scaling.yarn_beta_slow", 1, ""); err != nil {
		return err
	}
	return nil
}

func (b *Binder) readVocab(s *Spec) error {
	var fromTokens int
	haveTokens := false
	if v, ok := b.f.Get("tokenizer.ggml.tokens"); ok {
		if v.Type != gguf.TypeArray || v.Len() < 0 {
			return b.wrongType("tokenizer.ggml.tokens", v, "an array of strings")
		}
		fromTokens, haveTokens = v.Len(), true
	}
	if b.Has("vocab_size") {
		n, err := b.Uint("vocab_size", 1, MaxVocab)
		if err != nil {
			return err
		}
		if haveTokens && n != fromTokens {
			return refuse.New(By, "hyper-parameter %q = %d contradicts tokenizer.ggml.tokens with %d entries", b.Key("vocab_size"), n, fromTokens)
		}
		s.NVocab = n
		return nil
	}
	if !haveTokens {
		return refuse.New(By, "vocabulary size unknown: neither %q nor tokenizer.ggml.tokens is present", b.Key("vocab_size"))
	}
	if fromTokens < 1 || fromTokens > MaxVocab {
		return refuse.New(By, "tokenizer.ggml.tokens has %d entries, outside [1, %d]", fromTokens, MaxVocab)
	}
	s.NVocab = fromTokens
	return nil
}

// ReadMoE reads the expert counts. required says whether the architecture
// is MoE-only (qwen3moe: counts required and > 0) or optionally MoE (llama:
// absent means dense). normDefault is the architecture's rule for
// renormalising the top-k weights when expert_weights_norm is absent.
func (b *Binder) ReadMoE(s *Spec, required, normDefault bool) error {
	var err error
	if required {
		if s.NExpert, err = b.Uint("expert_count", 1, MaxExperts); err != nil {
			return err
		}
		if s.NExpertUsed, err = b.Uint("expert_used_count", 1, MaxExperts); err != nil {
			return err
		}
	} else {
		if s.NExpert, err = b.OptUint("expert_count", 0, MaxExperts, 0, ""); err != nil {
			return err
		}
		if s.NExpertUsed, err = b.OptUint("expert_used_count", 0, MaxExperts, 0, ""); err != nil {
			return err
		}
	}
	if s.NExpert == 0 {
		if s.NExpertUsed != 0 {
			return refuse.New(By, "%s = %d without experts", b.Key("expert_used_count"), s.NExpertUsed)
		}
		return nil
	}
	if s.NExpertUsed < 1 || s.NExpertUsed > s.NExpert {
		return refuse.New(By, "%s = %d must be in [1, %s = %d]", b.Key("expert_used_count"), s.NExpertUsed, b.Key("expert_count"), s.NExpert)
	}
	if s.NFFExpert, err = b.Uint("expert_feed_forward_length", 1, MaxFF); err != nil {
		return err
	}
	if s.NormTopKProb, err = b.OptBool("expert_weights_norm", normDefault,
		fmt.Sprintf("llama.cpp renormalises the top-k weights of %s: %v", b.arch, normDefault)); err != nil {
		return err
	}
	if s.ExpertWeightsScale, err = b.OptFloat("expert_weights_scale", 0, ""); err != nil {
		return err
	}
	s.ExpertGating = GatingSoftmax
	for i := range s.Layers {
		s.Layers[i].FFN = FFNMoE
	}
	return nil
}

// ReadFF reads feed_forward_length per layer into the layers' NFF and s.NFF
// (the largest). required: refuse when absent.
func (b *Binder) ReadFF(s *Spec, required bool) error {
	ff, err := b.PerLayer("feed_forward_length", s.NLayer, 0, MaxFF, required, make([]int, s.NLayer), "")
	if err != nil {
		return err
	}
	for i := range s.Layers {
		s.Layers[i].NFF = ff[i]
		s.NFF = max(s.NFF, ff[i])
	}
	return nil
}

// BindIO binds token_embd, output_norm and output (tied to token_embd when
// output.weight is absent, as llama.cpp does).
func (b *Binder) BindIO(s *Spec) error {
	var err error
	e, v := int64(s.NEmbd), int64(s.NVocab)
	if s.TokEmbd, err = b.Tensor("token_embd.weight", e, v); err != nil {
		return err
	}
	if s.OutputNorm, err = b.Tensor("output_norm.weight", e); err != nil {
		return err
	}
	if s.Output, err = b.OptTensor("output.weight", e, v); err != nil {
		return err
	}
	if s.Output == nil {
		s.Output, s.Tied = s.TokEmbd, true
	}
	return nil
}

// AttnOpts says which optional parts an architecture's attention has.
type AttnOpts struct {
	QKNorm bool // per-head q/k RMSNorm weights are required (qwen3, qwen3moe)
}

// BindAttention binds layer l's attention norm and projections: a fused
// attn_qkv or separate attn_q/attn_k/attn_v, each with an optional bias (as
// llama.cpp's create_tensor_qkv), attn_output with an optional bias, and the
// q/k norms when o.QKNorm.
func (b *Binder) BindAttention(s *Spec, l *Layer, o AttnOpts) error {
	var err error
	p := func(n string) string { return fmt.Sprintf("blk.%d.%s", l.Index, n) }
	e := int64(s.NEmbd)
	nq := int64(s.HeadDimK * l.NHead)
	nk := int64(s.HeadDimK * l.NHeadKV)
	nv := int64(s.HeadDimV * l.NHeadKV)
	if l.AttnNorm, err = b.Tensor(p("attn_norm.weight"), e); err != nil {
		return err
	}
	if l.Wqkv, err = b.OptTensor(p("attn_qkv.weight"), e, nq+nk+nv); err != nil {
		return err
	}
	if l.Wqkv != nil {
		if l.Bqkv, err = b.OptTensor(p("attn_qkv.bias"), nq+nk+nv); err != nil {
			return err
		}
	} else {
		if l.Wq, err = b.Tensor(p("attn_q.weight"), e, nq); err != nil {
			return err
		}
		if l.Wk, err = b.Tensor(p("attn_k.weight"), e, nk); err != nil {
			return err
		}
		if l.Wv, err = b.Tensor(p("attn_v.weight"), e, nv); err != nil {
			return err
		}
		if l.Bq, err = b.OptTensor(p("attn_q.bias"), nq); err != nil {
			return err
		}
		if l.Bk, err = b.OptTensor(p("attn_k.bias"), nk); err != nil {
			return err
		}
		if l.Bv, err = b.OptTensor(p("attn_v.bias"), nv); err != nil {
			return err
		}
	}
	if l.Wo, err = b.Tensor(p("attn_output.weight"), int64(s.HeadDimV*l.NHead), e); err != nil {
		return err
	}
	if l.Bo, err = b.OptTensor(p("attn_output.bias"), e); err != nil {
		return err
	}
	if o.QKNorm {
		if l.QNorm, err = b.Tensor(p("attn_q_norm.weight"), int64(s.HeadDimK)); err != nil {
			return err
		}
		if l.KNorm, err = b.Tensor(p("attn_k_norm.weight"), int64(s.HeadDimK)); err != nil {
			return err
		}
	}
	return nil
}

// BindFFN binds layer l's ffn_norm and its dense SwiGLU (optional biases) or
// MoE tensors, by l.FFN.
func (b *Binder) BindFFN(s *Spec, l *Layer) error {
	var err error
	p := func(n string) string { return fmt.Sprintf("blk.%d.%s", l.Index, n) }
	e := int64(s.NEmbd)
	if l.FFNNorm, err = b.Tensor(p("ffn_norm.weight"), e); err != nil {
		return err
	}
	switch l.FFN {
	case FFNDense:
		ff := int64(l.NFF)
		if ff == 0 {
			return refuse.New(By, "layer %d: %s is 0 for a dense feed-forward block", l.Index, b.Key("feed_forward_length"))
		}
		if l.FFNGate, err = b.Tensor(p("ffn_gate.weight"), e, ff); err != nil {
			return err
		}
		if l.FFNUp, err = b.Tensor(p("ffn_up.weight"), e, ff); err != nil {
			return err
		}
		if l.FFNDown, err = b.Tensor(p("ffn_down.weight"), ff, e); err != nil {
			return err
		}
		if l.FFNGateB, err = b.OptTensor(p("ffn_gate.bias"), ff); err != nil {
			return err
		}
		if l.FFNUpB, err = b.OptTensor(p("ffn_up.bias"), ff); err != nil {
			return err
		}
		if l.FFNDownB, err = b.OptTensor(p("ffn_down.bias"), e); err != nil {
			return err
		}
	case FFNMoE:
		ne, ff := int64(s.NExpert), int64(s.NFFExpert)
		if l.GateInp, err = b.Tensor(p("ffn_gate_inp.weight"), e, ne); err != nil {
			return err
		}
		if l.GateExps, err = b.Tensor(p("ffn_gate_exps.weight"), e, ff, ne); err != nil {
			return err
		}
		if l.UpExps, err = b.Tensor(p("ffn_up_exps.weight"), e, ff, ne); err != nil {
			return err
		}
		if l.DownExps, err = b.Tensor(p("ffn_down_exps.weight"), ff, e, ne); err != nil {
			return err
		}
	default:
		return refuse.New(By, "layer %d: unknown feed-forward kind %q", l.Index, l.FFN)
	}
	return nil
}
