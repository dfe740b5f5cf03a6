package qa

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/serve"
	"github.com/aprqa/apr/verdict"
)

// Registry returns a registry of falsify's own code and qa's
// (falsify.Builtins, then Register): what a run without Options.Registry
// uses. apr's binary runs the one its command line wires.
func Registry() *falsify.Registry {
	registryOnce.Do(func() {
		registry = falsify.Builtins()
		Register(registry)
	})
	return registry
}

var (
	registryOnce sync.Once
	registry     *falsify.Registry
)

// The falsifier codes qa registers (the contracts name them by these).
const (
	FalsifierTensorValues = falsify.CodeTensorValues
	FalsifierTokenizer    = falsify.CodeTokenizer
	FalsifierTemplate     = falsify.CodeTemplate
	FalsifierGoldenOutput = "golden_output"
	FalsifierEngineParity = "engine_parity"
	FalsifierGPUCPU       = "gpu_cpu"
	FalsifierThroughput   = falsify.CodeThroughput
	FalsifierServeParity  = "serve_parity" // falsify.RegisterServeParity
)

// Register adds qa's falsifier code to reg: golden_output, engine_parity and
// gpu_cpu, and falsify's serve_parity over package serve (tensor_values,
// tokenizer_roundtrip, chat_template and throughput are falsify's own). apr falsify
// runs them like any other code; apr qa runs them through falsify.Run.
func Register(reg *falsify.Registry) {
	registerCodes(reg.Register, nil)
	falsify.RegisterServeParity(reg, serveParity)
}

// serveParity is serve.Parity for falsify's serve_parity.
func serveParity(ctx context.Context, model, backend string, seed uint64, requests, tokens, parallel int) (int, int, []string, error) {
	res, err := serve.Parity(ctx, serve.ParityOptions{Model: model, Backend: backend, Seed: seed, Requests: requests, Tokens: tokens, Parallel: parallel})
	return res.Mismatches, res.MaxBatch, res.Notes, err
}

// registerCodes adds qa's code through add, bound to st (apr qa's run: its
// options and open models) or, with st nil, to the check's own inputs.
func registerCodes(add func(id string, kind falsify.Kind, fn falsify.Func, opts ...falsify.Option), st *state) {
	add(FalsifierGoldenOutput, falsify.KindGolden, adapt(st, func(ctx context.Context, c *falsify.Check, m *modelRun) verdict.Outcome {
		return m.goldenGate(ctx, c, backendParam(c, "ref"))
	}), falsify.Needs(falsify.NeedModel), falsify.Thresholds("mismatches", "max_logit_delta"), falsify.Params("tier", "logit_noise"),
		falsify.Refs("golden file", "reference engine"),
		falsify.AppliesWhen(falsify.TierApplies), falsify.VetWith(falsify.VetTier),
		falsify.Doc("a backend's greedy output equals the reviewed golden (or the reference's, in the numerics params.numerics names for the backend) at every step whose judge margin reaches twice the contract's numerical noise for the model's weight tier (params.logit_noise); a backend further than that noise from the reference fails"))
	add(FalsifierEngineParity, falsify.KindCosine, adapt(st, func(ctx context.Context, c *falsify.Check, m *modelRun) verdict.Outcome {
		return m.opts.hooks.parity(ctx, c, m, backendParam(c, "cpu"))
	}), falsify.Needs(falsify.NeedModel), falsify.Thresholds("min_cosine", "mean_cosine", "argmax_mismatches"),
		falsify.Params("tier", "argmax_margin", falsify.ParamNearTieEps, falsify.ParamRouterNoise), falsify.Refs("reference engine", "reference engine router"),
		falsify.AppliesWhen(falsify.TierApplies), falsify.VetWith(falsify.VetTier),
		falsify.Doc("a backend's logits against the reference engine's (in the numerics params.numerics names for the backend: plain, or ggml's activation rounding) at every position of a probe prompt, at the thresholds of the model's weight tier; a mixture of experts' router near-ties (on the reference) excluded and reported"))
	add(FalsifierGPUCPU, falsify.KindCosine, adapt(st, func(ctx context.Context, c *falsify.Check, m *modelRun) verdict.Outcome {
		return gpuCPU(ctx, c, m, backendParam(c, "cuda"))
	}), falsify.Needs(falsify.NeedModel), falsify.Thresholds("min_cosine", "mean_cosine", "argmax_mismatches"),
		falsify.Params("tier", "backend", "against", "argmax_margin", falsify.ParamNearTieEps, falsify.ParamRouterNoise), falsify.Refs("reference engine", "reference engine router"),
		falsify.AppliesWhen(gpuCPUApplies), falsify.VetWith(falsify.VetTier),
		falsify.Doc("a device backend's logits (params.backend) against another engine's (params.against) at every position of a probe prompt, at the thresholds of the model's weight tier; the judge's router near-ties excluded and reported"))
}

