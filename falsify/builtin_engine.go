package falsify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

// The ids of the engine-facing code in this file.
const (
	CodeGoldenOutput = "golden_output"
	CodeEngineParity = "engine_parity"
	CodeGPUCPU       = "gpu_cpu"
)

// Refusal classes of the engine-facing code.
const (
	RefusalReference = "reference_unavailable" // the reference could not run or gave unusable output
	RefusalNoGolden  = "no_golden"             // no reviewed golden for this model (reference backend)
)

// LogitsRunFunc evaluates logits: engine/generate.Logits in apr.
type LogitsRunFunc func(context.Context, generate.LogitsOptions) (generate.LogitsResult, error)

// Engines are how golden_output, engine_parity and gpu_cpu run engines;
// apr qa's tests plant defects through them. A nil field runs apr's own
// (engine/generate, RouterProbs, golden.Lookup).
type Engines struct {
	Run    RunFunc
	Logits LogitsRunFunc
	Router RouterFunc
	Golden GoldenLookup
	// SloppyParity plants a parity that does not fail closed: when its
	// reference fails it compares the backend with itself (the failclosed
	// gate's own test).
	SloppyParity bool
	// RefLogits, when set, answers in place of the reference's logits
	// (apr qa's failclosed gate hands parity garbage this way).
	RefLogits func(ctx context.Context, reference string, tokens []int32) (generate.LogitsResult, error)
}

func (e Engines) withDefaults() Engines {
	if e.Run == nil {
		e.Run = generate.Run
	}
	if e.Logits == nil {
		e.Logits = generate.Logits
	}
	if e.Golden == nil {
		e.Golden = golden.Lookup
	}
	return e
}

// EngineCodes returns the code of golden_output, engine_parity and gpu_cpu
// over e, by id: RegisterEngineCodes registers them, and apr qa rebinds them
// with its planted engines.
func EngineCodes(e Engines) map[string]Func {
	e = e.withDefaults()
	code := func(fn func(ctx context.Context, c *Check, m *engineModel) verdict.Outcome) Func {
		return outcomeCode(func(ctx context.Context, c *Check, h *loaded.Model) verdict.Outcome {
			m, o := newEngineModel(c, h, e)
			if o != nil {
				return *o
			}
			return fn(ctx, c, m)
		})
	}
	return map[string]Func{
		CodeGoldenOutput: code(func(ctx context.Context, c *Check, m *engineModel) verdict.Outcome {
			return m.goldenGate(ctx, c, backendOf(c, "ref"))
		}),
		CodeEngineParity: code(func(ctx context.Context, c *Check, m *engineModel) verdict.Outcome {
			return parityWith(ctx, c, m, backendOf(c, "cpu"), e.SloppyParity)
		}),
		CodeGPUCPU: code(func(ctx context.Context, c *Check, m *engineModel) verdict.Outcome {
			return parityWith(ctx, c, m, backendOf(c, "cuda"), false)
		}),
	}
}

// RegisterEngineCodes registers golden_output, engine_parity and gpu_cpu in
// r over e.
func RegisterEngineCodes(r *Registry, e Engines) {
	codes := EngineCodes(e)
	r.Register(CodeGoldenOutput, KindGolden, codes[CodeGoldenOutput], Needs(NeedModel), Thresholds("mismatches", "max_logit_delta"), Params("tier", "logit_noise", ParamNoiseFloor, ParamRouterNoise),
		Refs("golden file", "reference engine", "reference engine router"),
		AppliesWhen(TierApplies), VetWith(VetTier),
		Doc("a backend's greedy output equals the reviewed golden (or the reference's, in the numerics params.numerics names for the backend) at every step whose judge margin reaches twice the contract's numerical noise for the model's weight tier (params.logit_noise); a backend further than that noise from the reference fails, counting on a case that exceeds it only what lies beyond params.noise_floor times the model's own noise there (the reference against its jittered twin); on a mixture of experts, a case's steps from the first position the backend routes to other experts than the reference are not compared when params.router_noise explains that flip (reported), and any other flip fails"))
	r.Register(CodeEngineParity, KindCosine, codes[CodeEngineParity], Needs(NeedModel), Thresholds("min_cosine", "mean_cosine", "argmax_mismatches"),
		Params("tier", "argmax_margin", ParamNearTieEps, ParamRouterNoise, ParamNoiseFloor), Refs("reference engine", "reference engine router"),
		AppliesWhen(TierApplies), VetWith(VetTier),
		Doc("a backend's logits against the reference engine's (in the numerics params.numerics names for the backend: plain, or ggml's activation rounding) at every position of a probe prompt, at the thresholds of the model's weight tier, counting only distance beyond params.noise_floor times the model's own (the reference against its jittered twin) where the judge rounds activations; a mixture of experts' router near-ties (on the reference) excluded and reported"))
	r.Register(CodeGPUCPU, KindCosine, codes[CodeGPUCPU], Needs(NeedModel), Thresholds("min_cosine", "mean_cosine", "argmax_mismatches"),
		Params("tier", "backend", "against", "numerics", "argmax_margin", ParamNearTieEps, ParamRouterNoise, ParamNoiseFloor), Refs("reference engine", "reference engine router"),
		AppliesWhen(gpuCPUApplies), VetWith(VetTier),
		Doc("a device backend's logits (params.backend) against another engine's (params.against) at every position of a probe prompt, at the thresholds of the model's weight tier; where params.numerics gives the two engines different numerics, judged beyond the gap the reference shows between those numerics on the same positions (a position's distance counts only past the references' own, an argmax mismatch only where the references agree) and beyond params.noise_floor times the model's own noise (the reference in the rounding side's numerics against its jittered twin); the judge's router near-ties excluded and reported"))
}

