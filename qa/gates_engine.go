package qa

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

// logitsFunc returns backend's logits at every position of tokens.
type logitsFunc func(ctx context.Context, backend string, tokens []int32) (generate.LogitsResult, error)

// logits runs backend over tokens through engine/generate, once per
// (backend, tokens) within a model's gating.
func (m *modelRun) logits(ctx context.Context, backend string, tokens []int32) (generate.LogitsResult, error) {
	return m.logitsIn(ctx, backend, "", tokens)
}

// logitsIn is logits with the backend in a declared numerics (the
// reference's params.numerics; "": its default).
func (m *modelRun) logitsIn(ctx context.Context, backend, numerics string, tokens []int32) (generate.LogitsResult, error) {
	l := m.h.CachedLogits(backend, numerics, tokens, func() loaded.Logits {
		res, err := m.opts.hooks.logits(ctx, generate.LogitsOptions{Model: m.path, Loaded: m.h, Backend: backend, Tokens: tokens,
			Threads: m.opts.Threads, Log: m.opts.Log, Numerics: numerics})
		return loaded.Logits{NVocab: res.NVocab, Rows: res.Logits, Err: err}
	}, func() bool { return ctx.Err() != nil })
	return generate.LogitsResult{NVocab: l.NVocab, Tokens: tokens, Logits: l.Rows}, l.Err
}

// refLogits is the reference's logits over tokens in numerics (or the
// failclosed probe's answer in its place).
func (m *modelRun) refLogits(ctx context.Context, numerics string, tokens []int32) (generate.LogitsResult, error) {
	if m.refOverride != nil {
		return m.refOverride(ctx, m.opts.Reference, tokens)
	}
	return m.logitsIn(ctx, m.opts.Reference, numerics, tokens)
}

// router is the RouterFunc the gates trace routers with: the test hook when
// one is set, else falsify's, with the reference opened in numerics.
func (m *modelRun) router(numerics string) falsify.RouterFunc {
	if r := m.opts.hooks.router; r != nil {
		return r
	}
	if numerics == "" {
		return falsify.RouterProbs
	}
	return falsify.RouterProbsIn(m.opts.Reference, numerics)
}

// inNumerics names a numerics mode in a sentence ("" for the default).
func inNumerics(numerics string) string {
	if numerics == "" {
		return ""
	}
	return " in " + numerics + " numerics"
}

// refNumerics is the numerics in which the reference judges backend under
// a falsifier (params.numerics: one name for every backend, or a map from
// backend to name; a backend the map does not name is judged by the plain
// reference): "" for the reference's default (plain), or a declared mode
// such as "ggml" (engine/ref's NumericsGGML: activations rounded to the
// blocks each weight type's kernel consumes, as ggml-cpu does). The cpu
// engine computes in ggml's numerics; the CUDA engine multiplies F32
// activations, the plain reference's.
func refNumerics(fz schema.Falsifier, backend string) string {
	var n string
	switch v := fz.Params["numerics"].(type) {
	case string:
		n = v
	case map[string]any:
		n, _ = v[backend].(string)
	}
	if n == "plain" {
		return ""
	}
	return n
}

// Defaults of the gates' parameters when the falsifier gives none.
const (
	defaultProbe       = "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away,"
	defaultProbeTokens = 24
	defaultGreedyN     = 16
)

var defaultGreedyPrompts = []string{"Once upon a time", "The capital of France is"}

// probe returns the parity gate's token sequence: params.prompt tokenized
// as a raw prompt (BOS per the model), cut to params.tokens.
func (m *modelRun) probe(ctx context.Context, fz schema.Falsifier) ([]int32, error) {
	if m.tokErr != nil {
		return nil, m.tokErr
	}
	ids, err := generate.PromptTokens(ctx, m.tok, nil, paramString(fz, "prompt", defaultProbe), true)
	if err != nil {
		return nil, err
	}
	if n := paramInt(fz, "tokens", defaultProbeTokens); n > 0 && len(ids) > n {
		ids = ids[:n]
	}
	if len(ids) == 0 {
		return nil, errors.New("the probe prompt has no tokens")
	}
	return ids, nil
}

