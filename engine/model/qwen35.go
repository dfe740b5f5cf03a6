package model

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/refuse"
)

// qwen35 (Qwen3.5): a hybrid stack of Gated DeltaNet layers (linear attention
// with a recurrent state and a short causal convolution) and, every
// full_attention_interval-th layer, gated full attention (attn_q yields a
// query and a sigmoid output gate per head; q/k RMSNorm; interleaved
// multi-section RoPE). As llama.cpp's src/models/qwen35.cpp defines it.

// Layer kinds of qwen35.
const (
	LayerGatedDeltaNet  = "gated_deltanet"  // linear attention: conv → delta rule → gated norm
	LayerGatedAttention = "gated_attention" // full attention with a sigmoid output gate
)

// Roles of a Gated DeltaNet layer's tensors in Layer.Ext.
const (
	RoleSSMQKV   = "attn_qkv"   // [n_embd, 2·key_dim + value_dim]: q|k|v before the convolution
	RoleSSMGate  = "attn_gate"  // [n_embd, value_dim]: z, the output gate
	RoleSSMConv  = "ssm_conv1d" // [conv_kernel, conv_channels], per-channel kernels
	RoleSSMDt    = "ssm_dt"     // [n_v_heads] dt bias (ssm_dt.bias)
	RoleSSMA     = "ssm_a"      // [n_v_heads] −exp(A_log)
	RoleSSMBeta  = "ssm_beta"   // [n_embd, n_v_heads]
	RoleSSMAlpha = "ssm_alpha"  // [n_embd, n_v_heads]
	RoleSSMNorm  = "ssm_norm"   // [head_v_dim], shared by the value heads
	RoleSSMOut   = "ssm_out"    // [value_dim, n_embd]
)

// Qwen35 is qwen35's own hyper-parameters (Spec.Ext). The full-attention
// layers use the Spec's common fields (heads, head dims, RoPE base and
// dimension count, RMS epsilon).
type Qwen35 struct {
	RopeSections [4]int // rope.dimension_sections (t, h, w, e), in rotary pairs

	ConvKernel int // ssm.conv_kernel
	InnerSize  int // ssm.inner_size: value_dim
	StateSize  int // ssm.state_size: head size of keys and values
	NKHeads    int // ssm.group_count: key (and query) heads
	NVHeads    int // ssm.time_step_rank: value heads
	HeadVDim   int // InnerSize / NVHeads (= StateSize)

	NFFShexp int // qwen35moe: expert_shared_feed_forward_length, the shared expert's width (0 for qwen35)

	FullAttentionInterval int    // full_attention_interval (0 when attention.recurrent_layers is given)
	Recurrent             []bool // per main layer: Gated DeltaNet (true) or gated attention
	NNextN                int    // nextn_predict_layers: MTP blocks after the main stack, not run
}

// KeyDim is the width of the query and key parts of the DeltaNet projection.
func (q *Qwen35) KeyDim() int { return q.NKHeads * q.StateSize }

// ConvChannels is the width of the convolved q|k|v vector.
func (q *Qwen35) ConvChannels() int { return 2*q.KeyDim() + q.InnerSize }

func init() { RegisterArch("qwen35", loadQwen35) }

func loadQwen35(b *Binder, s *Spec) error { return loadQwen35Hybrid(b, s, false) }

