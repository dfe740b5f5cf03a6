package model_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/refuse"
)

func loadFixture(t *testing.T, rel string) (*model.Spec, error) {
	t.Helper()
	f, err := gguf.Open(testutil.Fixture(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return model.Load(f)
}

// specSummary is the part of a Spec the fixture table checks.
type specSummary struct {
	Arch                                                           string
	NEmbd, NLayer, NHead, NHeadKV, HeadDimK, HeadDimV, NFF, NVocab int
	NCtxTrain, RopeDim                                             int
	RopeBase                                                       float64
	RopeType                                                       model.RopeType
	RMSEps                                                         float32
	NExpert, NExpertUsed, NFFExpert                                int
	NormTopKProb, Tied, QKNorm, Biases                             bool
	FFN                                                            string
}

func summarize(s *model.Spec) specSummary {
	l := s.Layers[0]
	return specSummary{s.Arch, s.NEmbd, s.NLayer, s.NHead, s.NHeadKV, s.HeadDimK, s.HeadDimV, s.NFF, s.NVocab,
		s.NCtxTrain, s.RopeDim, s.RopeBase, s.RopeType, float32(s.RMSEps), s.NExpert, s.NExpertUsed, s.NFFExpert,
		s.NormTopKProb, s.Tied, l.QNorm != nil, l.Bq != nil, l.FFN}
}

func TestLoadFixtures(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		want     specSummary
		defaults []string // keys that must be recorded as defaulted
	}{
		{"stories260K", "models/stories260K.gguf",
			specSummary{"llama", 64, 5, 8, 4, 8, 8, 172, 512, 2048, 8, 10000, model.RopeNorm, 1e-5, 0, 0, 0, false, false, false, false, "dense"},
			[]string{"llama.rope.freq_base", "llama.attention.key_length"}},
		{"llama-tiny-Q4_K_M", "models/synth/llama-tiny-Q4_K_M.gguf",
			specSummary{"llama", 256, 2, 4, 2, 64, 64, 512, 2003, 2048, 64, 10000, model.RopeNorm, 1e-5, 0, 0, 0, false, false, false, false, "dense"}, nil},
		{"qwen2-tiny-F32", "models/synth/qwen2-tiny-F32.gguf",
			specSummary{"qwen2", 256, 2, 4, 2, 64, 64, 512, 2003, 4096, 64, 1e6, model.RopeNeox, 1e-6, 0, 0, 0, false, true, false, true, "dense"},
			[]string{"qwen2.rope.dimension_count"}},
		{"qwen3-tiny-F16", "models/synth/qwen3-tiny-F16.gguf",
			specSummary{"qwen3", 256, 2, 4, 2, 128, 128, 512, 2003, 4096, 128, 1e6, model.RopeNeox, 1e-6, 0, 0, 0, false, true, true, false, "dense"}, nil},
		{"qwen3moe-tiny-Q8_0", "models/synth/qwen3moe-tiny-Q8_0.gguf",
			specSummary{"qwen3moe", 256, 2, 4, 2, 64, 64, 512, 2003, 4096, 64, 1e6, model.RopeNeox, 1e-6, 8, 2, 256, true, true, true, false, "moe"},
			[]string{"qwen3moe.expert_weights_norm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := loadFixture(t, tt.file)
			if err != nil {
				t.Fatalf("model.Load(%s): %v", tt.file, err)
			}
			if diff := cmp.Diff(tt.want, summarize(s)); diff != "" {
				t.Errorf("model.Load(%s) mismatch (-want +got):\n%s", tt.file, diff)
			}
			got := map[string]bool{}
			for _, d := range s.Defaults {
				got[d.Key] = true
			}
			for _, k := range tt.defaults {
				if !got[k] {
					t.Errorf("model.Load(%s): default for %q not recorded (got %v)", tt.file, k, s.Defaults)
				}
			}
			if s.Tied != (s.Output == s.TokEmbd) {
				t.Errorf("Tied = %v but Output is TokEmbd: %v", s.Tied, s.Output == s.TokEmbd)
			}
		})
	}
}

// RewriteFixture copies the fixture src into a new file under tb.TempDir()
// after edit has changed its metadata or tensors; skip names tensors left
// out. It returns the new path.
func rewriteFixture(tb testing.TB, src string, edit func(b *gguf.Builder), skip ...string) string {
	tb.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	for _, kv := range f.KV {
		b.Set(kv.Key, kv.Value)
	}
	drop := map[string]bool{}
	for _, s := range skip {
		drop[s] = true
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if drop[ti.Name] {
			continue
		}
		if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
			tb.Fatal(err)
		}
	}
	if edit != nil {
		edit(b)
	}
	out := filepath.Join(tb.TempDir(), filepath.Base(src))
	if err := b.WriteFile(out); err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestLoadRefusesByName(t *testing.T) {
	base := testutil.Fixture(t, "models/synth/qwen2-tiny-Q4_0.gguf")
	moe := testutil.Fixture(t, "models/synth/qwen3moe-tiny-Q8_0.gguf")
	tests := []struct {
		name  string
		src   string
		edit  func(b *gguf.Builder)
		skip  []string
		wants []string // substrings of the refusal
	}{
		{"missing embedding_length", base, func(b *gguf.Builder) { b.Delete("qwen2.embedding_length") }, nil,
			[]string{`"qwen2.embedding_length"`, "missing"}},
		{"missing block_count", base, func(b *gguf.Builder) { b.Delete("qwen2.block_count") }, nil,
			[]string{`"qwen2.block_count"`, "missing"}},
		{"missing rms epsilon", base, func(b *gguf.Builder) { b.Delete("qwen2.attention.layer_norm_rms_epsilon") }, nil,
			[]string{`"qwen2.attention.layer_norm_rms_epsilon"`, "missing"}},
		{"missing head_count", base, func(b *gguf.Builder) { b.Delete("qwen2.attention.head_count") }, nil,
			[]string{`"qwen2.attention.head_count"`, "missing"}},
		{"missing context_length", base, func(b *gguf.Builder) { b.Delete("qwen2.context_length") }, nil,
			[]string{`"qwen2.context_length"`, "missing"}},
		{"missing feed_forward_length", base, func(b *gguf.Builder) { b.Delete("qwen2.feed_forward_length") }, nil,
			[]string{`"qwen2.feed_forward_length"`, "missing"}},
		{"missing expert_used_count", moe, func(b *gguf.Builder) { b.Delete("qwen3moe.expert_used_count") }, nil,
			[]string{`"qwen3moe.expert_used_count"`, "missing"}},
		{"missing expert_feed_forward_length", moe, func(b *gguf.Builder) { b.Delete("qwen3moe.expert_feed_forward_length") }, nil,
			[]string{`"qwen3moe.expert_feed_forward_length"`, "missing"}},
		{"key of the wrong type", base, func(b *gguf.Builder) { b.Set("qwen2.embedding_length", gguf.V("256")) }, nil,
			[]string{`"qwen2.embedding_length"`, "string"}},
		{"absurd value", base, func(b *gguf.Builder) { b.Set("qwen2.block_count", gguf.V(uint32(1<<30))) }, nil,
			[]string{`"qwen2.block_count"`, "out of range"}},
		{"kv heads do not divide heads", base, func(b *gguf.Builder) { b.Set("qwen2.attention.head_count_kv", gguf.V(uint32(3))) }, nil,
			[]string{`"qwen2.attention.head_count_kv"`}},
		{"unknown architecture", base, func(b *gguf.Builder) { b.Set("general.architecture", gguf.V("mamba9")) }, nil,
			[]string{`unknown architecture "mamba9"`}},
		{"no architecture", base, func(b *gguf.Builder) { b.Delete("general.architecture") }, nil,
			[]string{"general.architecture"}},
		{"shape contradicts kv heads", base, func(b *gguf.Builder) { b.Set("qwen2.attention.head_count_kv", gguf.V(uint32(4))) }, nil,
			[]string{`"blk.0.attn_k.weight"`, "shape"}},
		{"shape contradicts embedding", base, func(b *gguf.Builder) { b.Set("qwen2.embedding_length", gguf.V(uint32(512))) }, nil,
			[]string{`"token_embd.weight"`, "shape"}},
		{"shape contradicts vocab", base, func(b *gguf.Builder) { b.Set("qwen2.vocab_size", gguf.V(uint32(2003+7))) }, nil,
			[]string{`"qwen2.vocab_size"`}},
		{"shape contradicts experts", moe, func(b *gguf.Builder) { b.Set("qwen3moe.expert_count", gguf.V(uint32(16))) }, nil,
			[]string{`"blk.0.ffn_gate_inp.weight"`, "shape"}},
		{"missing tensor", base, nil, []string{"blk.1.ffn_up.weight"},
			[]string{`"blk.1.ffn_up.weight"`, "missing"}},
		{"stray tensor", base, func(b *gguf.Builder) {
			if err := b.AddTensor("blk.0.attn_q_norm.weight", quant.F32, []int64{64}, make([]byte, 256)); err != nil {
				t.Fatal(err)
			}
		}, nil, []string{`"blk.0.attn_q_norm.weight"`, "not part of architecture qwen2"}},
		{"unsupported rope scaling", base, func(b *gguf.Builder) { b.Set("qwen2.rope.scaling.type", gguf.V("longrope")) }, nil,
			[]string{`"qwen2.rope.scaling.type"`, "longrope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := rewriteFixture(t, tt.src, tt.edit, tt.skip...)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, err = model.Load(f)
			r, ok := refuse.As(err)
			if !ok || !errors.Is(err, refuse.ErrRefused) || r.By != model.By {
				t.Fatalf("model.Load = %v, want a refusal by %q", err, model.By)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("model.Load refusal %q does not mention %q", err, w)
				}
			}
		})
	}
}
