package model_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/refuse"
)

// qwen35moeFixture is the path of a fixtures/qwen35moe model.
func qwen35moeFixture(t *testing.T, name string) string {
	t.Helper()
	return testutil.Fixture(t, filepath.Join("qwen35moe", "models", name+".gguf"))
}

func TestQwen35MoESpecFromFixtures(t *testing.T) {
	for _, name := range []string{"qwen35moe-tiny-F16", "qwen35moe-tiny-Q8_0", "qwen35moe-tiny-Q4_K_M"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(qwen35moeFixture(t, name))
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
				NExpert, NExpertUsed, NFFExpert, NFFShexp int
				Norm                                      bool
				Scale                                     float64
				Gating                                    model.Gating
				Kinds, FFN                                []string
			}
			got := summary{NExpert: s.NExpert, NExpertUsed: s.NExpertUsed, NFFExpert: s.NFFExpert, NFFShexp: q.NFFShexp,
				Norm: s.NormTopKProb, Scale: s.ExpertWeightsScale, Gating: s.ExpertGating}
			for _, l := range s.Layers {
				got.Kinds = append(got.Kinds, l.Kind)
				got.FFN = append(got.FFN, l.FFN)
			}
			want := summary{NExpert: 8, NExpertUsed: 2, NFFExpert: 256, NFFShexp: 256, Norm: true, Gating: model.GatingSoftmax,
				Kinds: []string{model.LayerGatedDeltaNet, model.LayerGatedDeltaNet, model.LayerGatedDeltaNet, model.LayerGatedAttention},
				FFN:   []string{model.FFNMoEShared, model.FFNMoEShared, model.FFNMoEShared, model.FFNMoEShared}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("model.Load(%s) mismatch (-want +got):\n%s", name, diff)
			}
			for _, l := range s.Layers {
				if l.GateInp == nil || l.GateExps == nil || l.UpExps == nil || l.DownExps == nil || l.FFNNorm == nil ||
					l.Ext[model.RoleGateUpExps] != nil || l.FFNGate != nil {
					t.Errorf("layer %d: routed experts not bound as expected", l.Index)
				}
				g := l.Ext[model.RoleShexpGateInp]
				if g == nil || len(g.Shape) != 1 || g.Shape[0] != 256 || l.Ext[model.RoleShexpGate] == nil ||
					l.Ext[model.RoleShexpUp] == nil || l.Ext[model.RoleShexpDown] == nil {
					t.Errorf("layer %d: shared expert not bound: %v", l.Index, l.Ext)
				}
			}
		})
	}
}

// rebuildQwen35MoE is rebuildQwen35 over the qwen35moe Q8_0 fixture.
func rebuildQwen35MoE(t *testing.T, edit func(b *gguf.Builder, f *gguf.File)) (*model.Spec, error) {
	t.Helper()
	f, err := gguf.Open(qwen35moeFixture(t, "qwen35moe-tiny-Q8_0"))
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
	edit(b, f)
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

// fusedGateUp is layer il's ffn_gate_exps and ffn_up_exps of f as one
// ffn_gate_up_exps tensor: per expert its gate rows, then its up rows.
func fusedGateUp(t *testing.T, f *gguf.File, il int) (gguf.TensorInfo, []byte) {
	t.Helper()
	g, ok1 := f.Tensor(fmt.Sprintf("blk.%d.ffn_gate_exps.weight", il))
	u, ok2 := f.Tensor(fmt.Sprintf("blk.%d.ffn_up_exps.weight", il))
	if !ok1 || !ok2 || g.Type != u.Type {
		t.Fatalf("layer %d: no separate gate/up experts of one type", il)
	}
	gd, ud := f.Data(g), f.Data(u)
	n := int(g.Shape[2])
	per := len(gd) / n
	out := make([]byte, 0, 2*len(gd))
	for e := 0; e < n; e++ {
		out = append(out, gd[e*per:(e+1)*per]...)
		out = append(out, ud[e*per:(e+1)*per]...)
	}
	ti := *g
	ti.Name = fmt.Sprintf("blk.%d.ffn_gate_up_exps.weight", il)
	ti.Shape = []int64{g.Shape[0], 2 * g.Shape[1], g.Shape[2]}
	return ti, out
}

func TestQwen35MoERefusesByName(t *testing.T) {
	del := func(k string) func(*gguf.Builder, *gguf.File) {
		return func(b *gguf.Builder, _ *gguf.File) { b.Delete(k) }
	}
	set := func(k string, v any) func(*gguf.Builder, *gguf.File) {
		return func(b *gguf.Builder, _ *gguf.File) { b.Set(k, gguf.V(v)) }
	}
	drop := func(n string) func(*gguf.Builder, *gguf.File) {
		return func(b *gguf.Builder, _ *gguf.File) { dropTensor(t, b, n) }
	}
	for _, tc := range []struct {
		name string
		edit func(*gguf.Builder, *gguf.File)
		want string
	}{
		{"no expert count", del("qwen35moe.expert_count"), `"qwen35moe.expert_count" is missing`},
		{"no experts used", del("qwen35moe.expert_used_count"), `"qwen35moe.expert_used_count" is missing`},
		{"more used than exist", set("qwen35moe.expert_used_count", uint32(9)), "qwen35moe.expert_used_count = 9 must be in [1, qwen35moe.expert_count = 8]"},
		{"no shared gate", drop("blk.1.ffn_gate_inp_shexp.weight"), `"blk.1.ffn_gate_inp_shexp.weight" is missing`},
		{"no shared down", drop("blk.3.ffn_down_shexp.weight"), `"blk.3.ffn_down_shexp.weight" is missing`},
		{"no router", drop("blk.0.ffn_gate_inp.weight"), `"blk.0.ffn_gate_inp.weight" is missing`},
		{"no up experts", drop("blk.2.ffn_up_exps.weight"), `"blk.2.ffn_up_exps.weight" is missing`},
		{"shared width wrong", set("qwen35moe.expert_shared_feed_forward_length", uint32(128)), `"blk.0.ffn_gate_shexp.weight" has shape [256 256], the header implies [256 128]`},
		{"no widths at all", func(b *gguf.Builder, _ *gguf.File) {
			b.Delete("qwen35moe.expert_feed_forward_length")
			b.Delete("qwen35moe.feed_forward_length")
		}, "expert width unknown"},
		{"fused and separate", func(b *gguf.Builder, f *gguf.File) {
			ti, data := fusedGateUp(t, f, 0)
			if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, data); err != nil {
				t.Fatal(err)
			}
		}, `both "blk.0.ffn_gate_up_exps.weight" and separate`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rebuildQwen35MoE(t, tc.edit)
			var r *refuse.Error
			if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("model.Load: %v, want a refusal containing %q", err, tc.want)
			}
		})
	}
}

