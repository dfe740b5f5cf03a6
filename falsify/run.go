package falsify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

// ByRunner is the refuser named when the runner itself refuses a falsifier
// (no code registered, an input missing for an explicitly named one).
const ByRunner = "falsify"

// Result is one falsifier's outcome: what apr falsify --json prints per
// falsifier.
type Result struct {
	ID        string          `json:"id"`
	Code      string          `json:"code"`
	Kind      Kind            `json:"kind"`
	Binds     string          `json:"binds"`
	Verdict   verdict.Verdict `json:"verdict"`
	Reason    string          `json:"reason,omitempty"`
	RemovedBy string          `json:"removed_by,omitempty"`
	// RefusalCode is a refusal's machine-readable class, when the code
	// gave one (RefuseCode), e.g. "no_baseline".
	RefusalCode string `json:"refusal_code,omitempty"`
	// Optional marks a refusal whose code the contract lists in
	// params.optional_refusals: still refused (never a pass), but one the
	// contract accepts, so it does not make the run refused.
	Optional bool `json:"optional,omitempty"`
	// Measured holds every finite value measured; NonFinite names the
	// values that were NaN or Inf (JSON has no such numbers), each a fail.
	Measured   map[string]float64          `json:"measured"`
	NonFinite  map[string]string           `json:"non_finite,omitempty"`
	Thresholds map[string]schema.Threshold `json:"thresholds"`
	Seed       *int64                      `json:"seed,omitempty"`
	DurationMS float64                     `json:"duration_ms"`
	Details    []string                    `json:"details,omitempty"`
	Failure    string                      `json:"failure_means,omitempty"` // the contract's word on what a fail means
}

// NotRun is a falsifier the inputs gave no occasion to run, and why. It is
// reported, and never counted as a pass.
type NotRun struct {
	ID  string `json:"id"`
	Why string `json:"why"`
}

// Report is one run of falsifiers.
type Report struct {
	ContractsDigest string   `json:"contracts_digest"`
	Model           string   `json:"model,omitempty"`
	Fixtures        string   `json:"fixtures,omitempty"`
	Seed            int64    `json:"seed"`
	Results         []Result `json:"results"`
	NotRun          []NotRun `json:"not_run"`
	Summary         Summary  `json:"summary"`
}

// Summary counts verdicts. Refused counts the refusals the contracts do not
// accept; RefusedOptional the ones they list as optional.
type Summary struct {
	Pass            int `json:"pass"`
	Fail            int `json:"fail"`
	Refused         int `json:"refused"`
	RefusedOptional int `json:"refused_optional"`
}

// Options say what to run on what.
type Options struct {
	// IDs are falsifier ids or contract ids (all of a contract's
	// falsifiers). Empty: every falsifier that applies to the inputs.
	IDs      []string
	Model    string // a GGUF file, or ""
	Fixtures string // apr's shared fixtures directory, or ""
	Seed     int64  // the seed of property falsifiers (recorded)
	// ModelSHA256, when set, is trusted as the sha256 of Model's bytes
	// (a caller that hashed it already); otherwise it is computed once.
	ModelSHA256 string
	// Loaded, when set, is the model already opened (engine/loaded): the
	// run uses it, and Model, instead of opening the file again, and leaves
	// it open.
	Loaded   *loaded.Model
	Set      *contracts.Set
	Registry *Registry // nil: Builtins (this package's own code only)
	// Params are set over every selected falsifier's params (e.g. backend:
	// "cpu" to run the falsifiers on another backend).
	Params map[string]any
	Log    *slog.Logger
	// OnResult, when set, is called after each falsifier (progress).
	OnResult func(Result)
}

// ErrUnknownID is returned for an id that is neither a falsifier nor a
// contract of the set.
var ErrUnknownID = errors.New("falsify: unknown id")

type runner struct {
	opts Options
	reg  *Registry
	set  *contracts.Set
	in   *inputs
}

