package ref_test

import (
	"path/filepath"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/schema"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/ref"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/oracle"
)

// TestQwen35MoELogitsParity runs the qwen35moe fixtures (kept apart in
// fixtures/qwen35moe/) on the reference and compares every position's
// logits with llama.cpp's under the model contract's logits_parity
// falsifier of the file's tier, router near-ties excluded and reported.
// The argmax rule must hold. The cosine thresholds are reported: where the
// reference misses its tier the case reads SKIP (not a pass), because plain
// FP32 meets these files only as far as ggml's activation rounding, which
// the gated norms amplify, allows (measured: F16 1 − min 1.5e-5; Q8_0 and
// Q4_K_M 1 − min ≈ 0.1 at routing flips that the activation noise causes
// beyond the near-tie epsilon; engine/cpu, which rounds as ggml does, meets
// every tier on the same files: TestQwen35MoEAgainstLlamaCpp).
func TestQwen35MoELogitsParity(t *testing.T) { qwen35moeParity(t, ref.NumericsPlain) }

// TestQwen35MoELogitsParityDeployed: the reference in ggml's numerics (the
// activations rounded as the deployed kernels round them) meets the
// qwen35moe tiers against llama.cpp on every fixture — asserted, not
// reported: the judge apr qa holds the cpu engine to on quantized files.
func TestQwen35MoELogitsParityDeployed(t *testing.T) { qwen35moeParity(t, ref.NumericsGGML) }

func qwen35moeParity(t *testing.T, numerics string) {
	dir := filepath.Join(testutil.Fixtures(t), "qwen35moe")
	files, err := filepath.Glob(filepath.Join(dir, "expect", "*.logits.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no expect/*.logits.json under %s (%v)", dir, err)
	}
	for _, ef := range files {
		var ex expectLogits
		readJSON(t, ef, &ex)
		t.Run(strings.TrimSuffix(ex.Model, ".gguf"), func(t *testing.T) {
			f, err := gguf.Open(modelPath(dir, ex.Model))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			spec, err := model.Load(f)
			if err != nil {
				t.Fatalf("model.Load(%s): %v", ex.Model, err)
			}
			eng, err := ref.New(f, spec, ref.Options{Numerics: numerics})
			if err != nil {
				t.Fatalf("ref.New(%s): %v", ex.Model, err)
			}
			sess, err := eng.NewSession(len(ex.Tokens))
			if err != nil {
				t.Fatal(err)
			}
			fz := logitsParity(t, f)
			rec := oracle.Recording{Ops: map[string]bool{model.OpRouter: true}}
			sess.SetTrace(rec.Trace())
			got, err := sess.Eval(ex.Tokens, true)
			if err != nil {
				t.Fatalf("Eval(%s): %v", ex.Model, err)
			}
			ties, err := oracle.RouterNearTies(rec.Records, len(ex.Tokens), spec.NExpertUsed, param(t, fz, falsify.ParamNearTieEps))
			if err != nil {
				t.Fatalf("RouterNearTies(%s): %v", ex.Model, err)
			}
			rep, err := oracle.CompareSeqWith(got, ex.Logits, oracle.SeqOptions{Exclude: oracle.TiePositions(ties), ArgmaxMargin: param(t, fz, "argmax_margin")})
			if err != nil {
				t.Fatalf("CompareSeqWith(%s): %v", ex.Model, err)
			}
			for _, tie := range ties {
				t.Logf("position %d excluded: router near-tie at layer %d (gap %.3g); cosine %.6f", tie.Pos, tie.Layer, tie.Gap, rep.Positions[tie.Pos].Cosine)
			}
			t.Logf("%s (%s): 1 − min cosine %.3g, 1 − mean %.3g, %d excluded, argmax %d/%d",
				fz.ID, fz.Params["tier"], 1-rep.MinCosine, 1-rep.MeanCosine, len(rep.Excluded), rep.Compared-len(rep.ArgmaxMismatches), rep.Compared)
			if th := fz.Thresholds["argmax_mismatches"]; !th.Holds(float64(len(rep.ArgmaxMismatches))) {
				t.Errorf("%s: argmax mismatches at %v (%s)", ex.Model, rep.ArgmaxMismatches, fz.ID)
			}
			var missed []string
			for name, v := range map[string]float64{"min_cosine": rep.MinCosine, "mean_cosine": rep.MeanCosine} {
				if th := fz.Thresholds[name]; !th.Holds(v) {
					missed = append(missed, name)
				}
			}
			if len(missed) > 0 && fz.Params["tier"] == falsify.TierFloat {
				// A float file still holds the reference to the tier an
				// engine that rounds activations as ggml does is held to.
				ep := engineParityFloat(t, f)
				for name, v := range map[string]float64{"min_cosine": rep.MinCosine, "mean_cosine": rep.MeanCosine} {
					if th := ep.Thresholds[name]; !th.Holds(v) {
						t.Errorf("%s: %s = %.9g, want %s %g (%s)", ex.Model, name, v, th.Op, th.Value, ep.ID)
					}
				}
			}
			if len(missed) > 0 && numerics == ref.NumericsGGML {
				t.Errorf("%s: the reference in ggml numerics misses %s's %v (1 − min %.3g, 1 − mean %.3g)", ex.Model, fz.ID, missed, 1-rep.MinCosine, 1-rep.MeanCosine)
			} else if len(missed) > 0 {
				t.Skipf("SKIP (not a pass): the reference misses %s's %v on %s", fz.ID, missed, ex.Model)
			}
		})
	}
}

// engineParityFloat is the model contract's engine_parity falsifier of the
// float tier (thresholds: the engine_float tier).
func engineParityFloat(t *testing.T, f *gguf.File) schema.Falsifier {
	t.Helper()
	set, err := contracts.Embedded()
	if err != nil {
		t.Fatalf("contracts.Embedded(): %v", err)
	}
	mc, ok := set.Model(f.Architecture())
	if !ok {
		t.Fatalf("no model contract for %s", f.Architecture())
	}
	for _, fz := range mc.Falsifiers {
		if tr, _ := fz.Params["tier"].(string); fz.Code == "engine_parity" && tr == falsify.TierFloat {
			return fz
		}
	}
	t.Fatalf("contract %s has no float engine_parity falsifier", mc.ID)
	return schema.Falsifier{}
}