// parity compares backend's logits with the reference's at every position
// of the probe. The reference is consulted through c.CallRef, so a
// withdrawn reference refuses; so does any answer that is not usable (an
// error, too few rows, rows of the wrong length, a NaN or an Inf). Only
// then does it run the backend.
func parity(ctx context.Context, c *falsify.Check, m *modelRun, backend string) verdict.Outcome {
	return parityWith(ctx, c, m, backend, false)
}

// gpuCPU is the gpu_cpu gate: a device backend's logits against another
// engine's (params.against: cpu) at the probe, at the contract's tier; the
// reference's router near-ties excluded for a mixture of experts.
func gpuCPU(ctx context.Context, c *falsify.Check, m *modelRun, backend string) verdict.Outcome {
	return parityWith(ctx, c, m, backend, false)
}

func parityWith(ctx context.Context, c *falsify.Check, m *modelRun, backend string, sloppy bool) verdict.Outcome {
	fz := c.F
	toks, err := m.probe(ctx, fz)
	if err != nil {
		return fromError(CodeModel, err, "the probe prompt cannot be tokenized")
	}
	// The judge: the reference, unless the falsifier names another engine
	// in params.against (gpu_cpu holds a device engine to the cpu engine;
	// qa sets params.reference on every falsifier, so the judge has a name
	// of its own).
	judge := paramString(fz, "against", m.opts.Reference)
	var want generate.LogitsResult
	err = c.CallRef("reference engine", func() error {
		var err error
		if judge == m.opts.Reference {
			want, err = m.refLogits(ctx, refNumerics(fz, backend), toks)
		} else {
			want, err = m.logits(ctx, judge, toks)
		}
		if err != nil {
			return err
		}
		return usable(want, len(toks))
	})
	if err != nil && sloppy {
		want, err = m.logits(ctx, backend, toks) // the planted defect: compare the backend with itself
	}
	if err != nil {
		return verdict.RefusedBy(CodeReference, c.By(), nil, "the reference %s gave no usable logits, so nothing can be compared: %v", m.opts.Reference, err)
	}
	// A mixture of experts: the positions where the reference's router is
	// near a tie are left out of the aggregates (and reported).
	ties, judgeRecs, used, err := falsify.NearTiesTrace(ctx, c, toks, m.router(refNumerics(fz, backend)))
	if err != nil {
		return verdict.RefusedBy(CodeReference, c.By(), nil, "the reference %s's router could not be traced, so its near-ties are unknown: %v", m.opts.Reference, err)
	}
	got, err := m.logits(ctx, backend, toks)
	if err != nil {
		return fromError(CodeBackend, err, "backend %s", backend)
	}
	if len(got.Logits) != len(toks) {
		return verdict.Failed(nil, "backend %s returned %d logit rows for %d positions", backend, len(got.Logits), len(toks))
	}
	margin := paramFloat(fz, "argmax_margin", 0.2)
	wantRows, gotRows := want.Logits, got.Logits
	var flips []oracle.RoutingFlip
	if used > 0 && judge == m.opts.Reference { // a mixture of experts: used experts per token
		var o *verdict.Outcome
		if wantRows, gotRows, ties, flips, o = m.routingSegments(ctx, c, backend, toks, want.Logits, got.Logits, ties, judgeRecs, used); o != nil {
			return *o
		}
	}
	rep, err := oracle.Parity{Margin: margin, Ties: ties, Flips: flips}.Judge(gotRows, wantRows)
	if err != nil {
		return verdict.Failed(nil, "backend %s vs %s: %v", backend, m.opts.Reference, err)
	}
	mismatches := rep.MismatchNotes("reference")
	k := verdict.NewJudge(fz.ID, fz.Thresholds)
	for _, x := range rep.Metrics() {
		k.HoldIf(x.Name, x.Value, x.Unit)
	}
	k.Note("positions", float64(len(toks)), "positions")
	o := k.Outcome(verdict.FirstN(mismatches))
	o.Details = append(mismatches, rep.TieNotes(paramFloat(fz, falsify.ParamNearTieEps, math.NaN()))...)
	if o.Verdict == verdict.Fail {
		o.Details = append(o.Details, m.firstDivergence(ctx, backend, refNumerics(fz, backend), toks, paramThreshold(fz, "min_cosine", 0.999)))
	}
	o.Details = append(o.Details, rep.FlipNotes(falsify.ParamRouterNoise, paramFloat(fz, falsify.ParamRouterNoise, math.NaN()))...)
	return o
}

