// Package synth writes random-weight models in the shapes of real
// architectures, with llama.cpp's exact tensor names and metadata keys, so
// that apr can be exercised and measured without downloading weights.
package synth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// Preset is the shape of a model.
type Preset struct {
	Name     string  `json:"name"`
	Arch     string  `json:"arch"`
	Note     string  `json:"note,omitempty"` // how the preset relates to the real model it is named after
	NEmbd    int     `json:"n_embd"`
	NLayer   int     `json:"n_layer"`
	NHead    int     `json:"n_head"`
	NHeadKV  int     `json:"n_head_kv"`
	HeadDim  int     `json:"head_dim"`
	NFF      int     `json:"n_ff,omitempty"`
	NVocab   int     `json:"n_vocab,omitempty"` // 0: the synthetic vocabulary's own size; else padded to this
	NCtx     int     `json:"n_ctx"`
	RopeBase float64 `json:"rope_base"`
	RopeDim  int     `json:"rope_dim,omitempty"` // 0: HeadDim
	RMSEps   float64 `json:"rms_eps"`
	Tied     bool    `json:"tied"`     // output projection tied to token_embd
	QKVBias  bool    `json:"qkv_bias"` // qwen2: q/k/v biases
	QKNorm   bool    `json:"qk_norm"`  // qwen3, qwen3moe, qwen35 attention: per-head q/k RMSNorm
	Merges   int     `json:"merges"`   // merges in the synthetic byte-level vocabulary

	// Mixture of experts (qwen3moe, qwen35moe).
	NExpert     int  `json:"n_expert,omitempty"`
	NExpertUsed int  `json:"n_expert_used,omitempty"`
	NFFExpert   int  `json:"n_ff_expert,omitempty"`
	NFFShexp    int  `json:"n_ff_shexp,omitempty"`    // qwen35moe: the shared expert's width
	FusedGateUp bool `json:"fused_gate_up,omitempty"` // qwen35moe: ffn_gate_up_exps instead of ffn_gate_exps and ffn_up_exps (not in any preset; for tests)

	// Gated DeltaNet hybrid (qwen35, qwen35moe).
	FullAttnInterval int      `json:"full_attn_interval,omitempty"`
	RopeSections     [4]int32 `json:"rope_sections,omitzero"`
	ConvKernel       int      `json:"conv_kernel,omitempty"`
	StateSize        int      `json:"state_size,omitempty"` // key/value head size of the DeltaNet heads
	NKHeads          int      `json:"n_k_heads,omitempty"`
	NVHeads          int      `json:"n_v_heads,omitempty"`
}

