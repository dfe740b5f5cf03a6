package ladder

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/qa"
	"github.com/aprqa/apr/verdict"
)

// ExecOptions configure the real executors.
type ExecOptions struct {
	// ExpectDir holds reference outputs (*.logits.json as in the fixtures'
	// expect/); a file is used for the model whose sha256 it records, never
	// matched by name alone (falsify.RecordedLogits). "" compares nothing:
	// logits are then only checked to be finite and well-formed.
	ExpectDir string
	// Contracts judge the logits cells (the model contract's logits_parity);
	// nil: the embedded set, as the ladder's receipts record.
	Contracts *contracts.Set
	// Registry holds the falsifier code the qa and logits cells run (nil:
	// qa.Registry(), falsify's code and qa's).
	Registry *falsify.Registry
	// RunTokens is how many tokens a run cell generates (default 8).
	RunTokens int
	// Prompt is the run cell's prompt, tokenized raw (default below).
	Prompt string
	Log    *slog.Logger
}

// DefaultPrompt is the run and logits cells' text when no reference
// supplies the tokens.
const DefaultPrompt = "The quick brown fox jumps over the lazy dog. Once upon a time"

// DefaultExecutors registers the run, logits, qa and serve executors for
// every backend this binary links (model.Backends()). Other verbs (chat)
// and backends have no executor yet: their cells are refused by name.
func DefaultExecutors(opts ExecOptions) *Executors {
	if opts.RunTokens <= 0 {
		opts.RunTokens = 8
	}
	if opts.Prompt == "" {
		opts.Prompt = DefaultPrompt
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	e := &Executors{}
	backends := model.Backends()
	if len(backends) == 0 {
		return e
	}
	x := &executors{opts: opts}
	e.Register("run", x.run, backends...)
	e.Register("logits", x.logits, backends...)
	e.Register("qa", x.qa, backends...)
	e.Register("serve", x.serve, backends...)
	// A backend the ladder knows of but this binary does not link (cuda
	// before there is a CUDA engine) is refused by "backend" with that
	// reason, the same refusal apr run gives for it.
	for _, b := range DefaultBackends {
		if slices.Contains(backends, b) {
			continue
		}
		refused := func(ctx context.Context, m *Model, backend string) Result {
			return RefusedBy("backend", "backend %q is not linked into this binary (linked: %s)", backend, strings.Join(backends, ", "))
		}
		for _, verb := range []string{"run", "logits", "qa", "serve"} {
			e.Register(verb, refused, b)
		}
	}
	return e
}

// qa gates the model on one backend with apr qa's gates (the reference
// judges parity and goldens, as in apr qa). It never records a throughput
// baseline: a ladder run reads baselines, it does not move them. The cell is
// pass when every gate passed (an optional refusal included), fail when one
// failed, refused by the first refuser otherwise; the values are the gate
// counts.
func (x *executors) qa(ctx context.Context, m *Model, backend string) Result {
	rep, err := qa.Run(ctx, qa.Options{Model: m.realPath(), Backends: []string{backend}, Registry: x.opts.Registry, Log: x.opts.Log})
	if err != nil {
		return FromError(err)
	}
	return FromOutcome(rep.Outcome())
}

type executors struct {
	opts ExecOptions
}

// run generates RunTokens tokens greedily (end-of-generation ignored, so
// the count is fixed) with the one generation loop, engine/generate. It
// runs F2 first on a device engine (a failed F2 fails the cell), and
// passes when generation completes with every token and the stage timings
// are honest: none negative, their sum within the wall time, and the decode
// rate equal to (tokens − 1) over decode time.
func (x *executors) run(ctx context.Context, m *Model, backend string) Result {
	res, err := generate.Run(ctx, generate.Options{
		Model: m.realPath(), Backend: backend, Prompt: x.opts.Prompt, Raw: true,
		MaxTokens: x.opts.RunTokens, IgnoreEOS: true, Log: x.opts.Log,
		Validate: falsify.F2Validate(m.realPath(), x.opts.Log), // F2 before a device engine generates, as apr run does
	})
	if err != nil {
		return FromError(err)
	}
	out := Result{
		Phases: map[string]float64{
			"load": res.LoadMS / 1e3, "h2d": res.H2DMS / 1e3, "f2": res.F2MS / 1e3, "prefill": res.PrefillMS / 1e3, "decode": res.DecodeMS / 1e3,
		},
		Values: []Value{
			{Name: "prompt_tokens", Value: float64(res.PromptTokens)},
			{Name: "tokens_out", Value: float64(res.TokensOut), Threshold: verdict.Limit("==", float64(x.opts.RunTokens))},
			{Name: "decode_tok_per_s", Value: res.DecodeTokPerS, Unit: "tok/s"},
		},
	}
	fail := func(format string, args ...any) Result {
		out.Verdict, out.Reason = verdict.Fail, fmt.Sprintf(format, args...)
		return out
	}
	stages := res.LoadMS + res.H2DMS + res.F2MS + res.PrefillMS + res.DecodeMS
	switch {
	case m.SHA256 != "" && res.ModelSHA256 != m.SHA256:
		return fail("generate read a file with sha256 %s, the ladder hashed %s: the model changed during the run", res.ModelSHA256, m.SHA256)
	case res.TokensOut != x.opts.RunTokens:
		return fail("generated %d tokens, want %d (end-of-generation ignored)", res.TokensOut, x.opts.RunTokens)
	case res.PromptTokens < 1:
		return fail("the prompt fed no token")
	case res.LoadMS < 0 || res.H2DMS < 0 || res.F2MS < 0 || res.PrefillMS < 0 || res.DecodeMS < 0:
		return fail("a stage time is negative: load %.3f h2d %.3f f2 %.3f prefill %.3f decode %.3f ms", res.LoadMS, res.H2DMS, res.F2MS, res.PrefillMS, res.DecodeMS)
	case stages > res.WallMS*1.001+1:
		return fail("stage times add up to %.3f ms, more than the wall time %.3f ms", stages, res.WallMS)
	case res.TokensOut > 1 && res.DecodeMS <= 0:
		return fail("decoded %d tokens in %.3f ms", res.TokensOut-1, res.DecodeMS)
	}
	if n := res.TokensOut - 1; n > 0 {
		want := float64(n) / (res.DecodeMS / 1e3)
		if math.Abs(res.DecodeTokPerS-want) > 1e-6*want {
			return fail("decode_tok_per_s %.6g is not (tokens_out − 1) / decode time = %.6g", res.DecodeTokPerS, want)
		}
	}
	out.Verdict = verdict.Pass
	return out
}

// logits evaluates a token sequence in one call. When ExpectDir records
// llama.cpp's logits for this model object (matched by sha256), the cell is
// the model contract's logits_parity falsifier of the model's weight tier,
// run through falsify.Run on this backend: the thresholds, the argmax rule
// and a mixture of experts' router near-tie exclusion are the contract's.
// Without a reference it checks that every row is there, of n_vocab finite
// values, and says that it compared nothing.
func (x *executors) logits(ctx context.Context, m *Model, backend string) Result {
	expect := ""
	if x.opts.ExpectDir != "" && m.SHA256 != "" {
		p, _, err := falsify.RecordedLogits(x.opts.ExpectDir, filepath.Base(m.realPath()), m.SHA256)
		if err != nil {
			return Failed("reading the reference outputs: %v", err)
		}
		expect = p
	}
	if expect != "" {
		return x.logitsParity(ctx, m, backend, expect)
	}
	f, err := m.File()
	if err != nil {
		return FromError(err)
	}
	tok, err := tokenizer.New(f)
	if err != nil {
		return FromError(err)
	}
	tokens, err := tok.Encode(DefaultPrompt, tokenizer.Options{AddSpecial: true})
	if err != nil {
		return FromError(err)
	}
	tokens = tokens[:min(len(tokens), 16)]
	got, err := generate.Logits(ctx, generate.LogitsOptions{Model: m.realPath(), Backend: backend, Tokens: tokens, Log: x.opts.Log})
	if err != nil {
		return FromError(err)
	}
	out := Result{Values: []Value{{Name: "positions", Value: float64(len(tokens))}, {Name: "n_vocab", Value: float64(got.NVocab)}}}
	fail := func(format string, args ...any) Result {
		out.Verdict, out.Reason = verdict.Fail, fmt.Sprintf(format, args...)
		return out
	}
	if len(got.Logits) != len(tokens) {
		return fail("%d logits rows for %d tokens", len(got.Logits), len(tokens))
	}
	for pos, row := range got.Logits {
		if len(row) != got.NVocab || got.NVocab < 1 {
			return fail("row %d has %d logits, n_vocab is %d", pos, len(row), got.NVocab)
		}
		if err := oracle.Finite(fmt.Sprintf("logits row %d", pos), row); err != nil {
			return fail("%v", err)
		}
	}
	out.Verdict = verdict.Pass
	out.Detail = "no reference outputs for this model's sha256: checked that the logits are finite and well-formed only"
	return out
}

// ByContracts is the refuser named when the contracts cannot judge a cell
// (none loaded, or no falsifier for it).
const ByContracts = "contracts"

// logitsParity runs the model contract's logits_parity falsifier of the
// model's weight tier on backend, with llama.cpp's logits from expect's
// directory, and turns its result into the cell's.
func (x *executors) logitsParity(ctx context.Context, m *Model, backend, expect string) Result {
	set, err := x.contracts()
	if err != nil {
		return RefusedBy(ByContracts, "loading the contracts: %v", err)
	}
	f, err := m.File()
	if err != nil {
		return FromError(err)
	}
	arch, tier := f.Architecture(), falsify.WeightTier(f)
	mc, ok := set.Model(arch)
	if !ok {
		return RefusedBy(ByContracts, "the contracts (digest %.12s) have no model contract for architecture %q to judge its logits by", set.Digest(), arch)
	}
	id := ""
	for _, fz := range mc.Falsifiers {
		if t, _ := fz.Params["tier"].(string); fz.Code == "logits_parity" && t == tier {
			id = fz.ID
			break
		}
	}
	if id == "" {
		return RefusedBy(mc.ID, "contract %s has no logits_parity falsifier for %s weights", mc.ID, tier)
	}
	rep, err := falsify.Run(ctx, falsify.Options{IDs: []string{id}, Model: m.realPath(), ModelSHA256: m.SHA256, Registry: x.opts.Registry,
		Set: set, Params: map[string]any{"backend": backend, "expect_dir": filepath.Dir(expect)}, Log: x.opts.Log})
	if err != nil {
		return RefusedBy(ByContracts, "%v", err)
	}
	if len(rep.Results) != 1 {
		return RefusedBy(ByContracts, "falsify ran %d falsifiers for %s, want 1", len(rep.Results), id)
	}
	return fromFalsify(rep.Results[0], "compared with "+filepath.Base(expect)+" (matched by sha256) by "+id)
}

// fromFalsify is a cell's result from a falsifier's outcome: its verdict,
// reason (after the falsifier's id) or refuser, every measured value with its
// threshold, and its details after detail.
func fromFalsify(r falsify.Result, detail string) Result {
	o := r.Outcome()
	if o.Verdict != verdict.Pass {
		o.Reason = r.ID + ": " + o.Reason
	}
	o.Details = append([]string{detail}, o.Details...)
	return FromOutcome(o)
}

// contracts returns ExecOptions.Contracts, or the embedded set.
func (x *executors) contracts() (*contracts.Set, error) {
	if x.opts.Contracts != nil {
		return x.opts.Contracts, nil
	}
	return contracts.Embedded()
}