// routingSegments handles a mixture of experts whose backend routes a token
// to other experts than the reference. The backend quantizes activations
// as ggml does and the reference does not, so router probabilities differ
// by a few 1e-3 and a top-k set can flip at gaps above the near-tie rule's;
// the flipped position's output is another expert's, and through the next
// layers' attention so is part of every later position's. A flip is
// excused when noise explains it (oracle.RoutingFlip.Excused with
// params.router_noise): its position is excluded and the positions after it
// are compared in a fresh sequence that starts after it (both engines run
// again), and so on; a flip that noise does not explain fails the gate. It
// returns the rows to compare (each position's from the sequence that
// judges it), the reference's near-ties there (positions in toks) and the
// excused flips, or the outcome that ends the gate. judgeRecs and k are the
// reference's router over toks, as the near-ties were decided on.
func (m *modelRun) routingSegments(ctx context.Context, c *falsify.Check, backend string, toks []int32, want, got [][]float32, ties []oracle.NearTie, judgeRecs []oracle.Record, k int) ([][]float32, [][]float32, []oracle.NearTie, []oracle.RoutingFlip, *verdict.Outcome) {
	fz := c.F
	end := func(o verdict.Outcome) ([][]float32, [][]float32, []oracle.NearTie, []oracle.RoutingFlip, *verdict.Outcome) {
		return nil, nil, nil, nil, &o
	}
	if _, ok := fz.Params[falsify.ParamRouterNoise]; !ok {
		return end(verdict.RefusedBy(CodeNoContract, c.By(), nil, "the model routes tokens to experts and params.%s is missing: the contract must name how far two engines' router probabilities may differ", falsify.ParamRouterNoise))
	}
	noise := paramFloat(fz, falsify.ParamRouterNoise, math.NaN())
	eps := paramFloat(fz, falsify.ParamNearTieEps, math.NaN())
	if math.IsNaN(noise) || noise < 0 || math.IsNaN(eps) || eps < 0 {
		return end(verdict.RefusedBy(CodeNoContract, c.By(), nil, "params.%s %v and params.%s %v: want numbers ≥ 0", falsify.ParamRouterNoise, noise, falsify.ParamNearTieEps, eps))
	}
	router := m.router(refNumerics(fz, backend))
	w := append([][]float32(nil), want...)
	g := append([][]float32(nil), got...)
	var allTies []oracle.NearTie
	var flips []oracle.RoutingFlip
	for from := 0; from < len(toks); {
		seg := toks[from:]
		segTies, jr := ties, judgeRecs // the first sequence's, traced for the near-ties
		if from > 0 {
			var err error
			if jr, _, err = router(ctx, m.path, m.opts.Reference, seg); err != nil {
				return end(verdict.RefusedBy(CodeReference, c.By(), nil, "the reference %s's router could not be traced: %v", m.opts.Reference, err))
			}
			sw, err := m.refLogits(ctx, refNumerics(fz, backend), seg)
			if err == nil {
				err = usable(sw, len(seg))
			}
			if err != nil {
				return end(verdict.RefusedBy(CodeReference, c.By(), nil, "the reference %s gave no usable logits for the positions after a routing flip: %v", m.opts.Reference, err))
			}
			sg, err := m.logits(ctx, backend, seg)
			if err != nil {
				return end(fromError(CodeBackend, err, "backend %s", backend))
			}
			if len(sg.Logits) != len(seg) {
				return end(verdict.Failed(nil, "backend %s returned %d logit rows for %d positions", backend, len(sg.Logits), len(seg)))
			}
			copy(w[from:], sw.Logits)
			copy(g[from:], sg.Logits)
			if segTies, err = oracle.RouterNearTies(jr, len(seg), k, eps); err != nil {
				return end(verdict.RefusedBy(CodeReference, c.By(), nil, "the reference %s's router: %v", m.opts.Reference, err))
			}
		}
		gr, _, err := router(ctx, m.path, backend, seg)
		if err != nil {
			return end(fromError(CodeBackend, err, "backend %s's router", backend))
		}
		fl, err := oracle.RoutingFlips(jr, gr, len(seg), k)
		if err != nil {
			return end(verdict.Failed(nil, "backend %s's routing against %s's: %v", backend, m.opts.Reference, err))
		}
		stop := len(seg)
		if len(fl) > 0 {
			stop = fl[0].Pos
		}
		tied := false // the flip is at one of the reference's near-ties
		for _, t := range segTies {
			if t.Pos <= stop {
				tied = tied || t.Pos == stop
				t.Pos += from
				allTies = append(allTies, t)
			}
		}
		if len(fl) == 0 {
			break
		}
		f := fl[0]
		f.Pos += from
		if tied {
			// excluded by the near-tie rule and reported as such; the
			// positions after it still need a sequence of their own
			from = f.Pos + 1
			continue
		}
		if !f.Excused(noise) {
			o := verdict.Failed(nil, "backend %s %s: beyond params.%s %g (a real difference, not noise)", backend, f, falsify.ParamRouterNoise, noise)
			o.Details = []string{o.Reason}
			return end(o)
		}
		flips = append(flips, f)
		from = f.Pos + 1
	}
	if judged := len(toks) - len(flips) - len(allTies); judged < (len(toks)+1)/2 {
		return end(verdict.Failed(nil, "backend %s: only %d of %d positions left to compare after %d routing flips and %d near-ties", backend, judged, len(toks), len(flips), len(allTies)))
	}
	return w, g, allTies, flips, nil
}

