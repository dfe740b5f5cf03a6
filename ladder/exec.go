package ladder

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/qa"
)

// ExecOptions configure the real executors.
type ExecOptions struct {
	// ExpectDir holds reference outputs (*.logits.json as in the fixtures'
	// expect/); a file is used for the model whose sha256 it records, never
	// matched by name. "" compares nothing: logits are then only checked to
	// be finite and well-formed.
	ExpectDir string
	// RunTokens is how many tokens a run cell generates (default 8).
	RunTokens int
	// Prompt is the run cell's prompt, tokenized raw (default below).
	Prompt string
	Log    *slog.Logger
}

// DefaultPrompt is the run and logits cells' text when no reference
// supplies the tokens.
const DefaultPrompt = "The quick brown fox jumps over the lazy dog. Once upon a time"

// DefaultExecutors registers the run, logits and qa executors for every
// backend this binary links (model.Backends()). Other verbs (serve, chat)
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
		for _, verb := range []string{"run", "logits", "qa"} {
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
	rep, err := qa.Run(ctx, qa.Options{Model: m.realPath(), Backends: []string{backend}, Log: x.opts.Log})
	if err != nil {
		return FromError(err)
	}
	values := []Value{
		{Name: "gates_pass", Value: float64(rep.Counts.Pass)},
		{Name: "gates_fail", Value: float64(rep.Counts.Fail), Limit: "== 0"},
		{Name: "gates_refused", Value: float64(rep.Counts.Refused)},
		{Name: "gates_executed", Value: float64(rep.Executed)},
	}
	v, by, reason := rep.CellVerdict()
	switch v {
	case qa.Pass:
		return Passed(values...)
	case qa.Refused:
		r := RefusedBy(by, "%s", reason)
		r.Values = values
		return r
	}
	r := Failed("%s", reason)
	r.Values = values
	return r
}

type executors struct {
	opts ExecOptions

	indexOnce sync.Once
	index     map[string]string // model sha256 → expect file
	indexErr  error
}

