package qa_test

import (
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/qa"
	"github.com/aprqa/apr/schema"
)

// TestRefNumericsPerBackend: the reference judges each backend in the
// numerics the contract names for it — the shipped contracts: cpu and cuda
// in ggml's, any backend they do not name in the plain one ("" is plain);
// one name applies to every backend.
func TestRefNumericsPerBackend(t *testing.T) {
	set, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"qwen2.engine_parity", "qwen2.engine_parity_quantized", "qwen35.golden_output", "qwen3moe.golden_output_quantized"} {
		fz, ok := set.Falsifier(id)
		if !ok {
			t.Fatalf("no falsifier %s", id)
		}
		for b, want := range map[string]string{"cpu": "ggml", "cuda": "ggml", "perturbed": ""} {
			if got := qa.RefNumerics(fz, b); got != want {
				t.Errorf("%s: %s judged in numerics %q, want %q", id, b, got, want)
			}
		}
	}
	one := schema.Falsifier{Params: map[string]any{"numerics": "ggml"}}
	if qa.RefNumerics(one, "perturbed") != "ggml" || qa.RefNumerics(schema.Falsifier{}, "cpu") != "" {
		t.Error("a single numerics name, or none, is not applied to every backend")
	}
}
