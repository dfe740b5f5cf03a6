package falsify_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/verdict"
)

// runKLD runs falsifier id with params.kld_base = base.
func runKLD(t *testing.T, id, model, base string) falsify.Result {
	t.Helper()
	rep, err := falsify.Run(context.Background(), falsify.Options{IDs: []string{id}, Model: model, Seed: 1,
		Set: embedded(t), Registry: fullRegistry(), Params: map[string]any{falsify.ParamKLDBase: base}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, not run %v", len(rep.Results), rep.NotRun)
	}
	return rep.Results[0]
}

// TestKLDFalsifier: the model a base file was made for passes (the fixture's
// Q4_K_M against its F32 base); a planted defect — another model of the same
// vocabulary (llama-tiny's base against qwen2-tiny) — fails on the
// contract's thresholds; a missing base file refuses; without a base the
// falsifier does not run.
func TestKLDFalsifier(t *testing.T) {
	fx := testutil.Fixtures(t)
	qwen2 := filepath.Join(fx, "models/synth/qwen2-tiny-Q4_K_M.gguf")
	if r := runKLD(t, "qwen2.kld", qwen2, filepath.Join(fx, "kld/qwen2-tiny-Q4_K_M.kld")); r.Verdict != verdict.Pass || r.Measured["mean_kld"] > 0.05 {
		t.Errorf("qwen2 Q4_K_M against its base: %s %s %v", r.Verdict, r.Reason, r.Measured)
	}
	if r := runKLD(t, "qwen2.kld", qwen2, filepath.Join(fx, "kld/llama-tiny-Q4_K_M.kld")); r.Verdict != verdict.Fail || !strings.Contains(r.Reason, "mean_kld") {
		t.Errorf("qwen2 against llama's base: %s %q, want fail on mean_kld", r.Verdict, r.Reason)
	}
	if r := runKLD(t, "qwen2.kld", qwen2, filepath.Join(t.TempDir(), "missing.kld")); r.Verdict != verdict.Refused {
		t.Errorf("missing base: %s %q, want refused", r.Verdict, r.Reason)
	}
	rep, err := falsify.Run(context.Background(), falsify.Options{Model: qwen2, Seed: 1, Set: embedded(t), Registry: fullRegistry(),
		IDs: []string{"model.qwen2"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.ID == "qwen2.kld" {
			t.Errorf("qwen2.kld ran without a base file: %s", r.Verdict)
		}
	}
}
