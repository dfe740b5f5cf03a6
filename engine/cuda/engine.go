package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/aprqa/apr/engine/cuda/internal/cu"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/refuse"
)

// Name is the backend name the engine registers.
const Name = "cuda"

// By is the name refusals from the CUDA engine carry.
const By = "engine/cuda"

// ByBackend refuses a backend this machine cannot run (no driver, no
// device, no kernels), as the registry refuses one this build lacks: the
// name `apr ladder` and `apr qa --allow-refused backend` accept in advance.
const ByBackend = "backend"

var registered sync.Once

// Register makes the CUDA engine backend "cuda" of engine/model's registry
// (model.OpenBackend), with its probe (model.Available); once per process,
// however often it is called. The program's wiring calls it
// (engine/backends), never an init().
func Register() {
	registered.Do(registerBackend)
}

func registerBackend() {
	model.RegisterBackend(Name, func(f *gguf.File, spec *model.Spec, o model.OpenOptions) (model.Engine, error) {
		opts := Options{Log: o.Log}
		if s := os.Getenv(EnvPlant); s != "" {
			p, err := ParsePlant(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvPlant, err)
			}
			opts.Plant = p
			if o.Log != nil {
				o.Log.Warn("cuda: a defect is planted in the kernels' output (falsifier hook)", "env", EnvPlant, "plant", s)
			}
		}
		return New(f, spec, opts)
	})
	model.RegisterProbe(Name, func() error {
		if _, err := Available(); err != nil {
			return refuse.New(ByBackend, "backend %q cannot run here: CUDA is unavailable: %v", Name, err)
		}
		if _, _, err := kernelImage(); err != nil {
			return refuse.New(ByBackend, "backend %q cannot run here: no usable kernels: %v", Name, err)
		}
		return nil
	})
}

// EnvPlant plants a defect in the engine's kernels for every engine the
// registry opens ("TENSOR[:COL[:FACTOR]]" or "op=NAME[:COL[:FACTOR]]", see
// ParsePlant): the hook with which falsifiers and people prove that apr qa,
// F2 and apr diff catch a wrong CUDA kernel. Never set it otherwise.
const EnvPlant = "APR_CUDA_PLANT"

// Options configure an Engine.
type Options struct {
	Log *slog.Logger // nil: discard
	// Plant, when set, plants a defect in one kernel's output (falsifiers
	// prove with it that F2, the gates and the bisect catch a wrong
	// kernel). Never set outside tests and falsifiers.
	Plant *Plant
}

// Engine is the CUDA engine over one loaded model: the shared graph
// description on the CUDA backend. Weights are copied to the device by
// Upload (the h2d stage), or by the first Eval when nobody called it.
type Engine struct {
	f    *gguf.File
	spec *model.Spec
	be   *backend
	m    *graph.Model
	info cu.Info
}

var (
	_ model.Engine   = (*Engine)(nil)
	_ model.Uploader = (*Engine)(nil)
)

// workspaceBytes is the room kept for work buffers and scratch beyond the
// weights when deciding whether a model fits (activations of a 128-token
// piece of a small model are a few MB; a 151k-entry vocabulary's logits
// rows for a whole prompt are ~80 MB).
const workspaceBytes = 256 << 20

// Available reports whether the CUDA backend can run here, and why not.
func Available() (cu.Info, error) {
	d, err := cu.Load()
	if err != nil {
		return cu.Info{}, err
	}
	var in cu.Info
	err = d.Do(func() error {
		var err error
		in, err = d.Info()
		return err
	})
	return in, err
}

// Warm starts the driver's set-up (libcuda.so.1 loaded, cuInit, device 0's
// primary context retained; once per process) in the background, so that a
// command about to open a CUDA engine has it under way while it reads the
// model's header and tokenizer; New then waits for what is left of it. An
// unavailable driver is still New's refusal, with the same reason.
func Warm() { go cu.Load() }

