package cpu

import "github.com/aprqa/apr/engine/cpu/internal/kern"

// KernelInfo is one kernel of the registry the engine's products go
// through.
type KernelInfo struct {
	Op       string `json:"op"`       // "matvec" (one activation row) or "matmul" (many)
	Type     string `json:"type"`     // weight type
	Backend  string `json:"backend"`  // "cpu"
	ISA      string `json:"isa"`      // instruction set: go, avx2, avx512, avx512vnni, avx2r16, avx512vnni16, avx512r16, avx512bf16
	Contract string `json:"contract"` // contract id, e.g. kernel.matvec.Q4_K.cpu.avx2
	Act      string `json:"act"`      // activation format the kernel converts its input to
	Runnable bool   `json:"runnable"` // this machine has the instruction set
}

// Kernels lists every registered kernel (kern.List), sorted by operation,
// weight type and instruction set.
func Kernels() []KernelInfo {
	var out []KernelInfo
	for _, e := range kern.List() {
		out = append(out, KernelInfo{Op: string(e.Key.Op), Type: e.Key.Type.String(), Backend: e.Key.Backend,
			ISA: string(e.Key.ISA), Contract: e.Contract, Act: e.Act, Runnable: e.Runnable})
	}
	return out
}

// KernelIDs lists the contract ids of every registered kernel (for
// falsify.RegisterKernelIDs).
func KernelIDs() []string {
	var out []string
	for _, e := range kern.List() {
		out = append(out, e.Contract)
	}
	return out
}