var presets = []Preset{
	{Name: "tiny", Arch: "llama", NEmbd: 64, NLayer: 2, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 128,
		NCtx: 512, RopeBase: 10000, RMSEps: 1e-5, Merges: 200},
	{Name: "tiny", Arch: "qwen2", NEmbd: 64, NLayer: 2, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 128,
		NCtx: 512, RopeBase: 1e6, RMSEps: 1e-6, Tied: true, QKVBias: true, Merges: 200},
	{Name: "tiny", Arch: "qwen3", NEmbd: 64, NLayer: 2, NHead: 4, NHeadKV: 2, HeadDim: 32, NFF: 128,
		NCtx: 512, RopeBase: 1e6, RMSEps: 1e-6, Tied: true, QKNorm: true, Merges: 200},
	{Name: "tiny", Arch: "qwen3moe", NEmbd: 64, NLayer: 2, NHead: 4, NHeadKV: 2, HeadDim: 16,
		NCtx: 512, RopeBase: 1e6, RMSEps: 1e-6, Tied: true, QKNorm: true, Merges: 200,
		NExpert: 8, NExpertUsed: 2, NFFExpert: 64},
	{Name: "tiny", Arch: "qwen35", NEmbd: 64, NLayer: 4, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 128,
		NCtx: 512, RopeBase: 1e7, RopeDim: 8, RMSEps: 1e-6, Tied: true, QKNorm: true, Merges: 200,
		FullAttnInterval: 4, RopeSections: [4]int32{2, 1, 1, 0}, ConvKernel: 4, StateSize: 16, NKHeads: 2, NVHeads: 4},
	{Name: "tiny", Arch: "qwen35moe", NEmbd: 64, NLayer: 4, NHead: 4, NHeadKV: 2, HeadDim: 16,
		NCtx: 512, RopeBase: 1e7, RopeDim: 8, RMSEps: 1e-6, Tied: true, QKNorm: true, Merges: 200,
		NExpert: 8, NExpertUsed: 2, NFFExpert: 64, NFFShexp: 64,
		FullAttnInterval: 4, RopeSections: [4]int32{2, 1, 1, 0}, ConvKernel: 4, StateSize: 16, NKHeads: 2, NVHeads: 4},

	{Name: "qwen2.5-0.5b", Arch: "qwen2", Note: "the shape of Qwen2.5-0.5B",
		NEmbd: 896, NLayer: 24, NHead: 14, NHeadKV: 2, HeadDim: 64, NFF: 4864, NVocab: 151936,
		NCtx: 32768, RopeBase: 1e6, RMSEps: 1e-6, Tied: true, QKVBias: true, Merges: 200},
	{Name: "qwen3-0.6b", Arch: "qwen3", Note: "the shape of Qwen3-0.6B",
		NEmbd: 1024, NLayer: 28, NHead: 16, NHeadKV: 8, HeadDim: 128, NFF: 3072, NVocab: 151936,
		NCtx: 40960, RopeBase: 1e6, RMSEps: 1e-6, Tied: true, QKNorm: true, Merges: 200},
	{Name: "qwen3-30b-a3b", Arch: "qwen3moe",
		Note:  "Qwen3-30B-A3B's layer shapes scaled down to fit 8 GB: 24 of its 48 layers and 48 of its 128 experts (8 used, as the real model)",
		NEmbd: 2048, NLayer: 24, NHead: 32, NHeadKV: 4, HeadDim: 128, NVocab: 151936,
		NCtx: 40960, RopeBase: 1e6, RMSEps: 1e-6, QKNorm: true, Merges: 200,
		NExpert: 48, NExpertUsed: 8, NFFExpert: 768},
	{Name: "qwen3.5-0.8b", Arch: "qwen35", Note: "the shape of Qwen3.5-0.8B's text stack (no vision tower, no MTP block)",
		NEmbd: 1024, NLayer: 24, NHead: 8, NHeadKV: 2, HeadDim: 256, NFF: 3584, NVocab: 248320,
		NCtx: 262144, RopeBase: 1e7, RopeDim: 64, RMSEps: 1e-6, Tied: true, QKNorm: true, Merges: 200,
		FullAttnInterval: 4, RopeSections: [4]int32{11, 11, 10, 0}, ConvKernel: 4, StateSize: 128, NKHeads: 16, NVHeads: 16},
	{Name: "qwen3.5-35b-a3b", Arch: "qwen35moe",
		Note: "Qwen3.5-35B-A3B's layer shapes (its config.json as recalled, not checked against a released file) scaled down to fit 8 GB: " +
			"20 of its 40 layers (every 4th full attention, as the real model) and 64 of its 256 experts (8 used and one shared expert, as the real model); no vision tower, no MTP block",
		NEmbd: 2048, NLayer: 20, NHead: 16, NHeadKV: 2, HeadDim: 256, NVocab: 248320,
		NCtx: 262144, RopeBase: 1e7, RopeDim: 64, RMSEps: 1e-6, QKNorm: true, Merges: 200,
		NExpert: 64, NExpertUsed: 8, NFFExpert: 512, NFFShexp: 512,
		FullAttnInterval: 4, RopeSections: [4]int32{11, 11, 10, 0}, ConvKernel: 4, StateSize: 128, NKHeads: 16, NVHeads: 32},
}

// Presets lists the known presets.
func Presets() []Preset { return append([]Preset(nil), presets...) }

