package qa

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
)

// logitsFunc returns backend's logits at every position of tokens.
type logitsFunc func(ctx context.Context, backend string, tokens []int32) (generate.LogitsResult, error)

// logits runs backend over tokens through engine/generate, once per
// (backend, tokens) within a model's gating.
func (m *modelRun) logits(ctx context.Context, backend string, tokens []int32) (generate.LogitsResult, error) {
	key := fmt.Sprint(backend, tokens)
	if e, ok := m.logitsCache[key]; ok {
		return e.res, e.err
	}
	res, err := m.opts.hooks.logits(ctx, generate.LogitsOptions{Model: m.path, Backend: backend, Tokens: tokens,
		Threads: m.opts.Threads, Log: m.opts.Log})
	if ctx.Err() == nil {
		m.logitsCache[key] = logitsEntry{res, err}
	}
	return res, err
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

// parityGate runs the parity falsifier against the reference.
func (m *modelRun) parityGate(ctx context.Context, fz schema.Falsifier, backend string) outcome {
	return m.opts.hooks.parity(ctx, m, fz, backend, m.logits)
}

// parity compares backend's logits with ref's at every position of the
// probe. It refuses, by the falsifier's id, whenever the reference did not
// give a usable answer: an error, a refusal, too few rows, rows of the wrong
// length, a NaN or an Inf. Only then does it run the backend.
func parity(ctx context.Context, m *modelRun, fz schema.Falsifier, backend string, ref logitsFunc) outcome {
	toks, err := m.probe(ctx, fz)
	if err != nil {
		return fromError(CodeModel, err, "the probe prompt cannot be tokenized")
	}
	want, err := ref(ctx, m.opts.Reference, toks)
	if err != nil {
		return refused(CodeReference, fz.ID, nil, "the reference %s could not run, so nothing can be compared: %v", m.opts.Reference, err)
	}
	if err := usable(want, len(toks)); err != nil {
		return refused(CodeReference, fz.ID, nil, "the reference %s gave unusable logits: %v", m.opts.Reference, err)
	}
	got, err := m.logits(ctx, backend, toks)
	if err != nil {
		return fromError(CodeBackend, err, "backend %s", backend)
	}
	if len(got.Logits) != len(toks) {
		return failed(nil, "backend %s returned %d logit rows for %d positions", backend, len(got.Logits), len(toks))
	}
	rep, err := oracle.CompareSeq(got.Logits, want.Logits, 0)
	if err != nil {
		return failed(nil, "backend %s vs %s: %v", backend, m.opts.Reference, err)
	}
	margin := paramFloat(fz, "argmax_margin", 0.2)
	var mismatches []string
	for p, s := range rep.Positions {
		if s.ArgmaxEqual {
			continue
		}
		if mg := topMargin(want.Logits[p]); mg >= margin {
			mismatches = append(mismatches, fmt.Sprintf("position %d: argmax %d, reference %d (reference margin %.3g)", p, s.ArgmaxGot, s.ArgmaxWant, mg))
		}
	}
	c := newCheck(fz)
	tier := ""
	if m.quantized {
		tier = "_quantized"
	}
	holdTier := func(name string, v float64, required bool) {
		if _, ok := c.threshold(name + tier); ok {
			name += tier
		}
		if required {
			c.hold(name, v, "")
		} else {
			c.holdIf(name, v, "")
		}
	}
	holdTier("min_cosine", rep.MinCosine, true)
	holdTier("mean_cosine", rep.MeanCosine, false)
	c.hold("argmax_mismatches", float64(len(mismatches)), "count")
	c.note("argmax_agree", float64(rep.ArgmaxAgree), "positions")
	c.note("positions", float64(len(toks)), "positions")
	c.note("worst_position", float64(rep.Worst), "")
	c.note("max_kl", rep.MaxKL, "nats")
	return c.outcome(firstN(mismatches))
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

// failClosedGate proves the parity gate refuses when its reference cannot
// run: it hands the parity implementation references that refuse, error,
// or return NaN, too few or too short rows, and counts every verdict that
// is not a refusal naming the reference. A control run with the real
// reference must not be refused for the reference, or nothing is proven.
func (m *modelRun) failClosedGate(ctx context.Context, fz schema.Falsifier, backend string) outcome {
	target := paramString(fz, "target", "")
	var pf schema.Falsifier
	for _, f := range m.mc.Falsifiers {
		if f.ID == target {
			pf = f
		}
	}
	control := m.opts.hooks.parity(ctx, m, pf, backend, m.logits)
	if control.verdict == Refused {
		return refused(control.code, fz.ID, nil, "%s was refused with the real reference (%s), so refusing with a disabled one proves nothing", target, control.reason)
	}
	nv := m.tok.NVocab()
	rows := func(n, width int, poison bool) [][]float32 {
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
	const by = "qa.failclosed"
	probes := []struct {
		name string
		fn   logitsFunc
	}{
		{"reference refuses", func(context.Context, string, []int32) (generate.LogitsResult, error) {
			return generate.LogitsResult{}, refuse.New(by, "reference disabled to prove the parity gate fails closed")
		}},
		{"reference errors", func(context.Context, string, []int32) (generate.LogitsResult, error) {
			return generate.LogitsResult{}, errors.New("reference engine failed (planted by the failclosed gate)")
		}},
		{"reference returns NaN", func(_ context.Context, _ string, t []int32) (generate.LogitsResult, error) {
			return generate.LogitsResult{NVocab: nv, Tokens: t, Logits: rows(len(t), nv, true)}, nil
		}},
		{"reference returns too few positions", func(_ context.Context, _ string, t []int32) (generate.LogitsResult, error) {
			return generate.LogitsResult{NVocab: nv, Tokens: t, Logits: rows(len(t)-1, nv, false)}, nil
		}},
		{"reference returns short rows", func(_ context.Context, _ string, t []int32) (generate.LogitsResult, error) {
			return generate.LogitsResult{NVocab: nv, Tokens: t, Logits: rows(len(t), nv-1, false)}, nil
		}},
	}
	var bad []string
	for _, p := range probes {
		o := m.opts.hooks.parity(ctx, m, pf, backend, p.fn)
		if o.verdict != Refused || o.code != CodeReference {
			bad = append(bad, fmt.Sprintf("%s: %s gave %s (%s)", p.name, target, o.verdict, o.reason))
		}
	}
	c := newCheck(fz)
	c.note("probes", float64(len(probes)), "count")
	c.hold("non_refusals", float64(len(bad)), "count")
	return c.outcome(firstN(bad))
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
	return greedy(ctx, h, model, tok, backend, prompts, n, 0)
}

func greedy(ctx context.Context, h *hooks, model string, tok *tokenizer.Tokenizer, backend string, prompts []string, n, threads int) ([]golden.Case, error) {
	var out []golden.Case
	for _, p := range prompts {
		ids, err := generate.PromptTokens(ctx, tok, nil, p, true)
		if err != nil {
			return nil, err
		}
		res, err := h.run(ctx, generate.Options{Model: model, Backend: backend, Prompt: p, Raw: true, MaxTokens: n,
			IgnoreEOS: true, Threads: threads})
		if err != nil {
			return nil, err
		}
		if res.PromptTokens != len(ids) || len(res.TokenIDs) != n {
			return nil, fmt.Errorf("qa: %s: generate fed %d prompt tokens and produced %d, expected %d and %d", backend, res.PromptTokens, len(res.TokenIDs), len(ids), n)
		}
		seq := append(append([]int32(nil), ids...), res.TokenIDs[:n-1]...)
		lg, err := h.logits(ctx, generate.LogitsOptions{Model: model, Backend: backend, Tokens: seq, Threads: threads})
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
// numerical noise.
func (m *modelRun) goldenGate(ctx context.Context, fz schema.Falsifier, backend string) outcome {
	gf, ok, err := m.opts.hooks.golden(m.sha)
	if err != nil {
		return failed(nil, "the embedded golden files cannot be read: %v", err)
	}
	var cases []golden.Case
	var judge string
	switch {
	case ok:
		cases, judge = gf.Cases, "golden "+gf.Model
	case backend == m.opts.Reference:
		return refused(CodeNoGolden, fz.ID, nil, "no reviewed golden for this model (sha256 %.12s…); the reference %s is itself the judge of the other backends' output", m.sha, backend)
	default:
		key := m.opts.Reference
		cases, ok = m.greedyCache[key]
		if !ok {
			if m.tokErr != nil {
				return tokErrOutcome(m.tokErr)
			}
			cases, err = greedy(ctx, m.opts.hooks, m.path, m.tok, m.opts.Reference,
				paramStrings(fz, "prompts", defaultGreedyPrompts), paramInt(fz, "tokens", defaultGreedyN), m.opts.Threads)
			if err != nil {
				return refused(CodeReference, fz.ID, nil, "the reference %s could not produce the output to compare with: %v", m.opts.Reference, err)
			}
			m.greedyCache[key] = cases
		}
		judge = "the reference " + m.opts.Reference + " (no reviewed golden for this model)"
	}
	noise := paramFloat(fz, "noise_margin", 1e-3)
	if m.quantized {
		noise = paramFloat(fz, "noise_margin_quantized", noise)
	}
	var diffs []string
	compared, noisy := 0, 0
	for i, gc := range cases {
		res, err := m.opts.hooks.run(ctx, generate.Options{Model: m.path, Backend: backend, Prompt: gc.Prompt, Raw: true,
			MaxTokens: len(gc.TokenIDs), IgnoreEOS: true, Threads: m.opts.Threads, Log: m.opts.Log})
		if err != nil {
			return fromError(CodeBackend, err, "backend %s, case %d", backend, i)
		}
		if res.PromptTokens != len(gc.PromptIDs) {
			diffs = append(diffs, fmt.Sprintf("case %d %q: the prompt is %d tokens, %s has %d", i, gc.Prompt, res.PromptTokens, judge, len(gc.PromptIDs)))
			continue
		}
		for k, want := range gc.TokenIDs {
			if gc.Margins[k] < noise {
				noisy++
				break
			}
			if k >= len(res.TokenIDs) {
				diffs = append(diffs, fmt.Sprintf("case %d %q: generation stopped after %d tokens", i, gc.Prompt, len(res.TokenIDs)))
				break
			}
			if res.TokenIDs[k] != want {
				diffs = append(diffs, fmt.Sprintf("case %d %q: step %d is token %d, %s has %d (margin %.3g)", i, gc.Prompt, k, res.TokenIDs[k], judge, want, gc.Margins[k]))
				break
			}
			compared++
		}
	}
	c := newCheck(fz)
	c.note("cases", float64(len(cases)), "count")
	c.note("compared_tokens", float64(compared), "tokens")
	c.note("cases_cut_at_noise", float64(noisy), "count")
	c.hold("mismatches", float64(len(diffs)), "count")
	out := c.outcome(firstN(diffs))
	if out.verdict == Pass && compared == 0 {
		return failed(c.values, "no token was compared: every case's first step is within the noise margin %g", noise)
	}
	return out
}
