package cpu

import (
	"fmt"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/refuse"
)

// KernelRun is one product computed by a registered kernel: what the kernel
// returned, and the activation rows as the kernel converted them (bytes of
// format Act) — what a reference product must multiply, so that a check of
// the kernel does not count the activation format's rounding against it.
type KernelRun struct {
	Out  []float32 // m × rows, row-major: Out[i·rows + r] = Σ_c W[r,c]·x[i·cols+c]
	Act  string    // the activation format (ggml's vec_dot_type)
	Acts []byte    // m rows of cols values in Act's blocks
}

// RunKernel computes x·Wᵀ for m activation rows of cols values with the
// kernel registered under contract id (KernelInfo.Contract), on one thread.
// w holds rows weight rows of the kernel's type. An unknown id, or a kernel
// this machine cannot run, is refused by its id. It exists so that the
// kernel contracts' falsifiers can hold every kernel to its reference.
func RunKernel(contract string, w []byte, rows, cols int, x []float32, m int) (KernelRun, error) {
	var key *kern.Key
	for _, e := range kern.List() {
		if e.Contract == contract {
			k := e.Key
			key = &k
			break
		}
	}
	if key == nil {
		return KernelRun{}, refuse.New(contract, "no kernel is registered under this id")
	}
	k, err := kern.Lookup(*key)
	if err != nil {
		return KernelRun{}, err
	}
	pool := kern.NewPool(1)
	defer pool.Close()
	var s kern.Scratch
	var a kern.Acts
	if err := k.Convert(pool, &s, &a, x, m, cols); err != nil {
		return KernelRun{}, err
	}
	out := make([]float32, m*rows)
	// A packed kernel multiplies the packed copy of w, as the engine's do.
	wt, err := k.PackWeights(kern.Weights{Type: key.Type, Rows: rows, Cols: cols, Data: w})
	if err != nil {
		return KernelRun{}, fmt.Errorf("cpu: %s: %w", contract, err)
	}
	if err := k.MulActs(pool, &s, out, wt, &a); err != nil {
		return KernelRun{}, fmt.Errorf("cpu: %s: %w", contract, err)
	}
	return KernelRun{Out: out, Act: a.Type.String(), Acts: append([]byte(nil), a.Data...)}, nil
}
