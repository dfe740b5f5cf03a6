package model

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/aprqa/apr/engine/quant"
)

// RopeType is ggml's rotary-embedding mode, with ggml's numeric values.
type RopeType int

// The RoPE modes. Which one an architecture uses is llama.cpp's
// llama_model_rope_type: it is not stored in the file.
const (
	RopeNone   RopeType = -1 // no rotary embedding
	RopeNorm   RopeType = 0  // rotate adjacent pairs (x[2i], x[2i+1])
	RopeNeox   RopeType = 2  // rotate halves (x[i], x[i+n_rot/2])
	RopeMRope  RopeType = 8  // multi-section (vision-language)
	RopeIMRope RopeType = 40 // interleaved multi-section (qwen35)
)

func (r RopeType) String() string {
	switch r {
	case RopeNone:
		return "none"
	case RopeNorm:
		return "norm"
	case RopeNeox:
		return "neox"
	case RopeMRope:
		return "mrope"
	case RopeIMRope:
		return "imrope"
	}
	return fmt.Sprintf("rope(%d)", int(r))
}

// RopeScaling is the context-extension scheme the header declares
// (<arch>.rope.scaling.*). With Type "none" every field is neutral.
type RopeScaling struct {
	Type       string  // "none", "linear" or "yarn"
	Factor     float64 // rope.scaling.factor (1 when absent)
	FreqScale  float64 // 1/Factor: positions are multiplied by it
	OrigCtx    int     // rope.scaling.original_context_length (NCtxTrain when absent)
	AttnFactor float64 // rope.scaling.attn_factor (1 when absent)
	ExtFactor  float64 // YaRN extrapolation mix: 1 for yarn, else 0 (llama.cpp's context default)
	BetaFast   float64 // YaRN: 32 unless rope.scaling.yarn_beta_fast
	BetaSlow   float64 // YaRN: 1 unless rope.scaling.yarn_beta_slow
}

// Gating is the MoE router's gating function.
type Gating string

// The gating functions the reference implements.
const (
	GatingSoftmax Gating = "softmax"
	GatingSigmoid Gating = "sigmoid"
)

// Layer kinds. Kind says what mixes the sequence in a layer (the block
// between attn_norm and the first residual add); FFN says what follows
// ffn_norm. An architecture may register further kinds (qwen35's Gated
// DeltaNet); an engine refuses a kind it does not implement, by name.
const (
	LayerAttention = "attention" // softmax self-attention with a KV cache
	FFNDense       = "dense"     // SwiGLU: down(silu(gate(x)) * up(x))
	FFNMoE         = "moe"       // routed SwiGLU experts
)

// Default records a key that was absent from the file and took the value
// llama.cpp documents for its absence. Only keys llama.cpp itself treats as
// optional are defaulted; a required key that is absent is refused.
type Default struct {
	Key   string
	Value string
	Why   string
}

// Spec is an architecture's hyper-parameters, read from the file's <arch>.*
// keys, and its tensors bound to their roles. It holds no math.
type Spec struct {
	Arch string

	NEmbd     int // embedding_length
	NLayer    int // block_count
	NHead     int // attention.head_count (the largest, when given per layer)
	NHeadKV   int // attention.head_count_kv (the largest, when given per layer)
	HeadDimK  int // attention.key_length
	HeadDimV  int // attention.value_length
	NFF       int // feed_forward_length (0 for an MoE-only model without the key)
	NVocab    int // <arch>.vocab_size or the length of tokenizer.ggml.tokens
	NCtxTrain int // context_length

	RopeBase    float64 // rope.freq_base
	RopeDim     int     // rope.dimension_count: leading dims of each head that rotate
	RopeType    RopeType
	RopeScaling RopeScaling
	RopeFreqs   *Tensor // rope_freqs.weight (llama 3 frequency factors), or nil

	RMSEps    float64 // attention.layer_norm_rms_epsilon
	AttnScale float64 // attention logits scale: 1/sqrt(HeadDimK) unless attention.scale

	NExpert            int     // expert_count (0: dense)
	NExpertUsed        int     // expert_used_count
	NFFExpert          int     // expert_feed_forward_length
	NormTopKProb       bool    // renormalise the top-k router weights to sum to 1
	ExpertWeightsScale float64 // scale of the routed weights (0 or 1: none)
	ExpertGating       Gating

	TokEmbd    *Tensor // token_embd.weight [NEmbd, NVocab]
	OutputNorm *Tensor // output_norm.weight [NEmbd]
	Output     *Tensor // output.weight, or TokEmbd when Tied
	Tied       bool

	Layers []Layer

	// Defaults lists the optional keys that were absent and took llama.cpp's
	// default, so that a receipt can show them.
	Defaults []Default

	// Ext holds architecture-specific hyper-parameters that only that
	// architecture's code reads (for example qwen35's SSM sizes), and
	// ExtTensors its global tensors by role name.
	Ext        any
	ExtTensors map[string]*Tensor
}

