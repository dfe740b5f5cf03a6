package cpu

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/model"
)

// Name is the backend name the engine registers.
const Name = "cpu"

// By is the name refusals from the CPU engine carry.
const By = "engine/cpu"

var registered sync.Once

// Register makes the engine backend "cpu" of engine/model's registry
// (model.OpenBackend); once per process, however often it is called. The
// program's wiring calls it (cmd/apr: engine/backends), never an init().
func Register() {
	registered.Do(func() { model.RegisterBackend(Name, open) })
}

// open builds the engine for the registry, with the environment's planted
// defect and kernel set.
func open(f *gguf.File, spec *model.Spec, o model.OpenOptions) (model.Engine, error) {
	opts := Options{Threads: o.Threads, Log: o.Log, Plant: os.Getenv(EnvPlant), Kernels: os.Getenv(EnvKernels)}
	if opts.Plant != "" && o.Log != nil {
		o.Log.Warn("cpu: a defect is planted in a kernel (falsifier hook)", "env", EnvPlant, "plant", opts.Plant)
	}
	return New(f, spec, opts)
}

// EnvPlant plants a defect in one weight type's kernel for every engine the
// registry opens ("TYPE:DEFECT[:ARGS]", e.g. "Q8_0:scale:1:1.05"; the
// defects are listed at Options.Plant): the hook with which tests and people
// prove that apr qa's gates catch a wrong CPU kernel. Never set it otherwise.
const EnvPlant = "APR_CPU_PLANT"

// EnvKernels selects the engine's kernel set for every engine the registry
// opens: "" (the fastest kernels this CPU runs, packed ones included),
// "exact" (no packed kernels: ggml's order of float32 operations, for
// bisecting a difference against llama.cpp), "avx2" or "avx2-exact" (the
// same as on a CPU with AVX2 but no AVX-512: kernelSets). Any other value
// is refused.
const EnvKernels = "APR_CPU_KERNELS"

// Options configure an Engine.
type Options struct {
	// Kernels is the kernel set: "" (the fastest), "exact", "avx2" or
	// "avx2-exact" (EnvKernels, kernelSets).
	Kernels string
	Threads int          // worker threads; 0: every CPU (runtime.NumCPU)
	Log     *slog.Logger // nil: discard
	// Plant, when set, plants a defect in one weight type's kernel: every
	// product of that type goes through its pure-Go kernel with the defect
	// written in, and Kernels names it ("…+plant(SPEC)"). The defects:
	//   Q8_0:scale:B:F        block B's scale of every row × F
	//   Q8_0:drop_last        every row's last block left out
	//   Q4_K:min_sign:SB      sub-block SB's min with the wrong sign
	//   Q4_K:nibble:SB        sub-block SB reads the other nibble
	//   Q6_K:scale_from:SB:S  sub-block SB's scale read from sub-block S
	// An unknown defect is an error. Never set it outside tests and
	// falsifiers.
	Plant string
}

// Engine is the optimized CPU engine over one loaded model: the shared
// graph description on the CPU backend. The weights stay in the file's
// mapping (packed kernels' weights: repacked at load, the file's pages
// released); sessions hold the KV caches and recurrent states.
type Engine struct {
	f    *gguf.File
	spec *model.Spec
	be   *backend
	m    *graph.Model
}

var _ model.Engine = (*Engine)(nil)

// New builds the CPU engine for spec (from model.Load(f)). A weight type
// without a registered kernel, and a layer kind without a graph
// description, are refused by name.
func New(f *gguf.File, spec *model.Spec, o Options) (*Engine, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	set, err := lookupKernelSet(o.Kernels)
	if err != nil {
		return nil, err
	}
	be, err := newBackendSet(o.Threads, set)
	if err != nil {
		return nil, err
	}
	if o.Plant != "" {
		if be.plant, err = kern.ParsePlant(o.Plant); err != nil {
			be.close()
			return nil, fmt.Errorf("cpu: %w", err)
		}
	}
	be.ubatch = be.chooseUBatch(spec)
	m, err := graph.Build(spec, be)
	if err != nil {
		be.close()
		return nil, err
	}
	o.Log.Debug("cpu engine ready", "arch", spec.Arch, "layers", spec.NLayer, "threads", be.threads, "kernels", be.kernels())
	return &Engine{f: f, spec: spec, be: be, m: m}, nil
}

// Backend returns "cpu".
func (e *Engine) Backend() string { return Name }

// NVocab returns the logits row length.
func (e *Engine) NVocab() int { return e.spec.NVocab }

// Threads returns the number of threads the engine computes on.
func (e *Engine) Threads() int { return e.be.threads }

// Kernels lists the contract ids of the kernels the engine selected for
// its weights (and its attention), sorted.
func (e *Engine) Kernels() []string { return e.be.kernels() }

// NewSession starts an empty sequence with room for maxCtx positions. Its
// F32 KV caches are reserved here and become resident as positions are
// fed. The session also has Reset (empty it, keeping its memory) and Close
// (release its caches now).
func (e *Engine) NewSession(maxCtx int) (model.Session, error) {
	return e.m.NewSession(maxCtx)
}

// EvalBatch feeds parts[i] to sessions[i] (sessions of this engine) in one
// pass; see graph.Model.EvalBatch. The cpu kernels treat rows independently,
// so each session's rows equal its own Eval of its part.
func (e *Engine) EvalBatch(sessions []model.Session, parts [][]int32) ([][]float32, error) {
	if !e.m.CanEvalBatch() {
		return nil, fmt.Errorf("cpu: the backend's products are not row-exact; evaluate the sessions one by one")
	}
	gs := make([]*graph.Session, len(sessions))
	for i, s := range sessions {
		g, ok := s.(*graph.Session)
		if !ok {
			return nil, fmt.Errorf("cpu: EvalBatch: session %d (%T) is not this engine's", i, s)
		}
		gs[i] = g
	}
	return e.m.EvalBatch(gs, parts)
}

// MaxBatchRows is graph.MaxBatchRows.
func (e *Engine) MaxBatchRows() int { return graph.MaxBatchRows }

var _ model.BatchDecoder = (*Engine)(nil)

// Close stops the engine's threads and releases its work buffers; sessions
// fail with graph.ErrClosed afterwards. The caller closes the file after it.
func (e *Engine) Close() error {
	e.m.Close()
	e.be.close()
	return nil
}

// NewBackend returns the CPU implementation of graph.Backend on its own
// pool of threads (0: every CPU), and the function that stops it: for
// running a graph.Model directly, or wrapping the backend (to record or
// compare its ops against another backend's).
func NewBackend(threads int) (graph.Backend, func(), error) {
	be, err := newBackend(threads)
	if err != nil {
		return nil, nil, err
	}
	return be, be.close, nil
}