// Run runs the selected falsifiers in id order. The error is for bad
// options (an unknown id); every falsifier's outcome is in the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Set == nil {
		return nil, errors.New("falsify: Run: no contract set")
	}
	if opts.Registry == nil {
		opts.Registry = builtins()
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	r := &runner{opts: opts, reg: opts.Registry, set: opts.Set, in: &inputs{modelPath: opts.Model, fixtures: opts.Fixtures}}
	switch {
	case opts.Loaded != nil:
		r.in.modelPath, r.in.loaded = opts.Loaded.Path, opts.Loaded
	case opts.Model != "":
		r.in.loaded, r.in.modelErr = loaded.Open(opts.Model)
		if r.in.loaded != nil {
			defer r.in.loaded.Close()
			if opts.ModelSHA256 != "" {
				r.in.loaded.KnownSHA256(opts.ModelSHA256, 0)
			}
		}
	}
	if r.in.loaded != nil {
		r.in.model = r.in.loaded.File
	}
	named, err := r.expand(opts.IDs)
	if err != nil {
		return nil, err
	}
	rep := &Report{ContractsDigest: opts.Set.Digest(), Model: r.in.modelPath, Fixtures: opts.Fixtures, Seed: opts.Seed,
		Results: []Result{}, NotRun: []NotRun{}}
	for _, f := range opts.Set.Falsifiers {
		explicit, ok := named[f.ID]
		if len(opts.IDs) > 0 && !ok {
			continue
		}
		c := r.newCheck(f, faultNone)
		if apply, why := r.applies(c); !apply {
			// A falsifier whose code is missing is refused, never quietly
			// not run: its contract demands it.
			if !explicit && c.Code.Run != nil {
				rep.NotRun = append(rep.NotRun, NotRun{ID: f.ID, Why: why})
				continue
			}
			res := r.result(c, time.Now(), refuse.New(ByRunner, "%s", why))
			rep.add(res, opts.OnResult)
			continue
		}
		rep.add(r.execute(ctx, c), opts.OnResult)
	}
	return rep, nil
}

func (rep *Report) add(res Result, on func(Result)) {
	rep.Results = append(rep.Results, res)
	switch res.Verdict {
	case verdict.Pass:
		rep.Summary.Pass++
	case verdict.Fail:
		rep.Summary.Fail++
	default:
		if res.Optional {
			rep.Summary.RefusedOptional++
		} else {
			rep.Summary.Refused++
		}
	}
	if on != nil {
		on(res)
	}
}

// expand maps the requested ids to falsifier ids; the value says the
// falsifier was named itself (true) or through its contract (false).
func (r *runner) expand(ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range ids {
		if _, ok := r.set.Falsifier(id); ok {
			out[id] = true
			continue
		}
		if !r.set.Has(id) {
			return nil, fmt.Errorf("%w %q: not a falsifier or contract id (apr contracts list shows them)", ErrUnknownID, id)
		}
		for _, f := range r.set.Falsifiers {
			if r.set.Owner(f.ID) == id || f.Binds == id {
				out[f.ID] = out[f.ID] || false
			}
		}
	}
	return out, nil
}

func (r *runner) newCheck(f schema.Falsifier, fl fault) *Check {
	code, _ := r.reg.Lookup(f.Code)
	if len(r.opts.Params) > 0 {
		p := make(map[string]any, len(f.Params)+len(r.opts.Params))
		for k, v := range f.Params {
			p[k] = v
		}
		for k, v := range r.opts.Params {
			p[k] = v
		}
		f.Params = p
	}
	return &Check{F: f, Code: code, Set: r.set, Log: r.opts.Log.With("falsifier", f.ID), in: r.in, run: r,
		seed: r.opts.Seed, fault: fl, measured: map[string]float64{}}
}

// applies decides whether falsifier c applies to the inputs: its code
// exists, its needs are met, its contract covers the model, and its code's
// own test says so.
func (r *runner) applies(c *Check) (bool, string) {
	if c.Code.Run == nil {
		return false, fmt.Sprintf("no code is registered under %q", c.F.Code)
	}
	for _, n := range c.Code.Needs {
		switch n {
		case NeedModel:
			if r.in.modelPath == "" {
				return false, "needs a model (--model FILE)"
			}
		case NeedFixtures:
			if r.in.fixtures == "" {
				return false, "needs apr's shared fixtures (--fixtures DIR)"
			}
		}
	}
	group, _, _ := strings.Cut(c.F.Binds, ".")
	switch group {
	case contracts.GroupModel:
		if r.in.modelPath == "" {
			return false, fmt.Sprintf("binds %s: needs a model (--model FILE)", c.F.Binds)
		}
		if r.in.model != nil {
			m, ok := r.set.ModelByID(c.F.Binds)
			if !ok || m.Arch != r.in.model.Architecture() {
				return false, fmt.Sprintf("binds another architecture (the model is %q)", r.in.model.Architecture())
			}
		}
	case contracts.GroupKernel:
		if r.in.model != nil {
			k, ok := r.set.KernelByID(c.F.Binds)
			if !ok || !hasType(r.in.model, k.Type) {
				return false, "binds a ggml type the model holds no tensor of"
			}
		}
	}
	if c.Code.Applies != nil {
		return c.Code.Applies(c)
	}
	return true, ""
}