// usable checks a reference's logits: rows positions rows of NVocab finite
// values.
func usable(r generate.LogitsResult, rows int) error {
	if len(r.Logits) != rows {
		return fmt.Errorf("%d rows for %d positions", len(r.Logits), rows)
	}
	for p, row := range r.Logits {
		if len(row) != r.NVocab || r.NVocab <= 0 {
			return fmt.Errorf("row %d has %d values, the vocabulary %d", p, len(row), r.NVocab)
		}
		if err := oracle.Finite(fmt.Sprintf("reference row %d", p), row); err != nil {
			return err
		}
	}
	return nil
}

// topMargin is the gap between the largest and second-largest value.
func topMargin(row []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range row {
		f := float64(v)
		switch {
		case f > a:
			a, b = f, a
		case f > b:
			b = f
		}
	}
	if math.IsInf(b, -1) {
		return math.Inf(1)
	}
	return a - b
}

// greedyCase is one prompt's greedy continuation with the judge's margins.
type greedyCase = golden.Case

// Greedy generates n tokens greedily for each prompt with backend through
// engine/generate (prompt raw, end-of-generation ignored) and records at
// every step the top-1 minus top-2 logit of the same backend, from one
// logits evaluation of the whole sequence. Its output is what a golden
// file holds.
func Greedy(ctx context.Context, model, backend string, prompts []string, n int) ([]golden.Case, error) {
	f, err := gguf.Open(model)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.New(f)
	if err != nil {
		return nil, err
	}
	h := &hooks{}
	h.defaults()
	return greedy(ctx, h, model, tok, backend, "", prompts, n, 0)
}