// run generates RunTokens tokens greedily (end-of-generation ignored, so
// the count is fixed) with the one generation loop, engine/generate. It
// passes when generation completes with every token and the stage timings
// are honest: none negative, their sum within the wall time, and the decode
// rate equal to (tokens − 1) over decode time.
func (x *executors) run(ctx context.Context, m *Model, backend string) Result {
	res, err := generate.Run(ctx, generate.Options{
		Model: m.realPath(), Backend: backend, Prompt: x.opts.Prompt, Raw: true,
		MaxTokens: x.opts.RunTokens, IgnoreEOS: true, Log: x.opts.Log,
	})
	if err != nil {
		return FromError(err)
	}
	out := Result{
		Phases: map[string]float64{
			"load": res.LoadMS / 1e3, "h2d": res.H2DMS / 1e3, "prefill": res.PrefillMS / 1e3, "decode": res.DecodeMS / 1e3,
		},
		Values: []Value{
			{Name: "prompt_tokens", Value: float64(res.PromptTokens)},
			{Name: "tokens_out", Value: float64(res.TokensOut), Limit: fmt.Sprintf("== %d", x.opts.RunTokens)},
			{Name: "decode_tok_per_s", Value: res.DecodeTokPerS, Unit: "tok/s"},
		},
	}
	fail := func(format string, args ...any) Result {
		out.Verdict, out.Reason = Fail, fmt.Sprintf(format, args...)
		return out
	}
	stages := res.LoadMS + res.H2DMS + res.PrefillMS + res.DecodeMS
	switch {
	case m.SHA256 != "" && res.ModelSHA256 != m.SHA256:
		return fail("generate read a file with sha256 %s, the ladder hashed %s: the model changed during the run", res.ModelSHA256, m.SHA256)
	case res.TokensOut != x.opts.RunTokens:
		return fail("generated %d tokens, want %d (end-of-generation ignored)", res.TokensOut, x.opts.RunTokens)
	case res.PromptTokens < 1:
		return fail("the prompt fed no token")
	case res.LoadMS < 0 || res.H2DMS < 0 || res.PrefillMS < 0 || res.DecodeMS < 0:
		return fail("a stage time is negative: load %.3f h2d %.3f prefill %.3f decode %.3f ms", res.LoadMS, res.H2DMS, res.PrefillMS, res.DecodeMS)
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
	out.Verdict = Pass
	return out
}

// expected is the part of a *.logits.json reference the ladder uses.
type expected struct {
	Model  string      `json:"model"`
	SHA256 string      `json:"sha256"`
	Tokens []int32     `json:"tokens"`
	NVocab int         `json:"n_vocab"`
	Logits [][]float32 `json:"logits"`
}

// Logits tiers: the minimum and mean cosine per position against the
// reference, as engine/ref's parity test holds the reference engine to
// (float weights; quantized weights, where ggml also quantizes activations;
// the hybrid qwen35, where plain FP32 reaches only 0.973–0.992; and mixtures
// of experts, where a router near-tie can swap an expert at one position:
// the fixtures README measured 0.955 there). Contracts should own these
// numbers; until they do, every cell records the limit it was held to.
type logitsTier struct {
	name          string
	minCos, mean  float64
	argmaxMargin  float64 // argmax must agree where the reference's top-1/top-2 gap is at least this
	argmaxAllowed int     // mismatches tolerated among those positions
}

var (
	tierFloat  = logitsTier{"float", 0.99999, 0, 0.2, 0}
	tierQuant  = logitsTier{"quant", 0.998, 0.999, 0.2, 0}
	tierHybrid = logitsTier{"quant-hybrid", 0.95, 0.985, 0.2, 0}
	tierMoE    = logitsTier{"quant-moe", 0.95, 0.995, 0.2, 1}
)

func tierOf(m *Model) logitsTier {
	quantized := false
	for name := range m.Header.TypeCounts {
		if t, err := quant.ParseType(name); err == nil {
			if in, err := quant.Lookup(t); err == nil && in.Quantized {
				quantized = true
			}
		}
	}
	switch {
	case !quantized:
		return tierFloat
	case m.Header.Architecture == "qwen35":
		return tierHybrid
	case m.experts() > 0:
		return tierMoE
	}
	return tierQuant
}

func (m *Model) experts() uint64 {
	f, err := m.File()
	if err != nil {
		return 0
	}
	v, ok := f.Get(m.Header.Architecture + ".expert_count")
	if !ok {
		return 0
	}
	n, _ := v.Uint()
	return n
}

// logits evaluates a token sequence in one call and checks every row: the
// right count and length, finite values, and, when a reference for this
// model's sha256 exists, cosine and argmax agreement per position.
func (x *executors) logits(ctx context.Context, m *Model, backend string) Result {
	ref, err := x.expectFor(m.SHA256)
	if err != nil {
		return Failed("reading the reference outputs: %v", err)
	}
	var tokens []int32
	if ref != nil {
		tokens = ref.Tokens
	} else {
		f, err := m.File()
		if err != nil {
			return FromError(err)
		}
		tok, err := tokenizer.New(f)
		if err != nil {
			return FromError(err)
		}
		if tokens, err = tok.Encode(DefaultPrompt, tokenizer.Options{AddSpecial: true}); err != nil {
			return FromError(err)
		}
		tokens = tokens[:min(len(tokens), 16)]
	}
	got, err := generate.Logits(ctx, generate.LogitsOptions{Model: m.realPath(), Backend: backend, Tokens: tokens, Log: x.opts.Log})
	if err != nil {
		return FromError(err)
	}
	out := Result{Values: []Value{{Name: "positions", Value: float64(len(tokens))}, {Name: "n_vocab", Value: float64(got.NVocab)}}}
	fail := func(format string, args ...any) Result {
		out.Verdict, out.Reason = Fail, fmt.Sprintf(format, args...)
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
	if ref == nil {
		out.Verdict = Pass
		out.Detail = "no reference outputs for this model's sha256: checked that the logits are finite and well-formed only"
		return out
	}
	if ref.NVocab != got.NVocab || len(ref.Logits) != len(got.Logits) {
		return fail("reference %s has %d rows of %d, the engine gave %d rows of %d", ref.Model, len(ref.Logits), ref.NVocab, len(got.Logits), got.NVocab)
	}
	tier := tierOf(m)
	minCos, sum := 1.0, 0.0
	worst, checked, mismatched := 0, 0, []int{}
	for pos := range got.Logits {
		c, err := oracle.Cosine(got.Logits[pos], ref.Logits[pos])
		if err != nil {
			return fail("position %d: %v", pos, err)
		}
		if c < minCos {
			minCos, worst = c, pos
		}
		sum += c
		best, margin := top2(ref.Logits[pos])
		if margin >= tier.argmaxMargin {
			checked++
			if a, _ := oracle.Argmax(got.Logits[pos]); a != best {
				mismatched = append(mismatched, pos)
			}
		}
	}
	mean := sum / float64(len(got.Logits))
	out.Values = append(out.Values,
		Value{Name: "cosine_min", Value: minCos, Limit: fmt.Sprintf(">= %g (%s tier)", tier.minCos, tier.name)},
		Value{Name: "cosine_mean", Value: mean, Limit: fmt.Sprintf(">= %g (%s tier)", tier.mean, tier.name)},
		Value{Name: "argmax_checked", Value: float64(checked)},
		Value{Name: "argmax_mismatches", Value: float64(len(mismatched)), Limit: fmt.Sprintf("<= %d", tier.argmaxAllowed)},
	)
	out.Detail = "compared with " + ref.Model + " (matched by sha256)"
	switch {
	case minCos < tier.minCos:
		return fail("cosine with the reference %.6f at position %d, below the %s tier's %g", minCos, worst, tier.name, tier.minCos)
	case mean < tier.mean:
		return fail("mean cosine with the reference %.6f, below the %s tier's %g", mean, tier.name, tier.mean)
	case len(mismatched) > tier.argmaxAllowed:
		return fail("argmax differs from the reference at positions %v where its top-1/top-2 margin is at least %g", mismatched, tier.argmaxMargin)
	}
	out.Verdict = Pass
	return out
}

func top2(row []float32) (int, float64) {
	best, second := -1, -1
	for i, v := range row {
		switch {
		case best < 0 || v > row[best]:
			best, second = i, best
		case second < 0 || v > row[second]:
			second = i
		}
	}
	if second < 0 {
		return best, math.Inf(1)
	}
	return best, float64(row[best] - row[second])
}

var shaField = regexp.MustCompile(`"sha256"\s*:\s*"([0-9a-f]{64})"`)

// expectFor returns the reference whose recorded sha256 is sum, or nil.
// The directory is indexed once by reading the head of each file.
func (x *executors) expectFor(sum string) (*expected, error) {
	if x.opts.ExpectDir == "" || sum == "" {
		return nil, nil
	}
	x.indexOnce.Do(func() {
		x.index = map[string]string{}
		paths, err := filepath.Glob(filepath.Join(x.opts.ExpectDir, "*.logits.json"))
		if err != nil {
			x.indexErr = err
			return
		}
		for _, p := range paths {
			head, err := readPrefix(p, 4096)
			if err != nil {
				x.indexErr = err
				return
			}
			if mm := shaField.FindSubmatch(head); mm != nil {
				x.index[string(mm[1])] = p
			}
		}
	})
	if x.indexErr != nil {
		return nil, x.indexErr
	}
	p, ok := x.index[sum]
	if !ok {
		return nil, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var e expected
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if e.SHA256 != sum || len(e.Tokens) == 0 || len(e.Logits) != len(e.Tokens) {
		return nil, fmt.Errorf("%s: sha256 %.12s…, %d tokens, %d logits rows: not a usable reference", p, e.SHA256, len(e.Tokens), len(e.Logits))
	}
	if e.Model == "" {
		e.Model = strings.TrimSuffix(filepath.Base(p), ".logits.json")
	}
	return &e, nil
}

func readPrefix(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	return b[:k], nil
}