// New builds the CUDA engine for spec. An unavailable driver or device, a
// weight type without a CUDA kernel, and a model that does not fit the
// device's free memory are refused by name, with the reason.
func New(f *gguf.File, spec *model.Spec, o Options) (*Engine, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := checkSwitches(); err != nil {
		return nil, refuse.New(ByBackend, "backend %q: %v", Name, err)
	}
	d, err := cu.Load()
	if err != nil {
		return nil, refuse.New(ByBackend, "backend %q cannot run here: CUDA is unavailable: %v", Name, err)
	}
	ptx, origin, err := kernelImage()
	if err != nil {
		return nil, refuse.New(ByBackend, "backend %q cannot run here: no usable kernels: %v", Name, err)
	}
	be, info, err := newBackend(d, ptx, origin, o.Plant)
	if err != nil {
		return nil, refuse.New(By, "%v", err)
	}
	m, err := graph.Build(spec, be)
	if err != nil {
		be.close()
		return nil, err
	}
	need := be.weightBytes() + workspaceBytes
	if need > info.FreeBytes {
		be.close()
		return nil, refuse.New(By, "the model needs %d bytes on the device (weights %d + workspace %d); %s has %d bytes free",
			need, need-workspaceBytes, uint64(workspaceBytes), info.Name, info.FreeBytes)
	}
	o.Log.Debug("cuda engine ready", "arch", spec.Arch, "layers", spec.NLayer, "device", info.Name,
		"weights_bytes", need-workspaceBytes, "kernels", origin)
	return &Engine{f: f, spec: spec, be: be, m: m, info: info}, nil
}

// switches are the engine's developer switches and the values each takes
// ("" is unset: the default).
var switches = []struct {
	env  string
	vals []string
}{
	{EnvGraphs, []string{"0", "1"}},
	{EnvFuse, []string{"0", "1"}},
	{EnvEarly, []string{"0", "1"}},
	{EnvChunk, []string{"0", "1"}},
	{EnvAttg, []string{"0", "1", "norope", "group"}},
	{EnvMQ, []string{"0", "1"}},
	{EnvProfile, []string{"0", "1", ProfileSteps}},
}

// SwitchNames lists the developer switches' variables, in order.
func SwitchNames() []string {
	names := make([]string, len(switches))
	for i, sw := range switches {
		names[i] = sw.env
	}
	return names
}

// checkSwitches refuses a switch set to a value it does not take: a typo
// must not run the default and pass for the variant asked for.
func checkSwitches() error {
	for _, sw := range switches {
		v, ok := os.LookupEnv(sw.env)
		if !ok || v == "" || slices.Contains(sw.vals, v) {
			continue
		}
		return fmt.Errorf("%s=%q is not one of %s", sw.env, v, strings.Join(sw.vals, ", "))
	}
	return nil
}

// newBackend loads the kernel image, looks up every kernel and creates the
// stream the backend queues its work on.
func newBackend(d *cu.Driver, image []byte, origin string, plant *Plant) (*backend, cu.Info, error) {
	be := &backend{d: d, fn: map[string]cu.Func{}, resident: map[cu.Func]int{}, used: map[string]int{}, plant: plant, graphs: newGraphCache(),
		noFuse: os.Getenv(EnvFuse) == "0", noChunk: os.Getenv(EnvChunk) == "0", noAttg: os.Getenv(EnvAttg) == "0", noAttgRope: os.Getenv(EnvAttg) == "norope", noAttw: os.Getenv(EnvAttg) == "group",
		noMQ: os.Getenv(EnvMQ) == "0"}
	var info cu.Info
	err := d.Do(func() error {
		var err error
		if info, err = d.Info(); err != nil {
			return err
		}
		be.sms = info.SMs
		// Programmatic dependent launch needs sm_90 (griddepcontrol) and
		// CUDA 12's cuLaunchKernelEx.
		be.early = info.Major >= 9 && os.Getenv(EnvEarly) != "0" && d.HasEntry("cuLaunchKernelEx")
		if be.mod, err = d.LoadModule(image); err != nil {
			return fmt.Errorf("loading the kernels (%s): %w", origin, err)
		}
		for _, name := range kernelNames() {
			fn, err := d.Function(be.mod, name)
			if err != nil {
				return err
			}
			be.fn[name] = fn
			if strings.HasPrefix(name, "mv_") {
				// One wave of a one-token product (mvRowsPerSlot, mvGrid).
				n, err := d.Resident(fn, 128, 0)
				if err != nil {
					return fmt.Errorf("%w (kernel %s)", err, name)
				}
				if n < 1 {
					return fmt.Errorf("cuda: kernel %s cannot run a block of 128 threads on this device (the driver's occupancy: %d blocks per multiprocessor)", name, n)
				}
				be.resident[fn] = n
			}
		}
		be.stream, err = d.NewStream()
		return err
	})
	if err == nil {
		err = be.readAttgL()
	}
	if be.prof = newProfiler(be.fn); be.prof != nil {
		be.graphs = nil // timed kernel by kernel
	}
	be.steps = newStepProfiler()
	return be, info, err
}

