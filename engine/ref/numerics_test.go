package ref_test

import (
	"math"
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
		a, b := evalAll(t, plain, toks), evalAll(t, ggml, toks)
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

// TestNumericsGGMLJitter: the jittered twin of the ggml numerics moves each
// activation a few ulps before it is rounded, so on a quantized model its
// logits differ from ggml's (an activation's rounding flips somewhere: on
// qwen35-tiny at Q8_0 within these 16 tokens) while staying within the
// deployed tier's distance of them; it is deterministic (the
// same logits twice, on one goroutine or many), and on an F32 model, where
// no activation is rounded, it is the plain reference's numerics moved by
// ulps only.
func TestNumericsGGMLJitter(t *testing.T) {
	dir := testutil.Fixtures(t)
	toks := []int32{1, 40, 300, 7, 99, 250, 13, 77, 5, 180, 64, 3, 220, 31, 150, 8}
	eval := func(e *ref.Engine) [][]float32 { return evalAll(t, e, toks) }
	cosine := func(a, b []float32) float64 {
		var ab, aa, bb float64
		for i := range a {
			ab += float64(a[i]) * float64(b[i])
			aa += float64(a[i]) * float64(a[i])
			bb += float64(b[i]) * float64(b[i])
		}
		return ab / math.Sqrt(aa*bb)
	}
	for _, c := range []struct {
		name    string
		minCos  float64 // the twin against ggml, at every position
		differs bool
	}{{"qwen35-tiny-Q8_0.gguf", 0.999, true}, {"stories260K.gguf", 0.999999, true}} {
		f, spec, _ := openRef(t, modelPath(dir, c.name))
		open := func(n string, threads int) *ref.Engine {
			e, err := ref.New(f, spec, ref.Options{Numerics: n, Threads: threads})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		twin := open(ref.NumericsGGMLJitter, 1)
		if twin.Numerics() != ref.NumericsGGMLJitter {
			t.Errorf("Numerics() = %q, want %q", twin.Numerics(), ref.NumericsGGMLJitter)
		}
		g, j, j4 := eval(open(ref.NumericsGGML, 0)), eval(twin), eval(open(ref.NumericsGGMLJitter, 4))
		differs := false
		for p := range g {
			if cs := cosine(g[p], j[p]); cs < c.minCos {
				t.Errorf("%s position %d: twin against ggml cosine %v, want ≥ %v", c.name, p, cs, c.minCos)
			}
			for i := range g[p] {
				differs = differs || g[p][i] != j[p][i]
				if j[p][i] != j4[p][i] {
					t.Fatalf("%s position %d: the twin on 1 and on 4 goroutines differ at %d (%v, %v)", c.name, p, i, j[p][i], j4[p][i])
				}
			}
		}
		if differs != c.differs {
			t.Errorf("%s: twin differs from ggml: %v, want %v", c.name, differs, c.differs)
		}
	}
}

// evalAll feeds toks to a new session of e in one Eval and returns every
// position's logits.
func evalAll(tb testing.TB, e *ref.Engine, toks []int32) [][]float32 {
	tb.Helper()
	s, err := e.NewSession(len(toks))
	if err != nil {
		tb.Fatal(err)
	}
	rows, err := s.Eval(toks, true)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

// TestParallelIsSerial: the work the reference shares out among goroutines
// (a product's rows, a Gated DeltaNet layer's heads), forced onto the
// parallel path on a tiny qwen35, gives one goroutine's logits bit for bit.
func TestParallelIsSerial(t *testing.T) {
	f, spec, _ := openRef(t, modelPath(testutil.Fixtures(t), "qwen35-tiny-Q8_0.gguf"))
	toks := []int32{1, 40, 300, 7, 99, 250, 13, 77}
	one, err := ref.New(f, spec, ref.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := evalAll(t, one, toks)
	defer ref.SetEachMin(0)()
	four, err := ref.New(f, spec, ref.Options{Threads: 4})
	if err != nil {
		t.Fatal(err)
	}
	got := evalAll(t, four, toks)
	for p := range want {
		for i := range want[p] {
			if math.Float32bits(got[p][i]) != math.Float32bits(want[p][i]) {
				t.Fatalf("position %d logit %d: 4 goroutines %v, 1 goroutine %v", p, i, got[p][i], want[p][i])
			}
		}
	}
}
