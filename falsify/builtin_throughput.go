package falsify

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/internal/stats"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

const defaultThroughputPrompt = "Once upon a time, in a small village at the edge of a great forest, there lived a curious little girl who loved to read books about the stars."

// CodeThroughput is the id of the throughput code.
const CodeThroughput = "throughput"

// Refusal classes of throughput (a contract may list no_baseline as
// optional).
const (
	RefusalBackend      = "backend_unavailable" // the measured backend is not in this build, or refused the model
	RefusalNoBaseline   = "no_baseline"         // no comparable throughput baseline for (model, host, backend)
	RefusalBaselineFile = "baseline_unreadable" // the baseline file exists but cannot be read
	RefusalTooNoisy     = "too_noisy"           // the runs vary more than the contract's bound
	RefusalUndecided    = "undecided"           // the confidence interval straddles the threshold
	RefusalRecorded     = "baseline_recorded"   // accept_baseline recorded the first baseline: nothing compared yet
)

// RunFunc runs one generation: engine/generate.Run in apr (apr qa's tests
// plant runs with exact stage times through it).
type RunFunc func(context.Context, generate.Options) (generate.Result, error)

// RegisterThroughput registers throughput in r over run (nil:
// generate.Run).
func RegisterThroughput(r *Registry, run RunFunc) {
	r.Register(CodeThroughput, KindTiming, Throughput(run),
		Needs(NeedModel), Thresholds("decode_ratio", "prefill_ratio", "max_cv"), Refs("baseline"),
		AppliesWhen(throughputApplies),
		Doc("decode and prefill tok/s against the baseline recorded for this model, host and backend, by bootstrap confidence intervals"))
}

// Throughput is the throughput code over run (nil: generate.Run). Its
// inputs besides the contract come from params, which apr qa sets:
// backend, baseline_file (default DefaultBaselineFile), accept_baseline,
// host (a HostKey, or its fingerprint; default ThisHost) and threads.
func Throughput(run RunFunc) Func {
	if run == nil {
		run = generate.Run
	}
	return outcomeCode(func(ctx context.Context, c *Check, m *loaded.Model) verdict.Outcome {
		env, o := throughputEnvOf(c, m, run)
		if o != nil {
			return *o
		}
		return env.gate(ctx, c.F, backendOf(c, "cpu"))
	})
}

// throughputEnv is what one throughput run needs beyond the contract.
type throughputEnv struct {
	run     RunFunc
	m       *loaded.Model
	sha     string
	host    HostKey
	file    string
	accept  bool
	threads int
	log     *slog.Logger
}

func throughputEnvOf(c *Check, m *loaded.Model, run RunFunc) (*throughputEnv, *verdict.Outcome) {
	sha, _, err := m.SHA256()
	if err != nil {
		o := verdict.FromError(RefusalModel, refuse.Wrap(c.By(), err), "")
		return nil, &o
	}
	e := &throughputEnv{run: run, m: m, sha: sha, host: hostParam(c), log: c.Log}
	e.file, _ = c.ParamString("baseline_file", "")
	if e.file == "" {
		if e.file, err = DefaultBaselineFile(); err != nil {
			o := verdict.RefusedBy(RefusalBaselineFile, c.By(), nil, "%v", err)
			return nil, &o
		}
	}
	accept, _ := c.Param("accept_baseline")
	e.accept = accept == true
	e.threads, _ = c.ParamInt("threads", 0)
	return e, nil
}

// hostParam is params.host: a HostKey, or a fingerprint; this machine
// without one.
func hostParam(c *Check) HostKey {
	switch h := c.F.Params["host"].(type) {
	case HostKey:
		return h
	case string:
		if h != "" {
			return HostKey{Fingerprint: h}
		}
	}
	return ThisHost()
}

// backendOf is params.backend, or def.
func backendOf(c *Check, def string) string {
	b, err := c.ParamString("backend", def)
	if err != nil || b == "" {
		return def
	}
	return b
}

// throughputApplies: throughput is compared against a recorded baseline;
// without one (and without accept_baseline) there is nothing to compare.
func throughputApplies(c *Check) (bool, string) {
	file, _ := c.ParamString("baseline_file", "")
	if file == "" {
		var err error
		if file, err = DefaultBaselineFile(); err != nil {
			return true, ""
		}
	}
	if accept, _ := c.Param("accept_baseline"); accept == true {
		return true, ""
	}
	sha, err := c.ModelSHA256()
	if err != nil {
		return true, ""
	}
	if ok, why := HasBaseline(file, sha, hostParam(c).Fingerprint, backendOf(c, "cpu")); !ok {
		return false, why
	}
	return true, ""
}

// HasBaseline reports whether file holds a baseline for (sha, host,
// backend), and why not; an unreadable file counts as having one (the check
// then refuses with the reason rather than skipping it).
func HasBaseline(file, sha, host, backend string) (bool, string) {
	bl, err := LoadBaselines(file)
	if err != nil {
		return true, ""
	}
	if _, ok := bl.Entries[BaselineKey(sha, host, backend)]; ok {
		return true, ""
	}
	return false, fmt.Sprintf("no baseline for this model, host (%s) and backend %s in %s; apr qa --accept-baseline records one", host, backend, file)
}

