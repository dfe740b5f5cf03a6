package cuda

import (
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/aprqa/apr/engine/cuda/internal/cu"
)

// EnvProfile set to "1" times every kernel launch with CUDA events (the
// graph cache off: kernels are launched one by one) and prints a table per
// kernel to stderr when the engine closes: where a decode step's device
// time goes. Set to "steps" (ProfileSteps) it times whole steps instead.
const EnvProfile = "APR_CUDA_PROFILE"

type profiler struct {
	names  map[cu.Func]string
	events []cu.Event
	marks  []profMark
	stats  map[string]*kernelTime
}

type profMark struct {
	name string
	ev   int // events[ev], events[ev+1]: before and after the launch
}

type kernelTime struct {
	launches int
	ms       float64
}

func newProfiler(fn map[string]cu.Func) *profiler {
	if os.Getenv(EnvProfile) != "1" {
		return nil
	}
	p := &profiler{names: map[cu.Func]string{}, stats: map[string]*kernelTime{}}
	for n, f := range fn {
		p.names[f] = n
	}
	return p
}

// growEvents makes events at least n long with new events (the profilers'
// pools, reused across launches); inside do.
func growEvents(be *backend, events *[]cu.Event, n int) error {
	for len(*events) < n {
		e, err := be.d.NewEvent()
		if err != nil {
			return err
		}
		*events = append(*events, e)
	}
	return nil
}

// launch runs op between two events; inside do.
func (p *profiler) launch(be *backend, op *tapeOp) error {
	i := 2 * len(p.marks)
	if err := growEvents(be, &p.events, i+2); err != nil {
		return err
	}
	if err := be.d.Record(p.events[i], be.stream); err != nil {
		return err
	}
	if err := be.d.LaunchPacked(op.f, op.grid, op.block, op.shared, be.stream, op.args[:op.n]); err != nil {
		return err
	}
	if err := be.d.Record(p.events[i+1], be.stream); err != nil {
		return err
	}
	p.marks = append(p.marks, profMark{name: p.names[op.f], ev: i})
	return nil
}

// collect waits for the recorded launches and adds their times; inside do.
func (p *profiler) collect(be *backend) error {
	for _, m := range p.marks {
		ms, err := be.d.Elapsed(p.events[m.ev], p.events[m.ev+1])
		if err != nil {
			return err
		}
		k := p.stats[m.name]
		if k == nil {
			k = &kernelTime{}
			p.stats[m.name] = k
		}
		k.launches++
		k.ms += float64(ms)
	}
	p.marks = p.marks[:0]
	return nil
}

func (p *profiler) report(w io.Writer) {
	type row struct {
		name string
		kernelTime
	}
	var rows []row
	total := 0.0
	for n, k := range p.stats {
		rows = append(rows, row{n, *k})
		total += k.ms
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ms > rows[j].ms })
	fmt.Fprintf(w, "cuda profile (%s=1: each kernel timed with CUDA events, launched one by one): %.3f ms in %d kernels\n", EnvProfile, total, len(rows))
	fmt.Fprintf(w, "%-22s %9s %11s %10s %6s\n", "kernel", "launches", "total ms", "mean µs", "share")
	for _, r := range rows {
		fmt.Fprintf(w, "%-22s %9d %11.3f %10.2f %5.1f%%\n", r.name, r.launches, r.ms, 1000*r.ms/float64(r.launches), 100*r.ms/max(total, 1e-9))
	}
}

// ProfileSteps is EnvProfile's value that times steps instead of kernels:
// each replayed graph (a decode step's kernels) with CUDA events around its
// launch, and each Eval on the host clock, so that what a step costs beyond
// its kernels (recording the tape, launching, reading the logits back) is a
// measured difference; reported when the engine closes. Graphs stay on.
const ProfileSteps = "steps"

type stepProfiler struct {
	events   []cu.Event
	marks    int // event pairs recorded since the last collect
	replays  int
	deviceMs float64
	evals    int     // Evals that replayed a graph
	evalMs   float64 // their host time
	// Where their host time went: flushing the tape (the staged values'
	// copy and the launches, each part's: backend.run), reading results
	// (DtoH: waiting for the device, then the copy), and recording the
	// tape (the rest: the graph's ops, which the parts' runs interleave).
	// cur* are the Eval in progress's.
	recMs, flushMs, readMs float64
	t0                     time.Time
	curFlush, curRead      time.Duration
}

// begin starts an Eval's host clock.
func (p *stepProfiler) begin(t0 time.Time) {
	p.t0, p.curFlush, p.curRead = t0, 0, 0
}

// flushing is called as a flush starts; it returns the function that ends it.
func (p *stepProfiler) flushing() func() {
	start := time.Now()
	return func() { p.curFlush += time.Since(start) }
}

// read adds a device-to-host copy's time (its wait for the device included).
func (p *stepProfiler) read(d time.Duration) { p.curRead += d }

func newStepProfiler() *stepProfiler {
	if os.Getenv(EnvProfile) != ProfileSteps {
		return nil
	}
	return &stepProfiler{}
}

// around launches a replay between two events; inside do.
func (p *stepProfiler) around(be *backend, launch func() error) error {
	i := 2 * p.marks
	if err := growEvents(be, &p.events, i+2); err != nil {
		return err
	}
	if err := be.d.Record(p.events[i], be.stream); err != nil {
		return err
	}
	if err := launch(); err != nil {
		return err
	}
	p.marks++
	return be.d.Record(p.events[i+1], be.stream)
}

// collect waits for the stream and adds the replays' device times and, when
// it replayed a graph, one Eval's host time; inside do.
func (p *stepProfiler) collect(be *backend, eval time.Duration) error {
	if p.marks == 0 {
		return nil
	}
	if err := be.d.StreamSync(be.stream); err != nil {
		return err
	}
	for m := 0; m < p.marks; m++ {
		ms, err := be.d.Elapsed(p.events[2*m], p.events[2*m+1])
		if err != nil {
			return err
		}
		p.replays++
		p.deviceMs += float64(ms)
	}
	p.marks = 0
	p.evals++
	p.evalMs += ms(eval)
	p.recMs += ms(eval - p.curFlush - p.curRead)
	p.flushMs += ms(p.curFlush)
	p.readMs += ms(p.curRead)
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (p *stepProfiler) report(w io.Writer) {
	n := max(float64(p.evals), 1)
	fmt.Fprintf(w, "cuda steps (%s=%s): %d Evals that replayed %d graphs: %.3f ms each on the host clock, %.3f ms of it on the device (events around the launches), %.3f ms beyond the kernels\n",
		EnvProfile, ProfileSteps, p.evals, p.replays, p.evalMs/n, p.deviceMs/n, (p.evalMs-p.deviceMs)/n)
	fmt.Fprintf(w, "cuda steps: host clock per Eval: %.3f ms recording the tape (all but the two after it), %.3f ms flushing it (staged values copied, graphs launched), %.3f ms reading results (the wait for the device included)\n",
		p.recMs/n, p.flushMs/n, p.readMs/n)
}
