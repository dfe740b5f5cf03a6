package cpu_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
)

// TestEvalBatch: one pass over three sessions (prompts of different
// lengths, so different positions) — a decode token each, or a prompt chunk
// for one of them — gives every session the logits of its own Eval of its
// part, bit for bit, step after step, on a model of every layer kind
// (attention with and without biases and q/k norms, MoE, Gated DeltaNet
// with gated attention).
func TestEvalBatch(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"stories260K", "synth/qwen2-tiny-Q4_K_M", "synth/qwen3-tiny-F16", "synth/qwen3moe-tiny-Q8_0", "synth/qwen35-tiny-Q8_0"} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			m := open(t, filepath.Join(dir, "models", name+".gguf"), "cpu", 0)
			bd, ok := m.eng.(model.BatchDecoder)
			if !ok {
				t.Fatal("the cpu engine is not a model.BatchDecoder")
			}
			tok := func(i int) int32 { return int32((5 + i*7919) % m.spec.NVocab) }
			var batch, solo []model.Session
			for k, plen := range []int{1, 4, 9} {
				prompt := make([]int32, plen)
				for i := range prompt {
					prompt[i] = tok(100*k + i)
				}
				for _, dst := range []*[]model.Session{&batch, &solo} {
					s, err := m.eng.NewSession(32)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := s.Eval(prompt, false); err != nil {
						t.Fatal(err)
					}
					*dst = append(*dst, s)
				}
			}
			for step := 0; step < 4; step++ {
				parts := [][]int32{{tok(7 * step)}, {tok(7*step + 1)}, {tok(7*step + 2)}}
				if step == 1 { // a prompt chunk beside two decode tokens
					parts[1] = []int32{tok(50), tok(51), tok(52), tok(53), tok(54)}
				}
				got, err := bd.EvalBatch(batch, parts)
				if err != nil {
					t.Fatal(err)
				}
				for k, s := range solo {
					want, err := s.Eval(parts[k], false)
					if err != nil {
						t.Fatal(err)
					}
					for i := range want[0] {
						if math.Float32bits(got[k][i]) != math.Float32bits(want[0][i]) {
							t.Fatalf("step %d session %d logit %d: %v batched, %v alone", step, k, i, got[k][i], want[0][i])
						}
					}
					if batch[k].Pos() != s.Pos() {
						t.Fatalf("step %d session %d: Pos %d batched, %d alone", step, k, batch[k].Pos(), s.Pos())
					}
				}
			}
		})
	}
}