// gate measures decode and prefill tok/s over params.runs runs
// (after one warm-up run that is not counted) and compares them with the
// baseline recorded for (model, host, backend): the bootstrap confidence
// interval of the ratio current/baseline must lie above the contract's
// ratio threshold to pass and below it to fail; an interval that straddles
// it is undecided, and runs whose coefficient of variation exceeds max_cv
// are too noisy to decide. Both are refusals, never a coin flip.
func (m *throughputEnv) gate(ctx context.Context, fz schema.Falsifier, backend string) verdict.Outcome {
	runs := max(2, paramIntOr(fz, "runs", 7))
	n := max(2, paramIntOr(fz, "tokens", 32))
	prompt := paramStringOr(fz, "prompt", defaultThroughputPrompt)
	conf := paramFloatOr(fz, "confidence", 0.95)
	resamples := max(100, paramIntOr(fz, "resamples", 2000))
	c := verdict.NewJudge(fz.ID, fz.Thresholds)
	for _, name := range []string{"decode_ratio", "prefill_ratio", "max_cv"} {
		if _, ok := c.Threshold(name); !ok {
			return verdict.RefusedBy(verdict.CodeNoContract, fz.ID, nil, "falsifier %s has no threshold %s", fz.ID, name)
		}
	}
	opts := generate.Options{Model: m.m.Path, Loaded: m.m, Backend: backend, Prompt: prompt, Raw: true, MaxTokens: n,
		IgnoreEOS: true, Threads: m.threads, Log: m.log}
	// A run repeats the generation until it has lasted min_run_ms, so that
	// a tiny model's runs are not all scheduler jitter; its rates are its
	// tokens over its summed stage times (decode only for decode).
	minRun := time.Duration(paramFloatOr(fz, "min_run_ms", 100) * float64(time.Millisecond))
	var decode, prefill []float64
	for i := 0; i <= runs; i++ {
		var dTok, pTok int
		var dMS, pMS float64
		for start := time.Now(); dTok == 0 || time.Since(start) < minRun; {
			r, err := m.run(ctx, opts)
			if err != nil {
				return verdict.FromError(RefusalBackend, err, "backend "+backend)
			}
			if r.TokensOut < 2 || r.DecodeMS <= 0 || r.PrefillMS <= 0 || r.PromptTokens < 1 {
				return verdict.Failed(nil, "run %d: %d tokens decoded in %.3g ms, %d prompt tokens in %.3g ms: not a rate", i, r.TokensOut-1, r.DecodeMS, r.PromptTokens, r.PrefillMS)
			}
			dTok += r.TokensOut - 1
			dMS += r.DecodeMS
			pTok += r.PromptTokens
			pMS += r.PrefillMS
		}
		if i == 0 {
			continue // warm-up: page cache, allocator, CPU frequency
		}
		decode = append(decode, float64(dTok)/(dMS/1e3))
		prefill = append(prefill, float64(pTok)/(pMS/1e3))
	}
	rng := stats.SeededRand(m.sha, backend, m.host.Fingerprint)
	dm, pm := stat.Mean(decode, nil), stat.Mean(prefill, nil)
	dci, pci := stats.MeanCI(decode, conf, resamples, rng), stats.MeanCI(prefill, conf, resamples, rng)
	cv := math.Max(stats.CV(decode), stats.CV(prefill))
	c.Note("decode_tok_per_s", dm, "tok/s")
	c.Note("decode_ci_lo", dci.Lo, "tok/s")
	c.Note("decode_ci_hi", dci.Hi, "tok/s")
	c.Note("prefill_tok_per_s", pm, "tok/s")
	c.Note("prefill_ci_lo", pci.Lo, "tok/s")
	c.Note("prefill_ci_hi", pci.Hi, "tok/s")
	c.Note("runs", float64(runs), "count")
	noisy := !c.Compare("max_cv", cv, "")

	key := BaselineKey(m.sha, m.host.Fingerprint, backend)
	file := m.file
	bl, err := LoadBaselines(file)
	if err != nil {
		return verdict.RefusedBy(RefusalBaselineFile, fz.ID, c.Values, "%v (fix or move it; --accept-baseline will not overwrite it)", err)
	}
	base, have := bl.Entries[key]
	if have && (base.Prompt != prompt || base.Tokens != n || base.Threads != m.threads) {
		if !m.accept {
			return verdict.RefusedBy(RefusalNoBaseline, fz.ID, c.Values, "the baseline for this model, host and backend in %s was measured with other parameters (prompt, %d tokens, %d threads); --accept-baseline records one for these", file, base.Tokens, base.Threads)
		}
		have = false
	}
	record := func(first bool, why string) verdict.Outcome {
		bl.Entries[key] = &Baseline{ModelSHA256: m.sha, Model: m.m.Name(), Host: m.host, Backend: backend,
			Prompt: prompt, Tokens: n, Threads: m.threads, Recorded: time.Now().UTC().Format(time.RFC3339),
			Decode: decode, Prefill: prefill}
		if err := bl.Save(file); err != nil {
			return verdict.RefusedBy(RefusalBaselineFile, fz.ID, c.Values, "%v", err)
		}
		if first {
			// Nothing was compared: recorded, not passed.
			return verdict.RefusedBy(RefusalRecorded, fz.ID, c.Values, "%s", why)
		}
		return verdict.Outcome{Verdict: verdict.Pass, Values: c.Values, Reason: why}
	}
	tooNoisy := func() verdict.Outcome {
		return verdict.RefusedBy(RefusalTooNoisy, fz.ID, c.Values, "too noisy: the runs' coefficient of variation is %.3g, above the contract's %s; nothing is decided or recorded", cv, verdict.FormatThreshold(fz.Thresholds["max_cv"]))
	}
	if !have {
		if !m.accept {
			also := ""
			if noisy {
				also = fmt.Sprintf(" (and these runs, cv %.3g, are too noisy to record one: %s)", cv, verdict.FormatThreshold(fz.Thresholds["max_cv"]))
			}
			return verdict.RefusedBy(RefusalNoBaseline, fz.ID, c.Values, "no baseline for this model, host (%s) and backend in %s; run with --accept-baseline to record one%s", m.host.Fingerprint, file, also)
		}
		if noisy {
			return tooNoisy()
		}
		{
			return record(true, fmt.Sprintf("no baseline for this model, host (%s) and backend: recorded these runs as the baseline in %s (stable: cv %.3g); the next run compares against them", m.host.Fingerprint, file, cv))
		}
	}
	if noisy {
		return tooNoisy()
	}
	dr := stats.RatioCI(decode, base.Decode, conf, resamples, rng)
	pr := stats.RatioCI(prefill, base.Prefill, conf, resamples, rng)
	c.Note("baseline_decode_tok_per_s", stat.Mean(base.Decode, nil), "tok/s")
	c.Note("baseline_prefill_tok_per_s", stat.Mean(base.Prefill, nil), "tok/s")
	c.Note("decode_ratio_ci_lo", dr.Lo, "")
	c.Note("decode_ratio_ci_hi", dr.Hi, "")
	c.Note("prefill_ratio_ci_lo", pr.Lo, "")
	c.Note("prefill_ratio_ci_hi", pr.Hi, "")
	var drops, undecided []string
	for _, r := range []struct {
		name string
		ci   stats.Interval
		cur  float64
		base []float64
	}{{"decode_ratio", dr, dm, base.Decode}, {"prefill_ratio", pr, pm, base.Prefill}} {
		t := fz.Thresholds[r.name]
		point := r.cur / stat.Mean(r.base, nil)
		// The threshold holds the lower end of the interval: a pass is a
		// pass for the whole interval.
		c.Values = append(c.Values, verdict.Value{Name: r.name, Value: r.ci.Lo, Threshold: verdict.FormatThreshold(t)},
			verdict.Value{Name: r.name + "_point", Value: point})
		lo, hi := t.Holds(r.ci.Lo), t.Holds(r.ci.Hi)
		switch {
		case lo && hi:
		case !lo && !hi:
			drops = append(drops, fmt.Sprintf("%s %.3f (%.0f%% CI [%.3f, %.3f]) is outside %s", r.name, point, conf*100, r.ci.Lo, r.ci.Hi, verdict.FormatThreshold(t)))
		default:
			undecided = append(undecided, fmt.Sprintf("%s %.3f: its %.0f%% CI [%.3f, %.3f] straddles %s", r.name, point, conf*100, r.ci.Lo, r.ci.Hi, verdict.FormatThreshold(t)))
		}
	}
	switch {
	case len(drops) > 0:
		return verdict.Failed(c.Values, "slower than the baseline recorded %s: %s", base.Recorded, verdict.FirstN(drops))
	case len(undecided) > 0:
		return verdict.RefusedBy(RefusalUndecided, fz.ID, c.Values, "undecided: %s; more runs or a quieter machine are needed", verdict.FirstN(undecided))
	}
	// The ratchet: the baseline only moves up, and only when asked.
	if m.accept && dr.Lo > 1 && pr.Lo > 1 {
		return record(false, fmt.Sprintf("faster than the baseline (decode ×%.3f, prefill ×%.3f, both CIs above 1): raised the baseline", dm/stat.Mean(base.Decode, nil), pm/stat.Mean(base.Prefill, nil)))
	}
	return verdict.Passed(c.Values...)
}

func paramStringOr(f schema.Falsifier, name, def string) string {
	if s, ok := f.Params[name].(string); ok && s != "" {
		return s
	}
	return def
}

func paramFloatOr(f schema.Falsifier, name string, def float64) float64 {
	if v, ok := toFloat(f.Params[name]); ok {
		return v
	}
	return def
}
