package cuda_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/internal/testutil"
)

func TestZZAllocs(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skip()
	}
	path := filepath.Join(testutil.Fixtures(t), "models", "synth", "qwen2-tiny-Q8_0.gguf")
	eng, spec := newEngine(t, path, cuda.Options{})
	s, err := eng.NewSession(64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Eval([]int32{1, 2, 3}, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		s.Eval([]int32{5}, false)
	}
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	n := 20
	for i := 0; i < n; i++ {
		if _, err := s.Eval([]int32{5}, false); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&b)
	t.Logf("layers %d vocab %d: %d allocs, %d bytes per decode Eval", spec.NLayer, spec.NVocab, (b.Mallocs-a.Mallocs)/uint64(n), (b.TotalAlloc-a.TotalAlloc)/uint64(n))
}