// FindPreset returns the preset for arch and name.
func FindPreset(arch, name string) (Preset, error) {
	var names []string
	for _, p := range presets {
		if p.Arch == arch && p.Name == name {
			return p, nil
		}
		if p.Arch == arch {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		var arches []string
		seen := map[string]bool{}
		for _, p := range presets {
			if !seen[p.Arch] {
				seen[p.Arch] = true
				arches = append(arches, p.Arch)
			}
		}
		sort.Strings(arches)
		return Preset{}, fmt.Errorf("synth: no presets for architecture %q (have: %s)", arch, strings.Join(arches, ", "))
	}
	sort.Strings(names)
	return Preset{}, fmt.Errorf("synth: no preset %q for %s (have: %s)", name, arch, strings.Join(names, ", "))
}

// Options choose what Build writes.
type Options struct {
	Preset Preset
	Type   quant.Type // weight type of the matrices; 1-D tensors, the router and the conv kernels stay F32
	Seed   uint64
	// Progress, when set, is called as the writer starts generating tensor
	// i (1-based) of n.
	Progress func(tensor string, i, n int)
}

// Fallback records a matrix written in another type than asked, because its
// rows are not a multiple of the asked type's block size; the substitute is
// the one llama.cpp's quantizer picks in the same case.
type Fallback struct {
	Tensor   string
	Asked    quant.Type
	Used     quant.Type
	RowWidth int
}

func (f Fallback) String() string {
	return fmt.Sprintf("%s: rows of %d are not a multiple of %s's block size; written as %s", f.Tensor, f.RowWidth, f.Asked, f.Used)
}

// Result describes what Build put in the file.
type Result struct {
	Builder   *gguf.Builder
	Fallbacks []Fallback
	Params    int64
}

// Build returns a Builder holding the whole model; tensor data is generated
// when the Builder writes, one tensor at a time.
func Build(opts Options) (*Result, error) {
	p := opts.Preset
	if p.NHead <= 0 || p.NHeadKV <= 0 || p.NHead%p.NHeadKV != 0 {
		return nil, fmt.Errorf("synth: preset %s: %d heads is not a multiple of %d kv heads", p.Name, p.NHead, p.NHeadKV)
	}
	if !quantizable(opts.Type) {
		return nil, refuse.New("synth", "no quantizer for %s (types apr can write: %s)", opts.Type, strings.Join(writableTypes(), ", "))
	}
	voc := ByteLevelVocab(p.Merges)
	nVocab := len(voc.Tokens)
	if p.NVocab > 0 {
		if p.NVocab < nVocab {
			return nil, fmt.Errorf("synth: preset %s: vocab %d is smaller than the synthetic vocabulary (%d)", p.Name, p.NVocab, nVocab)
		}
		for i := nVocab; i < p.NVocab; i++ {
			voc.Tokens = append(voc.Tokens, fmt.Sprintf("[PAD%d]", i))
			voc.Types = append(voc.Types, 5) // UNUSED
		}
		nVocab = p.NVocab
	}
	ropeDim := p.RopeDim
	if ropeDim == 0 {
		ropeDim = p.HeadDim
	}

	b := gguf.NewBuilder()
	a := p.Arch
	hybrid := a == "qwen35" || a == "qwen35moe" // Gated DeltaNet layers and gated attention
	u32 := func(k string, v int) { b.Set(a+"."+k, gguf.V(uint32(v))) }
	b.Set("general.architecture", gguf.V(a))
	b.Set("general.name", gguf.V(fmt.Sprintf("apr-synth-%s-%s", a, p.Name)))
	b.Set("general.file_type", gguf.V(uint32(fileType(opts.Type))))
	b.Set("general.quantization_version", gguf.V(uint32(2)))
	u32("vocab_size", nVocab)
	u32("context_length", p.NCtx)
	u32("embedding_length", p.NEmbd)
	u32("block_count", p.NLayer)
	if p.NFF > 0 {
		u32("feed_forward_length", p.NFF)
	}
	u32("attention.head_count", p.NHead)
	u32("attention.head_count_kv", p.NHeadKV)
	b.Set(a+".rope.freq_base", gguf.V(float32(p.RopeBase)))
	if a == "llama" || hybrid {
		u32("rope.dimension_count", ropeDim)
	}
	b.Set(a+".attention.layer_norm_rms_epsilon", gguf.V(float32(p.RMSEps)))
	if p.HeadDim*p.NHead != p.NEmbd || a == "qwen3" || a == "qwen3moe" || hybrid {
		u32("attention.key_length", p.HeadDim)
		u32("attention.value_length", p.HeadDim)
	}
	if p.NExpert > 0 {
		u32("expert_count", p.NExpert)
		u32("expert_used_count", p.NExpertUsed)
		u32("expert_feed_forward_length", p.NFFExpert)
	}
	if p.NFFShexp > 0 {
		u32("expert_shared_feed_forward_length", p.NFFShexp)
	}
	if hybrid {
		b.Set(a+".rope.dimension_sections", gguf.V(p.RopeSections[:]))
		u32("ssm.conv_kernel", p.ConvKernel)
		u32("ssm.inner_size", p.NVHeads*p.StateSize)
		u32("ssm.state_size", p.StateSize)
		u32("ssm.group_count", p.NKHeads)
		u32("ssm.time_step_rank", p.NVHeads)
		u32("full_attention_interval", p.FullAttnInterval)
	}
	b.Set("tokenizer.ggml.model", gguf.V("gpt2"))
	b.Set("tokenizer.ggml.pre", gguf.V(voc.Pre))
	b.Set("tokenizer.ggml.tokens", gguf.V(voc.Tokens))
	b.Set("tokenizer.ggml.token_type", gguf.V(voc.Types))
	b.Set("tokenizer.ggml.merges", gguf.V(voc.Merges))
	b.Set("tokenizer.ggml.bos_token_id", gguf.V(uint32(voc.BOS)))
	b.Set("tokenizer.ggml.eos_token_id", gguf.V(uint32(voc.EOS)))
	b.Set("tokenizer.ggml.padding_token_id", gguf.V(uint32(voc.EndOfText)))
	b.Set("tokenizer.ggml.add_bos_token", gguf.V(false))
	b.Set("tokenizer.chat_template", gguf.V(voc.Template))

	g := &gen{b: b, seed: opts.Seed, wtype: opts.Type, progress: opts.Progress}
	e := p.NEmbd
	q, kv := p.NHead*p.HeadDim, p.NHeadKV*p.HeadDim
	g.matrix("token_embd.weight", e, nVocab)
	for l := range p.NLayer {
		pre := fmt.Sprintf("blk.%d.", l)
		g.norm(pre+"attn_norm.weight", e)
		full := !hybrid || (l+1)%p.FullAttnInterval == 0
		if full {
			qRows := q
			if hybrid {
				qRows = 2 * q // each head's query, then its gate
			}
			g.matrix(pre+"attn_q.weight", e, qRows)
			g.matrix(pre+"attn_k.weight", e, kv)
			g.matrix(pre+"attn_v.weight", e, kv)
			if p.QKVBias {
				g.bias(pre+"attn_q.bias", q)
				g.bias(pre+"attn_k.bias", kv)
				g.bias(pre+"attn_v.bias", kv)
			}
			g.matrix(pre+"attn_output.weight", q, e)
			if p.QKNorm {
				g.norm(pre+"attn_q_norm.weight", p.HeadDim)
				g.norm(pre+"attn_k_norm.weight", p.HeadDim)
			}
		} else {
			keyDim, valDim := p.NKHeads*p.StateSize, p.NVHeads*p.StateSize
			g.matrix(pre+"attn_qkv.weight", e, 2*keyDim+valDim)
			g.matrix(pre+"attn_gate.weight", e, valDim)
			g.f32(pre+"ssm_conv1d.weight", []int64{int64(p.ConvKernel), int64(2*keyDim + valDim)}, normal(0, 0.3))
			g.f32(pre+"ssm_dt.bias", []int64{int64(p.NVHeads)}, normal(1, 0.1))
			g.f32(pre+"ssm_a", []int64{int64(p.NVHeads)}, func(r *rand.Rand) float32 { return float32(-math.Exp(r.Float64() * math.Log(16))) })
			g.matrix(pre+"ssm_beta.weight", e, p.NVHeads)
			g.matrix(pre+"ssm_alpha.weight", e, p.NVHeads)
			g.norm(pre+"ssm_norm.weight", p.StateSize)
			g.matrix(pre+"ssm_out.weight", valDim, e)
		}
		if hybrid {
			g.norm(pre+"post_attention_norm.weight", e)
		} else {
			g.norm(pre+"ffn_norm.weight", e)
		}
		if p.NExpert > 0 {
			g.f32(pre+"ffn_gate_inp.weight", []int64{int64(e), int64(p.NExpert)}, normal(0, 1/math.Sqrt(float64(e))))
			if p.FusedGateUp {
				g.matrix(pre+"ffn_gate_up_exps.weight", e, 2*p.NFFExpert, p.NExpert)
			} else {
				g.matrix(pre+"ffn_gate_exps.weight", e, p.NFFExpert, p.NExpert)
				g.matrix(pre+"ffn_up_exps.weight", e, p.NFFExpert, p.NExpert)
			}
			g.matrix(pre+"ffn_down_exps.weight", p.NFFExpert, e, p.NExpert)
			if p.NFFShexp > 0 {
				// The shared expert and its gate, a vector (one logit per token).
				g.f32(pre+"ffn_gate_inp_shexp.weight", []int64{int64(e)}, normal(0, 1/math.Sqrt(float64(e))))
				g.matrix(pre+"ffn_gate_shexp.weight", e, p.NFFShexp)
				g.matrix(pre+"ffn_up_shexp.weight", e, p.NFFShexp)
				g.matrix(pre+"ffn_down_shexp.weight", p.NFFShexp, e)
			}
		} else {
			g.matrix(pre+"ffn_gate.weight", e, p.NFF)
			g.matrix(pre+"ffn_up.weight", e, p.NFF)
			g.matrix(pre+"ffn_down.weight", p.NFF, e)
		}
	}
	g.norm("output_norm.weight", e)
	if !p.Tied {
		g.matrix("output.weight", e, nVocab)
	}
	if g.err != nil {
		return nil, g.err
	}
	return &Result{Builder: b, Fallbacks: g.fallbacks, Params: g.params}, nil
}

// Write builds the model and writes it atomically to path.
func Write(path string, opts Options) (*Result, error) {
	r, err := Build(opts)
	if err != nil {
		return nil, err
	}
	return r, r.Builder.WriteFile(path)
}

// quantizable reports whether apr can write model weights of type t. Q8_1
// and Q8_K exist for activations only: llama.cpp does not load weights of
// those types, so they are not offered.
func quantizable(t quant.Type) bool {
	if t == quant.Q8_1 || t == quant.Q8_K {
		return false
	}
	return t == quant.F32 || quant.CanQuantize(t)
}

func writableTypes() []string {
	var out []string
	for _, in := range quant.All() {
		if quantizable(in.Type) && !in.Integer {
			out = append(out, in.Name)
		}
	}
	return out
}

// fallbackType is llama.cpp's substitute for a type whose block size does not
// divide a tensor's rows (llama-quant.cpp); F16 when even that does not fit.
func fallbackType(t quant.Type, rowWidth int) quant.Type {
	var sub quant.Type
	switch t {
	case quant.TQ1_0, quant.TQ2_0:
		sub = quant.Q4_0
	case quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_S, quant.IQ1_M,
		quant.Q2_K, quant.Q3_K, quant.IQ4_XS:
		sub = quant.IQ4_NL
	case quant.Q4_K:
		sub = quant.Q5_0
	case quant.Q5_K:
		sub = quant.Q5_1
	case quant.Q6_K:
		sub = quant.Q8_0
	default:
		sub = quant.F16
	}
	if in, err := quant.Lookup(sub); err != nil || rowWidth%in.BlockSize != 0 || !quantizable(sub) {
		return quant.F16
	}
	return sub
}

// fileType is llama.cpp's general.file_type for a model whose matrices are t.
func fileType(t quant.Type) int {
	switch t {
	case quant.F32:
		return 0
	case quant.F16:
		return 1
	case quant.Q4_0:
		return 2
	case quant.Q4_1:
		return 3
	case quant.Q8_0:
		return 7
	case quant.Q5_0:
		return 8
	case quant.Q5_1:
		return 9
	case quant.Q2_K:
		return 10
	case quant.Q3_K:
		return 12
	case quant.Q4_K:
		return 15
	case quant.Q5_K:
		return 17
	case quant.Q6_K:
		return 18
	case quant.IQ4_NL:
		return 25
	case quant.IQ4_XS:
		return 30
	case quant.BF16:
		return 32
	case quant.TQ1_0:
		return 36
	case quant.TQ2_0:
		return 37
	}
	return 0
}

// gen adds tensors whose values come from seeded generators, one per
// (tensor, row), so that any row is reproducible on its own and rows can be
// generated and quantized in parallel.
type gen struct {
	b         *gguf.Builder
	seed      uint64
	wtype     quant.Type
	n         uint64
	params    int64
	fallbacks []Fallback
	err       error
	progress  func(tensor string, i, n int)
}

func normal(mean, std float64) func(*rand.Rand) float32 {
	return func(r *rand.Rand) float32 { return float32(mean + std*r.NormFloat64()) }
}

// matrix adds a weight [ne0, ne1(, ne2)] ~ N(0, 1/sqrt(ne0)), fan-in scaled,
// in the model's weight type (or llama.cpp's fallback for that type).
func (g *gen) matrix(name string, dims ...int) {
	shape := make([]int64, len(dims))
	for i, d := range dims {
		shape[i] = int64(d)
	}
	typ := g.wtype
	if in, err := quant.Lookup(typ); err == nil && dims[0]%in.BlockSize != 0 {
		sub := fallbackType(typ, dims[0])
		g.fallbacks = append(g.fallbacks, Fallback{Tensor: name, Asked: typ, Used: sub, RowWidth: dims[0]})
		typ = sub
	}
	g.add(name, typ, shape, normal(0, 1/math.Sqrt(float64(dims[0]))))
}

// norm adds a 1-D norm weight ~ 1 + N(0, 0.05), always F32.
func (g *gen) norm(name string, n int) { g.f32(name, []int64{int64(n)}, normal(1, 0.05)) }

// bias adds a 1-D bias ~ N(0, 0.05), always F32.
func (g *gen) bias(name string, n int) { g.f32(name, []int64{int64(n)}, normal(0, 0.05)) }

func (g *gen) f32(name string, shape []int64, sample func(*rand.Rand) float32) {
	g.add(name, quant.F32, shape, sample)
}

// rowsPerChunk rows are generated and encoded by one worker at a time.
const rowsPerChunk = 64

func (g *gen) add(name string, typ quant.Type, shape []int64, sample func(*rand.Rand) float32) {
	if g.err != nil {
		return
	}
	g.n++
	stream := g.n << 32
	seed := g.seed
	ne0 := int(shape[0])
	rows := 1
	for _, d := range shape[1:] {
		rows *= int(d)
	}
	g.params += int64(ne0) * int64(rows)
	info, err := quant.Lookup(typ)
	if err != nil {
		g.err = err
		return
	}
	rb, ok := info.RowBytes(int64(ne0))
	if !ok {
		g.err = fmt.Errorf("synth: %s: row of %d is not a multiple of %s's block size %d", name, ne0, typ, info.BlockSize)
		return
	}
	rowBytes := int(rb)
	idx := g.n
	g.err = g.b.AddTensorFunc(name, typ, shape, func(w io.Writer) error {
		if g.progress != nil {
			g.progress(name, int(idx), int(g.n)) // g.n is the total once Build returned
		}
		workers := max(1, runtime.GOMAXPROCS(0))
		nChunks := (rows + rowsPerChunk - 1) / rowsPerChunk
		type chunk struct {
			buf []byte
			err error
		}
		results := make([]chan chunk, nChunks)
		for i := range results {
			results[i] = make(chan chunk, 1)
		}
		sem := make(chan struct{}, workers)
		go func() {
			for c := range nChunks {
				sem <- struct{}{}
				go func() {
					lo, hi := c*rowsPerChunk, min(rows, (c+1)*rowsPerChunk)
					buf := make([]byte, (hi-lo)*rowBytes)
					row := make([]float32, ne0)
					var err error
					for r := lo; r < hi && err == nil; r++ {
						rng := rand.New(rand.NewPCG(seed, stream|uint64(r)))
						for i := range row {
							row[i] = sample(rng)
						}
						err = encodeRow(typ, row, buf[(r-lo)*rowBytes:(r-lo+1)*rowBytes])
					}
					results[c] <- chunk{buf, err}
				}()
			}
		}()
		// A chunk's slot is given back when it is written, so at most
		// `workers` chunks are in memory however the workers are scheduled.
		var werr error
		for c := range nChunks {
			ch := <-results[c]
			<-sem
			if werr != nil {
				continue // drain the workers
			}
			if ch.err != nil {
				werr = fmt.Errorf("%s: %w", name, ch.err)
				continue
			}
			if _, err := w.Write(ch.buf); err != nil {
				werr = err
			}
		}
		return werr
	})
}

func encodeRow(t quant.Type, row []float32, dst []byte) error {
	if t == quant.F32 {
		for i, v := range row {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return nil
	}
	return quant.Quantize(t, row, dst)
}
