package falsify

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/schema"
)

// Kind is what a falsifier does.
type Kind string

// The kinds. Each has a planted-defect test proving it can fail.
const (
	KindProperty   Kind = "property"   // randomized inputs (gopter); the seed is recorded
	KindTiming     Kind = "timing"     // a planted delay moves one field only
	KindCosine     Kind = "cosine"     // two engines' logits or hidden states agree
	KindFailClosed Kind = "failclosed" // a check refuses when its reference is withdrawn
	KindGolden     Kind = "golden"     // output equals a reviewed golden file
	KindShape      Kind = "shape"      // data (a GGUF, a verb's output) satisfies its contract
)

// Need is an input a falsifier's code needs; without it the falsifier does
// not apply (and is refused when named explicitly).
type Need string

// The inputs.
const (
	NeedModel    Need = "model"    // --model FILE
	NeedFixtures Need = "fixtures" // --fixtures DIR (apr's shared test fixtures)
)

// Func is a falsifier's code. It measures into c and returns nil, or returns
// Fail(...), a refusal, or another error (a refusal by the falsifier).
type Func func(ctx context.Context, c *Check) error

// Code is one registered falsifier implementation.
type Code struct {
	ID         string
	Kind       Kind
	Run        Func
	Needs      []Need
	Thresholds []string // threshold names every contract using the code must give
	Params     []string // params every contract using the code must give
	// Refs names the references the code consults through Check.Ref or
	// Check.CallRef; failclosed needs at least one.
	Refs []string
	// Applies, when set, says whether the falsifier applies to the inputs
	// beyond the generic rules (binds, needs), and why not.
	Applies func(c *Check) (bool, string)
	// Vet, when set, checks a contract's use of the code (for contracts vet).
	Vet func(f schema.Falsifier, set *contracts.Set) []string
	Doc string
}

// Option sets an optional part of a Code.
type Option func(*Code)

// Needs declares the inputs the code needs.
func Needs(n ...Need) Option { return func(c *Code) { c.Needs = append(c.Needs, n...) } }

// Thresholds declares the threshold names a contract must give.
func Thresholds(names ...string) Option {
	return func(c *Code) { c.Thresholds = append(c.Thresholds, names...) }
}

// Params declares the params a contract must give.
func Params(names ...string) Option { return func(c *Code) { c.Params = append(c.Params, names...) } }

// Refs declares the references the code consults.
func Refs(names ...string) Option { return func(c *Code) { c.Refs = append(c.Refs, names...) } }

// AppliesWhen sets the code's applicability test.
func AppliesWhen(fn func(c *Check) (bool, string)) Option { return func(c *Code) { c.Applies = fn } }

// VetWith sets the code's contract check.
func VetWith(fn func(f schema.Falsifier, set *contracts.Set) []string) Option {
	return func(c *Code) { c.Vet = fn }
}

// Doc sets the code's one-line description.
func Doc(s string) Option { return func(c *Code) { c.Doc = s } }

// Registry holds falsifier code by id, and the kernel ids engines'
// registries name. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	codes   map[string]Code
	kernels map[string]func() []string
	runners map[string]kernelSource
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{codes: map[string]Code{}, kernels: map[string]func() []string{}}
}

// Builtins returns a new registry holding this package's own code
// (RegisterBuiltins). The registry apr's binary runs adds to it, in one
// place (cmd/apr/internal/cli's wiring): qa's gates, verb_fields and the
// engines' kernels.
func Builtins() *Registry {
	r := NewRegistry()
	RegisterBuiltins(r)
	return r
}

// builtins is the registry a run without Options.Registry uses.
var builtins = sync.OnceValue(Builtins)

// Register adds code id of kind. An empty or duplicate id, an unknown kind or
// a nil fn is a programmer error and panics.
func (r *Registry) Register(id string, kind Kind, fn Func, opts ...Option) {
	if id == "" || fn == nil {
		panic("falsify: Register: empty id or nil func")
	}
	if !validKind(kind) {
		panic(fmt.Sprintf("falsify: Register %s: unknown kind %q", id, kind))
	}
	c := Code{ID: id, Kind: kind, Run: fn}
	for _, o := range opts {
		o(&c)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.codes[id]; dup {
		panic("falsify: Register: duplicate id " + id)
	}
	r.codes[id] = c
}

// RegisterKernelIDs adds a source of kernel contract ids (an engine's
// kernel registry, e.g. "kernel.matvec.Q4_K.cpu.avx2"); Vet resolves every
// one against the kernel contracts.
func (r *Registry) RegisterKernelIDs(source string, ids func() []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kernels[source]; dup {
		panic("falsify: RegisterKernelIDs: duplicate source " + source)
	}
	r.kernels[source] = ids
}

// Clone returns a copy of r: the same code, kernel sources and runners,
// which the copy may then rebind without touching r.
func (r *Registry) Clone() *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := &Registry{codes: maps.Clone(r.codes), kernels: maps.Clone(r.kernels), runners: maps.Clone(r.runners)}
	return c
}

// Rebind replaces the function of code id, keeping what it declares
// (kind, needs, thresholds, params, refs, docs), and reports whether id is
// registered: a caller binds code to state of its own (apr qa's open models)
// in a clone, instead of handing the state through a context.
func (r *Registry) Rebind(id string, fn Func) bool {
	if fn == nil {
		panic("falsify: Rebind: nil func")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.codes[id]
	if ok {
		c.Run = fn
		r.codes[id] = c
	}
	return ok
}

// Lookup returns the code registered under id.
func (r *Registry) Lookup(id string) (Code, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.codes[id]
	return c, ok
}

// Codes returns every registered code, sorted by id.
func (r *Registry) Codes() []Code {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Code, 0, len(r.codes))
	for _, c := range r.codes {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func validKind(k Kind) bool {
	switch k {
	case KindProperty, KindTiming, KindCosine, KindFailClosed, KindGolden, KindShape:
		return true
	}
	return false
}