func greedy(ctx context.Context, h *hooks, model string, tok *tokenizer.Tokenizer, backend, numerics string, prompts []string, n, threads int) ([]golden.Case, error) {
	var out []golden.Case
	for _, p := range prompts {
		ids, err := generate.PromptTokens(ctx, tok, nil, p, true)
		if err != nil {
			return nil, err
		}
		res, err := h.run(ctx, generate.Options{Model: model, Backend: backend, Numerics: numerics, Prompt: p, Raw: true, MaxTokens: n,
			IgnoreEOS: true, Threads: threads})
		if err != nil {
			return nil, err
		}
		if res.PromptTokens != len(ids) || len(res.TokenIDs) != n {
			return nil, fmt.Errorf("qa: %s: generate fed %d prompt tokens and produced %d, expected %d and %d", backend, res.PromptTokens, len(res.TokenIDs), len(ids), n)
		}
		seq := append(append([]int32(nil), ids...), res.TokenIDs[:n-1]...)
		lg, err := h.logits(ctx, generate.LogitsOptions{Model: model, Backend: backend, Numerics: numerics, Tokens: seq, Threads: threads})
		if err != nil {
			return nil, err
		}
		if err := usable(lg, len(seq)); err != nil {
			return nil, fmt.Errorf("qa: %s: %w", backend, err)
		}
		margins := make([]float64, n)
		for k := range n {
			margins[k] = golden.Round(topMargin(lg.Logits[len(ids)-1+k]))
		}
		out = append(out, golden.Case{Prompt: p, PromptIDs: ids, TokenIDs: res.TokenIDs,
			Text: strings.ToValidUTF8(res.Text, "\uFFFD"), Margins: margins})
	}
	return out, nil
}

