package cli_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

type logitsJSON struct {
	NVocab int         `json:"n_vocab"`
	Tokens []int32     `json:"tokens"`
	Logits [][]float64 `json:"logits"`
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// TestLogitsJSONMatchesLlamaCpp: `apr logits --json` on the fixture token
// sequences agrees with llama.cpp's logits at every position.
func TestLogitsJSONMatchesLlamaCpp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		minCos float64
	}{{"stories260K", 0.99999}, {"qwen3-tiny-F16", 0.99999}, {"qwen2-tiny-Q4_0", 0.998}} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(testutil.Fixture(t, filepath.Join("expect", tc.name+".logits.json")))
			if err != nil {
				t.Fatal(err)
			}
			var want logitsJSON
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runApr(t, "logits", fixtureModel(t, tc.name), "--tokens", joinIDs(want.Tokens), "--backend", "ref", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got logitsJSON
			keys := oneJSON(t, stdout, &got)
			if strings.Join(keys, ",") != "logits,n_vocab,tokens" {
				t.Errorf("keys %v, want logits, n_vocab, tokens", keys)
			}
			if got.NVocab != want.NVocab || joinIDs(got.Tokens) != joinIDs(want.Tokens) || len(got.Logits) != len(want.Logits) {
				t.Fatalf("n_vocab %d tokens %v rows %d; want %d, %v, %d", got.NVocab, got.Tokens, len(got.Logits), want.NVocab, want.Tokens, len(want.Logits))
			}
			for pos := range got.Logits {
				a, b := got.Logits[pos], want.Logits[pos]
				if len(a) != want.NVocab {
					t.Fatalf("row %d has %d values", pos, len(a))
				}
				var ab, aa, bb float64
				for i := range a {
					ab += a[i] * b[i]
					aa += a[i] * a[i]
					bb += b[i] * b[i]
				}
				if c := ab / math.Sqrt(aa*bb); c < tc.minCos {
					t.Errorf("position %d: cosine %.9f < %g", pos, c, tc.minCos)
				}
			}
		})
	}
}

func TestLogitsBadInput(t *testing.T) {
	stories := fixtureModel(t, "stories260K")
	for _, tokens := range []string{"", "1,x", "1,,2", "-3", "512", "99999999999"} {
		code, stdout, stderr := runApr(t, "logits", stories, "--tokens", tokens, "--json")
		if code != cli.ExitBadInput || stdout != "" {
			t.Errorf("apr logits --tokens %q: exit %d stdout %q stderr %q; want exit 2, no stdout", tokens, code, stdout, stderr)
		}
	}
	if code, _, stderr := runApr(t, "logits", stories, "--tokens", "1", "--backend", "nope"); code != cli.ExitRefused || !strings.Contains(stderr, `"nope"`) {
		t.Errorf("unknown backend: exit %d stderr %q; want 3 naming it", code, stderr)
	}
}

// rewrite copies a fixture after edit changed its metadata; skip leaves
// tensors out.
func rewrite(t *testing.T, src string, edit func(b *gguf.Builder), skip ...string) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
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
		if !drop[ti.Name] {
			if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if edit != nil {
		edit(b)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := b.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRefusalClasses: a missing required hyper-parameter, an unknown
// architecture and a tensor shape that contradicts the header are each
// refused by name with exit code 3, by apr logits and apr run alike.
func TestRefusalClasses(t *testing.T) {
	src := fixtureModel(t, "qwen3-tiny-Q4_K_M")
	tests := []struct {
		name string
		edit func(b *gguf.Builder)
		skip []string
		says []string
	}{
		{"missing hyper-parameter", func(b *gguf.Builder) { b.Delete("qwen3.attention.layer_norm_rms_epsilon") }, nil,
			[]string{"refused by model", `"qwen3.attention.layer_norm_rms_epsilon"`, "missing"}},
		{"unknown architecture", func(b *gguf.Builder) { b.Set("general.architecture", gguf.V("qwen9")) }, nil,
			[]string{"refused by model", `unknown architecture "qwen9"`}},
		{"shape contradicts header", func(b *gguf.Builder) { b.Set("qwen3.attention.key_length", gguf.V(uint32(64))) }, nil,
			[]string{"refused by model", `"blk.0.attn_q.weight"`, "shape"}},
		{"missing tensor", nil, []string{"blk.1.attn_k_norm.weight"},
			[]string{"refused by model", `"blk.1.attn_k_norm.weight"`}},
		{"stray tensor", func(b *gguf.Builder) {
			if err := b.AddTensor("blk.0.attn_q.bias", quant.F32, []int64{7}, make([]byte, 28)); err != nil {
				t.Fatal(err)
			}
		}, nil, []string{"refused by model", `"blk.0.attn_q.bias"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := rewrite(t, src, tt.edit, tt.skip...)
			for _, args := range [][]string{
				{"logits", path, "--tokens", "1,2,3", "--json"},
				{"run", path, "-p", "hi", "--raw", "-n", "2", "--json"},
			} {
				code, stdout, stderr := runApr(t, args...)
				if code != cli.ExitRefused || stdout != "" {
					t.Errorf("apr %s: exit %d stdout %q; want exit 3 and no stdout", args[0], code, stdout)
				}
				for _, s := range tt.says {
					if !strings.Contains(stderr, s) {
						t.Errorf("apr %s: stderr %q does not say %q", args[0], stderr, s)
					}
				}
			}
		})
	}
}
