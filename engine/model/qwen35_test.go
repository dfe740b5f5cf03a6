package model_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/refuse"
)

func TestQwen35SpecFromFixtures(t *testing.T) {
	for _, name := range []string{"qwen35-tiny-F32", "qwen35-tiny-Q8_0"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(testutil.Fixture(t, filepath.Join("models", "synth", name+".gguf")))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := model.Load(f)
			if err != nil {
				t.Fatalf("model.Load(%s): %v", name, err)
			}
			q, ok := s.Ext.(*model.Qwen35)
			if !ok {
				t.Fatalf("model.Load(%s).Ext is %T, want *model.Qwen35", name, s.Ext)
			}
			type summary struct {
				NEmbd, NLayer, NHead, NHeadKV, HeadDim, NFF, NVocab, RopeDim int
				RopeBase, RMSEps                                             float64
				RopeType                                                     model.RopeType
				Tied                                                         bool
				Kinds                                                        []string
				Q                                                            model.Qwen35
			}
			got := summary{NEmbd: s.NEmbd, NLayer: s.NLayer, NHead: s.NHead, NHeadKV: s.NHeadKV, HeadDim: s.HeadDimK,
				NFF: s.NFF, NVocab: s.NVocab, RopeDim: s.RopeDim, RopeBase: s.RopeBase, RMSEps: float64(float32(s.RMSEps)),
				RopeType: s.RopeType, Tied: s.Tied, Q: *q}
			for _, l := range s.Layers {
				got.Kinds = append(got.Kinds, l.Kind)
			}
			want := summary{NEmbd: 256, NLayer: 4, NHead: 4, NHeadKV: 2, HeadDim: 64, NFF: 256, NVocab: 2003, RopeDim: 16,
				RopeBase: 1e7, RMSEps: float64(float32(1e-6)), RopeType: model.RopeIMRope, Tied: true,
				Kinds: []string{model.LayerGatedDeltaNet, model.LayerGatedDeltaNet, model.LayerGatedDeltaNet, model.LayerGatedAttention},
				Q: model.Qwen35{RopeSections: [4]int{3, 3, 2, 0}, ConvKernel: 4, InnerSize: 256, StateSize: 64, NKHeads: 2,
					NVHeads: 4, HeadVDim: 64, FullAttentionInterval: 4, Recurrent: []bool{true, true, true, false}}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("model.Load(%s) mismatch (-want +got):\n%s", name, diff)
			}
			l0, l3 := s.Layers[0], s.Layers[3]
			if l0.Ext[model.RoleSSMConv] == nil || l0.Ext[model.RoleSSMOut].Shape[0] != 256 || l0.FFNNorm == nil {
				t.Errorf("layer 0 DeltaNet tensors not bound: %v", l0.Ext)
			}
			if l3.Wq == nil || l3.Wq.Shape[1] != 512 || l3.QNorm == nil || l3.KNorm == nil || l3.Ext != nil {
				t.Errorf("layer 3 gated attention tensors not bound as expected")
			}
		})
	}
}

