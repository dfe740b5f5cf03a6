package falsify

import (
	"context"
	"fmt"
	"math"

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

// ParamRouterNoise is the param naming how far two engines' router
// probabilities may differ where a routing flip is excused (contracts:
// tolerances.router_flip_noise).
const ParamRouterNoise = "router_noise"
