package falsify

import "context"

// SetF2EarlyMinCPU sets the cores F2Run.Prepare needs, for a test on any
// machine; it returns the restore.
func SetF2EarlyMinCPU(n int) func() {
	old := f2EarlyMinCPU
	f2EarlyMinCPU = n
	return func() { f2EarlyMinCPU = old }
}

// WithReference makes f's F2 use refLogits and cacheDir (F2Options').
func (f *F2Run) WithReference(refLogits func(ctx context.Context, model, backend, numerics string, tokens []int32) ([][]float32, error), cacheDir string) *F2Run {
	f.refLogits, f.cacheDir = refLogits, cacheDir
	return f
}