// Weight tiers of engine_parity (params.tier): falsify's, the one rule
// every cosine falsifier uses.
const (
	TierFloat     = falsify.TierFloat     // every matrix F32 or F16
	TierQuantized = falsify.TierQuantized // some matrix in a quantized type, or BF16
)

func tier(f *gguf.File) string { return falsify.WeightTier(f) }

// gpuCPUApplies: gpu_cpu applies to models of its tier when its device
// backend can run on this machine (qa gates a named backend anyway, and
// refuses it with the reason).
func gpuCPUApplies(c *falsify.Check) (bool, string) {
	if ok, why := falsify.TierApplies(c); !ok {
		return ok, why
	}
	b, _ := c.ParamString("backend", "cuda")
	if err := model.Available(b); err != nil {
		return false, fmt.Sprintf("backend %s cannot run here: %v", b, err)
	}
	return true, ""
}

func backendParam(c *falsify.Check, def string) string {
	b, err := c.ParamString("backend", def)
	if err != nil || b == "" {
		return def
	}
	return b
}

// adapt turns a gate implementation into falsifier code bound to st
// (falsify.Decide records its outcome).
func adapt(st *state, fn func(ctx context.Context, c *falsify.Check, m *modelRun) verdict.Outcome) falsify.Func {
	return func(ctx context.Context, c *falsify.Check) error {
		m, err := modelFor(st, c)
		if err != nil {
			return err
		}
		return falsify.Decide(c, fn(ctx, c, m))
	}
}

// state is what apr qa binds its falsifier code to (registry): its options
// (hooks, reference, threads, baselines) and the models it gates, opened
// once. apr falsify binds nothing; the code then builds its own.
type state struct {
	opts   *Options
	host   falsify.HostKey
	models *modelTable

	regOnce sync.Once
	reg     *falsify.Registry
}

// registry is opts.Registry with qa's code bound to st: a clone in which
// every qa code registered there runs on st's open models.
func (st *state) registry() *falsify.Registry {
	st.regOnce.Do(func() {
		st.reg = st.opts.Registry.Clone()
		registerCodes(func(id string, _ falsify.Kind, fn falsify.Func, _ ...falsify.Option) { st.reg.Rebind(id, fn) }, st)
		st.reg.Rebind(falsify.CodeThroughput, falsify.Throughput(st.opts.hooks.run))
	})
	return st.reg
}

// modelTable holds the models apr qa is gating, by path.
type modelTable struct {
	mu sync.Mutex
	m  map[string]*modelRun
}

func (t *modelTable) get(path string) *modelRun {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[path]
}

func (t *modelTable) set(path string, m *modelRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m == nil {
		delete(t.m, path)
		return
	}
	t.m[path] = m
}

// modelFor returns the gating state of the check's model: apr qa's (st),
// or a fresh one over the check's own inputs.
func modelFor(st *state, c *falsify.Check) (*modelRun, error) {
	if st != nil {
		if m := st.models.get(c.ModelPath()); m != nil {
			return m, nil
		}
	}
	h, err := c.Loaded()
	if err != nil {
		return nil, err
	}
	sha, err := c.ModelSHA256()
	if err != nil {
		return nil, err
	}
	o := &Options{}
	if err := o.defaults(); err != nil {
		return nil, refuse.Wrap(c.By(), err)
	}
	o.Reference, _ = c.ParamString("reference", o.Reference)
	m := newModelRun(o, falsify.ThisHost(), h, sha)
	return m, nil
}