// kernelNames lists every kernel the backend looks up.
func kernelNames() []string {
	names := []string{"k_zero", "k_add", "k_addvec", "k_swiglu", "k_sigmoid", "k_silu", "k_mulsigmoid",
		"k_softplusmul", "k_deinterleave", "k_wsum", "k_rmsnorm", "k_l2norm", "k_gatednorm", "k_softmax", "k_rope",
		"k_store", "k_attend", "k_attn", "k_stream", "k_sumk", "k_conv", "k_delta", "k_deltaw2", "k_deltaw4", "k_deltaw8", "k_perturb"}
	for _, k := range append(attgKernels[:], attwKernels[:]...) {
		names = append(names, k.name, k.rope)
	}
	names = append(names, flashNames[:]...)
	names = append(names, "k_round", "k_actfmt", "k_attgcfg")
	for _, t := range mqTypes {
		names = append(names, "mq_"+t.String())
	}
	for _, t := range Types() {
		for _, p := range []string{"mv_", "mm_", "mmid_", "getrows_"} {
			names = append(names, p+t.String())
		}
	}
	return names
}

// Backend returns "cuda".
func (e *Engine) Backend() string { return Name }

// NVocab returns the logits row length.
func (e *Engine) NVocab() int { return e.spec.NVocab }

// Device describes the GPU the engine runs on.
func (e *Engine) Device() cu.Info { return e.info }

// Kernels lists the contract ids of the kernels the engine uses, sorted.
func (e *Engine) Kernels() []string { return e.be.kernels() }

// GraphStats counts how the engine's tapes ran (see graphCache): launched
// kernel by kernel on a first sighting, captured into a CUDA graph on the
// second, replayed from then on. All zero when the cache is off
// (APR_CUDA_GRAPHS=0).
func (e *Engine) GraphStats() (direct, captured, replayed int) {
	g := e.be.graphs
	if g == nil {
		return 0, 0, 0
	}
	e.be.d.Do(func() error { direct, captured, replayed = g.direct, g.captured, g.replayed; return nil })
	return
}

// EarlyLaunches counts the kernels launched early (programmatic dependent
// launch, before the kernel ahead of them finished); zero with
// APR_CUDA_EARLY=0 or on a device before sm_90.
func (e *Engine) EarlyLaunches() int {
	n := 0
	e.be.d.Do(func() error { n = e.be.earlyN; return nil })
	return n
}

// Fused counts the ops folded into the product before them (a bias, a
// residual add); zero with APR_CUDA_FUSE=0.
func (e *Engine) Fused() int {
	n := 0
	e.be.d.Do(func() error { n = e.be.fused; return nil })
	return n
}

// Upload copies the weights to the device (once); Evals before it upload
// first.
func (e *Engine) Upload() error { return e.be.upload() }

// WeightBytes is what Upload copies.
func (e *Engine) WeightBytes() uint64 { return e.be.weightBytes() }

// NewSession starts an empty sequence with room for maxCtx positions; its
// KV caches are allocated on the device now (refused, with the sizes, when
// they do not fit).
func (e *Engine) NewSession(maxCtx int) (model.Session, error) {
	s, err := e.m.NewSession(maxCtx)
	if err != nil {
		return nil, err
	}
	return &session{Session: s, be: e.be}, nil
}

