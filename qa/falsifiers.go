package qa

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/falsify"
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

// The falsifier codes qa's gates run (the contracts name them by these;
// the code is falsify's).
const (
	FalsifierTensorValues = falsify.CodeTensorValues
	FalsifierTokenizer    = falsify.CodeTokenizer
	FalsifierTemplate     = falsify.CodeTemplate
	FalsifierGoldenOutput = falsify.CodeGoldenOutput
	FalsifierEngineParity = falsify.CodeEngineParity
	FalsifierGPUCPU       = falsify.CodeGPUCPU
	FalsifierThroughput   = falsify.CodeThroughput
	FalsifierServeParity  = "serve_parity" // falsify.RegisterServeParity
)

// Register adds to reg what falsify's own code cannot: serve_parity over
// package serve (which imports falsify). Every other falsifier a gate runs
// is falsify's own (falsify.Builtins).
func Register(reg *falsify.Registry) {
	falsify.RegisterServeParity(reg, serveParity)
}

// serveParity is serve.Parity for falsify's serve_parity.
func serveParity(ctx context.Context, model, backend string, seed uint64, requests, tokens, parallel int) (int, int, []string, error) {
	res, err := serve.Parity(ctx, serve.ParityOptions{Model: model, Backend: backend, Seed: seed, Requests: requests, Tokens: tokens, Parallel: parallel})
	return res.Mismatches, res.MaxBatch, res.Notes, err
}

// Weight tiers of engine_parity (params.tier): falsify's, the one rule
// every cosine falsifier uses.
const (
	TierFloat     = falsify.TierFloat     // every matrix F32 or F16
	TierQuantized = falsify.TierQuantized // some matrix in a quantized type, or BF16
)

func tier(f *gguf.File) string { return falsify.WeightTier(f) }

// state is one qa run: its options (the planted engines among them) and
// host, and the registry its gates run, in which falsify's engine-facing
// code is bound to the run's engines.
type state struct {
	opts *Options
	host falsify.HostKey

	regOnce sync.Once
	reg     *falsify.Registry
}

// engines are the run's engines in falsify's words (the tests' plants).
func (st *state) engines() falsify.Engines {
	h := st.opts.hooks
	return falsify.Engines{Run: h.run, Logits: h.logits, Router: h.router, Golden: h.golden, SloppyParity: h.sloppyParity}
}

// registry is opts.Registry with the engine-facing code (golden_output,
// engine_parity, gpu_cpu, throughput) bound to the run's engines, in a clone.
func (st *state) registry() *falsify.Registry {
	st.regOnce.Do(func() { st.reg = bindEngines(st.opts.Registry, st.engines()) })
	return st.reg
}

// bindEngines returns a clone of reg whose engine-facing code runs e.
func bindEngines(reg *falsify.Registry, e falsify.Engines) *falsify.Registry {
	r := reg.Clone()
	for id, fn := range falsify.EngineCodes(e) {
		r.Rebind(id, fn)
	}
	r.Rebind(falsify.CodeThroughput, falsify.Throughput(e.Run))
	return r
}

// execute runs falsifiers ids on the model through falsify.Run with the
// backend (and reference) set over their params, and merges their results
// into one outcome.
func (m *modelRun) execute(ctx context.Context, st *state, ids []string, backend string) (verdict.Outcome, []falsify.Result) {
	return m.executeIn(ctx, st.registry(), ids, backend)
}

// executeIn is execute with the registry given.
func (m *modelRun) executeIn(ctx context.Context, reg *falsify.Registry, ids []string, backend string) (verdict.Outcome, []falsify.Result) {
	params := map[string]any{"reference": m.opts.Reference, "baseline_file": m.opts.BaselineFile,
		"accept_baseline": m.opts.AcceptBaseline, "host": m.host, "threads": m.opts.Threads, falsify.ParamKLDBase: m.opts.KLDBase}
	if backend != "" {
		params["backend"] = backend
	}
	rep, err := falsify.Run(ctx, falsify.Options{IDs: ids, Model: m.path, Loaded: m.h, Set: m.opts.Contracts,
		Registry: reg, Params: params, Seed: m.opts.Seed, ModelSHA256: m.sha, Log: m.opts.Log})
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
		e := st.engines()
		e.RefLogits = func(_ context.Context, _ string, toks []int32) (generate.LogitsResult, error) {
			rows, w := g.rows(len(toks))
			return generate.LogitsResult{NVocab: w, Tokens: toks, Logits: rows}, nil
		}
		r, rs := m.executeIn(ctx, bindEngines(st.opts.Registry, e), []string{parityID}, backend)
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