// goldenGate compares backend's greedy output with the model's reviewed
// golden file or, when the model has none, with the reference engine's
// greedy output, up to the first step whose judge margin is within
// numerical noise. Both are references, consulted through c.CallRef.
func (m *modelRun) goldenGate(ctx context.Context, c *falsify.Check, backend string) verdict.Outcome {
	fz := c.F
	numerics := refNumerics(fz, backend) // the reference's, as judge and as the measure of the backend's distance
	var gf *golden.File
	var ok bool
	if err := c.CallRef("golden file", func() (err error) { gf, ok, err = m.opts.hooks.golden(m.sha); return err }); err != nil {
		return verdict.RefusedBy(CodeReference, c.By(), nil, "the golden store cannot be read: %v", err)
	}
	var cases []golden.Case
	var judge string
	switch {
	case ok:
		cases, judge = gf.Cases, "golden "+gf.Model
	case backend == m.opts.Reference:
		return verdict.RefusedBy(CodeNoGolden, c.By(), nil, "no reviewed golden for this model (sha256 %.12s…); the reference %s is itself the judge of the other backends' output", m.sha, backend)
	default:
		if m.tokErr != nil {
			return falsify.TokenizerOutcome(m.tokErr)
		}
		err := c.CallRef("reference engine", func() error {
			key := m.opts.Reference + "/" + numerics
			m.mu.Lock()
			cached, hit := m.greedyCache[key]
			m.mu.Unlock()
			if hit {
				cases = cached
				return nil
			}
			var err error
			cases, err = greedy(ctx, m.opts.hooks, m.path, m.tok, m.opts.Reference, numerics,
				paramStrings(fz, "prompts", defaultGreedyPrompts), paramInt(fz, "tokens", defaultGreedyN), m.opts.Threads)
			if err == nil {
				m.mu.Lock()
				m.greedyCache[key] = cases
				m.mu.Unlock()
			}
			return err
		})
		if err != nil {
			return verdict.RefusedBy(CodeReference, c.By(), nil, "the reference %s could not produce the output to compare with: %v", m.opts.Reference, err)
		}
		judge = "the reference " + m.opts.Reference + inNumerics(numerics) + " (no reviewed golden for this model)"
	}
	// The numerical noise the gate allows is the contract's (params.
	// logit_noise of the model's weight tier), never measured on the judged
	// backend: a step is decided where the judge's top-1 margin is at least
	// twice it (or the floor noise_margin), since a backend within noise of
	// the reference can flip only a smaller margin; a backend further than
	// noise from the reference at any step of the judge's sequences fails
	// (max_logit_delta), so a broken backend cannot widen its own tolerance.
	//
	// Two comparisons: the backend's own greedy run against the judge's
	// tokens up to the first step below the cut (its sequence then may part
	// from the judge's on noise alone), and, on the judge's sequence, the
	// backend's top token at every step whose judge margin reaches the cut
	// (forced steps: each has the judge's prefix, so no earlier noisy step
	// ends the comparison).
	floor := paramFloat(fz, "noise_margin", 1e-3)
	noise := paramFloat(fz, "logit_noise", math.NaN())
	if math.IsNaN(noise) || noise < 0 {
		return verdict.RefusedBy(CodeNoContract, By, nil, "falsifier %s gives no params.logit_noise (the numerical noise the gate allows): the gate cannot decide a step without one", fz.ID)
	}
	cut := math.Max(floor, 2*noise)
	var diffs, far []string
	compared, forced, noisy := 0, 0, 0
	maxDelta := 0.0
	for i, gc := range cases {
		n := len(gc.TokenIDs)
		res, err := m.opts.hooks.run(ctx, generate.Options{Model: m.path, Backend: backend, Prompt: gc.Prompt, Raw: true,
			MaxTokens: n, IgnoreEOS: true, Threads: m.opts.Threads, Log: m.opts.Log})
		if err != nil {
			return fromError(CodeBackend, err, "backend %s, case %d", backend, i)
		}
		if res.PromptTokens != len(gc.PromptIDs) {
			diffs = append(diffs, fmt.Sprintf("case %d %q: the prompt is %d tokens, %s has %d", i, gc.Prompt, res.PromptTokens, judge, len(gc.PromptIDs)))
			continue
		}
		seq := append(append([]int32(nil), gc.PromptIDs...), gc.TokenIDs[:n-1]...)
		got, err := m.logits(ctx, backend, seq)
		if err != nil {
			return fromError(CodeBackend, err, "backend %s, case %d", backend, i)
		}
		if len(got.Logits) != len(seq) {
			return verdict.Failed(nil, "backend %s returned %d logit rows for %d positions", backend, len(got.Logits), len(seq))
		}
		// How far the backend's logits are from the reference's at each step
		// of the judge's sequence: held to the contract's noise, reported.
		delta := make([]float64, n)
		if backend != m.opts.Reference {
			var want generate.LogitsResult
			if err := c.CallRef("reference engine", func() error {
				var err error
				if want, err = m.refLogits(ctx, numerics, seq); err != nil {
					return err
				}
				return usable(want, len(seq))
			}); err != nil {
				return verdict.RefusedBy(CodeReference, c.By(), nil, "the reference %s cannot measure how far %s is from it: %v", m.opts.Reference, backend, err)
			}
			worst, at := 0.0, 0
			for k := range n {
				p := len(gc.PromptIDs) - 1 + k
				d, _, err := oracle.MaxAbs(got.Logits[p], want.Logits[p])
				if err != nil {
					return verdict.Failed(nil, "backend %s, case %d, step %d: %v", backend, i, k, err)
				}
				delta[k] = d
				if d > worst {
					worst, at = d, k
				}
			}
			maxDelta = math.Max(maxDelta, worst)
			if worst > noise {
				far = append(far, fmt.Sprintf("case %d %q: at step %d the logits are %.3g from the reference's, beyond the contract's noise %g", i, gc.Prompt, at, worst, noise))
			}
		}
		for k, want := range gc.TokenIDs {
			if gc.Margins[k] < cut {
				noisy++
				break
			}
			if k >= len(res.TokenIDs) {
				diffs = append(diffs, fmt.Sprintf("case %d %q: generation stopped after %d tokens", i, gc.Prompt, len(res.TokenIDs)))
				break
			}
			if res.TokenIDs[k] != want {
				diffs = append(diffs, fmt.Sprintf("case %d %q: step %d is token %d, %s has %d (judge margin %.3g, backend %.3g from the reference there)", i, gc.Prompt, k, res.TokenIDs[k], judge, want, gc.Margins[k], delta[k]))
				break
			}
			compared++
		}
		for k, want := range gc.TokenIDs {
			if gc.Margins[k] < cut {
				continue
			}
			top, err := oracle.Argmax(got.Logits[len(gc.PromptIDs)-1+k])
			if err != nil {
				return verdict.Failed(nil, "backend %s, case %d, step %d: %v", backend, i, k, err)
			}
			forced++
			if int32(top) != want {
				diffs = append(diffs, fmt.Sprintf("case %d %q: after the judge's first %d tokens, step %d's top token is %d, %s has %d (judge margin %.3g, backend %.3g from the reference there)", i, gc.Prompt, k, k, top, judge, want, gc.Margins[k], delta[k]))
			}
		}
	}
	k := verdict.NewJudge(fz.ID, fz.Thresholds)
	k.Note("cases", float64(len(cases)), "count")
	k.Note("compared_tokens", float64(compared), "tokens")
	k.Note("forced_steps", float64(forced), "tokens")
	k.Note("cases_cut_at_noise", float64(noisy), "count")
	k.Note("noise_cut", cut, "")
	k.Hold("mismatches", float64(len(diffs)), "count")
	k.Hold("max_logit_delta", maxDelta, "")
	out := k.Outcome(verdict.FirstN(append(append([]string(nil), diffs...), far...)))
	out.Details = append(diffs, far...)
	if out.Verdict == verdict.Pass && compared+forced == 0 {
		return verdict.RefusedBy(CodeUndecided, c.By(), k.Values, "undecided: no step could be decided; every judge margin is below %.3g (twice the contract's numerical noise %g, or the floor %g), and %s is within that noise of the reference", cut, noise, floor, backend)
	}
	return out
}

