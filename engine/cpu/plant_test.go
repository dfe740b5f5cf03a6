package cpu_test

import (
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/internal/enginetest"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
)

// TestPlantIsNamedAndChecked: a planted defect replaces the kernel of its
// weight type only, is named in the engine's kernel list, changes the
// logits, and a defect the engine does not know is an error, never an
// unplanted engine.
func TestPlantIsNamedAndChecked(t *testing.T) {
	f, spec := openQwen2TinyQ8(t)
	logits := func(plant string) ([]float32, []string) {
		return lastLogits(t, f, spec, cpu.Options{Threads: 1, Plant: plant}, []int32{39, 301, 385})
	}
	clean, ks := logits("")
	for _, k := range ks {
		if strings.Contains(k, "+plant(") {
			t.Errorf("unplanted engine lists %s", k)
		}
	}
	bad, ks := logits("Q8_0:drop_last")
	planted := 0
	for _, k := range ks {
		if strings.Contains(k, "+plant(Q8_0:drop_last)") {
			planted++
			if !strings.HasPrefix(k, "kernel.") || !strings.Contains(k, ".Q8_0.cpu.go") {
				t.Errorf("planted kernel %s, want the Q8_0 Go kernel's id", k)
			}
		}
	}
	if planted != 2 { // matvec and matmul
		t.Errorf("kernels %v: want the planted Q8_0 matvec and matmul named", ks)
	}
	same := true
	for i := range clean {
		same = same && clean[i] == bad[i]
	}
	if same {
		t.Error("the planted defect does not change the logits")
	}
	if _, err := cpu.New(f, spec, cpu.Options{Plant: "Q8_0:nonesuch"}); err == nil || !strings.Contains(err.Error(), "unknown defect") {
		t.Errorf("an unknown defect: %v, want an error naming it", err)
	}
}

// openQwen2TinyQ8 opens the qwen2-tiny-Q8_0 fixture for the test.
func openQwen2TinyQ8(t *testing.T) (*gguf.File, *model.Spec) {
	t.Helper()
	return enginetest.Model(t, testutil.Fixture(t, "models/synth/qwen2-tiny-Q8_0.gguf"))
}

// lastLogits builds an engine with o, feeds toks in one Eval and returns
// the last position's logits and the engine's kernel ids.
func lastLogits(t *testing.T, f *gguf.File, spec *model.Spec, o cpu.Options, toks []int32) ([]float32, []string) {
	t.Helper()
	e, err := cpu.New(f, spec, o)
	if err != nil {
		t.Fatalf("cpu.New(%+v): %v", o, err)
	}
	defer e.Close()
	s, err := e.NewSession(len(toks))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Eval(toks, false)
	if err != nil {
		t.Fatal(err)
	}
	return rows[len(rows)-1], e.Kernels()
}
