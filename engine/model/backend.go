package model

import (
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/refuse"
)

// OpenOptions are what every backend's constructor receives besides the
// model.
type OpenOptions struct {
	Log     *slog.Logger // never nil when passed by generate
	Threads int          // 0: the backend's choice
	// Numerics asks the reference ("ref") for a declared numerics mode
	// ("plain", the default, or "ggml": activations rounded as ggml-cpu's
	// kernels round them). Only the reference has modes; OpenBackend
	// refuses a non-empty Numerics for any other backend.
	Numerics string
}

// OpenFunc builds an engine of one backend over a loaded model. The engine
// keeps f open and reads its tensors through spec's views; the caller closes
// the engine before f.
type OpenFunc func(f *gguf.File, spec *Spec, opts OpenOptions) (Engine, error)

// Uploader is implemented by engines that copy weights to a device after
// construction. The generation pipeline times Upload as its h2d stage; an
// engine without it has an h2d stage of 0.
type Uploader interface {
	Upload() error
}

var (
	backendMu sync.RWMutex
	backends  = map[string]OpenFunc{}
)

// RegisterBackend makes name available to OpenBackend. Backends register
// themselves from an init function in their package; the binary imports the
// packages it ships. It panics when name is registered twice.
func RegisterBackend(name string, fn OpenFunc) {
	backendMu.Lock()
	defer backendMu.Unlock()
	if _, dup := backends[name]; dup {
		panic("model: RegisterBackend: " + name + " registered twice")
	}
	backends[name] = fn
}

// Backends lists the registered backends, sorted.
func Backends() []string {
	backendMu.RLock()
	defer backendMu.RUnlock()
	out := make([]string, 0, len(backends))
	for n := range backends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// OpenBackend builds the named backend's engine. A name no package
// registered is refused by name (never a fallback to another backend).
func OpenBackend(name string, f *gguf.File, spec *Spec, opts OpenOptions) (Engine, error) {
	backendMu.RLock()
	fn, ok := backends[name]
	backendMu.RUnlock()
	if !ok {
		return nil, refuse.New("backend", "backend %q is not available in this build (available: %s)", name, strings.Join(Backends(), ", "))
	}
	if opts.Numerics != "" && name != "ref" {
		return nil, refuse.New("backend", "backend %q has no numerics modes (numerics %q): only the reference computes in a declared numerics", name, opts.Numerics)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return fn(f, spec, opts)
}

var probes = map[string]func() error{}

// RegisterProbe gives a registered backend whose use depends on the
// machine (cuda: a driver, a device, built kernels) the check Available
// runs. A backend without one is always available.
func RegisterProbe(name string, probe func() error) {
	backendMu.Lock()
	defer backendMu.Unlock()
	probes[name] = probe
}

// Available reports whether backend name can run on this machine: nil, or
// a refusal saying why not (not linked, no device, …). Callers that pick
// backends by default use it to leave out, and report, what cannot run;
// a backend the user names is opened and refused by its own reason.
func Available(name string) error {
	backendMu.RLock()
	_, ok := backends[name]
	probe := probes[name]
	backendMu.RUnlock()
	if !ok {
		return refuse.New("backend", "backend %q is not available in this build (available: %s)", name, strings.Join(Backends(), ", "))
	}
	if probe == nil {
		return nil
	}
	if err := probe(); err != nil {
		if _, ok := refuse.As(err); ok {
			return err
		}
		return refuse.New("backend", "backend %q cannot run here: %v", name, err)
	}
	return nil
}
