package cli

import (
	"strings"
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/verdict"
)

// TestApplyVerdicts: a failing kernel_dot marks every kernel of its type
// that this machine runs as failed and leaves the ones it cannot run "not
// run"; a falsifier the report lists as not run, and one it does not list
// at all, are "not run" with the reason, never pass.
func TestApplyVerdicts(t *testing.T) {
	set, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	rows := kernelRows(set)
	rep := &falsify.Report{
		Results: []falsify.Result{
			{ID: "q8_0.kernel_dot", Verdict: verdict.Fail, Reason: "planted"},
			{ID: "q8_0.dequant_exact", Verdict: verdict.Refused, RemovedBy: "someone", Reason: "planted refusal"},
			{ID: "q8_0.dequant_layout", Verdict: verdict.Pass},
		},
		NotRun: []falsify.NotRun{{ID: "q8_0.quant_roundtrip", Why: "planted why"}},
	}
	applyVerdicts(rows, rep)
	saw := map[bool]bool{}
	for _, r := range rows {
		if r.KernelContract != "kernel.q8_0" {
			continue
		}
		saw[r.Runnable] = true
		for _, f := range r.Falsifiers {
			want, reason := "not run", ""
			switch f.ID {
			case "q8_0.kernel_dot":
				want, reason = "fail", "planted"
				if r.Backend == "cuda" {
					want, reason = "not run", "TestProducts"
				} else if !r.Runnable {
					want, reason = "not run", "cannot run"
				}
			case "q8_0.dequant_exact":
				want, reason = "refused", "someone: planted refusal"
			case "q8_0.dequant_layout":
				want = "pass"
			case "q8_0.quant_roundtrip":
				reason = "planted why"
			default:
				reason = "did not select"
			}
			if f.Verdict != want || !strings.Contains(f.Reason, reason) {
				t.Errorf("%s (runnable %v): %s = %q (%q), want %q (…%s…)", r.Contract, r.Runnable, f.ID, f.Verdict, f.Reason, want, reason)
			}
		}
		if r.Runnable && r.Backend != "cuda" && !strings.Contains(r.FalsifierState, "1 fail") {
			t.Errorf("%s: summary %q does not count the fail", r.Contract, r.FalsifierState)
		}
	}
	if !saw[true] {
		t.Error("no runnable Q8_0 kernel in the registry")
	}
}