// gpuCPUApplies: gpu_cpu applies to models of its tier when its device
// backend can run on this machine (apr qa gates a named backend anyway, and
// refuses it with the reason).
func gpuCPUApplies(c *Check) (bool, string) {
	if ok, why := TierApplies(c); !ok {
		return ok, why
	}
	b, _ := c.ParamString("backend", "cuda")
	if err := model.Available(b); err != nil {
		return false, fmt.Sprintf("backend %s cannot run here: %v", b, err)
	}
	return true, ""
}

// engineModel is one check's view of the loaded model for the
// engine-facing code: the engines, the reference (params.reference,
// default "ref") and the threads (params.threads) it runs them with.
type engineModel struct {
	eng       Engines
	h         *loaded.Model
	path      string
	sha       string
	tok       *tokenizer.Tokenizer
	tokErr    error
	reference string
	threads   int
	log       *slog.Logger
}

func newEngineModel(c *Check, h *loaded.Model, e Engines) (*engineModel, *verdict.Outcome) {
	sha, _, err := h.SHA256()
	if err != nil {
		o := verdict.FromError(RefusalModel, refuse.Wrap(c.By(), err), "")
		return nil, &o
	}
	m := &engineModel{eng: e, h: h, path: h.Path, sha: sha, log: c.Log}
	m.tok, m.tokErr = h.Tokenizer()
	m.reference, _ = c.ParamString("reference", "ref")
	if m.reference == "" {
		m.reference = "ref"
	}
	m.threads, _ = c.ParamInt("threads", 0)
	return m, nil
}

// logits runs backend over tokens through engine/generate, once per
// (backend, tokens) on the loaded model.
func (m *engineModel) logits(ctx context.Context, backend string, tokens []int32) (generate.LogitsResult, error) {
	return m.logitsIn(ctx, backend, "", tokens)
}

// logitsIn is logits with the backend in a declared numerics (the
// reference's params.numerics; "": its default).
func (m *engineModel) logitsIn(ctx context.Context, backend, numerics string, tokens []int32) (generate.LogitsResult, error) {
	l := m.h.CachedLogits(backend, numerics, tokens, func() loaded.Logits {
		res, err := m.eng.Logits(ctx, generate.LogitsOptions{Model: m.path, Loaded: m.h, Backend: backend, Tokens: tokens,
			Threads: m.threads, Log: m.log, Numerics: numerics})
		return loaded.Logits{NVocab: res.NVocab, Rows: res.Logits, Err: err}
	}, func() bool { return ctx.Err() != nil })
	return generate.LogitsResult{NVocab: l.NVocab, Tokens: tokens, Logits: l.Rows}, l.Err
}

// refLogits is the reference's logits over tokens in numerics (or the
// answer Engines.RefLogits plants in its place).
func (m *engineModel) refLogits(ctx context.Context, numerics string, tokens []int32) (generate.LogitsResult, error) {
	if m.eng.RefLogits != nil {
		return m.eng.RefLogits(ctx, m.reference, tokens)
	}
	return m.logitsIn(ctx, m.reference, numerics, tokens)
}

// router is the RouterFunc the code traces routers with: the planted one
// when set, else RouterProbs, with the reference opened in numerics.
func (m *engineModel) router(numerics string) RouterFunc {
	if r := m.eng.Router; r != nil {
		return r
	}
	if numerics == "" {
		return RouterProbs
	}
	return RouterProbsIn(m.reference, numerics)
}

// inNumerics names a numerics mode in a sentence ("" for the default).
func inNumerics(numerics string) string {
	if numerics == "" {
		return ""
	}
	return " in " + numerics + " numerics"
}