// session surfaces a device failure recorded by an op without an error
// result: an Eval after which the backend has failed returns that failure.
type session struct {
	*graph.Session
	be  *backend
	row []float32 // LogitsRow's, in pinned host memory
}

func (s *session) Eval(tokens []int32, all bool) ([][]float32, error) {
	var rows [][]float32
	err := s.held(func() (err error) {
		rows, err = s.Session.Eval(tokens, all)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// LogitsRow is model.RowAllocator's: n floats of pinned host memory, which
// the logits' copy from the device writes directly (into pageable memory
// the driver copies through a staging buffer of its own). A session has
// one row, kept for its sequences in turn (a server's slot), replaced only
// for another n; Close gives it back, and so does the engine's Close for
// sessions never closed. A row must not be read after its session closes.
func (s *session) LogitsRow(n int) ([]float32, error) {
	if len(s.row) == n {
		return s.row, nil
	}
	if err := s.releaseRow(); err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	err := s.be.d.Do(func() (err error) {
		p, err = s.be.d.AllocHost(uint64(4 * max(n, 1)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: a logits row of %d values in pinned memory: %w", n, err)
	}
	s.be.mu.Lock()
	s.be.rows = append(s.be.rows, p)
	s.be.mu.Unlock()
	s.row = unsafe.Slice((*float32)(p), n)
	return s.row, nil
}

// Close is graph.Session's, and gives back the session's logits row.
func (s *session) Close() error {
	err := s.releaseRow()
	return errors.Join(err, s.Session.Close())
}

// releaseRow frees the session's logits row, unless the engine's Close
// already did.
func (s *session) releaseRow() error {
	if s.row == nil {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(s.row))
	s.row = nil
	s.be.mu.Lock()
	i := slices.Index(s.be.rows, p)
	if i >= 0 {
		s.be.rows = slices.Delete(s.be.rows, i, i+1)
	}
	s.be.mu.Unlock()
	if i < 0 {
		return nil
	}
	if err := s.be.d.Do(func() error { return s.be.d.FreeHost(p) }); err != nil {
		return fmt.Errorf("cuda: freeing a session's logits row: %w", err)
	}
	return nil
}

// EvalLast is model.LastEvaluator's: Eval's last row written to dst.
func (s *session) EvalLast(tokens []int32, dst []float32) error {
	return s.held(func() error { return s.Session.EvalLast(tokens, dst) })
}

// held runs one evaluation (eval) with the driver held on this thread, then
// the kernels it left on the tape, and surfaces a device failure that an op
// recorded without an error result.
func (s *session) held(eval func() error) error {
	t0 := time.Now()
	if s.be.steps != nil {
		s.be.steps.begin(t0)
	}
	// One Eval is hundreds of launches on this goroutine: hold the driver
	// on its thread for all of them (the graph runs one Eval at a time).
	release, err := s.be.d.Hold()
	if err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	s.be.held, s.be.chunkAt = true, chunkFirst
	err = eval()
	if err == nil {
		// An Eval without logits (a prompt chunk) ends with kernels still
		// on the tape.
		err = s.be.do(s.be.flush)
		if err == nil && s.be.steps != nil {
			err = s.be.do(func() error { return s.be.steps.collect(s.be, time.Since(t0)) })
		}
	} else {
		s.be.dropTape()
	}
	s.be.held = false
	release()
	if err == nil && s.be.err != nil {
		err = fmt.Errorf("cuda: %w", s.be.err)
	}
	return err
}

// Close releases the engine's device memory; sessions fail afterwards.
func (e *Engine) Close() error {
	if e.be.prof != nil {
		e.be.prof.report(os.Stderr)
	}
	if e.be.steps != nil {
		e.be.steps.report(os.Stderr)
	}
	e.m.Close()
	e.be.close()
	return nil
}

// Identity is what the engine's results depend on beyond the model: the
// device and the kernel module (sha256 of the PTX).
func (e *Engine) Identity() string {
	sum, err := ModuleSHA256()
	if err != nil {
		sum = "unknown"
	}
	return fmt.Sprintf("%s sm_%d%d driver %d kernels %s", e.info.Name, e.info.Major, e.info.Minor, e.info.Driver, sum)
}

// Plant is a planted defect: after every product whose weight is Tensor
// (or, with Tensor "", every op called Op: "rmsnorm", "attend"), column Col
// of its output is multiplied by Factor.
type Plant struct {
	Tensor string
	Op     string
	Col    int
	Factor float32
}

func (p *Plant) after(be *backend, op string, d *buf) {
	target := "matmul:" + p.Tensor
	if p.Tensor == "" {
		target = p.Op
	}
	if op != target || p.Col >= d.cols || d.rows == 0 {
		return
	}
	c := d.p + cu.Ptr(4*p.Col)
	be.do(func() error {
		return be.launch("k_perturb", cu.Dim{X: uint32((d.rows + 127) / 128)}, cu.Dim{X: 128}, 0, c, d.stride, d.rows, 0, p.Factor)
	})
}

// ParsePlant reads "TENSOR[:COL[:FACTOR]]" or "op=NAME[:COL[:FACTOR]]"
// (the planted-defect flags of the CUDA falsifiers).
func ParsePlant(s string) (*Plant, error) {
	p := &Plant{Factor: 2}
	parts := strings.Split(s, ":")
	if op, ok := strings.CutPrefix(parts[0], "op="); ok {
		p.Op = op
	} else {
		p.Tensor = parts[0]
	}
	if parts[0] == "" || len(parts) > 3 {
		return nil, errors.New("cuda: plant is TENSOR[:COL[:FACTOR]] or op=NAME[:COL[:FACTOR]]")
	}
	if len(parts) > 1 {
		if _, err := fmt.Sscan(parts[1], &p.Col); err != nil || p.Col < 0 {
			return nil, fmt.Errorf("cuda: plant column %q", parts[1])
		}
	}
	if len(parts) > 2 {
		if _, err := fmt.Sscan(parts[2], &p.Factor); err != nil {
			return nil, fmt.Errorf("cuda: plant factor %q", parts[2])
		}
	}
	return p, nil
}

// StreamRead measures the device's streaming read: k_stream reads a
// buffer of n bytes (filled with a pattern, not zeros) reps times, each
// timed with CUDA events; it returns the best rate in bytes per second
// (apr bench --stream: the bound a decode step's weight reads meet).
func (e *Engine) StreamRead(n, reps int) (float64, error) {
	if n < 1<<20 || reps < 1 {
		return 0, fmt.Errorf("cuda: stream read of %d bytes, %d repetitions", n, reps)
	}
	n &^= 15
	be := e.be
	var best float64
	err := be.d.Do(func() error {
		p, err := be.d.Alloc(uint64(n) + 16)
		if err != nil {
			return err
		}
		defer be.d.Free(p)
		chunk := make([]byte, 1<<20)
		for i := range chunk {
			chunk[i] = byte(i*131 + i>>8)
		}
		for off := 0; off < n; off += len(chunk) {
			m := min(len(chunk), n-off)
			if err := be.d.HtoD(p+cu.Ptr(off), unsafe.Pointer(&chunk[0]), uint64(m)); err != nil {
				return err
			}
		}
		f := be.fn["k_stream"]
		in, err := be.d.Info()
		if err != nil {
			return err
		}
		grid := cu.Dim{X: uint32(max(1, in.SMs) * 8)}
		a, err := be.d.NewEvent()
		if err != nil {
			return err
		}
		defer be.d.DestroyEvent(a)
		b, err := be.d.NewEvent()
		if err != nil {
			return err
		}
		defer be.d.DestroyEvent(b)
		words := int64(n / 16)
		for i := 0; i <= reps; i++ { // the first run warms up
			if err := be.d.Record(a, be.stream); err != nil {
				return err
			}
			if err := be.d.Launch(f, grid, cu.Dim{X: 256}, 0, be.stream, p, words, p+cu.Ptr(n)); err != nil {
				return err
			}
			if err := be.d.Record(b, be.stream); err != nil {
				return err
			}
			ms, err := be.d.Elapsed(a, b)
			if err != nil {
				return err
			}
			if bps := float64(n) / (float64(ms) / 1e3); i > 0 && bps > best {
				best = bps
			}
		}
		return nil
	})
	return best, err
}
