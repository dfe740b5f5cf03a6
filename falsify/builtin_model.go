package falsify

import (
	"context"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/refuse"
)

// RegisterBuiltins registers this package's falsifier code in r (Builtins).
// Tests use it to build a registry of their own.
func RegisterBuiltins(r *Registry) {
	r.Register("tensor_contract", KindShape, modelCheck(contracts.TensorRules...),
		Needs(NeedModel), Thresholds("violations"), Refs("model contract"),
		Doc("a GGUF's tensors: present, with the shapes its hyper-parameters imply, of allowed types, nothing else"))
	r.Register("metadata_plausibility", KindShape, modelCheck(contracts.MetadataRules...),
		Needs(NeedModel), Thresholds("violations"), Refs("model contract"),
		Doc("a GGUF's hyper-parameters: present, of their types, in range, consistent"))
	registerModelValues(r)
	RegisterThroughput(r, nil)
	RegisterEngineCodes(r, Engines{})
	registerKernelBuiltins(r)
	registerKLD(r)
	r.Register("failclosed", KindFailClosed, failClosed,
		Thresholds("non_refusals"), Params("target"), VetWith(vetFailClosed), AppliesWhen(failClosedApplies),
		Doc("the target falsifier refuses when its reference is unavailable or errors"))
	r.Register("timing", KindTiming, timingFromGenerate,
		Needs(NeedModel), Thresholds("max_leak_ms", "max_shortfall_ms", "max_excess_ms"), Params("delay_ms"), VetWith(vetTiming),
		Doc("a delay planted in one stage of apr run moves that stage's field only"))
	r.Register("greedy_golden", KindGolden, greedyGolden,
		Needs(NeedModel), Thresholds("mismatched_cases"), Refs("golden store"), AppliesWhen(goldenApplies),
		Doc("greedy generation on the reference engine equals the reviewed golden (package golden) of that model object"))
	r.Register("f2", KindCosine, f2Code,
		Needs(NeedModel), Thresholds("min_cosine", "mean_cosine", "argmax_mismatches"),
		Params("tier", "backend", "numerics", "prompt", "f2_tokens", "argmax_margin", ParamNoiseFloor), Refs("reference engine"), AppliesWhen(f2Applies), VetWith(VetTier),
		Doc("F2: a device engine's logits over the prompt's first tokens and one decode step agree with the reference engine's (in the numerics params.numerics names for params.backend) before it may generate, at the thresholds of the model's weight tier; below them, where params.noise_floor allows for the model's own noise, judged again beyond that many times the reference's distance from its jittered twin"))
	// logits_parity finds llama.cpp's logits under params.expect_dir, else
	// the fixtures' expect/ (so it needs one of them: parityApplies says so).
	r.Register("logits_parity", KindCosine, logitsParity,
		Needs(NeedModel), Thresholds("min_cosine", "mean_cosine", "argmax_mismatches"),
		Params("tier", "argmax_margin", ParamNearTieEps), Refs("llama.cpp logits", "reference engine router"),
		AppliesWhen(parityApplies), VetWith(VetTier),
		Doc("an engine's logits against llama.cpp's recorded logits for the same model object, per position, at the thresholds of the model's weight tier; a mixture of experts' router near-ties excluded and reported"))
}

// modelCheck checks the model against the bound model contract and counts
// the violations of rules.
func modelCheck(rules ...string) Func {
	return func(ctx context.Context, c *Check) error {
		f, err := c.Model()
		if err != nil {
			return err
		}
		if err := c.Ref("model contract"); err != nil {
			return err
		}
		m, ok := c.Set.ModelByID(c.F.Binds)
		if !ok {
			return c.Refuse("binds %s, which is not a model contract", c.F.Binds)
		}
		r, err := contracts.CheckModel(m, f)
		if err != nil {
			return refuse.Wrap(c.By(), err)
		}
		vs := r.Filter(rules...)
		for _, v := range vs {
			c.Note("%s", v)
		}
		c.Measure("violations", float64(len(vs)))
		c.Measure("tensors_checked", float64(r.TensorsChecked))
		c.Measure("constraints_checked", float64(r.ConstraintsChecked))
		return nil
	}
}
