package cpu_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/oracle"
)

// TestKernelSetExact: Options.Kernels "exact" builds the engine on the
// unpacked kernels only (ggml's order), the default on the packed ones
// where this CPU runs them, both within the cpu tiers of each other on a
// Q8_0 model; an unknown set is an error, never the default.
func TestKernelSetExact(t *testing.T) {
	f, spec := openQwen2TinyQ8(t)
	run := func(set string) ([]float32, []string) {
		return lastLogits(t, f, spec, cpu.Options{Threads: 1, Kernels: set}, []int32{39, 301, 385, 7, 12, 99, 4, 150})
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
	if c, err := oracle.Cosine(fast, exact); err != nil || !(c > 0.9999) {
		t.Errorf("cosine of the exact and default last-position logits = %v, want > 0.9999", c)
	}
	if _, err := cpu.New(f, spec, cpu.Options{Kernels: "fastest"}); err == nil || !strings.Contains(err.Error(), "kernel set") {
		t.Errorf("cpu.New(Kernels: fastest) = %v, want an error naming the kernel set", err)
	}
}
