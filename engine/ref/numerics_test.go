package ref_test

import (
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/ref"
	"github.com/aprqa/apr/internal/testutil"
)

// TestNumericsGGML: the ggml numerics is the plain reference plus rounding
// of the activations a product consumes, so on an F32 model (whose kernels
// take F32 activations) it gives the plain logits bit for bit, and on a
// quantized one it moves them (by about the distance between the plain
// reference and an engine that rounds: 1e-4..1e-3 in cosine); an unknown
// numerics is refused by name.
func TestNumericsGGML(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, c := range []struct {
		name string
		same bool
	}{{"stories260K.gguf", true}, {"qwen2-tiny-Q8_0.gguf", false}} {
		f, spec, plain := openRef(t, modelPath(dir, c.name))
		ggml, err := ref.New(f, spec, ref.Options{Numerics: ref.NumericsGGML})
		if err != nil {
			t.Fatal(err)
		}
		if plain.Numerics() != ref.NumericsPlain || ggml.Numerics() != ref.NumericsGGML {
			t.Errorf("Numerics() = %q, %q", plain.Numerics(), ggml.Numerics())
		}
		toks := []int32{1, 40, 300, 7, 99, 250}
		eval := func(e *ref.Engine) [][]float32 {
			s, err := e.NewSession(len(toks))
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.Eval(toks, true)
			if err != nil {
				t.Fatal(err)
			}
			return rows
		}
		a, b := eval(plain), eval(ggml)
		same := true
		for p := range a {
			for i := range a[p] {
				same = same && a[p][i] == b[p][i]
			}
		}
		if same != c.same {
			t.Errorf("%s: ggml numerics equal to plain: %v, want %v", c.name, same, c.same)
		}
		if _, err := ref.New(f, spec, ref.Options{Numerics: "fp8"}); err == nil || !strings.Contains(err.Error(), `numerics "fp8"`) {
			t.Errorf("numerics fp8: %v, want a refusal naming it", err)
		}
	}
}