// TestQwen35MoEDefaults: without the expert widths, llama.cpp's defaults
// apply (n_ff / k for the routed experts, n_ff for the shared one) and are
// recorded.
func TestQwen35MoEDefaults(t *testing.T) {
	_, err := rebuildQwen35MoE(t, func(b *gguf.Builder, _ *gguf.File) {
		b.Delete("qwen35moe.expert_feed_forward_length")
		b.Delete("qwen35moe.expert_shared_feed_forward_length")
		b.Set("qwen35moe.feed_forward_length", gguf.V(uint32(512)))
	})
	if err == nil || !strings.Contains(err.Error(), "ffn_gate_shexp") {
		// n_ff 512 makes the shared expert 512 wide, which the file's
		// 256-wide tensors contradict.
		t.Fatalf("model.Load with feed_forward_length 512: %v, want the shared expert's shape refused", err)
	}
	s, err := rebuildQwen35MoE(t, func(b *gguf.Builder, _ *gguf.File) {
		b.Delete("qwen35moe.expert_shared_feed_forward_length")
	})
	if err != nil {
		t.Fatalf("model.Load without expert_shared_feed_forward_length: %v", err)
	}
	if q := s.Ext.(*model.Qwen35); q.NFFShexp != 256 {
		t.Errorf("shared width %d, want feed_forward_length 256", q.NFFShexp)
	}
	found := false
	for _, d := range s.Defaults {
		found = found || d.Key == "qwen35moe.expert_shared_feed_forward_length"
	}
	if !found {
		t.Errorf("the default of expert_shared_feed_forward_length is not recorded: %v", s.Defaults)
	}
}

// TestQwen35MoEFusedGateUp: layer 0's gate and up experts fused into
// ffn_gate_up_exps bind as the fused role and nothing else.
func TestQwen35MoEFusedGateUp(t *testing.T) {
	s, err := rebuildQwen35MoE(t, func(b *gguf.Builder, f *gguf.File) {
		ti, data := fusedGateUp(t, f, 0)
		dropTensor(t, b, "blk.0.ffn_gate_exps.weight")
		dropTensor(t, b, "blk.0.ffn_up_exps.weight")
		if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, data); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatalf("model.Load with a fused gate_up: %v", err)
	}
	l0, l1 := s.Layers[0], s.Layers[1]
	if gu := l0.Ext[model.RoleGateUpExps]; gu == nil || gu.Shape[1] != 512 || l0.GateExps != nil || l0.UpExps != nil {
		t.Errorf("layer 0: fused gate_up not bound alone")
	}
	if l1.Ext[model.RoleGateUpExps] != nil || l1.GateExps == nil {
		t.Errorf("layer 1: separate experts not bound")
	}
}
