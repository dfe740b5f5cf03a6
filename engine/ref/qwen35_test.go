package ref_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/ref"
	"github.com/aprqa/apr/internal/testutil"
)

// qwen35 against llama.cpp: logits of 24 tokens in one batch, the same fed
// token by token and in uneven pieces (recurrent state carried across Eval
// calls), and greedy generation.

// q35Cases are the qwen35 fixtures and their acceptance: F32 must match to
// 0.99999 at every position; quantized qwen35 in plain FP32 only reaches
// ~0.99 (the gated RMSNorm after each DeltaNet block amplifies ggml's
// activation quantization), hence min 0.95 / mean 0.985. Greedy ids must
// match up to the first step whose llama.cpp top-1/top-2 margin is below
// noise.
var q35Cases = []struct {
	name            string
	minCos, meanCos float64
	noise           float64
}{
	{"qwen35-tiny-F32", 0.99999, 0.99999, 1e-3},
	{"qwen35-tiny-Q8_0", 0.95, 0.985, 1.0},
}

func q35Open(t *testing.T, name string) model.Engine {
	t.Helper()
	f, err := gguf.Open(testutil.Fixture(t, filepath.Join("models", "synth", name+".gguf")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	spec, err := model.Load(f)
	if err != nil {
		t.Fatalf("model.Load(%s): %v", name, err)
	}
	e, err := ref.New(f, spec, ref.Options{})
	if err != nil {
		t.Fatalf("ref.New(%s): %v", name, err)
	}
	return e
}

func q35ReadJSON(t *testing.T, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(testutil.Fixture(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

func q35Cosine(a []float32, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * b[i]
		aa += float64(a[i]) * float64(a[i])
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}

func q35Argmax[T float32 | float64](v []T) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

func q35Margin(v []float64) float64 {
	b := q35Argmax(v)
	second := math.Inf(-1)
	for i, x := range v {
		if i != b && x > second {
			second = x
		}
	}
	return v[b] - second
}

// q35Eval feeds tokens in pieces of the given sizes (the last piece takes the
// rest) and returns every position's logits.
func q35Eval(t *testing.T, e model.Engine, tokens []int32, pieces ...int) [][]float32 {
	t.Helper()
	s, err := e.NewSession(len(tokens))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for at := 0; at < len(tokens); {
		n := len(tokens) - at
		if len(pieces) > 0 {
			n, pieces = min(pieces[0], n), pieces[1:]
		}
		rows, err := s.Eval(tokens[at:at+n], true)
		if err != nil {
			t.Fatalf("Eval(tokens[%d:%d]): %v", at, at+n, err)
		}
		out = append(out, rows...)
		at += n
	}
	if s.Pos() != len(tokens) {
		t.Fatalf("Pos() = %d after %d tokens", s.Pos(), len(tokens))
	}
	return out
}

func TestQwen35Logits(t *testing.T) {
	for _, tc := range q35Cases {
		t.Run(tc.name, func(t *testing.T) {
			var exp struct {
				Tokens []int32     `json:"tokens"`
				Logits [][]float64 `json:"logits"`
			}
			q35ReadJSON(t, filepath.Join("expect", tc.name+".logits.json"), &exp)
			e := q35Open(t, tc.name)
			got := q35Eval(t, e, exp.Tokens)
			minC, sum, checked := 1.0, 0.0, 0
			for pos, row := range got {
				c := q35Cosine(row, exp.Logits[pos])
				minC, sum = min(minC, c), sum+c
				if q35Margin(exp.Logits[pos]) >= 0.2 {
					checked++
					if a, w := q35Argmax(row), q35Argmax(exp.Logits[pos]); a != w {
						t.Errorf("position %d: argmax %d, llama.cpp %d (margin %.3f)", pos, a, w, q35Margin(exp.Logits[pos]))
					}
				}
			}
			mean := sum / float64(len(got))
			t.Logf("%s: min cosine %.12f (1-%.2g), mean %.12f (1-%.2g), argmax checked at %d/%d positions",
				tc.name, minC, 1-minC, mean, 1-mean, checked, len(got))
			if minC < tc.minCos || mean < tc.meanCos {
				t.Errorf("%s: min cosine %.9f (want ≥ %g), mean %.9f (want ≥ %g)", tc.name, minC, tc.minCos, mean, tc.meanCos)
			}
		})
	}
}

// Feeding the prompt at once, token by token, or in uneven pieces gives
// bit-identical logits: the conv and delta-rule states and the KV cache carry
// across Eval calls.
func TestQwen35FeedingIsBitIdentical(t *testing.T) {
	var exp struct {
		Tokens []int32 `json:"tokens"`
	}
	q35ReadJSON(t, filepath.Join("expect", "qwen35-tiny-F32.logits.json"), &exp)
	e := q35Open(t, "qwen35-tiny-F32")
	batch := q35Eval(t, e, exp.Tokens)
	ones := make([]int, len(exp.Tokens))
	for i := range ones {
		ones[i] = 1
	}
	for _, tc := range []struct {
		name   string
		pieces []int
	}{
		{"token by token", ones},
		{"pieces 1,5,2,9", []int{1, 5, 2, 9}},
	} {
		got := q35Eval(t, e, exp.Tokens, tc.pieces...)
		for pos := range batch {
			for i := range batch[pos] {
				if got[pos][i] != batch[pos][i] {
					t.Fatalf("%s: position %d logit %d = %g, one batch gave %g", tc.name, pos, i, got[pos][i], batch[pos][i])
				}
			}
		}
	}
}

func TestQwen35Greedy(t *testing.T) {
	for _, tc := range q35Cases {
		t.Run(tc.name, func(t *testing.T) {
			var exp struct {
				Results []struct {
					Prompt    string    `json:"prompt"`
					PromptIDs []int32   `json:"prompt_ids"`
					Generated []int32   `json:"generated_ids"`
					Margins   []float64 `json:"top1_top2_margins"`
				} `json:"results"`
			}
			q35ReadJSON(t, filepath.Join("expect", tc.name+".greedy.json"), &exp)
			e := q35Open(t, tc.name)
			for _, r := range exp.Results {
				s, err := e.NewSession(len(r.PromptIDs) + len(r.Generated))
				if err != nil {
					t.Fatal(err)
				}
				rows, err := s.Eval(r.PromptIDs, false)
				if err != nil {
					t.Fatal(err)
				}
				lg := rows[0]
				checked, prefix, noisy := 0, 0, false
				for step, want := range r.Generated {
					if got := int32(q35Argmax(lg)); got != want {
						if !noisy {
							t.Errorf("%q step %d: generated %d, llama.cpp %d (margin %.4g)", r.Prompt, step, got, want, r.Margins[step])
						}
						break
					}
					prefix++
					if !noisy {
						checked++
					}
					// Past the first margin within noise the ids may
					// legitimately diverge: follow on for the log only.
					noisy = noisy || r.Margins[step] < tc.noise
					if step+1 == len(r.Generated) {
						break
					}
					rows, err := s.Eval([]int32{want}, false)
					if err != nil {
						t.Fatal(err)
					}
					lg = rows[0]
				}
				t.Logf("%q: %d ids checked (to the first margin < %g), %d/%d match in all", r.Prompt, checked, tc.noise, prefix, len(r.Generated))
			}
		})
	}
}

// The trace reports the DeltaNet block output under the shared op name, once
// per DeltaNet layer and position, and the gated attention's ops on layer 3.
func TestQwen35Trace(t *testing.T) {
	e := q35Open(t, "qwen35-tiny-F32")
	s, err := e.NewSession(4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	s.SetTrace(func(layer int, op string, pos int, v []float32) {
		switch op {
		case model.OpSSMOut, model.OpAttnOut, model.OpQ35Delta, model.OpQ35Gate, model.OpQRope:
			seen[op+"@"+string(rune('0'+layer))]++
		}
	})
	if _, err := s.Eval([]int32{1, 2, 3}, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ssm_out@0", "ssm_out@1", "ssm_out@2", "ssm_delta@2", "attn_out@3", "q_gate@3", "q_rope@3"} {
		if seen[want] != 3 {
			t.Errorf("trace %s reported %d times for 3 tokens, want 3 (all: %v)", want, seen[want], seen)
		}
	}
	if seen["attn_out@0"] != 0 || seen["ssm_out@3"] != 0 {
		t.Errorf("trace reported an op on the wrong layer kind: %v", seen)
	}
}