// rebuild copies the fixture's metadata and tensors into a Builder that a
// case edits, then parses the result in memory.
func rebuildQwen35(t *testing.T, edit func(b *gguf.Builder)) (*model.Spec, error) {
	t.Helper()
	f, err := gguf.Open(testutil.Fixture(t, filepath.Join("models", "synth", "qwen35-tiny-Q8_0.gguf")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	for _, kv := range f.KV {
		b.Set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	edit(b)
	raw, _, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse("edited.gguf", raw)
	if err != nil {
		t.Fatal(err)
	}
	return model.Load(g)
}

func TestQwen35RefusesByName(t *testing.T) {
	del := func(k string) func(*gguf.Builder) { return func(b *gguf.Builder) { b.Delete(k) } }
	set := func(k string, v any) func(*gguf.Builder) { return func(b *gguf.Builder) { b.Set(k, gguf.V(v)) } }
	for _, tc := range []struct {
		name string
		edit func(*gguf.Builder)
		want string // must appear in the refusal
	}{
		{"no conv kernel", del("qwen35.ssm.conv_kernel"), `"qwen35.ssm.conv_kernel" is missing`},
		{"no inner size", del("qwen35.ssm.inner_size"), `"qwen35.ssm.inner_size" is missing`},
		{"no state size", del("qwen35.ssm.state_size"), `"qwen35.ssm.state_size" is missing`},
		{"no group count", del("qwen35.ssm.group_count"), `"qwen35.ssm.group_count" is missing`},
		{"no time step rank", del("qwen35.ssm.time_step_rank"), `"qwen35.ssm.time_step_rank" is missing`},
		{"no rope sections", del("qwen35.rope.dimension_sections"), `"qwen35.rope.dimension_sections" is missing`},
		{"no rms eps", del("qwen35.attention.layer_norm_rms_epsilon"), `"qwen35.attention.layer_norm_rms_epsilon" is missing`},
		{"no head count", del("qwen35.attention.head_count"), `"qwen35.attention.head_count" is missing`},
		{"no ffn length", del("qwen35.feed_forward_length"), `"qwen35.feed_forward_length" is missing`},
		{"three rope sections", set("qwen35.rope.dimension_sections", []int32{3, 3, 2}), `has 3 entries, want 4`},
		{"zero rope sections", set("qwen35.rope.dimension_sections", []int32{0, 0, 0, 8}), `no t, h or w section`},
		{"inner size not heads × state", set("qwen35.ssm.inner_size", uint32(512)), `"qwen35.ssm.inner_size" = 512`},
		{"v heads not a multiple of k heads", set("qwen35.ssm.group_count", uint32(3)), `not a multiple`},
		{"interval puts attention on layer 1", set("qwen35.full_attention_interval", uint32(2)), `"blk.1.attn_q.weight" is missing`},
		{"missing ssm_a", func(b *gguf.Builder) { dropTensor(t, b, "blk.1.ssm_a") }, `"blk.1.ssm_a" is missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rebuildQwen35(t, tc.edit)
			if !errors.Is(err, refuse.ErrRefused) {
				t.Fatalf("model.Load(%s) = %v, want a refusal", tc.name, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("model.Load(%s) refusal %q does not say %q", tc.name, err, tc.want)
			}
		})
	}
}

// dropTensor rebuilds b without the tensor name (the Builder has no delete).
func dropTensor(t *testing.T, b *gguf.Builder, name string) {
	t.Helper()
	raw, _, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("drop.gguf", raw)
	if err != nil {
		t.Fatal(err)
	}
	nb := gguf.NewBuilder()
	for _, kv := range f.KV {
		nb.Set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Name != name {
			if err := nb.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
				t.Fatal(err)
			}
		}
	}
	*b = *nb
}

func TestQwen35DefaultsAndRecurrentLayers(t *testing.T) {
	s, err := rebuildQwen35(t, func(b *gguf.Builder) {
		b.Delete("qwen35.full_attention_interval")
	})
	if err != nil {
		t.Fatalf("model.Load without full_attention_interval: %v", err)
	}
	if got := s.Ext.(*model.Qwen35).FullAttentionInterval; got != 4 {
		t.Errorf("default full_attention_interval = %d, want 4", got)
	}
	found := false
	for _, d := range s.Defaults {
		found = found || d.Key == "qwen35.full_attention_interval"
	}
	if !found {
		t.Errorf("Spec.Defaults %v does not record qwen35.full_attention_interval", s.Defaults)
	}

	s, err = rebuildQwen35(t, func(b *gguf.Builder) {
		b.Set("qwen35.attention.recurrent_layers", gguf.V([]bool{true, true, true, false}))
	})
	if err != nil {
		t.Fatalf("model.Load with attention.recurrent_layers: %v", err)
	}
	if diff := cmp.Diff([]bool{true, true, true, false}, s.Ext.(*model.Qwen35).Recurrent); diff != "" {
		t.Errorf("Recurrent from attention.recurrent_layers mismatch (-want +got):\n%s", diff)
	}
}

// With nextn_predict_layers the last blocks are MTP heads: the main stack is
// shorter, and their tensors are known (not refused as unbound).
func TestQwen35NextNBlocksAreNotRun(t *testing.T) {
	s, err := rebuildQwen35(t, func(b *gguf.Builder) {
		b.Set("qwen35.nextn_predict_layers", gguf.V(uint32(1)))
	})
	if err != nil {
		t.Fatalf("model.Load with nextn_predict_layers 1: %v", err)
	}
	if s.NLayer != 3 || len(s.Layers) != 3 {
		t.Errorf("NLayer = %d with %d layers, want 3 main layers", s.NLayer, len(s.Layers))
	}
	if diff := cmp.Diff([]bool{true, true, true}, s.Ext.(*model.Qwen35).Recurrent); diff != "" {
		t.Errorf("Recurrent mismatch (-want +got):\n%s", diff)
	}
	_, err = rebuildQwen35(t, func(b *gguf.Builder) {
		b.Set("qwen35.nextn_predict_layers", gguf.V(uint32(4)))
	})
	if !errors.Is(err, refuse.ErrRefused) || !strings.Contains(err.Error(), `"qwen35.nextn_predict_layers" = 4`) {
		t.Errorf("model.Load with nextn_predict_layers = block_count: %v, want a refusal naming the key", err)
	}
}

func TestQwen35RecurrentLayersMustBeBools(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"ints", []int32{1, 1, 1, 0}, "want an array of bool"},
		{"short", []bool{true, false}, "has 2 entries, block_count is 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rebuildQwen35(t, func(b *gguf.Builder) {
				b.Set("qwen35.attention.recurrent_layers", gguf.V(tc.v))
			})
			if !errors.Is(err, refuse.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("model.Load with recurrent_layers %v: %v, want a refusal saying %q", tc.v, err, tc.want)
			}
		})
	}
}