// RefNumerics is the numerics in which the reference judges backend under
// a falsifier (params.numerics: one name for every backend, or a map from
// backend to name; a backend the map does not name is judged by the plain
// reference): "" for the reference's default (plain), or a declared mode
// such as "ggml" (engine/ref's NumericsGGML: activations rounded to the
// blocks each weight type's kernel consumes, as ggml-cpu does). The cpu
// and CUDA engines compute in ggml's numerics.
func RefNumerics(fz schema.Falsifier, backend string) string {
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

// ParamNoiseFloor names the cosine gates' parameter: how many times the
// model's noise floor (the reference against its jittered twin,
// oracle.ParityReport.AtFloor) the gate allows; absent or 0, none is
// measured.
const ParamNoiseFloor = "noise_floor"

// jitterTwin is the numerics whose distance from n is the model's noise
// floor (engine/ref's NumericsGGMLJitter for "ggml"), or "" where n has
// none: the plain reference rounds no activation, so there is no step for
// an ulp to cross.
func jitterTwin(n string) string {
	if n == "ggml" {
		return "ggml-jitter"
	}
	return ""
}

// numericsName names a RefNumerics value for people ("" is plain).
func numericsName(n string) string {
	if n == "" {
		return "plain"
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
func (m *engineModel) probe(ctx context.Context, fz schema.Falsifier) ([]int32, error) {
	if m.tokErr != nil {
		return nil, m.tokErr
	}
	ids, err := generate.PromptTokens(ctx, m.tok, nil, paramStringOr(fz, "prompt", defaultProbe), true)
	if err != nil {
		return nil, err
	}
	if n := paramIntOr(fz, "tokens", defaultProbeTokens); n > 0 && len(ids) > n {
		ids = ids[:n]
	}
	if len(ids) == 0 {
		return nil, errors.New("the probe prompt has no tokens")
	}
	return ids, nil
}

// parityWith compares backend's logits with the reference's (or, for
// gpu_cpu, params.against's) at every position of the probe. The reference
// is consulted through c.CallRef, so a withdrawn reference refuses; so does
// any answer that is not usable (an error, too few rows, rows of the wrong
// length, a NaN or an Inf). Only then does it run the backend. sloppy is
// the planted defect of Engines.SloppyParity.
func parityWith(ctx context.Context, c *Check, m *engineModel, backend string, sloppy bool) verdict.Outcome {
	fz := c.F
	toks, err := m.probe(ctx, fz)
	if err != nil {
		return verdict.FromError(RefusalModel, err, "the probe prompt cannot be tokenized")
	}
	// The judge: the reference, unless the falsifier names another engine
	// in params.against (gpu_cpu holds a device engine to the cpu engine;
	// qa sets params.reference on every falsifier, so the judge has a name
	// of its own).
	judge := paramStringOr(fz, "against", m.reference)
	var want generate.LogitsResult
	err = c.CallRef("reference engine", func() error {
		var err error
		if judge == m.reference {
			want, err = m.refLogits(ctx, RefNumerics(fz, backend), toks)
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
		return verdict.RefusedBy(RefusalReference, c.By(), nil, "the reference %s gave no usable logits, so nothing can be compared: %v", m.reference, err)
	}
	// A mixture of experts: the positions where the reference's router is
	// near a tie are left out of the aggregates (and reported).
	ties, judgeRecs, used, err := NearTiesTrace(ctx, c, toks, m.router(RefNumerics(fz, backend)))
	if err != nil {
		return verdict.RefusedBy(RefusalReference, c.By(), nil, "the reference %s's router could not be traced, so its near-ties are unknown: %v", m.reference, err)
	}
	got, err := m.logits(ctx, backend, toks)
	if err != nil {
		return verdict.FromError(RefusalBackend, err, fmt.Sprintf("backend %s", backend))
	}
	if len(got.Logits) != len(toks) {
		return verdict.Failed(nil, "backend %s returned %d logit rows for %d positions", backend, len(got.Logits), len(toks))
	}
	margin := paramFloatOr(fz, "argmax_margin", 0.2)
	wantRows, gotRows := want.Logits, got.Logits
	var flips []oracle.RoutingFlip
	if used > 0 && judge == m.reference { // a mixture of experts: used experts per token
		var o *verdict.Outcome
		if wantRows, gotRows, ties, flips, o = m.routingSegments(ctx, c, backend, toks, want.Logits, got.Logits, ties, judgeRecs, used); o != nil {
			return *o
		}
	}
	rep, err := oracle.Parity{Margin: margin, Ties: ties, Flips: flips}.Judge(gotRows, wantRows)
	if err != nil {
		return verdict.Failed(nil, "backend %s vs %s: %v", backend, m.reference, err)
	}
	// Two engines in different numerics (gpu_cpu: cuda multiplies F32
	// activations, cpu rounds them as ggml does) are judged by what
	// separates them beyond the numerics: the reference in each engine's
	// numerics measures that gap on the same positions (oracle's Beyond).
	nb, nj := RefNumerics(fz, backend), RefNumerics(fz, judge)
	if judge != m.reference && nb != nj {
		var gap oracle.ParityReport
		err := c.CallRef("reference engine", func() error {
			var rows [2][][]float32
			for i, n := range []string{nb, nj} {
				r, err := m.refLogits(ctx, n, toks)
				if err == nil {
					err = usable(r, len(toks))
				}
				if err != nil {
					return err
				}
				rows[i] = r.Logits
			}
			var err error
			gap, err = oracle.Parity{Margin: margin, Ties: ties}.Judge(rows[0], rows[1])
			return err
		})
		if err != nil {
			return verdict.RefusedBy(RefusalReference, c.By(), nil, "the gap between %s's and %s's numerics needs the reference %s in both, which gave no usable logits: %v", backend, judge, m.reference, err)
		}
		if rep, err = rep.Beyond(gap); err != nil {
			return verdict.Failed(nil, "backend %s vs %s: %v", backend, judge, err)
		}
	}
	// On a model that amplifies rounding, two correct engines in ggml's
	// numerics are apart by the model's own noise: the gate judges what
	// exceeds params.noise_floor times the reference's distance from its
	// jittered twin (oracle's AtFloor), in the numerics of the side that
	// rounds activations.
	var floorNumerics string
	var floorFrom oracle.ParityReport // rep before AtFloor
	if _, ok := fz.Params[ParamNoiseFloor]; ok {
		kf, ok := toFloat(fz.Params[ParamNoiseFloor])
		if !ok || math.IsNaN(kf) || kf < 0 {
			return verdict.RefusedBy(verdict.CodeNoContract, c.By(), nil, "params.%s %v: want a number ≥ 0 (how many times the model's noise floor the gate allows)", ParamNoiseFloor, fz.Params[ParamNoiseFloor])
		}
		n := nj
		if jitterTwin(n) == "" {
			n = nb
		}
		if twin := jitterTwin(n); twin != "" && kf > 0 {
			var floor oracle.ParityReport
			err := c.CallRef("reference engine", func() error {
				var rows [2][][]float32
				for i, m2 := range []string{n, twin} {
					r, err := m.refLogits(ctx, m2, toks)
					if err == nil {
						err = usable(r, len(toks))
					}
					if err != nil {
						return err
					}
					rows[i] = r.Logits
				}
				var err error
				floor, err = oracle.Parity{Margin: margin, Ties: ties}.Judge(rows[1], rows[0])
				return err
			})
			switch {
			case err != nil && sloppy:
				// the planted defect goes on without the floor, too
			case err != nil:
				return verdict.RefusedBy(RefusalReference, c.By(), nil, "the noise floor needs the reference %s in %s numerics and its jittered twin, which gave no usable logits: %v", m.reference, numericsName(n), err)
			default:
				floorFrom = rep
				if rep, err = rep.AtFloor(floor.SeqReport, wantRows, kf); err != nil {
					return verdict.Failed(nil, "backend %s vs %s: %v", backend, judge, err)
				}
				floorNumerics = n
			}
		}
	}
	mismatches := rep.MismatchNotes("reference")
	k := verdict.NewJudge(fz.ID, fz.Thresholds)
	for _, x := range rep.Metrics() {
		k.HoldIf(x.Name, x.Value, x.Unit)
	}
	k.Note("positions", float64(len(toks)), "positions")
	if f := rep.Floor; f != nil {
		// what the judgement subtracted, for the record: the floor, and the
		// engines' distance before it was counted beyond it
		k.Note("noise_floor_min_cosine", f.MinCosine, "")
		k.Note("noise_floor_mean_cosine", f.MeanCosine, "")
		k.Note("noise_floor_max_abs", f.MaxAbs, "logits")
		k.Note("measured_min_cosine", floorFrom.MinCosine, "")
		k.Note("measured_mean_cosine", floorFrom.MeanCosine, "")
		k.Note("measured_argmax_mismatches", float64(len(floorFrom.ArgmaxMismatches)), "count")
	}
	o := k.Outcome(verdict.FirstN(mismatches))
	o.Details = append(mismatches, rep.TieNotes(paramFloatOr(fz, ParamNearTieEps, math.NaN()))...)
	if note := rep.GapNote(numericsName(nb), numericsName(nj)); note != "" {
		o.Details = append(o.Details, note)
	}
	if note := rep.FloorNote(numericsName(floorNumerics)); note != "" {
		o.Details = append(o.Details, note)
	}
	if o.Verdict == verdict.Fail {
		o.Details = append(o.Details, m.firstDivergence(ctx, backend, RefNumerics(fz, backend), toks, paramThreshold(fz, "min_cosine", 0.999)))
	}
	o.Details = append(o.Details, rep.FlipNotes(ParamRouterNoise, paramFloatOr(fz, ParamRouterNoise, math.NaN()))...)
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
func (m *engineModel) routingSegments(ctx context.Context, c *Check, backend string, toks []int32, want, got [][]float32, ties []oracle.NearTie, judgeRecs []oracle.Record, k int) ([][]float32, [][]float32, []oracle.NearTie, []oracle.RoutingFlip, *verdict.Outcome) {
	fz := c.F
	end := func(o verdict.Outcome) ([][]float32, [][]float32, []oracle.NearTie, []oracle.RoutingFlip, *verdict.Outcome) {
		return nil, nil, nil, nil, &o
	}
	if _, ok := fz.Params[ParamRouterNoise]; !ok {
		return end(verdict.RefusedBy(verdict.CodeNoContract, c.By(), nil, "the model routes tokens to experts and params.%s is missing: the contract must name how far two engines' router probabilities may differ", ParamRouterNoise))
	}
	noise := paramFloatOr(fz, ParamRouterNoise, math.NaN())
	eps := paramFloatOr(fz, ParamNearTieEps, math.NaN())
	if math.IsNaN(noise) || noise < 0 || math.IsNaN(eps) || eps < 0 {
		return end(verdict.RefusedBy(verdict.CodeNoContract, c.By(), nil, "params.%s %v and params.%s %v: want numbers ≥ 0", ParamRouterNoise, noise, ParamNearTieEps, eps))
	}
	router := m.router(RefNumerics(fz, backend))
	w := append([][]float32(nil), want...)
	g := append([][]float32(nil), got...)
	var allTies []oracle.NearTie
	var flips []oracle.RoutingFlip
	for from := 0; from < len(toks); {
		seg := toks[from:]
		segTies, jr := ties, judgeRecs // the first sequence's, traced for the near-ties
		if from > 0 {
			var err error
			if jr, _, err = router(ctx, m.path, m.reference, seg); err != nil {
				return end(verdict.RefusedBy(RefusalReference, c.By(), nil, "the reference %s's router could not be traced: %v", m.reference, err))
			}
			sw, err := m.refLogits(ctx, RefNumerics(fz, backend), seg)
			if err == nil {
				err = usable(sw, len(seg))
			}
			if err != nil {
				return end(verdict.RefusedBy(RefusalReference, c.By(), nil, "the reference %s gave no usable logits for the positions after a routing flip: %v", m.reference, err))
			}
			sg, err := m.logits(ctx, backend, seg)
			if err != nil {
				return end(verdict.FromError(RefusalBackend, err, fmt.Sprintf("backend %s", backend)))
			}
			if len(sg.Logits) != len(seg) {
				return end(verdict.Failed(nil, "backend %s returned %d logit rows for %d positions", backend, len(sg.Logits), len(seg)))
			}
			copy(w[from:], sw.Logits)
			copy(g[from:], sg.Logits)
			if segTies, err = oracle.RouterNearTies(jr, len(seg), k, eps); err != nil {
				return end(verdict.RefusedBy(RefusalReference, c.By(), nil, "the reference %s's router: %v", m.reference, err))
			}
		}
		gr, _, err := router(ctx, m.path, backend, seg)
		if err != nil {
			return end(verdict.FromError(RefusalBackend, err, fmt.Sprintf("backend %s's router", backend)))
		}
		fl, err := oracle.RoutingFlips(jr, gr, len(seg), k)
		if err != nil {
			return end(verdict.Failed(nil, "backend %s's routing against %s's: %v", backend, m.reference, err))
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
			return end(unexcusedFlip(backend, f, noise))
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
	h, err := loaded.Open(model)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	tok, err := h.Tokenizer()
	if err != nil {
		return nil, err
	}
	return greedy(ctx, Engines{}.withDefaults(), model, tok, backend, "", prompts, n, 0)
}

func greedy(ctx context.Context, h Engines, model string, tok *tokenizer.Tokenizer, backend, numerics string, prompts []string, n, threads int) ([]golden.Case, error) {
	var out []golden.Case
	for _, p := range prompts {
		ids, err := generate.PromptTokens(ctx, tok, nil, p, true)
		if err != nil {
			return nil, err
		}
		res, err := h.Run(ctx, generate.Options{Model: model, Backend: backend, Numerics: numerics, Prompt: p, Raw: true, MaxTokens: n,
			IgnoreEOS: true, Threads: threads})
		if err != nil {
			return nil, err
		}
		if res.PromptTokens != len(ids) || len(res.TokenIDs) != n {
			return nil, fmt.Errorf("%s: generate fed %d prompt tokens and produced %d, expected %d and %d", backend, res.PromptTokens, len(res.TokenIDs), len(ids), n)
		}
		seq := append(append([]int32(nil), ids...), res.TokenIDs[:n-1]...)
		lg, err := h.Logits(ctx, generate.LogitsOptions{Model: model, Backend: backend, Numerics: numerics, Tokens: seq, Threads: threads})
		if err != nil {
			return nil, err
		}
		if err := usable(lg, len(seq)); err != nil {
			return nil, fmt.Errorf("%s: %w", backend, err)
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
func (m *engineModel) goldenGate(ctx context.Context, c *Check, backend string) verdict.Outcome {
	fz := c.F
	numerics := RefNumerics(fz, backend) // the reference's, as judge and as the measure of the backend's distance
	var gf *golden.File
	var ok bool
	if err := c.CallRef("golden file", func() (err error) { gf, ok, err = m.eng.Golden(m.sha); return err }); err != nil {
		return verdict.RefusedBy(RefusalReference, c.By(), nil, "the golden store cannot be read: %v", err)
	}
	var cases []golden.Case
	var judge string
	switch {
	case ok:
		cases, judge = gf.Cases, "golden "+gf.Model
	case backend == m.reference:
		return verdict.RefusedBy(RefusalNoGolden, c.By(), nil, "no reviewed golden for this model (sha256 %.12s…); the reference %s is itself the judge of the other backends' output", m.sha, backend)
	default:
		if m.tokErr != nil {
			return TokenizerOutcome(m.tokErr)
		}
		err := c.CallRef("reference engine", func() error {
			v, err := m.h.Memo("greedy|"+m.reference+"|"+numerics, func() (any, error) {
				return greedy(ctx, m.eng, m.path, m.tok, m.reference, numerics,
					paramStringsOr(fz, "prompts", defaultGreedyPrompts), paramIntOr(fz, "tokens", defaultGreedyN), m.threads)
			})
			if err == nil {
				cases = v.([]golden.Case)
			}
			return err
		})
		if err != nil {
			return verdict.RefusedBy(RefusalReference, c.By(), nil, "the reference %s could not produce the output to compare with: %v", m.reference, err)
		}
		judge = "the reference " + m.reference + inNumerics(numerics) + " (no reviewed golden for this model)"
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
	floor := paramFloatOr(fz, "noise_margin", 1e-3)
	noise := paramFloatOr(fz, "logit_noise", math.NaN())
	if math.IsNaN(noise) || noise < 0 {
		return verdict.RefusedBy(verdict.CodeNoContract, c.By(), nil, "falsifier %s gives no params.logit_noise (the numerical noise the gate allows): the gate cannot decide a step without one", fz.ID)
	}
	cut := math.Max(floor, 2*noise)
	var diffs []string
	compared, forced, noisy := 0, 0, 0
	maxDelta, nearMax := 0.0, 0.0 // nearMax: over the cases within the noise
	// farCase is a case further than the noise from the reference: its
	// worst step, the judge's sequence and the reference's logits over it.
	type farCase struct {
		i, at int
		d     float64
		seq   []int32
		want  [][]float32
		steps []int // the sequence's positions of the case's steps
		// the reference's router over seq and the experts used per token
		// (0: no experts), for the twin's own routing flips
		router []oracle.Record
		k      int
	}
	var far []farCase
	var flipNotes []string
	for i, gc := range cases {
		n := len(gc.TokenIDs)
		res, err := m.eng.Run(ctx, generate.Options{Model: m.path, Backend: backend, Prompt: gc.Prompt, Raw: true,
			MaxTokens: n, IgnoreEOS: true, Threads: m.threads, Log: m.log})
		if err != nil {
			return verdict.FromError(RefusalBackend, err, fmt.Sprintf("backend %s, case %d", backend, i))
		}
		if res.PromptTokens != len(gc.PromptIDs) {
			diffs = append(diffs, fmt.Sprintf("case %d %q: the prompt is %d tokens, %s has %d", i, gc.Prompt, res.PromptTokens, judge, len(gc.PromptIDs)))
			continue
		}
		seq := append(append([]int32(nil), gc.PromptIDs...), gc.TokenIDs[:n-1]...)
		// A mixture of experts: where noise explains it, the backend may
		// route a position of the judge's sequence to other experts than
		// the reference; from there on its logits are another computation's,
		// and the case's steps there are not compared (reported).
		limit := len(seq)
		var jr []oracle.Record
		var used int
		if backend != m.reference {
			at, note, recs, k, o := m.goldenFlip(ctx, c, backend, numerics, seq)
			jr, used = recs, k
			if o != nil {
				return *o
			}
			if note != "" {
				limit = at
				flipNotes = append(flipNotes, fmt.Sprintf("case %d %q: %s; its steps from there on (%d of %d) are not compared", i, gc.Prompt, note, n-max(0, at-(len(gc.PromptIDs)-1)), n))
			}
		}
		stepIn := func(k int) bool { return len(gc.PromptIDs)-1+k < limit }
		got, err := m.logits(ctx, backend, seq)
		if err != nil {
			return verdict.FromError(RefusalBackend, err, fmt.Sprintf("backend %s, case %d", backend, i))
		}
		if len(got.Logits) != len(seq) {
			return verdict.Failed(nil, "backend %s returned %d logit rows for %d positions", backend, len(got.Logits), len(seq))
		}
		// How far the backend's logits are from the reference's at each step
		// of the judge's sequence: held to the contract's noise, reported.
		delta := make([]float64, n)
		if backend != m.reference {
			var want generate.LogitsResult
			if err := c.CallRef("reference engine", func() error {
				var err error
				if want, err = m.refLogits(ctx, numerics, seq); err != nil {
					return err
				}
				return usable(want, len(seq))
			}); err != nil {
				return verdict.RefusedBy(RefusalReference, c.By(), nil, "the reference %s cannot measure how far %s is from it: %v", m.reference, backend, err)
			}
			worst, at := 0.0, 0
			for k := range n {
				if !stepIn(k) {
					break
				}
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
				var steps []int
				for k := 0; k < n && stepIn(k); k++ {
					steps = append(steps, len(gc.PromptIDs)-1+k)
				}
				far = append(far, farCase{i: i, at: at, d: worst, seq: seq, want: want.Logits, steps: steps, router: jr, k: used})
			} else {
				nearMax = math.Max(nearMax, worst)
			}
		}
		for k, want := range gc.TokenIDs {
			if gc.Margins[k] < cut {
				noisy++
				break
			}
			if !stepIn(k) {
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
			if gc.Margins[k] < cut || !stepIn(k) {
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
	// On a model that amplifies rounding (params.noise_floor), a case
	// further than the noise from the reference is measured again beyond
	// that many times the model's own noise there: the reference against
	// its jittered twin on the same sequence (the largest logit difference
	// over the case's steps), as the parity gate judges its cosines.
	judged, floorMax := maxDelta, 0.0
	if kf := paramFloatOr(fz, ParamNoiseFloor, 0); len(far) > 0 && kf > 0 && jitterTwin(numerics) != "" {
		judged = nearMax
		for fi, f := range far {
			var twin generate.LogitsResult
			err := c.CallRef("reference engine", func() error {
				var err error
				if twin, err = m.refLogits(ctx, jitterTwin(numerics), f.seq); err != nil {
					return err
				}
				return usable(twin, len(f.seq))
			})
			if err != nil {
				return verdict.RefusedBy(RefusalReference, c.By(), nil, "the noise floor needs the reference %s in %s numerics and its jittered twin, which gave no usable logits: %v", m.reference, numericsName(numerics), err)
			}
			// On a mixture of experts the twin may itself route a position
			// to other experts than the reference: its distance from there on
			// is another computation's, not noise, and does not count.
			twinEnd, err := m.twinFlip(ctx, c, numerics, f.seq, f.router, f.k)
			if err != nil {
				return verdict.RefusedBy(RefusalReference, c.By(), nil, "the noise floor needs the routers of the reference %s and its jittered twin: %v", m.reference, err)
			}
			fm := 0.0
			for _, p := range f.steps {
				if p >= twinEnd {
					break
				}
				d, _, err := oracle.MaxAbs(twin.Logits[p], f.want[p])
				if err != nil {
					return verdict.Failed(nil, "the noise floor, case %d: %v", f.i, err)
				}
				fm = math.Max(fm, d)
			}
			floorMax = math.Max(floorMax, fm)
			far[fi].d = math.Max(0, f.d-kf*fm)
		}
		for _, f := range far {
			judged = math.Max(judged, f.d)
		}
	}
	var farLines []string
	for _, f := range far {
		if f.d > noise {
			farLines = append(farLines, fmt.Sprintf("case %d %q: at step %d the logits are %.3g from the reference's, beyond the contract's noise %g", f.i, cases[f.i].Prompt, f.at, f.d, noise))
		}
	}
	k := verdict.NewJudge(fz.ID, fz.Thresholds)
	k.Note("cases", float64(len(cases)), "count")
	k.Note("compared_tokens", float64(compared), "tokens")
	k.Note("forced_steps", float64(forced), "tokens")
	k.Note("cases_cut_at_noise", float64(noisy), "count")
	k.Note("routing_flips", float64(len(flipNotes)), "count")
	k.Note("noise_cut", cut, "")
	k.Hold("mismatches", float64(len(diffs)), "count")
	k.Hold("max_logit_delta", judged, "")
	if judged != maxDelta {
		k.Note("measured_max_logit_delta", maxDelta, "")
		k.Note("noise_floor_max_abs", floorMax, "logits")
	}
	out := k.Outcome(verdict.FirstN(append(append([]string(nil), diffs...), farLines...)))
	out.Details = append(append(diffs, farLines...), flipNotes...)
	if out.Verdict == verdict.Pass && compared+forced == 0 {
		return verdict.RefusedBy(RefusalUndecided, c.By(), k.Values, "undecided: no step could be decided; every judge margin is below %.3g (twice the contract's numerical noise %g, or the floor %g), and %s is within that noise of the reference", cut, noise, floor, backend)
	}
	return out
}

// goldenFlip finds, on a mixture of experts, the first position of seq
// that backend routes to other experts than the reference (in numerics):
// it returns that position and a note when noise explains the flip
// (oracle.RoutingFlip.Excused with params.router_noise, the parity gate's
// rule), a failing outcome when it does not, and a note "" (with
// len(seq)) for a model without experts or without a flip; and the
// reference's router records over seq with the experts used per token (0
// without experts), which the noise floor's twin is compared with.
func (m *engineModel) goldenFlip(ctx context.Context, c *Check, backend, numerics string, seq []int32) (int, string, []oracle.Record, int, *verdict.Outcome) {
	fz := c.F
	router := m.router(numerics)
	var jr []oracle.Record
	var k int
	err := c.CallRef("reference engine router", func() (err error) { jr, k, err = router(ctx, m.path, m.reference, seq); return err })
	if err != nil {
		o := verdict.RefusedBy(RefusalReference, c.By(), nil, "the reference %s's router could not be traced, so routing flips are unknown: %v", m.reference, err)
		return 0, "", nil, 0, &o
	}
	if k == 0 {
		return len(seq), "", nil, 0, nil
	}
	noise := paramFloatOr(fz, ParamRouterNoise, math.NaN())
	if math.IsNaN(noise) || noise < 0 {
		o := verdict.RefusedBy(verdict.CodeNoContract, c.By(), nil, "the model routes tokens to experts and params.%s is missing or not a number ≥ 0: the contract must name how far two engines' router probabilities may differ", ParamRouterNoise)
		return 0, "", nil, 0, &o
	}
	gr, _, err := router(ctx, m.path, backend, seq)
	if err != nil {
		o := verdict.FromError(RefusalBackend, err, fmt.Sprintf("backend %s's router", backend))
		return 0, "", nil, 0, &o
	}
	fl, err := oracle.RoutingFlips(jr, gr, len(seq), k)
	if err != nil {
		o := verdict.Failed(nil, "backend %s's routing against %s's: %v", backend, m.reference, err)
		return 0, "", nil, 0, &o
	}
	if len(fl) == 0 {
		return len(seq), "", jr, k, nil
	}
	if f := fl[0]; !f.Excused(noise) {
		o := unexcusedFlip(backend, f, noise)
		return 0, "", jr, 0, &o
	}
	return fl[0].Pos, fmt.Sprintf("%s, within params.%s %g", fl[0], ParamRouterNoise, noise), jr, k, nil
}

// unexcusedFlip fails a gate on a routing flip that params.router_noise
// does not explain (engine_parity's and golden_output's rule).
func unexcusedFlip(backend string, f oracle.RoutingFlip, noise float64) verdict.Outcome {
	o := verdict.Failed(nil, "backend %s %s: beyond params.%s %g (a real difference, not noise)", backend, f, ParamRouterNoise, noise)
	o.Details = []string{o.Reason}
	return o
}

// twinFlip is the first position of seq that the reference's jittered twin
// routes to other experts than the reference in numerics, whose router
// records over seq are jr (k experts used per token; 0: none, and len(seq)
// is returned, as it is without such a flip).
func (m *engineModel) twinFlip(ctx context.Context, c *Check, numerics string, seq []int32, jr []oracle.Record, k int) (int, error) {
	if k == 0 {
		return len(seq), nil
	}
	var tr []oracle.Record
	err := c.CallRef("reference engine router", func() (err error) {
		tr, _, err = m.router(jitterTwin(numerics))(ctx, m.path, m.reference, seq)
		return err
	})
	if err != nil {
		return len(seq), err
	}
	fl, err := oracle.RoutingFlips(jr, tr, len(seq), k)
	if err != nil || len(fl) == 0 {
		return len(seq), err
	}
	return fl[0].Pos, nil
}

// firstDivergence bisects a failed parity: both engines run the probe again
// with every op traced, and the first record (computation order, lowest
// position) whose cosine falls below minCos is named, with the command that
// shows every op. It is a detail for whoever investigates, not part of the
// verdict: a trace that cannot be taken says so.
func (m *engineModel) firstDivergence(ctx context.Context, backend, numerics string, toks []int32, minCos float64) string {
	traced := func(b, num string) ([]oracle.Record, error) {
		var rec oracle.Recording
		_, err := m.eng.Logits(ctx, generate.LogitsOptions{Model: m.path, Backend: b, Tokens: toks,
			Threads: m.threads, Log: m.log, Trace: rec.Trace(), Numerics: num})
		return rec.Records, err
	}
	want, err := traced(m.reference, numerics)
	if err != nil {
		return fmt.Sprintf("first divergent op: not traced (%s: %v)", m.reference, err)
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
	how := fmt.Sprintf("apr diff %s --backend %s --against %s%s --tokens %s --min-cosine %g shows every op", m.path, backend, m.reference, num, joinTokens(toks), minCos)
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

func paramStringsOr(f schema.Falsifier, name string, def []string) []string {
	l, ok := f.Params[name].([]any)
	if !ok {
		return def
	}
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return def
	}
	return out
}