// execute runs falsifiers ids on the model through falsify.Run with the
// backend (and reference) set over their params, and merges their results
// into one outcome.
func (m *modelRun) execute(ctx context.Context, st *state, ids []string, backend string) (verdict.Outcome, []falsify.Result) {
	params := map[string]any{"reference": m.opts.Reference, "baseline_file": m.opts.BaselineFile,
		"accept_baseline": m.opts.AcceptBaseline, "host": m.host, "threads": m.opts.Threads, falsify.ParamKLDBase: m.opts.KLDBase}
	if backend != "" {
		params["backend"] = backend
	}
	rep, err := falsify.Run(ctx, falsify.Options{IDs: ids, Model: m.path, Loaded: m.h, Set: m.opts.Contracts,
		Registry: st.registry(), Params: params, Seed: m.opts.Seed, ModelSHA256: m.sha, Log: m.opts.Log})
	if err != nil {
		return verdict.RefusedBy(CodeNoContract, By, nil, "%v", err), nil
	}
	if len(rep.Results) == 0 {
		var why []string
		for _, n := range rep.NotRun {
			why = append(why, n.ID+": "+n.Why)
		}
		return verdict.RefusedBy(CodeNoContract, By, nil, "falsify ran nothing: %s", strings.Join(why, "; ")), nil
	}
	os := make([]verdict.Outcome, len(rep.Results))
	for i, r := range rep.Results {
		os[i] = r.Outcome()
	}
	return verdict.Merge(os...), rep.Results
}

// failClosed runs the contract's failclosed falsifier for parity (the
// reference withdrawn: unavailable, then erroring), then hands parity
// references that answer with garbage (NaN rows, too few rows, rows of the
// wrong width): every run must end refused for the reference. A parity that
// was refused for its real reference proves nothing and refuses.
func (m *modelRun) failClosed(ctx context.Context, st *state, fc schema.Falsifier, parityID, backend string) verdict.Outcome {
	pr, ok := m.parityResult[backend]
	if !ok {
		pr, _ = m.execute(ctx, st, []string{parityID}, backend)
		m.parityResult[backend] = pr
	}
	if pr.Verdict == verdict.Refused {
		return verdict.RefusedBy(pr.Code, fc.ID, nil, "%s was refused with the real reference (%s); refusing with a withdrawn one proves nothing", parityID, pr.Reason)
	}
	o, _ := m.execute(ctx, st, []string{fc.ID}, backend)
	if o.Verdict == verdict.Refused {
		return o
	}
	withdrawn := 0.0
	for _, v := range o.Values {
		if v.Name == "non_refusals" {
			withdrawn = v.Value
		}
	}
	nv := 0
	if m.tok != nil {
		nv = m.tok.NVocab()
	}
	garbage := []struct {
		name string
		rows func(n int) ([][]float32, int)
	}{
		{"NaN rows", func(n int) ([][]float32, int) { return fill(n, nv, true), nv }},
		{"too few rows", func(n int) ([][]float32, int) { return fill(n-1, nv, false), nv }},
		{"rows of the wrong width", func(n int) ([][]float32, int) { return fill(n, nv-1, false), nv }},
	}
	var bad []string
	for _, g := range garbage {
		m.refOverride = func(_ context.Context, _ string, toks []int32) (generate.LogitsResult, error) {
			rows, w := g.rows(len(toks))
			return generate.LogitsResult{NVocab: w, Tokens: toks, Logits: rows}, nil
		}
		r, rs := m.execute(ctx, st, []string{parityID}, backend)
		m.refOverride = nil
		code := ""
		if len(rs) > 0 {
			code = rs[0].RefusalCode
		}
		if r.Verdict != verdict.Refused || code != CodeReference {
			bad = append(bad, fmt.Sprintf("reference returning %s: %s gave %s (%s)", g.name, parityID, r.Verdict, r.Reason))
		}
	}
	c := verdict.NewJudge(fc.ID, fc.Thresholds)
	c.Note("withdrawn_non_refusals", withdrawn, "count")
	c.Note("garbage_non_refusals", float64(len(bad)), "count")
	c.Hold("non_refusals", withdrawn+float64(len(bad)), "count")
	out := c.Outcome(verdict.FirstN(append(detailsOf(o), bad...)))
	out.Details = append(o.Details, bad...)
	return out
}

func detailsOf(o verdict.Outcome) []string {
	if o.Verdict == verdict.Pass {
		return nil
	}
	return []string{o.Reason}
}

func fill(n, width int, poison bool) [][]float32 {
	if n < 0 || width < 1 {
		return nil
	}
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, width)
		for j := range out[i] {
			out[i][j] = float32(j%7) - 3
		}
	}
	if poison && n > 0 {
		out[n/2][width/2] = float32(math.NaN())
	}
	return out
}
