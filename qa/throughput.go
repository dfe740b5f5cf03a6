package qa

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/internal/stats"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

const defaultThroughputPrompt = "Once upon a time, in a small village at the edge of a great forest, there lived a curious little girl who loved to read books about the stars."

// throughputGate measures decode and prefill tok/s over params.runs runs
// (after one warm-up run that is not counted) and compares them with the
// baseline recorded for (model, host, backend): the bootstrap confidence
// interval of the ratio current/baseline must lie above the contract's
// ratio threshold to pass and below it to fail; an interval that straddles
// it is undecided, and runs whose coefficient of variation exceeds max_cv
// are too noisy to decide. Both are refusals, never a coin flip.
func (m *modelRun) throughputGate(ctx context.Context, fz schema.Falsifier, backend string) verdict.Outcome {
	runs := max(2, paramInt(fz, "runs", 7))
	n := max(2, paramInt(fz, "tokens", 32))
	prompt := paramString(fz, "prompt", defaultThroughputPrompt)
	conf := paramFloat(fz, "confidence", 0.95)
	resamples := max(100, paramInt(fz, "resamples", 2000))
	c := verdict.NewJudge(fz.ID, fz.Thresholds)
	for _, name := range []string{"decode_ratio", "prefill_ratio", "max_cv"} {
		if _, ok := c.Threshold(name); !ok {
			return verdict.RefusedBy(CodeNoContract, fz.ID, nil, "falsifier %s has no threshold %s", fz.ID, name)
		}
	}
	opts := generate.Options{Model: m.path, Backend: backend, Prompt: prompt, Raw: true, MaxTokens: n,
		IgnoreEOS: true, Threads: m.opts.Threads, Log: m.opts.Log}
	// A run repeats the generation until it has lasted min_run_ms, so that
	// a tiny model's runs are not all scheduler jitter; its rates are its
	// tokens over its summed stage times (decode only for decode).
	minRun := time.Duration(paramFloat(fz, "min_run_ms", 100) * float64(time.Millisecond))
	var decode, prefill []float64
	for i := 0; i <= runs; i++ {
		var dTok, pTok int
		var dMS, pMS float64
		for start := time.Now(); dTok == 0 || time.Since(start) < minRun; {
			r, err := m.opts.hooks.run(ctx, opts)
			if err != nil {
				return fromError(CodeBackend, err, "backend %s", backend)
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
	file := m.opts.BaselineFile
	bl, err := LoadBaselines(file)
	if err != nil {
		return verdict.RefusedBy(CodeBaselineFile, fz.ID, c.Values, "%v (fix or move it; --accept-baseline will not overwrite it)", err)
	}
	base, have := bl.Entries[key]
	if have && (base.Prompt != prompt || base.Tokens != n || base.Threads != m.opts.Threads) {
		if !m.opts.AcceptBaseline {
			return verdict.RefusedBy(CodeNoBaseline, fz.ID, c.Values, "the baseline for this model, host and backend in %s was measured with other parameters (prompt, %d tokens, %d threads); --accept-baseline records one for these", file, base.Tokens, base.Threads)
		}
		have = false
	}
	record := func(first bool, why string) verdict.Outcome {
		bl.Entries[key] = &Baseline{ModelSHA256: m.sha, Model: m.name, Host: m.host, Backend: backend,
			Prompt: prompt, Tokens: n, Threads: m.opts.Threads, Recorded: time.Now().UTC().Format(time.RFC3339),
			Decode: decode, Prefill: prefill}
		if err := bl.Save(file); err != nil {
			return verdict.RefusedBy(CodeBaselineFile, fz.ID, c.Values, "%v", err)
		}
		if first {
			// Nothing was compared: recorded, not passed.
			return verdict.RefusedBy(CodeRecorded, fz.ID, c.Values, "%s", why)
		}
		return verdict.Outcome{Verdict: verdict.Pass, Values: c.Values, Reason: why}
	}
	tooNoisy := func() verdict.Outcome {
		return verdict.RefusedBy(CodeTooNoisy, fz.ID, c.Values, "too noisy: the runs' coefficient of variation is %.3g, above the contract's %s; nothing is decided or recorded", cv, verdict.FormatThreshold(fz.Thresholds["max_cv"]))
	}
	if !have {
		if !m.opts.AcceptBaseline {
			also := ""
			if noisy {
				also = fmt.Sprintf(" (and these runs, cv %.3g, are too noisy to record one: %s)", cv, verdict.FormatThreshold(fz.Thresholds["max_cv"]))
			}
			return verdict.RefusedBy(CodeNoBaseline, fz.ID, c.Values, "no baseline for this model, host (%s) and backend in %s; run with --accept-baseline to record one%s", m.host.Fingerprint, file, also)
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
		c.Values = append(c.Values, Value{Name: r.name, Value: r.ci.Lo, Threshold: verdict.FormatThreshold(t)},
			Value{Name: r.name + "_point", Value: point})
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
		return verdict.RefusedBy(CodeUndecided, fz.ID, c.Values, "undecided: %s; more runs or a quieter machine are needed", verdict.FirstN(undecided))
	}
	// The ratchet: the baseline only moves up, and only when asked.
	if m.opts.AcceptBaseline && dr.Lo > 1 && pr.Lo > 1 {
		return record(false, fmt.Sprintf("faster than the baseline (decode ×%.3f, prefill ×%.3f, both CIs above 1): raised the baseline", dm/stat.Mean(base.Decode, nil), pm/stat.Mean(base.Prefill, nil)))
	}
	return verdict.Passed(c.Values...)
}
