package cpu

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/quant"
)

// kernelSet is one value of Options.Kernels: the instruction sets the
// engine may choose among (nil: every one this CPU runs) and whether the
// packed kernels are left out.
type kernelSet struct {
	isas  []kern.ISA
	exact bool
}

// kernelSets are the kernel sets Options.Kernels and EnvKernels accept:
//
//	""           the fastest kernels this CPU runs, packed ones included
//	"exact"      no packed kernels: ggml's order of float32 operations
//	"avx2"       what a CPU with AVX2 but no AVX-512 chooses (Haswell to
//	             Zen 3): the AVX-512 kernels masked off, the packed avx2r16
//	             ones included; refused on a CPU without AVX2
//	"avx2-exact" the same without the packed kernels (what such CPUs ran
//	             before the avx2r16 kernels)
//
// The avx2 sets let a machine with AVX-512 run, test and time the kernels
// an AVX2-only machine runs.
var kernelSets = map[string]kernelSet{
	"":           {},
	"exact":      {exact: true},
	"avx2":       {isas: kern.AVX2ISAs},
	"avx2-exact": {isas: kern.AVX2ISAs, exact: true},
}

// lookupKernelSet returns the kernel set named s, or an error naming it.
func lookupKernelSet(s string) (kernelSet, error) {
	ks, ok := kernelSets[s]
	if !ok {
		var names []string
		for n := range kernelSets {
			names = append(names, fmt.Sprintf("%q", n))
		}
		slices.Sort(names)
		return ks, fmt.Errorf("cpu: kernel set %q: want one of %s (%s)", s, strings.Join(names, ", "), EnvKernels)
	}
	return ks, nil
}

// selectKernel is kern.Select within the backend's kernel set.
func (be *backend) selectKernel(op kern.Op, t quant.Type) (*kern.Kernel, error) {
	return kern.SelectOn(op, t, be.set.isas, be.set.exact)
}
