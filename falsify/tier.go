package falsify

import (
	"fmt"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/schema"
)

// Weight tiers of the cosine kind (params.tier): a model contract gives one
// falsifier per tier with that tier's thresholds, and each applies only to
// models of its tier.
const (
	TierFloat     = "float"     // every matrix F32 or F16
	TierQuantized = "quantized" // some matrix in a quantized type, or BF16
)

// WeightTier is f's weight tier: TierQuantized when any matrix (a tensor of
// two or more dimensions) has a quantized type or BF16, TierFloat
// otherwise. BF16 goes with the quantized types because ggml (and apr's
// optimized engine, which computes as ggml does) rounds the activations of
// a BF16 product to bf16's 8 significant bits, an error of the size of Q8
// activation quantization: measured against the FP32 reference, BF16 models
// agree to 1−cos 2e-5…3e-5 (qwen35: 2.2e-3), F16 models to 3e-7…7e-6.
func WeightTier(f *gguf.File) string {
	for _, t := range f.Tensors {
		if len(t.Shape) < 2 {
			continue
		}
		if info, err := quant.Lookup(t.Type); err == nil && (info.Quantized || t.Type == quant.BF16) {
			return TierQuantized
		}
	}
	return TierFloat
}

// TierApplies is an applicability test (AppliesWhen) for code whose
// falsifiers carry params.tier: the falsifier applies when the model is of
// that tier. Without a model it applies (the run then refuses by name).
func TierApplies(c *Check) (bool, string) {
	f, err := c.Model()
	if err != nil {
		return true, ""
	}
	want, _ := c.ParamString("tier", "")
	if got := WeightTier(f); got != want {
		return false, fmt.Sprintf("its thresholds are for %s weights; the model's are %s", want, got)
	}
	return true, ""
}

// VetTier checks (VetWith) that a falsifier's params.tier names a tier.
func VetTier(f schema.Falsifier, _ *contracts.Set) []string {
	if t, _ := f.Params["tier"].(string); t != TierFloat && t != TierQuantized {
		return []string{fmt.Sprintf("param tier is %q, want %q or %q", t, TierFloat, TierQuantized)}
	}
	return nil
}
