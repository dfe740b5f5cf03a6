package cuda_test

import (
	"io"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/engine/internal/enginetest"
	"github.com/aprqa/apr/engine/model"
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

// TestLogitsRow: a CUDA session hands a decode loop its logits row
// (model.RowAllocator: pinned host memory, which the device's copy writes
// directly): the same row on every call for one size, a new one for
// another, EvalLast into it equal to Eval's row (TestEvalLast), and Close
// giving it back — once, also after another Close and after the engine's.
func TestLogitsRow(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	eng, spec := newEngine(t, filepath.Join(testutil.Fixtures(t), "models", "synth", "qwen2-tiny-Q8_0.gguf"), cuda.Options{})
	s, err := eng.NewSession(8)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(model.RowAllocator); !ok {
		t.Fatalf("cuda sessions (%T) are not model.RowAllocators: decode loops read logits into pageable memory", s)
	}
	row, err := model.LogitsRow(s, spec.NVocab)
	if err != nil {
		t.Fatal(err)
	}
	again, err := model.LogitsRow(s, spec.NVocab)
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != spec.NVocab || unsafe.SliceData(again) != unsafe.SliceData(row) {
		t.Fatalf("rows of %d and %d values at %p and %p; want one row of %d", len(row), len(again), unsafe.SliceData(row), unsafe.SliceData(again), spec.NVocab)
	}
	if err := model.EvalLast(s, []int32{1, 2, 3}, row); err != nil {
		t.Fatal(err)
	}
	other, err := model.LogitsRow(s, spec.NVocab+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(other) != spec.NVocab+1 {
		t.Fatalf("a row of %d values for %d", len(other), spec.NVocab+1)
	}
	c, ok := s.(io.Closer)
	if !ok {
		t.Fatalf("cuda sessions (%T) do not close", s)
	}
	for i := range 2 {
		if err := c.Close(); err != nil {
			t.Fatalf("Close %d: %v", i+1, err)
		}
	}
	// A session never closed: its row goes with the engine, and a Close
	// after the engine's frees nothing twice.
	f, _ := enginetest.Model(t, filepath.Join(testutil.Fixtures(t), "models", "synth", "qwen2-tiny-Q8_0.gguf"))
	eng2, err := cuda.New(f, spec, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := eng2.NewSession(8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.LogitsRow(s2, spec.NVocab); err != nil {
		t.Fatal(err)
	}
	if err := eng2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s2.(io.Closer).Close(); err != nil {
		t.Fatalf("Close after the engine's: %v", err)
	}
}
