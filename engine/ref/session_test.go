package ref_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
)

// TestBatchEqualsTokenByToken feeds the same tokens in one Eval, in chunks,
// and one at a time: the logits must be bit-identical.
func TestBatchEqualsTokenByToken(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"stories260K.gguf", "llama-tiny-Q4_K_M.gguf", "qwen2-tiny-Q4_0.gguf", "qwen3-tiny-F16.gguf", "qwen3moe-tiny-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			_, spec, eng := openRef(t, modelPath(dir, name))
			tokens := make([]int32, 20)
			for i := range tokens {
				tokens[i] = int32((i*7919 + 13) % spec.NVocab)
			}
			run := func(chunks []int) [][]float32 {
				s, err := eng.NewSession(len(tokens))
				if err != nil {
					t.Fatal(err)
				}
				var out [][]float32
				at := 0
				for _, c := range chunks {
					rows, err := s.Eval(tokens[at:at+c], true)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, rows...)
					at += c
				}
				if s.Pos() != len(tokens) {
					t.Fatalf("Pos() = %d after %d tokens", s.Pos(), len(tokens))
				}
				return out
			}
			ones := make([]int, len(tokens))
			for i := range ones {
				ones[i] = 1
			}
			batch := run([]int{len(tokens)})
			for _, chunks := range [][]int{ones, {5, 1, 9, 5}} {
				got := run(chunks)
				if diff := cmp.Diff(batch, got); diff != "" {
					t.Errorf("logits fed in chunks %v differ from one batch (-batch +chunks):\n%s", chunks, diff)
				}
			}
			// all=false returns the last row only, equal to the batch's last row.
			s, _ := eng.NewSession(len(tokens))
			last, err := s.Eval(tokens, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(last) != 1 || !cmp.Equal(last[0], batch[len(batch)-1]) {
				t.Errorf("Eval(all=false) did not return the last row of Eval(all=true)")
			}
		})
	}
}

// TestTraceReportsEveryOp checks that a trace hook sees every shared op at
// every layer and position, with the right widths, and that the hook does
// not change the logits.
func TestTraceReportsEveryOp(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"qwen2-tiny-F32.gguf", "qwen3moe-tiny-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			_, spec, eng := openRef(t, modelPath(dir, name))
			tokens := []int32{1, 2, 3, 4}
			plain, _ := eng.NewSession(8)
			want, err := plain.Eval(tokens, true)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := eng.NewSession(8)
			seen := map[string]int{}
			s.SetTrace(func(layer int, op string, pos int, v []float32) {
				seen[fmt.Sprintf("%d/%s/%d", layer, op, pos)] = len(v)
				for _, x := range v {
					if math.IsNaN(float64(x)) {
						t.Errorf("NaN in %s at layer %d pos %d", op, layer, pos)
						break
					}
				}
			})
			got, err := s.Eval(tokens, true)
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(want, got) {
				t.Errorf("logits with a trace hook differ from logits without")
			}
			e := spec.NEmbd
			wantOps := map[string]int{model.OpAttnNorm: e, model.OpQ: spec.NHead * spec.HeadDimK,
				model.OpK: spec.NHeadKV * spec.HeadDimK, model.OpV: spec.NHeadKV * spec.HeadDimV,
				model.OpQRope: spec.NHead * spec.HeadDimK, model.OpKRope: spec.NHeadKV * spec.HeadDimK,
				model.OpAttnOut: e, model.OpFFNInp: e, model.OpFFNNorm: e, model.OpFFNOut: e, model.OpLayerOut: e}
			if spec.NExpert > 0 {
				wantOps[model.OpRouter] = spec.NExpert
			}
			for pos := range tokens {
				for op, n := range map[string]int{model.OpEmbed: e, model.OpResultNorm: e, model.OpLogits: spec.NVocab} {
					if k := fmt.Sprintf("-1/%s/%d", op, pos); seen[k] != n {
						t.Errorf("trace %s: width %d, want %d", k, seen[k], n)
					}
				}
				for l := 0; l < spec.NLayer; l++ {
					for op, n := range wantOps {
						if k := fmt.Sprintf("%d/%s/%d", l, op, pos); seen[k] != n {
							t.Errorf("trace %s: width %d, want %d", k, seen[k], n)
						}
					}
				}
			}
		})
	}
}

// TestEvalErrors checks that bad calls fail with an error, not a panic.
func TestEvalErrors(t *testing.T) {
	dir := testutil.Fixtures(t)
	_, spec, eng := openRef(t, modelPath(dir, "stories260K.gguf"))
	s, err := eng.NewSession(4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tokens []int32
	}{
		{"empty", nil},
		{"negative id", []int32{-1}},
		{"id past vocab", []int32{int32(spec.NVocab)}},
		{"past context", []int32{1, 2, 3, 4, 5}},
	} {
		if _, err := s.Eval(tc.tokens, false); err == nil {
			t.Errorf("Eval(%s %v) succeeded", tc.name, tc.tokens)
		}
	}
	if s.Pos() != 0 {
		t.Errorf("Pos() = %d after failed Evals, want 0", s.Pos())
	}
	if _, err := eng.NewSession(0); err == nil {
		t.Errorf("NewSession(0) succeeded")
	}
}
