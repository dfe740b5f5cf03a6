package ref_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/aprqa/apr/internal/testutil"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRef measures the reference's prefill (64 tokens in one Eval) and
// decode (one token after a 64-token prompt) on fixture models. It reports
// tok/s (wall clock) and tok/cpu-s (tokens per second of the process's CPU
// time, all threads), which stays meaningful on a machine shared with other
// work.
func BenchmarkRef(b *testing.B) {
	dir := testutil.Fixtures(b)
	for _, name := range []string{"stories260K.gguf", "qwen2-tiny-F32.gguf", "llama-tiny-F16.gguf", "qwen3moe-tiny-Q8_0.gguf", "qwen35-tiny-F32.gguf"} {
		_, spec, eng := openRef(b, modelPath(dir, name))
		prompt := make([]int32, 64)
		for i := range prompt {
			prompt[i] = int32((i*31 + 7) % spec.NVocab)
		}
		b.Run(fmt.Sprintf("model=%s/prefill=64", name), func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			c0 := cpuTime(b)
			for b.Loop() {
				s, _ := eng.NewSession(len(prompt))
				if _, err := s.Eval(prompt, false); err != nil {
					b.Fatal(err)
				}
				n += len(prompt)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(n)/(cpuTime(b)-c0).Seconds(), "tok/cpu-s")
		})
		b.Run(fmt.Sprintf("model=%s/decode", name), func(b *testing.B) {
			b.ReportAllocs()
			s, _ := eng.NewSession(len(prompt) + 1<<20)
			if _, err := s.Eval(prompt, false); err != nil {
				b.Fatal(err)
			}
			n := 0
			c0 := cpuTime(b)
			for b.Loop() {
				if _, err := s.Eval([]int32{prompt[n%len(prompt)]}, false); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(n)/(cpuTime(b)-c0).Seconds(), "tok/cpu-s")
		})
	}
}