// firstDivergence bisects a failed parity: both engines run the probe again
// with every op traced, and the first record (computation order, lowest
// position) whose cosine falls below minCos is named, with the command that
// shows every op. It is a detail for whoever investigates, not part of the
// verdict: a trace that cannot be taken says so.
func (m *modelRun) firstDivergence(ctx context.Context, backend, numerics string, toks []int32, minCos float64) string {
	traced := func(b, num string) ([]oracle.Record, error) {
		var rec oracle.Recording
		_, err := m.opts.hooks.logits(ctx, generate.LogitsOptions{Model: m.path, Backend: b, Tokens: toks,
			Threads: m.opts.Threads, Log: m.opts.Log, Trace: rec.Trace(), Numerics: num})
		return rec.Records, err
	}
	want, err := traced(m.opts.Reference, numerics)
	if err != nil {
		return fmt.Sprintf("first divergent op: not traced (%s: %v)", m.opts.Reference, err)
	}
	got, err := traced(backend, "")
	if err != nil {
		return fmt.Sprintf("first divergent op: not traced (%s: %v)", backend, err)
	}
	d := oracle.FirstDivergence(want, got, oracle.DivergenceTol{MinCosine: minCos})
	num := ""
	if numerics != "" {
		num = " --numerics " + numerics
	}
	how := fmt.Sprintf("apr diff %s --backend %s --against %s%s --tokens %s --min-cosine %g shows every op", m.path, backend, m.opts.Reference, num, joinTokens(toks), minCos)
	if d.First == nil {
		return fmt.Sprintf("first divergent op: none below cosine %g among %d traced records (the logits alone part); %s", minCos, d.Compared, how)
	}
	return fmt.Sprintf("first divergent op: %s; %s", d.First, how)
}

func joinTokens(toks []int32) string {
	s := make([]string, len(toks))
	for i, t := range toks {
		s[i] = fmt.Sprint(t)
	}
	return strings.Join(s, ",")
}

// paramThreshold is the value of the falsifier's threshold name, or def.
func paramThreshold(f schema.Falsifier, name string, def float64) float64 {
	if t, ok := f.Thresholds[name]; ok {
		return t.Value
	}
	return def
}
