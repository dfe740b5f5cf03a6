package cuda_test

import (
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/engine/internal/enginetest"
	"github.com/aprqa/apr/internal/testutil"
)

// TestEvalLast: the CUDA session's EvalLast (the last row read into the
// caller's buffer, as apr bench's and generate's decode loops take it)
// equals Eval's row bit for bit, prompt and decode steps (graph replays
// included).
func TestEvalLast(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	eng, _ := newEngine(t, filepath.Join(testutil.Fixtures(t), "models", "synth", "qwen2-tiny-Q8_0.gguf"), cuda.Options{})
	enginetest.EvalLastMatchesEval(t, eng, 9, 4)
}
