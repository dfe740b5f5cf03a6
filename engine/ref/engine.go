package ref

import (
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// By is the name refusals from the reference engine carry.
const By = "engine/ref"

var registered sync.Once

// Register makes the reference backend "ref" of engine/model's registry
// (model.OpenBackend); once per process, however often it is called. The
// program's wiring calls it (engine/backends), never an init().
func Register() {
	registered.Do(func() {
		model.RegisterBackend("ref", func(f *gguf.File, spec *model.Spec, o model.OpenOptions) (model.Engine, error) {
			return New(f, spec, Options{Threads: o.Threads, Log: o.Log, Numerics: o.Numerics})
		})
	})
}

// The reference's numerics (Options.Numerics).
const (
	// NumericsPlain computes every product on the float32 activations
	// (accumulated in float64): the judge of the model's semantics.
	NumericsPlain = "plain"
	// NumericsGGML is the same code with the one rounding step the deployed
	// kernels add: before each product, the activation row is rounded to
	// the format ggml-cpu's kernel for the weight type consumes
	// (quant.VecDotType: Q8_0, Q8_1, Q8_K, F16, BF16; F32 unchanged), with
	// the format layer's quantizers (quant.RoundActivations). The product
	// itself stays Σ dequant(w)·dequant(act(x)) in float64, the kernel
	// contracts' reference; nothing is taken from the optimized engines.
	NumericsGGML = "ggml"
	// NumericsGGMLJitter is NumericsGGML with every activation moved by
	// one float32 ulp, up or down by a fixed hash of (tensor, token,
	// element), before it is rounded: the reference as another correct
	// engine in ggml numerics would compute it, one that rounds its float32
	// arithmetic differently (another summation order). Its distance from
	// NumericsGGML is the model's own sensitivity to that rounding — how
	// far two correct engines can be apart on it — which the cosine gates
	// measure as their noise floor (params.noise_floor).
	NumericsGGMLJitter = "ggml-jitter"
)

// Options configure an Engine.
type Options struct {
	Threads int          // goroutines for matrix rows; 0: GOMAXPROCS
	Log     *slog.Logger // nil: discard
	// Numerics is NumericsPlain (or ""), NumericsGGML or
	// NumericsGGMLJitter; anything else is refused by name.
	Numerics string
}

// Engine is the reference engine over one loaded model. It holds the file's
// mapping (through spec's tensor views), small dequantized vectors (norm
// weights, biases) and the per-layer blocks; sessions hold the caches.
type Engine struct {
	f       *gguf.File
	spec    *model.Spec
	threads int
	log     *slog.Logger
	ggml    bool // Options.Numerics is NumericsGGML or NumericsGGMLJitter
	jitter  bool // Options.Numerics is NumericsGGMLJitter

	vecMu sync.Mutex
	vecs  map[string][]float32

	mixers []Mixer
	ffns   []FFN
}

var _ model.Engine = (*Engine)(nil)

// New builds the reference engine for spec (from model.Load(f)). It refuses,
// by name, a layer kind or feed-forward kind it does not implement and a
// tensor whose type has no dequantizer.
func New(f *gguf.File, spec *model.Spec, o Options) (*Engine, error) {
	if o.Threads <= 0 {
		o.Threads = runtime.GOMAXPROCS(0)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{f: f, spec: spec, threads: o.Threads, log: o.Log, vecs: map[string][]float32{}}
	switch o.Numerics {
	case "", NumericsPlain:
	case NumericsGGML:
		e.ggml = true
	case NumericsGGMLJitter:
		e.ggml, e.jitter = true, true
	default:
		return nil, refuse.New(By, "numerics %q is not one the reference computes in (known: %s, %s, %s)", o.Numerics, NumericsPlain, NumericsGGML, NumericsGGMLJitter)
	}
	for _, t := range spec.AllTensors() {
		if err := checkDequant(t); err != nil {
			return nil, err
		}
		if _, err := quant.VecDotType(t.Type); e.ggml && len(t.Shape) >= 2 && err != nil {
			return nil, refuse.New(By, "tensor %q: numerics %s: %v", t.Name, NumericsGGML, err)
		}
	}
	for i := range spec.Layers {
		l := &spec.Layers[i]
		mf, ok := lookup(&mixerMu, mixerKinds, l.Kind)
		if !ok {
			return nil, refuse.New(By, "layer %d: kind %q is not implemented by the reference (known: %s)", i, l.Kind, keys(&mixerMu, mixerKinds))
		}
		m, err := mf(e, l)
		if err != nil {
			return nil, err
		}
		ff, ok := lookup(&ffnMu, ffnKinds, l.FFN)
		if !ok {
			return nil, refuse.New(By, "layer %d: feed-forward kind %q is not implemented by the reference (known: %s)", i, l.FFN, keys(&ffnMu, ffnKinds))
		}
		fn, err := ff(e, l)
		if err != nil {
			return nil, err
		}
		e.mixers = append(e.mixers, m)
		e.ffns = append(e.ffns, fn)
	}
	o.Log.Debug("reference engine ready", "arch", spec.Arch, "layers", spec.NLayer, "threads", e.threads)
	return e, nil
}

func checkDequant(t *model.Tensor) error {
	buf := make([]float32, t.Cols())
	if err := quant.Dequantize(t.Type, t.Row(0), buf); err != nil {
		return refuse.New(By, "tensor %q of type %s cannot be dequantized: %v", t.Name, t.Type, err)
	}
	return nil
}

// Spec returns the model description the engine runs.
func (e *Engine) Spec() *model.Spec { return e.spec }

// Backend returns "ref".
func (e *Engine) Backend() string { return "ref" }

// Numerics returns the numerics the engine computes in (NumericsPlain,
// NumericsGGML or NumericsGGMLJitter).
func (e *Engine) Numerics() string {
	if e.jitter {
		return NumericsGGMLJitter
	}
	if e.ggml {
		return NumericsGGML
	}
	return NumericsPlain
}

// NVocab returns the logits row length.
func (e *Engine) NVocab() int { return e.spec.NVocab }

// Close releases nothing: the caller owns the file.
func (e *Engine) Close() error { return nil }

// NewSession starts an empty sequence with room for maxCtx positions.
func (e *Engine) NewSession(maxCtx int) (model.Session, error) {
	if maxCtx <= 0 {
		return nil, fmt.Errorf("ref: context size %d must be positive", maxCtx)
	}
	s := &Session{e: e, maxCtx: maxCtx}
	for _, m := range e.mixers {
		s.states = append(s.states, m.NewState(maxCtx))
	}
	return s, nil
}

// Mixer is one layer's sequence mixer (the block between attn_norm and the
// first residual add), built once per engine by the MixerFunc registered for
// the layer's Kind.
type Mixer interface {
	// NewState returns one session's state in this layer (its KV cache or
	// recurrent state) for up to maxCtx positions.
	NewState(maxCtx int) MixerState
}

// MixerState is one session's state in one layer.
type MixerState interface {
	// Forward reads the normalised inputs x[t] of the tokens at positions
	// pos, pos+1, … and writes each block output (after its output
	// projection, NEmbd wide) to out[t], advancing the state.
	Forward(tr tracer, x, out [][]float32, pos int) error
}

// FFN is one layer's feed-forward block (after ffn_norm), stateless.
type FFN interface {
	// Forward writes the block output for each normalised input x[t] (the
	// token at position pos+t) to out[t].
	Forward(tr tracer, x, out [][]float32, pos int) error
}

// MixerFunc builds the mixer of layer l.
type MixerFunc func(e *Engine, l *model.Layer) (Mixer, error)

// FFNFunc builds the feed-forward block of layer l.
type FFNFunc func(e *Engine, l *model.Layer) (FFN, error)

var (
	mixerMu    sync.RWMutex
	mixerKinds = map[string]MixerFunc{}
	ffnMu      sync.RWMutex
	ffnKinds   = map[string]FFNFunc{}
)

// RegisterMixer makes layers of kind (model.Layer.Kind) runnable. It panics
// on a duplicate: a programmer error.
func RegisterMixer(kind string, fn MixerFunc) { register(&mixerMu, mixerKinds, kind, fn) }

// RegisterFFN makes feed-forward blocks of kind (model.Layer.FFN) runnable.
func RegisterFFN(kind string, fn FFNFunc) { register(&ffnMu, ffnKinds, kind, fn) }

func register[F any](mu *sync.RWMutex, m map[string]F, kind string, fn F) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := m[kind]; dup {
		panic("ref: kind " + kind + " registered twice")
	}
	m[kind] = fn
}

func lookup[F any](mu *sync.RWMutex, m map[string]F, kind string) (F, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := m[kind]
	return f, ok
}

func keys[F any](mu *sync.RWMutex, m map[string]F) string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// tracer reports one layer's intermediate results to a model.Trace. The zero
// value (no hook) reports nothing and costs a nil check.
type tracer struct {
	fn    model.Trace
	layer int
}

// on reports whether a hook is installed (to skip building values only a
// trace would read).
func (t tracer) on() bool { return t.fn != nil }

// emit reports v as op at position pos.
func (t tracer) emit(op string, pos int, v []float32) {
	if t.fn != nil {
		t.fn(t.layer, op, pos, v)
	}
}
