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
	"sort"
	"strings"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
)

// Preset is the shape of a model.
type Preset struct {
	Name     string
	Arch     string
	NEmbd    int
	NLayer   int
	NHead    int
	NHeadKV  int
	HeadDim  int
	NFF      int
	NVocab   int // 0: the synthetic vocabulary's own size; else padded to this
	NCtx     int
	RopeBase float64
	RMSEps   float64
	Tied     bool // output projection tied to token_embd
	Merges   int  // merges in the synthetic byte-level vocabulary
}

var presets = []Preset{
	{Name: "tiny", Arch: "llama", NEmbd: 64, NLayer: 2, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 128,
		NCtx: 512, RopeBase: 10000, RMSEps: 1e-5, Merges: 200},
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
	Type   quant.Type // weight type of the 2-D matrices; 1-D tensors stay F32
	Seed   uint64
}

// Build returns a Builder holding the whole model; tensor data is generated
// when the Builder writes, one tensor at a time.
func Build(opts Options) (*gguf.Builder, error) {
	p := opts.Preset
	if p.NHead <= 0 || p.NHeadKV <= 0 || p.NHead%p.NHeadKV != 0 {
		return nil, fmt.Errorf("synth: preset %s: %d heads is not a multiple of %d kv heads", p.Name, p.NHead, p.NHeadKV)
	}
	if opts.Type != quant.F32 && !quantizable(opts.Type) {
		return nil, fmt.Errorf("synth: no quantizer for %s", opts.Type)
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

	b := gguf.NewBuilder()
	a := p.Arch
	b.Set("general.architecture", gguf.V(a))
	b.Set("general.name", gguf.V(fmt.Sprintf("apr-synth-%s-%s", a, p.Name)))
	b.Set("general.file_type", gguf.V(uint32(fileType(opts.Type))))
	b.Set("general.quantization_version", gguf.V(uint32(2)))
	b.Set(a+".vocab_size", gguf.V(uint32(nVocab)))
	b.Set(a+".context_length", gguf.V(uint32(p.NCtx)))
	b.Set(a+".embedding_length", gguf.V(uint32(p.NEmbd)))
	b.Set(a+".block_count", gguf.V(uint32(p.NLayer)))
	b.Set(a+".feed_forward_length", gguf.V(uint32(p.NFF)))
	b.Set(a+".attention.head_count", gguf.V(uint32(p.NHead)))
	b.Set(a+".attention.head_count_kv", gguf.V(uint32(p.NHeadKV)))
	b.Set(a+".rope.freq_base", gguf.V(float32(p.RopeBase)))
	b.Set(a+".rope.dimension_count", gguf.V(uint32(p.HeadDim)))
	b.Set(a+".attention.layer_norm_rms_epsilon", gguf.V(float32(p.RMSEps)))
	if p.HeadDim*p.NHead != p.NEmbd {
		b.Set(a+".attention.key_length", gguf.V(uint32(p.HeadDim)))
		b.Set(a+".attention.value_length", gguf.V(uint32(p.HeadDim)))
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

	g := &gen{b: b, seed: opts.Seed, wtype: opts.Type}
	kv := p.NHeadKV * p.HeadDim
	q := p.NHead * p.HeadDim
	g.matrix("token_embd.weight", p.NEmbd, nVocab)
	for l := range p.NLayer {
		pre := fmt.Sprintf("blk.%d.", l)
		g.norm(pre+"attn_norm.weight", p.NEmbd)
		g.matrix(pre+"attn_q.weight", p.NEmbd, q)
		g.matrix(pre+"attn_k.weight", p.NEmbd, kv)
		g.matrix(pre+"attn_v.weight", p.NEmbd, kv)
		g.matrix(pre+"attn_output.weight", q, p.NEmbd)
		g.norm(pre+"ffn_norm.weight", p.NEmbd)
		g.matrix(pre+"ffn_gate.weight", p.NEmbd, p.NFF)
		g.matrix(pre+"ffn_up.weight", p.NEmbd, p.NFF)
		g.matrix(pre+"ffn_down.weight", p.NFF, p.NEmbd)
	}
	g.norm("output_norm.weight", p.NEmbd)
	if !p.Tied {
		g.matrix("output.weight", p.NEmbd, nVocab)
	}
	return b, g.err
}

// Write builds the model and writes it atomically to path.
func Write(path string, opts Options) error {
	b, err := Build(opts)
	if err != nil {
		return err
	}
	return b.WriteFile(path)
}

func quantizable(t quant.Type) bool {
	switch t {
	case quant.F32, quant.F16, quant.BF16:
		return true
	}
	return quant.CanQuantize(t)
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

// gen adds tensors whose values come from a per-tensor seeded generator, so
// that each tensor is reproducible on its own.
type gen struct {
	b     *gguf.Builder
	seed  uint64
	wtype quant.Type
	n     uint64
	err   error
}

func (g *gen) rng() *rand.Rand {
	g.n++
	return rand.New(rand.NewPCG(g.seed, g.n))
}

// matrix adds a 2-D weight [ne0, ne1] ~ N(0, 1/sqrt(ne0)), fan-in scaled.
func (g *gen) matrix(name string, ne0, ne1 int) {
	std := 1 / math.Sqrt(float64(ne0))
	g.add(name, g.wtype, []int64{int64(ne0), int64(ne1)}, func(r *rand.Rand) float32 { return float32(r.NormFloat64() * std) })
}

// norm adds a 1-D norm weight ~ 1 + N(0, 0.05), always F32.
func (g *gen) norm(name string, n int) {
	g.add(name, quant.F32, []int64{int64(n)}, func(r *rand.Rand) float32 { return float32(1 + 0.05*r.NormFloat64()) })
}

func (g *gen) add(name string, typ quant.Type, shape []int64, sample func(*rand.Rand) float32) {
	if g.err != nil {
		return
	}
	r := g.rng()
	ne0 := int(shape[0])
	rows := 1
	for _, d := range shape[1:] {
		rows *= int(d)
	}
	info, err := quant.Lookup(typ)
	if err != nil {
		g.err = err
		return
	}
	rowBytes, ok := info.RowBytes(int64(ne0))
	if !ok {
		g.err = fmt.Errorf("synth: %s: row of %d is not a multiple of %s's block size %d", name, ne0, typ, info.BlockSize)
		return
	}
	g.err = g.b.AddTensorFunc(name, typ, shape, func(w io.Writer) error {
		row := make([]float32, ne0)
		buf := make([]byte, rowBytes)
		for range rows {
			for i := range row {
				row[i] = sample(r)
			}
			if err := encodeRow(typ, row, buf); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}

func encodeRow(t quant.Type, row []float32, dst []byte) error {
	switch t {
	case quant.F32:
		for i, v := range row {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return nil
	}
	return quant.Quantize(t, row, dst)
}
