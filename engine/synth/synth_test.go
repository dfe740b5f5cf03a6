package synth_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
)

// TestPresetsLoad: every preset's header (keys and tensor shapes) is
// accepted by the shared model loader, which refuses anything llama.cpp
// would refuse. Only headers are built here, so the big presets cost nothing.
func TestPresetsLoad(t *testing.T) {
	for _, p := range synth.Presets() {
		t.Run(p.Arch+"/"+p.Name, func(t *testing.T) {
			res, err := synth.Build(synth.Options{Preset: p, Type: quant.Q8_0, Seed: 1})
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			hdr, lay, err := res.Builder.EncodeHeader()
			if err != nil {
				t.Fatalf("EncodeHeader: %v", err)
			}
			// Parse needs the data section to exist: a zero-filled buffer
			// of the right size would be huge, so check the header through
			// a sparse file.
			path := filepath.Join(t.TempDir(), "m.gguf")
			writeSparse(t, path, hdr, lay.Size)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer f.Close()
			spec, err := model.Load(f)
			if err != nil {
				t.Fatalf("model.Load(%s %s): %v", p.Arch, p.Name, err)
			}
			if spec.NLayer != p.NLayer || spec.NEmbd != p.NEmbd {
				t.Errorf("spec has %d layers × %d, want %d × %d", spec.NLayer, spec.NEmbd, p.NLayer, p.NEmbd)
			}
		})
	}
}

// TestTinyModelsRun writes every architecture's tiny preset in F32 and Q8_0
// and runs the reference engine on it: finite logits of the right width.
func TestTinyModelsRun(t *testing.T) {
	for _, p := range synth.Presets() {
		if p.Name != "tiny" {
			continue
		}
		for _, typ := range []quant.Type{quant.F32, quant.Q8_0} {
			t.Run(p.Arch+"/"+typ.String(), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "m.gguf")
				if _, err := synth.Write(path, synth.Options{Preset: p, Type: typ, Seed: 3}); err != nil {
					t.Fatalf("Write: %v", err)
				}
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				spec, err := model.Load(f)
				if err != nil {
					t.Fatalf("model.Load: %v", err)
				}
				eng, err := model.OpenBackend("ref", f, spec, model.OpenOptions{})
				if err != nil {
					t.Fatalf("OpenBackend(ref): %v", err)
				}
				defer eng.Close()
				sess, err := eng.NewSession(16)
				if err != nil {
					t.Fatal(err)
				}
				logits, err := sess.Eval([]int32{1, 2, 3, 4}, true)
				if err != nil {
					t.Fatalf("Eval: %v", err)
				}
				if len(logits) != 4 || len(logits[3]) != eng.NVocab() {
					t.Fatalf("logits %dx%d, want 4x%d", len(logits), len(logits[0]), eng.NVocab())
				}
				for _, row := range logits {
					for _, v := range row {
						if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
							t.Fatalf("non-finite logit %v", v)
						}
					}
				}
			})
		}
	}
}

// TestDeterministic: the same seed writes the same bytes; another seed does not.
func TestDeterministic(t *testing.T) {
	p, err := synth.FindPreset("qwen2", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	enc := func(seed uint64) []byte {
		res, err := synth.Build(synth.Options{Preset: p, Type: quant.Q4_0, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := res.Builder.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := enc(5), enc(5), enc(6)
	if string(a) != string(b) {
		t.Errorf("two builds with seed 5 differ")
	}
	if string(a) == string(c) {
		t.Errorf("seeds 5 and 6 wrote the same file")
	}
}

// TestFallbacksAreReported: a Q4_K qwen2.5-0.5b has 896-wide rows, which Q4_K
// (blocks of 256) cannot hold; those matrices use llama.cpp's substitute Q5_0
// and every one is reported.
func TestFallbacksAreReported(t *testing.T) {
	p, err := synth.FindPreset("qwen2", "qwen2.5-0.5b")
	if err != nil {
		t.Fatal(err)
	}
	res, err := synth.Build(synth.Options{Preset: p, Type: quant.Q4_K, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fallbacks) == 0 {
		t.Fatal("no fallbacks reported for 896-wide rows at Q4_K")
	}
	for _, f := range res.Fallbacks {
		if f.Used != quant.Q5_0 || f.RowWidth != 896 {
			t.Errorf("fallback %v, want Q5_0 for 896-wide rows", f)
		}
	}
}

func TestUnknownPresetAndType(t *testing.T) {
	if _, err := synth.FindPreset("llama", "huge"); err == nil {
		t.Error("FindPreset(llama, huge) succeeded")
	}
	if _, err := synth.FindPreset("gpt9", "tiny"); err == nil {
		t.Error("FindPreset(gpt9, tiny) succeeded")
	}
	p, _ := synth.FindPreset("llama", "tiny")
	if _, err := synth.Build(synth.Options{Preset: p, Type: quant.Q8_1}); err == nil {
		t.Error("Build with Q8_1 (no quantizer for model weights) succeeded")
	}
}

// TestFusedGateUp: a qwen35moe preset with FusedGateUp writes
// ffn_gate_up_exps (twice the expert width) instead of the separate gate
// and up experts, and the loader binds it as the fused role.
func TestFusedGateUp(t *testing.T) {
	p, err := synth.FindPreset("qwen35moe", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	p.FusedGateUp = true
	path := filepath.Join(t.TempDir(), "m.gguf")
	if _, err := synth.Write(path, synth.Options{Preset: p, Type: quant.Q8_0, Seed: 3}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.Tensor("blk.0.ffn_gate_exps.weight"); ok {
		t.Error("separate ffn_gate_exps written beside the fused tensor")
	}
	spec, err := model.Load(f)
	if err != nil {
		t.Fatalf("model.Load: %v", err)
	}
	gu := spec.Layers[0].Ext[model.RoleGateUpExps]
	if gu == nil || gu.Shape[1] != int64(2*p.NFFExpert) || spec.Layers[0].GateExps != nil {
		t.Errorf("layer 0: fused gate_up not bound alone (%v)", gu)
	}
}