func hasType(f *gguf.File, name string) bool {
	t, err := quant.ParseType(name)
	if err != nil {
		return false
	}
	for i := range f.Tensors {
		if f.Tensors[i].Type == t {
			return true
		}
	}
	return false
}

// execute runs c's code, recovering a panic as a refusal, and judges it.
func (r *runner) execute(ctx context.Context, c *Check) (res Result) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			c.Log.Error("falsifier panicked", "panic", p, "stack", string(debug.Stack()))
			res = r.result(c, start, refuse.New(c.By(), "the falsifier's code panicked: %v", p))
		}
	}()
	err := c.Code.Run(ctx, c)
	if err == nil {
		if cerr := ctx.Err(); cerr != nil {
			err = refuse.Wrap(c.By(), cerr)
		}
	}
	return r.result(c, start, err)
}

// result turns c's measurements and err into a Result with its verdict.
func (r *runner) result(c *Check, start time.Time, err error) Result {
	res := Result{ID: c.F.ID, Code: c.F.Code, Kind: Kind(c.F.Kind), Binds: c.F.Binds,
		Measured: map[string]float64{}, Thresholds: c.F.Thresholds, Details: c.details, Failure: c.F.Failure}
	if c.seedUsed {
		s := c.seed
		res.Seed = &s
	}
	for _, name := range c.order {
		v := c.measured[name]
		if nf := verdict.NonFinite(v); nf != "" {
			if res.NonFinite == nil {
				res.NonFinite = map[string]string{}
			}
			res.NonFinite[name] = nf
			continue
		}
		res.Measured[name] = v
	}
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	var fl *Failure
	switch {
	case err == nil:
		res.Verdict, res.Reason = r.judge(c)
	case errors.As(err, &fl):
		res.Verdict, res.Reason = verdict.Fail, fl.Reason
	default:
		res.Verdict = verdict.Refused
		var coded *CodedRefusal
		if errors.As(err, &coded) {
			res.RefusalCode = coded.Code
			res.Optional = optionalRefusal(c.F.Params, coded.Code)
		}
		if rf, ok := refuse.As(err); ok {
			res.RemovedBy, res.Reason = rf.By, rf.Reason
		} else {
			res.RemovedBy, res.Reason = c.By(), err.Error()
		}
	}
	return res
}

// judge compares every threshold with its measured value: a threshold with
// no measurement, or a non-finite one, fails.
func (r *runner) judge(c *Check) (verdict.Verdict, string) {
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(c.F.Thresholds)) {
		th := c.F.Thresholds[name]
		v, ok := c.measured[name]
		switch {
		case !ok:
			bad = append(bad, verdict.Missing(name, th))
		case !th.Holds(v):
			bad = append(bad, verdict.Violation(name, v, th))
		}
	}
	if len(c.F.Thresholds) == 0 {
		bad = append(bad, "the contract gives no threshold: nothing can be judged")
	}
	if len(bad) == 0 {
		return verdict.Pass, ""
	}
	reason := strings.Join(bad, "; ")
	if len(c.details) > 0 {
		reason += ": " + c.details[0]
	}
	return verdict.Fail, reason
}

// optionalRefusal reports whether code is listed in params.optional_refusals.
func optionalRefusal(params map[string]any, code string) bool {
	switch l := params["optional_refusals"].(type) {
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok && s == code {
				return true
			}
		}
	case []string:
		for _, s := range l {
			if s == code {
				return true
			}
		}
	}
	return false
}

// Values lists the result's measured values in package verdict's words,
// each with the threshold it was held to: those with a threshold first, then
// the others, each group by name; a non-finite value by its name.
func (r Result) Values() []verdict.Value {
	out := make([]verdict.Value, 0, len(r.Measured)+len(r.NonFinite))
	add := func(n string, x float64, nf string) {
		v := verdict.Value{Name: n, Value: x, NonFinite: nf}
		if t, ok := r.Thresholds[n]; ok {
			v.Threshold = verdict.FormatThreshold(t)
		}
		out = append(out, v)
	}
	for n, x := range r.Measured {
		add(n, x, "")
	}
	for n, nf := range r.NonFinite {
		add(n, 0, nf)
	}
	verdict.SortValues(out)
	return out
}

// Outcome is the result as package verdict's outcome: its verdict, reason,
// refuser and refusal class, values (Values) and details.
func (r Result) Outcome() verdict.Outcome {
	o := verdict.Outcome{Verdict: r.Verdict, Reason: r.Reason, Values: r.Values(), Details: r.Details}
	if r.Verdict == verdict.Refused {
		o.RemovedBy, o.Code = r.RemovedBy, r.RefusalCode
	}
	return o
}
