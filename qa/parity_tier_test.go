package qa_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
	"github.com/aprqa/apr/qa"
)

// TestParityTiersOfReducedPrecision: the cpu engine rounds the activations
// of F16 and BF16 products as ggml does, so a BF16 model is held to the
// quantized tier (bf16 keeps 8 significant bits: llama 1−min ~1e-4) and an
// F16 one to engine_float (qwen35's gated norm amplifies the F16 rounding
// to 1−mean 1.9e-6, beyond the float tier's 1e-6); both pass, each with
// its tier's thresholds named.
func TestParityTiersOfReducedPrecision(t *testing.T) {
	for _, c := range []struct {
		arch string
		typ  quant.Type
		min  string // the min_cosine threshold the gate must show
	}{
		{"llama", quant.BF16, "0.998"},
		{"qwen35", quant.BF16, "0.95"},
		{"qwen35", quant.F16, "0.9999"},
	} {
		t.Run(c.arch+"-"+c.typ.String(), func(t *testing.T) {
			p, err := synth.FindPreset(c.arch, "tiny")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			if _, err := synth.Write(path, synth.Options{Preset: p, Type: c.typ, Seed: 1}); err != nil {
				t.Fatal(err)
			}
			g := gate(t, gateRun(t, qa.Options{Model: path, Backends: []string{"cpu"}, Gates: []string{qa.GateParity}}), qa.GateParity, "cpu")
			wantStatus(t, g, "pass")
			if v := value(t, g, "min_cosine"); !strings.HasSuffix(v.Threshold, " "+c.min) {
				t.Errorf("min_cosine threshold %q, want >= %s", v.Threshold, c.min)
			}
		})
	}
}
