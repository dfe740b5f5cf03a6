package falsify

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/oracle"
)

// RouterFunc runs engine backend over tokens from position 0 and returns
// its router probabilities (trace records of op model.OpRouter, every layer
// and position) with the number of experts each token uses; a model without
// experts gives (nil, 0, nil). RouterProbs in apr.
type RouterFunc func(ctx context.Context, modelPath, backend string, tokens []int32) ([]oracle.Record, int, error)

// RouterProbs is the RouterFunc of apr: it opens backend on the model, feeds
// tokens in one Eval (every position's logits, so that no engine may skip a
// layer of a position) with a trace hook that keeps model.OpRouter, and
// returns what the hook saw. A model without experts runs nothing.
func RouterProbs(ctx context.Context, modelPath, backend string, tokens []int32) ([]oracle.Record, int, error) {
	return routerProbs(ctx, modelPath, backend, "", tokens)
}

// RouterProbsIn is RouterProbs with backend reference (only) opened in a
// declared numerics (model.OpenOptions.Numerics), so that the router a
// judge traces is the one whose logits it compares.
func RouterProbsIn(reference, numerics string) RouterFunc {
	return func(ctx context.Context, modelPath, backend string, tokens []int32) ([]oracle.Record, int, error) {
		if backend != reference {
			return routerProbs(ctx, modelPath, backend, "", tokens)
		}
		return routerProbs(ctx, modelPath, backend, numerics, tokens)
	}
}