// loadQwen35Hybrid reads and binds qwen35 (moe false: a dense SwiGLU after
// every mixer) or qwen35moe (moe true: routed experts and a gated shared
// expert, qwen35moe.go); the mixers are the same.
func loadQwen35Hybrid(b *Binder, s *Spec, moe bool) error {
	if err := b.ReadCommon(s, RopeIMRope); err != nil {
		return err
	}
	if s.HeadDimK != s.HeadDimV {
		return refuse.New(By, "%q = %d and %q = %d differ; qwen35 needs equal key and value head sizes",
			b.Key("attention.key_length"), s.HeadDimK, b.Key("attention.value_length"), s.HeadDimV)
	}
	// qwen35moe reads feed_forward_length only for its defaults.
	if err := b.ReadFF(s, !moe); err != nil {
		return err
	}
	q := &Qwen35{}
	s.Ext = q
	var err error
	if q.RopeSections, err = readRopeSections(b); err != nil {
		return err
	}
	if q.ConvKernel, err = b.Uint("ssm.conv_kernel", 1, 64); err != nil {
		return err
	}
	if q.InnerSize, err = b.Uint("ssm.inner_size", 1, MaxFF); err != nil {
		return err
	}
	if q.StateSize, err = b.Uint("ssm.state_size", 1, MaxHeadDim); err != nil {
		return err
	}
	if q.NVHeads, err = b.Uint("ssm.time_step_rank", 1, MaxHeads); err != nil {
		return err
	}
	if q.NKHeads, err = b.Uint("ssm.group_count", 1, MaxHeads); err != nil {
		return err
	}
	if q.NVHeads%q.NKHeads != 0 {
		return refuse.New(By, "%q = %d is not a multiple of %q = %d",
			b.Key("ssm.time_step_rank"), q.NVHeads, b.Key("ssm.group_count"), q.NKHeads)
	}
	if q.InnerSize != q.NVHeads*q.StateSize {
		// llama.cpp sizes ssm_norm from state_size and the graph takes the
		// value head size as inner_size/time_step_rank; the delta rule needs
		// both equal to the key head size.
		return refuse.New(By, "%q = %d is not %q × %q = %d × %d",
			b.Key("ssm.inner_size"), q.InnerSize, b.Key("ssm.time_step_rank"), b.Key("ssm.state_size"), q.NVHeads, q.StateSize)
	}
	q.HeadVDim = q.InnerSize / q.NVHeads
	if moe {
		if err := readQwen35MoE(b, s, q); err != nil {
			return err
		}
	}

	if q.NNextN, err = b.OptUint("nextn_predict_layers", 0, MaxLayers, 0, "llama.cpp: no MTP blocks unless nextn_predict_layers"); err != nil {
		return err
	}
	nAll := s.NLayer
	if q.NNextN >= nAll {
		return refuse.New(By, "%q = %d leaves no main layers of %q = %d", b.Key("nextn_predict_layers"), q.NNextN, b.Key("block_count"), nAll)
	}
	if q.Recurrent, err = readRecurrent(b, q, nAll); err != nil {
		return err
	}
	// The MTP blocks sit after the main stack; the main pass never runs them.
	s.NLayer = nAll - q.NNextN
	s.Layers = s.Layers[:s.NLayer]
	q.Recurrent = q.Recurrent[:s.NLayer]
	if q.NNextN > 0 {
		claimNextN(b, s.NLayer)
	}

	if err := b.BindIO(s); err != nil {
		return err
	}
	for i := range s.Layers {
		l := &s.Layers[i]
		var err error
		if q.Recurrent[i] {
			l.Kind = LayerGatedDeltaNet
			err = bindQwen35DeltaNet(b, s, q, l)
		} else {
			l.Kind = LayerGatedAttention
			err = bindQwen35Attention(b, s, l)
		}
		if err != nil {
			return err
		}
		if moe {
			err = bindQwen35MoEFFN(b, s, q, l)
		} else {
			err = bindQwen35FFN(b, s, l)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readRopeSections reads rope.dimension_sections (required): an array of
// four non-negative integers, or one integer for all four (llama.cpp's
// get_key_or_arr). At least one of t, h, w must be non-zero (ggml asserts it).
func readRopeSections(b *Binder) ([4]int, error) {
	var sec [4]int
	key := b.Key("rope.dimension_sections")
	v, ok := b.File().Get(key)
	if !ok {
		return sec, b.missing(key)
	}
	if v.Type == gguf.TypeArray {
		if v.Len() != 4 {
			return sec, refuse.New(By, "hyper-parameter %q has %d entries, want 4", key, v.Len())
		}
		for i := range sec {
			x, err := b.uint(fmt.Sprintf("%s[%d]", key, i), v.Index(i), 0, MaxHeadDim)
			if err != nil {
				return sec, err
			}
			sec[i] = x
		}
	} else {
		x, err := b.uint(key, v, 0, MaxHeadDim)
		if err != nil {
			return sec, err
		}
		sec = [4]int{x, x, x, x}
	}
	if sec[0] == 0 && sec[1] == 0 && sec[2] == 0 {
		return sec, refuse.New(By, "hyper-parameter %q = %v has no t, h or w section", key, sec)
	}
	return sec, nil
}

// readRecurrent says which of the n layers are Gated DeltaNet: from
// attention.recurrent_layers (array of n bools) when present, else layer i is
// full attention iff (i+1) % full_attention_interval == 0 (interval 4 when
// absent, as llama.cpp). MTP blocks (the last NNextN) are never recurrent.
func readRecurrent(b *Binder, q *Qwen35, n int) ([]bool, error) {
	rec := make([]bool, n)
	main := n - q.NNextN
	key := b.Key("attention.recurrent_layers")
	if v, ok := b.File().Get(key); ok {
		if v.Type != gguf.TypeArray || v.Elem != gguf.TypeBool {
			return nil, b.wrongType(key, v, "an array of bool")
		}
		if v.Len() != n {
			return nil, refuse.New(By, "hyper-parameter %q has %d entries, block_count is %d", key, v.Len(), n)
		}
		for i := 0; i < main; i++ {
			x, _ := v.Index(i).Bool()
			rec[i] = x
		}
		return rec, nil
	}
	var err error
	if q.FullAttentionInterval, err = b.OptUint("full_attention_interval", 1, MaxLayers, 4,
		"llama.cpp: full_attention_interval defaults to 4"); err != nil {
		return nil, err
	}
	for i := 0; i < main; i++ {
		rec[i] = (i+1)%q.FullAttentionInterval != 0
	}
	return rec, nil
}

// claimNextN marks the tensors of the MTP blocks (blk.i.* for i ≥ first) as
// known: they belong to the architecture but the main pass does not use them.
func claimNextN(b *Binder, first int) {
	for _, t := range b.File().Tensors {
		rest, ok := strings.CutPrefix(t.Name, "blk.")
		if !ok {
			continue
		}
		num, _, ok := strings.Cut(rest, ".")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(num); err == nil && i >= first {
			b.Claim(t.Name)
		}
	}
}

func bindQwen35DeltaNet(b *Binder, s *Spec, q *Qwen35, l *Layer) error {
	p := func(n string) string { return fmt.Sprintf("blk.%d.%s", l.Index, n) }
	e := int64(s.NEmbd)
	nv := int64(q.NVHeads)
	var err error
	if l.AttnNorm, err = b.Tensor(p("attn_norm.weight"), e); err != nil {
		return err
	}
	l.Ext = map[string]*Tensor{}
	for _, t := range []struct {
		role, name string
		shape      []int64
	}{
		{RoleSSMQKV, "attn_qkv.weight", []int64{e, int64(q.ConvChannels())}},
		{RoleSSMGate, "attn_gate.weight", []int64{e, int64(q.InnerSize)}},
		{RoleSSMConv, "ssm_conv1d.weight", []int64{int64(q.ConvKernel), int64(q.ConvChannels())}},
		{RoleSSMDt, "ssm_dt.bias", []int64{nv}},
		{RoleSSMA, "ssm_a", []int64{nv}},
		{RoleSSMBeta, "ssm_beta.weight", []int64{e, nv}},
		{RoleSSMAlpha, "ssm_alpha.weight", []int64{e, nv}},
		{RoleSSMNorm, "ssm_norm.weight", []int64{int64(q.HeadVDim)}},
		{RoleSSMOut, "ssm_out.weight", []int64{int64(q.InnerSize), e}},
	} {
		// llama.cpp marks attn_qkv and attn_gate optional only for its
		// tile640 packing, which apr does not read: all are required here.
		if l.Ext[t.role], err = b.Tensor(p(t.name), t.shape...); err != nil {
			return err
		}
	}
	return nil
}

func bindQwen35Attention(b *Binder, s *Spec, l *Layer) error {
	p := func(n string) string { return fmt.Sprintf("blk.%d.%s", l.Index, n) }
	e := int64(s.NEmbd)
	hd := int64(s.HeadDimK)
	var err error
	if l.AttnNorm, err = b.Tensor(p("attn_norm.weight"), e); err != nil {
		return err
	}
	// attn_q yields, per head, head_dim query rows then head_dim gate rows.
	if l.Wq, err = b.Tensor(p("attn_q.weight"), e, 2*hd*int64(l.NHead)); err != nil {
		return err
	}
	if l.Wk, err = b.Tensor(p("attn_k.weight"), e, hd*int64(l.NHeadKV)); err != nil {
		return err
	}
	if l.Wv, err = b.Tensor(p("attn_v.weight"), e, hd*int64(l.NHeadKV)); err != nil {
		return err
	}
	if l.Wo, err = b.Tensor(p("attn_output.weight"), hd*int64(l.NHead), e); err != nil {
		return err
	}
	if l.QNorm, err = b.Tensor(p("attn_q_norm.weight"), hd); err != nil {
		return err
	}
	if l.KNorm, err = b.Tensor(p("attn_k_norm.weight"), hd); err != nil {
		return err
	}
	return nil
}

// bindQwen35FFN binds the dense SwiGLU; its input norm is
// post_attention_norm (qwen35 has no ffn_norm).
func bindQwen35FFN(b *Binder, s *Spec, l *Layer) error {
	p := func(n string) string { return fmt.Sprintf("blk.%d.%s", l.Index, n) }
	e, ff := int64(s.NEmbd), int64(l.NFF)
	if ff == 0 {
		return refuse.New(By, "layer %d: %q is 0", l.Index, b.Key("feed_forward_length"))
	}
	var err error
	if l.FFNNorm, err = b.Tensor(p("post_attention_norm.weight"), e); err != nil {
		return err
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
	return nil
}
