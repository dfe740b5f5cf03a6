package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// BenchmarkEval measures prefill (one Eval of p tokens) and decode (one
// token after a 64-token prompt) on the model named by $APR_BENCH_MODEL
// (e.g. one written by apr synth --preset qwen2.5-0.5b); without it the
// benchmark is skipped.
func BenchmarkEval(b *testing.B) {
	path := os.Getenv("APR_BENCH_MODEL")
	if path == "" {
		b.Skip("SKIP (not a pass): set APR_BENCH_MODEL to a GGUF file")
	}
	for _, threads := range []int{1, 2} {
		m := open(b, path, "cpu", threads)
		rng := rand.New(rand.NewPCG(1, 2))
		toks := make([]int32, 512)
		for i := range toks {
			toks[i] = int32(rng.IntN(m.spec.NVocab))
		}
		for _, p := range []int{64, 512} {
			b.Run(fmt.Sprintf("pp%d/threads=%d", p, threads), func(b *testing.B) {
				for b.Loop() {
					s, err := m.eng.NewSession(p)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Eval(toks[:p], false); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(p)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
		b.Run(fmt.Sprintf("tg/threads=%d", threads), func(b *testing.B) {
			s, err := m.eng.NewSession(64 + 1<<12)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Eval(toks[:64], false); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				if s.Pos() == 64+1<<12 {
					b.Fatal("context full")
				}
				if _, err := s.Eval(toks[i%512:i%512+1], false); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