// Layer is one block's sizes and tensors. Tensors a layer does not have are
// nil. Ext holds architecture-specific tensors by role name.
type Layer struct {
	Index int
	Kind  string // LayerAttention, or a kind registered by an architecture
	FFN   string // FFNDense or FFNMoE

	NHead   int
	NHeadKV int
	NFF     int

	AttnNorm *Tensor // [NEmbd]

	// Attention: either Wqkv (fused, rows q|k|v) or Wq, Wk, Wv.
	Wqkv, Bqkv   *Tensor
	Wq, Wk, Wv   *Tensor
	Bq, Bk, Bv   *Tensor
	Wo, Bo       *Tensor
	QNorm, KNorm *Tensor // per-head RMSNorm weights [HeadDimK] (qwen3)

	FFNNorm *Tensor // [NEmbd]

	// Dense FFN.
	FFNGate, FFNUp, FFNDown    *Tensor
	FFNGateB, FFNUpB, FFNDownB *Tensor

	// MoE: router [NEmbd, NExpert] and 3-D expert tensors.
	GateInp                    *Tensor
	GateExps, UpExps, DownExps *Tensor // [NEmbd, NFFExpert, NExpert], [NFFExpert, NEmbd, NExpert]
	ExpProbsB                  *Tensor // selection bias (exp_probs_b), or nil

	Ext map[string]*Tensor
}

// Tensor is a weight bound to its role: a view of the file's bytes (never a
// copy) with its type and ggml shape. A row is Shape[0] values.
type Tensor struct {
	Name     string
	Type     quant.Type
	Shape    []int64 // ggml order, ne0 first
	Data     []byte  // view into the mapped file; read-only
	RowBytes int     // bytes of one row of Shape[0] values
}

// Cols is the length of one row (Shape[0]).
func (t *Tensor) Cols() int { return int(t.Shape[0]) }

// Rows is the number of rows: the product of Shape[1:].
func (t *Tensor) Rows() int {
	n := 1
	for _, d := range t.Shape[1:] {
		n *= int(d)
	}
	return n
}

// Row returns the bytes of row i. It panics when i is out of range, as a
// slice index would.
func (t *Tensor) Row(i int) []byte {
	return t.Data[i*t.RowBytes : (i+1)*t.RowBytes : (i+1)*t.RowBytes]
}

// Matrix returns the 2-D matrix i of a 3-D tensor (expert i of an expert
// tensor): shape [Shape[0], Shape[1]], sharing the bytes. It panics when t is
// not 3-D or i is out of range.
func (t *Tensor) Matrix(i int) *Tensor {
	if len(t.Shape) != 3 {
		panic(fmt.Sprintf("model: Matrix of the %d-D tensor %q", len(t.Shape), t.Name))
	}
	if i < 0 || int64(i) >= t.Shape[2] {
		panic(fmt.Sprintf("model: Matrix(%d) of %q with %d matrices", i, t.Name, t.Shape[2]))
	}
	per := int(t.Shape[1]) * t.RowBytes
	return &Tensor{
		Name:     fmt.Sprintf("%s[%d]", t.Name, i),
		Type:     t.Type,
		Shape:    []int64{t.Shape[0], t.Shape[1]},
		Data:     t.Data[i*per : (i+1)*per : (i+1)*per],
		RowBytes: t.RowBytes,
	}
}

// KVDims returns the widths of one position's K and V rows in layer l's
// attention cache.
func (s *Spec) KVDims(l int) (k, v int) {
	return s.Layers[l].NHeadKV * s.HeadDimK, s.Layers[l].NHeadKV * s.HeadDimV
}

// AllTensors lists every bound tensor once (a tied output is TokEmbd),
// globals first, then layer by layer, then each Ext map in name order.
func (s *Spec) AllTensors() []*Tensor {
	var out []*Tensor
	seen := map[*Tensor]bool{}
	add := func(t *Tensor) {
		if t != nil && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	addFields := func(v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			if t, ok := v.Field(i).Interface().(*Tensor); ok {
				add(t)
			}
		}
	}
	addExt := func(m map[string]*Tensor) {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			add(m[n])
		}
	}
	addFields(reflect.ValueOf(*s))
	addExt(s.ExtTensors)
	for i := range s.Layers {
		addFields(reflect.ValueOf(s.Layers[i]))
		addExt(s.Layers[i].Ext)
	}
	return out
}
