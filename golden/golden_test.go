package golden_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/golden/goldentest"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/qa"
)

const generator = "apr's reference engine (backend ref) through engine/generate: prompt raw (BOS as the model says, control tokens parsed), greedy, end-of-generation ignored; margins from one logits evaluation of the whole sequence on the same engine"

// synthPrompts are the prompts of the synthetic models' goldens (the
// fixtures' greedy prompts: plain text, and a ChatML turn with control
// tokens).
var synthPrompts = []string{"Hello world, 2+2=4", "The capital of France is",
	"<|im_start|>user\nWhat is the meaning of life?<|im_end|>\n<|im_start|>assistant\n"}

type spec struct {
	name    string
	path    string
	source  string
	review  string
	prompts []string
	n       int
}

func sha(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// specs lists every golden this package holds and how to regenerate it.
func specs(t *testing.T) []spec {
	var out []spec
	models, err := qa.SynthDefaults(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		out = append(out, spec{name: "synth-" + m.Arch + "-tiny-F32", path: m.Path, source: m.How,
			review:  "random weights: no independent implementation has run this file; the cpu engine agrees (apr qa) and the ref engine agrees with llama.cpp on the fixtures of the same architecture",
			prompts: synthPrompts, n: 16})
	}
	if dir, err := testutil.FixturesDir(); err == nil {
		out = append(out, spec{name: "stories260K", path: filepath.Join(dir, "models/stories260K.gguf"),
			source:  "apr's shared fixtures: models/stories260K.gguf (Karpathy's tinyllamas)",
			review:  "token ids equal llama.cpp's greedy outputs in fixtures expect/stories260K.greedy.json (checked by TestStoriesAgainstLlamaCpp)",
			prompts: []string{"Once upon a time", "One day, Lily", "The little dog"}, n: 64})
	} else {
		t.Logf("SKIP (not a pass) the stories260K golden: %v", err)
	}
	return out
}

// TestGoldens regenerates every golden from its model and compares it with
// the committed file: regenerating leaves no diff. With -update it rewrites
// the files (review the diff before committing).
func TestGoldens(t *testing.T) {
	for _, s := range specs(t) {
		t.Run(s.name, func(t *testing.T) {
			cases, err := falsify.Greedy(context.Background(), s.path, "ref", s.prompts, s.n)
			if err != nil {
				t.Fatalf("Greedy(%s): %v", s.name, err)
			}
			f := &golden.File{Format: golden.Format, Model: s.name, SHA256: sha(t, s.path), Source: s.source,
				Generator: generator, Review: s.review, Cases: cases}
			b, err := f.Encode()
			if err != nil {
				t.Fatal(err)
			}
			goldentest.Check(t, filepath.Join("data", s.name+".json"), b, s.path)
		})
	}
}

// TestStoriesAgainstLlamaCpp is the review of the stories260K golden: its
// prompt ids equal llama.cpp's, and its generated ids equal llama.cpp's up
// to the first step whose llama.cpp margin is within numerical noise.
func TestStoriesAgainstLlamaCpp(t *testing.T) {
	path := testutil.Fixture(t, "expect/stories260K.greedy.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Results []struct {
			Prompt       string    `json:"prompt"`
			PromptIDs    []int32   `json:"prompt_ids"`
			GeneratedIDs []int32   `json:"generated_ids"`
			Margins      []float64 `json:"top1_top2_margins"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	g := lookupByName(t, "stories260K")
	if len(want.Results) != len(g.Cases) {
		t.Fatalf("llama.cpp has %d prompts, the golden %d", len(want.Results), len(g.Cases))
	}
	for i, w := range want.Results {
		c := g.Cases[i]
		if c.Prompt != w.Prompt {
			t.Fatalf("case %d: prompt %q, llama.cpp's %q", i, c.Prompt, w.Prompt)
		}
		if diff := cmp.Diff(w.PromptIDs, c.PromptIDs); diff != "" {
			t.Errorf("case %d prompt ids (-llama.cpp +golden):\n%s", i, diff)
		}
		n := len(w.GeneratedIDs)
		for k, m := range w.Margins {
			if m < 1e-3 {
				n = k
				break
			}
		}
		if n < 8 {
			t.Errorf("case %d: only %d steps above the noise margin; the comparison proves little", i, n)
		}
		if diff := cmp.Diff(w.GeneratedIDs[:n], c.TokenIDs[:n]); diff != "" {
			t.Errorf("case %d generated ids, first %d steps (-llama.cpp +golden):\n%s", i, n, diff)
		}
	}
}

func lookupByName(t *testing.T, name string) *golden.File {
	t.Helper()
	all, err := golden.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if f.Model == name {
			return f
		}
	}
	t.Fatalf("no embedded golden named %s", name)
	return nil
}

// TestEmbeddedCanonical: every embedded file parses, is in canonical form
// and is found by its sha256.
func TestEmbeddedCanonical(t *testing.T) {
	names, err := fs.Glob(golden.FS(), "data/*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded goldens (%v)", err)
	}
	for _, n := range names {
		b, _ := fs.ReadFile(golden.FS(), n)
		f, err := golden.Parse(n, b)
		if err != nil {
			t.Fatalf("Parse(%s): %v", n, err)
		}
		re, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(re, b) {
			t.Errorf("%s is not canonical: Encode(Parse(file)) differs", n)
		}
		got, ok, err := golden.Lookup(f.SHA256)
		if err != nil || !ok || got.Model != f.Model {
			t.Errorf("Lookup(%s) = %v, %v, %v; want %s", f.SHA256, got, ok, err, f.Model)
		}
	}
}

func TestParseRejects(t *testing.T) {
	good := `{"format": 1, "model": "m", "model_sha256": "` + strings.Repeat("a", 64) + `", "source": "", "generator": "", "review": "",
	"cases": [{"prompt": "p", "prompt_ids": [1], "token_ids": [2, 3], "text": "", "top1_top2_margins": [0.5, 1]}]}`
	if _, err := golden.Parse("good", []byte(good)); err != nil {
		t.Fatalf("Parse(good): %v", err)
	}
	tests := []struct {
		name, old, new, want string
	}{
		{"unknown field", `"source"`, `"colour": 1, "source"`, "colour"},
		{"format", `"format": 1`, `"format": 2`, "format"},
		{"sha", `"model_sha256": "a`, `"model_sha256": "A`, "model_sha256"},
		{"no cases", `"cases": [`, `"cases": [], "x": [`, "x"},
		{"margins length", `[0.5, 1]`, `[0.5]`, "top1_top2_margins"},
		{"negative margin", `[0.5, 1]`, `[0.5, -1]`, "top1_top2_margins[1]"},
		{"negative id", `"token_ids": [2, 3]`, `"token_ids": [2, -3]`, "negative"},
		{"two documents", `[0.5, 1]}]}`, `[0.5, 1]}]} {}`, "more than one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.Replace(good, tt.old, tt.new, 1)
			_, err := golden.Parse(tt.name, []byte(in))
			if err == nil || !errors.Is(err, golden.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%s) = %v, want an ErrInvalid naming %q", tt.name, err, tt.want)
			}
		})
	}
}
