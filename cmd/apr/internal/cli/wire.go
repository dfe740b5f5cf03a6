package cli

// What apr is wired from, in this one file: the engines (backends) and the
// falsifier registry.
//
// The engines the CLI can run become backends by name here (wire,
// engine/backends: engine/model's registry, which refuses a name that is not
// registered); a registered backend that cannot run here (cuda without a
// driver or device) refuses with the reason when opened.
import (
	"context"
	"log/slog"
	"sync"

	"github.com/aprqa/apr/engine/backends"
	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/qa"
	"github.com/aprqa/apr/serve"
)

// registry is the falsifier registry apr runs, wired here and only here:
// falsify's own code, the code of apr qa's gates (qa.Register), the two
// checks whose code is in falsify but needs what only the command line has
// (verb_fields runs apr's own verbs, serve_responses serves the model), and
// the engines' kernels (the CPU engine's run by kernel_dot; the CUDA
// engine's resolved by apr contracts vet). Neither falsify, qa nor the CLI
// registers falsifier code into another package's registry from init().
var registry = sync.OnceValue(func() *falsify.Registry {
	r := falsify.Builtins()
	qa.Register(r)
	falsify.RegisterVerbFields(r, runVerb)
	falsify.RegisterServeResponses(r, func(ctx context.Context, model, backend string) (map[string]any, []string, error) {
		return serve.Responses(ctx, serve.Options{Model: model, Backend: backend, Log: slog.New(slog.DiscardHandler)})
	})
	r.RegisterKernels("engine/cpu", cpu.KernelIDs, cpuKernelRun)
	r.RegisterKernelIDs("engine/cuda", cuda.KernelIDs)
	return r
})

func cpuKernelRun(contract string, w []byte, rows, cols int, x []float32, m int) ([]float32, string, []byte, error) {
	r, err := cpu.RunKernel(contract, w, rows, cols, x, m)
	return r.Out, r.Act, r.Acts, err
}

// wire registers the engines as backends (once per process): every command
// tree NewRoot builds starts from it.
func wire() { backends.Register() }