func routerProbs(ctx context.Context, modelPath, backend, numerics string, tokens []int32) ([]oracle.Record, int, error) {
	f, err := gguf.Open(modelPath)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	spec, err := model.Load(f)
	if err != nil {
		return nil, 0, err
	}
	if spec.NExpert == 0 {
		return nil, 0, nil
	}
	eng, err := model.OpenBackend(backend, f, spec, model.OpenOptions{Numerics: numerics})
	if err != nil {
		return nil, 0, err
	}
	defer eng.Close()
	if up, ok := eng.(model.Uploader); ok {
		if err := up.Upload(); err != nil {
			return nil, 0, fmt.Errorf("%s: upload: %w", backend, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	sess, err := eng.NewSession(len(tokens))
	if err != nil {
		return nil, 0, err
	}
	rec := oracle.Recording{Ops: map[string]bool{model.OpRouter: true}}
	sess.SetTrace(rec.Trace())
	if _, err := sess.Eval(tokens, true); err != nil {
		return nil, 0, err
	}
	return rec.Records, spec.NExpertUsed, nil
}

// ParamNearTieEps is the param naming the router near-tie epsilon of the
// cosine kind (contracts: tolerances.router_near_tie).
const ParamNearTieEps = "near_tie_eps"

// experts is the model's expert count as its GGUF states it (0: dense).
func experts(f *gguf.File) uint64 {
	v, ok := f.Get(f.Architecture() + ".expert_count")
	if !ok {
		return 0
	}
	n, _ := v.Uint()
	return n
}

// NearTies is the cosine kind's near-tie rule for c's model: for a mixture
// of experts, the reference engine (params.reference, default "ref") runs
// tokens with its router traced — consulted as reference "reference engine
// router" through c.CallRef, so a withdrawn or failing one refuses — and
// oracle.RouterNearTies picks the positions whose k-th and (k+1)-th expert
// probabilities are less than params.near_tie_eps apart at any layer. The
// judge's router decides, never the engine under test's. A dense model has
// no near-ties and consults nothing. router nil means RouterProbs.
func NearTies(ctx context.Context, c *Check, tokens []int32, router RouterFunc) ([]oracle.NearTie, error) {
	ties, _, _, err := NearTiesTrace(ctx, c, tokens, router)
	return ties, err
}

// NearTiesTrace is NearTies that also returns the judge's router records
// it decided them on and the experts used per token (nil and 0 for a dense
// model), for a caller that compares another engine's routing with them.
func NearTiesTrace(ctx context.Context, c *Check, tokens []int32, router RouterFunc) ([]oracle.NearTie, []oracle.Record, int, error) {
	f, err := c.Model()
	if err != nil {
		return nil, nil, 0, err
	}
	if experts(f) == 0 {
		return nil, nil, 0, nil
	}
	if _, ok := c.Param(ParamNearTieEps); !ok {
		return nil, nil, 0, c.Refuse("the model routes tokens to experts and params.%s is missing: the contract must name the router near-tie tolerance", ParamNearTieEps)
	}
	eps, err := c.ParamFloat(ParamNearTieEps, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	if math.IsNaN(eps) || eps < 0 {
		return nil, nil, 0, c.Refuse("params.%s is %v, want a number ≥ 0", ParamNearTieEps, eps)
	}
	judge, err := c.ParamString("reference", "ref")
	if err != nil {
		return nil, nil, 0, err
	}
	if router == nil {
		router = RouterProbs
	}
	var ties []oracle.NearTie
	var recs []oracle.Record
	var k int
	err = c.CallRef("reference engine router", func() error {
		var err error
		recs, k, err = router(ctx, c.ModelPath(), judge, tokens)
		if err != nil {
			return err
		}
		if k == 0 {
			return fmt.Errorf("%s reports no experts used for a model with %d experts", judge, experts(f))
		}
		ties, err = oracle.RouterNearTies(recs, len(tokens), k, eps)
		return err
	})
	return ties, recs, k, err
}

// NearTieNotes describes each excluded near-tie with what the comparison
// measured there (rep.Positions), for a result's details.
func NearTieNotes(ties []oracle.NearTie, rep oracle.SeqReport, eps float64) []string {
	out := make([]string, 0, len(ties))
	for _, t := range ties {
		s := rep.Positions[t.Pos]
		out = append(out, fmt.Sprintf("position %d excluded: router near-tie at layer %d (k-th minus (k+1)-th expert probability %.3g < %g); there cosine %.9f, argmax %d vs %d",
			t.Pos, t.Layer, t.Gap, eps, s.Cosine, s.ArgmaxGot, s.ArgmaxWant))
	}
	return out
}

// ExcludedMinCosine is the lowest cosine among the excluded positions (1
// when none is excluded), a measured value for the record.
func ExcludedMinCosine(rep oracle.SeqReport) float64 {
	m := 1.0
	for _, p := range rep.Excluded {
		m = math.Min(m, rep.Positions[p].Cosine)
	}
	return m
}

// ParamRouterNoise is the param naming how far two engines' router
// probabilities may differ where a routing flip is excused (contracts:
// tolerances.router_flip_noise).
const ParamRouterNoise = "router_noise"

// RoutingFlip is a position where an engine under test routes a token to
// other experts than the judge: the lowest layer where the top-k sets
// differ, the judge's k-th minus (k+1)-th probability there (Gap) and the
// largest difference between the two engines' probabilities at that layer
// and position (Diff).
type RoutingFlip struct {
	Pos, Layer int
	Gap, Diff  float64
}

// Excused reports whether noise explains the flip: the engines' router
// probabilities differ by at most noise there, and the judge's gap is
// within twice that difference (each of the two experts may move by Diff).
func (f RoutingFlip) Excused(noise float64) bool {
	return f.Diff <= noise && f.Gap <= 2*f.Diff
}

func (f RoutingFlip) String() string {
	return fmt.Sprintf("position %d: routed to other experts than the reference at layer %d (reference k-th minus (k+1)-th probability %.3g, the engines' probabilities differ by up to %.3g there)",
		f.Pos, f.Layer, f.Gap, f.Diff)
}

// RoutingFlips compares an engine's router records (got) with the judge's
// over the same positions, k experts used per token, and returns the
// positions whose top-k expert sets differ, in position order, each at its
// lowest such layer. Records missing on either side, of different widths,
// or with NaN probabilities are an error (oracle.ErrTrace): a flip that was
// not looked for cannot be ruled out.
func RoutingFlips(judge, got []oracle.Record, positions, k int) ([]RoutingFlip, error) {
	type key struct{ layer, pos int }
	index := func(recs []oracle.Record, who string) (map[key][]float32, error) {
		m := map[key][]float32{}
		for _, r := range recs {
			if r.Op != model.OpRouter {
				continue
			}
			if r.Pos < 0 || r.Pos >= positions {
				return nil, fmt.Errorf("%w: %s router record at layer %d has position %d, outside [0, %d)", oracle.ErrTrace, who, r.Layer, r.Pos, positions)
			}
			m[key{r.Layer, r.Pos}] = r.Values
		}
		return m, nil
	}
	jm, err := index(judge, "reference")
	if err != nil {
		return nil, err
	}
	gm, err := index(got, "engine")
	if err != nil {
		return nil, err
	}
	if len(jm) != len(gm) {
		return nil, fmt.Errorf("%w: the reference traced %d router vectors, the engine %d", oracle.ErrTrace, len(jm), len(gm))
	}
	lowest := map[int]RoutingFlip{}
	for kk, jv := range jm {
		gv, ok := gm[kk]
		if !ok {
			return nil, fmt.Errorf("%w: the engine traced no router at layer %d position %d", oracle.ErrTrace, kk.layer, kk.pos)
		}
		if len(gv) != len(jv) || len(jv) <= k || k < 1 {
			return nil, fmt.Errorf("%w: router vectors of %d and %d experts at layer %d position %d, %d used", oracle.ErrTrace, len(jv), len(gv), kk.layer, kk.pos, k)
		}
		js, gap := topSet(jv, k)
		gs, _ := topSet(gv, k)
		if math.IsNaN(gap) {
			return nil, fmt.Errorf("%w: NaN router probability at layer %d position %d", oracle.ErrNonFinite, kk.layer, kk.pos)
		}
		if js == gs {
			continue
		}
		diff := 0.0
		for i := range jv {
			d := math.Abs(float64(jv[i]) - float64(gv[i]))
			if math.IsNaN(d) {
				return nil, fmt.Errorf("%w: NaN router probability at layer %d position %d", oracle.ErrNonFinite, kk.layer, kk.pos)
			}
			diff = max(diff, d)
		}
		if f, ok := lowest[kk.pos]; !ok || kk.layer < f.Layer {
			lowest[kk.pos] = RoutingFlip{Pos: kk.pos, Layer: kk.layer, Gap: gap, Diff: diff}
		}
	}
	out := make([]RoutingFlip, 0, len(lowest))
	for p := 0; p < positions; p++ {
		if f, ok := lowest[p]; ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// topSet is the set of the k largest entries (oracle.TopK, as text) and
// the k-th minus (k+1)-th value.
func topSet(v []float32, k int) (string, float64) {
	top := oracle.TopK(v, k+1)
	set := append([]int(nil), top[:k]...)
	sort.Ints(set)
	return fmt.Sprint(set), float64(v[top[k-1]]) - float64(v[top[k]])
}
