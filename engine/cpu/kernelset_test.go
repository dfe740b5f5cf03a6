package cpu_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
)

// TestKernelSetExact: Options.Kernels "exact" builds the engine on the
// unpacked kernels only (ggml's order), the default on the packed ones
// where this CPU runs them, both within the cpu tiers of each other on a
// Q8_0 model; an unknown set is an error, never the default.
func TestKernelSetExact(t *testing.T) {
	path := testutil.Fixture(t, "models/synth/qwen2-tiny-Q8_0.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	run := func(set string) ([]float32, []string) {
		e, err := cpu.New(f, spec, cpu.Options{Threads: 1, Kernels: set})
		if err != nil {
			t.Fatalf("kernel set %q: %v", set, err)
		}
		defer e.Close()
		s, err := e.NewSession(8)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.Eval([]int32{39, 301, 385, 7, 12, 99, 4, 150}, false)
		if err != nil {
			t.Fatal(err)
		}
		return rows[len(rows)-1], e.Kernels()
	}
	exact, ek := run("exact")
	fast, fk := run("")
	packed := func(ks []string) bool {
		return slices.ContainsFunc(ks, func(k string) bool { return strings.HasSuffix(k, ".avx512vnni16") })
	}
	if packed(ek) {
		t.Errorf("kernel set exact uses packed kernels: %v", ek)
	}
	if cpuHasVNNI := slices.ContainsFunc(cpu.Kernels(), func(k cpu.KernelInfo) bool { return k.ISA == "avx512vnni16" && k.Runnable }); cpuHasVNNI != packed(fk) {
		t.Errorf("default kernel set: packed kernels used = %v, runnable here = %v (%v)", packed(fk), cpuHasVNNI, fk)
	}
	var dot, ne, nf float64
	for i := range exact {
		dot += float64(exact[i]) * float64(fast[i])
		ne += float64(exact[i]) * float64(exact[i])
		nf += float64(fast[i]) * float64(fast[i])
	}
	if c := dot / math.Sqrt(ne*nf); !(c > 0.9999) {
		t.Errorf("cosine of the exact and default last-position logits = %v, want > 0.9999", c)
	}
	if _, err := cpu.New(f, spec, cpu.Options{Kernels: "fastest"}); err == nil || !strings.Contains(err.Error(), "kernel set") {
		t.Errorf("cpu.New(Kernels: fastest) = %v, want an error naming the kernel set", err)
	}
}
