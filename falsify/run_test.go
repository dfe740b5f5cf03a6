package falsify_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
)

// TestVerdicts pins how a code's outcome becomes a verdict: nothing that
// did not measure what its thresholds judge, or could not run, passes.
func TestVerdicts(t *testing.T) {
	model := testutil.Fixture(t, "models/stories260K.gguf")
	tests := []struct {
		name      string
		fn        falsify.Func
		verdict   verdict.Verdict
		removedBy string
		reason    string
	}{
		{"measures within threshold", func(ctx context.Context, c *falsify.Check) error { c.Measure("violations", 0); return nil },
			verdict.Pass, "", ""},
		{"measures beyond threshold", func(ctx context.Context, c *falsify.Check) error { c.Measure("violations", 2); return nil },
			verdict.Fail, "", "violations = 2, want == 0"},
		{"measures nothing", func(ctx context.Context, c *falsify.Check) error { return nil },
			verdict.Fail, "", "violations was not measured"},
		{"measures NaN", func(ctx context.Context, c *falsify.Check) error { c.Measure("violations", math.NaN()); return nil },
			verdict.Fail, "", "violations is NaN"},
		{"returns Fail", func(ctx context.Context, c *falsify.Check) error { return falsify.Fail("found a defect") },
			verdict.Fail, "", "found a defect"},
		{"refuses", func(ctx context.Context, c *falsify.Check) error { return refuse.New("engine/ref", "no such op") },
			verdict.Refused, "engine/ref", "no such op"},
		{"errors", func(ctx context.Context, c *falsify.Check) error { return errors.New("disk on fire") },
			verdict.Refused, "falsifier:llama.tensor_contract", "disk on fire"},
		{"panics", func(ctx context.Context, c *falsify.Check) error { panic("boom") },
			verdict.Refused, "falsifier:llama.tensor_contract", "panicked: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := falsify.NewRegistry()
			reg.Register("tensor_contract", falsify.KindShape, tt.fn)
			r := runOne(t, reg, embedded(t), "llama.tensor_contract", model, "")
			got := [3]string{string(r.Verdict), r.RemovedBy, r.Reason}
			if r.Verdict != tt.verdict || r.RemovedBy != tt.removedBy || !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("Run(llama.tensor_contract) with a code that %s = %q, want verdict %s, removed_by %q, reason ~%q", tt.name, got, tt.verdict, tt.removedBy, tt.reason)
			}
		})
	}
}

func TestSelection(t *testing.T) {
	set := embedded(t)
	model := testutil.Fixture(t, "models/stories260K.gguf")
	ctx := context.Background()

	// Named explicitly, a falsifier that cannot run is refused, not skipped.
	r := runOne(t, fullRegistry(), set, "llama.tensor_contract", "", "")
	if r.Verdict != verdict.Refused || r.RemovedBy != falsify.ByRunner || !strings.Contains(r.Reason, "--model") {
		t.Errorf("llama.tensor_contract without a model: %s by %q (%s), want refused by falsify naming --model", r.Verdict, r.RemovedBy, r.Reason)
	}
	r = runOne(t, fullRegistry(), set, "qwen3.tensor_contract", model, "")
	if r.Verdict != verdict.Refused || !strings.Contains(r.Reason, `the model is "llama"`) {
		t.Errorf("qwen3.tensor_contract on a llama model: %s (%s), want refused", r.Verdict, r.Reason)
	}

	// Unknown ids are bad input.
	if _, err := falsify.Run(ctx, falsify.Options{IDs: []string{"nonesuch"}, Set: set, Registry: fullRegistry()}); !errors.Is(err, falsify.ErrUnknownID) {
		t.Errorf("Run(nonesuch): error %v, want ErrUnknownID", err)
	}

	// A falsifier whose code is not registered is refused even when not named.
	reg := fullRegistry()
	less := falsify.NewRegistry()
	for _, c := range reg.Codes() {
		if c.ID != "greedy_golden" {
			less.Register(c.ID, c.Kind, c.Run, falsify.Needs(c.Needs...), falsify.AppliesWhen(c.Applies), falsify.Thresholds(c.Thresholds...), falsify.Refs(c.Refs...))
		}
	}
	rep, err := falsify.Run(ctx, falsify.Options{IDs: []string{"model.llama"}, Model: model, Set: set, Registry: less})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]verdict.Verdict{}
	for _, res := range rep.Results {
		got[res.ID] = res.Verdict
	}
	for id, want := range map[string]verdict.Verdict{
		"llama.greedy_golden":            verdict.Refused, // its code is missing: refused, not quietly not run
		"llama.greedy_golden.failclosed": verdict.Refused, // its target cannot run
		"llama.metadata_plausibility":    verdict.Pass,
		"llama.tensor_contract":          verdict.Pass,
	} {
		if got[id] != want {
			t.Errorf("Run(model.llama) without greedy_golden's code: %s = %q, want %s", id, got[id], want)
		}
	}
	// A contract id selects its falsifiers; the ones that do not apply are
	// reported as not run, never as results.
	notRun := map[string]bool{}
	for _, n := range rep.NotRun {
		notRun[n.ID] = true
		if _, ran := got[n.ID]; ran {
			t.Errorf("%s is both a result and not run", n.ID)
		}
	}
	if !notRun["llama.logits_parity"] {
		t.Errorf("Run(model.llama) not run = %v, want llama.logits_parity among them (needs fixtures)", rep.NotRun)
	}
	if n := rep.Summary.Pass + rep.Summary.Fail + rep.Summary.Refused; n != len(rep.Results) {
		t.Errorf("Run(model.llama) summary %+v counts %d, results %d", rep.Summary, n, len(rep.Results))
	}
}

// TestStoriesAllPass is the acceptance run: everything that applies to
// stories260K passes.
func TestStoriesAllPass(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP (not a pass): runs the model; not in -short")
	}
	model := testutil.Fixture(t, "models/stories260K.gguf")
	rep, err := falsify.Run(context.Background(), falsify.Options{Model: model, Seed: time.Now().UnixNano(),
		Set: embedded(t), Registry: fullRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[falsify.Kind]int{}
	for _, r := range rep.Results {
		kinds[r.Kind]++
		if r.Verdict != verdict.Pass {
			t.Errorf("%s: %s (%s) %v", r.ID, r.Verdict, r.Reason, r.Details)
		}
	}
	for _, k := range []falsify.Kind{falsify.KindShape, falsify.KindProperty, falsify.KindTiming, falsify.KindGolden, falsify.KindFailClosed} {
		if kinds[k] == 0 {
			t.Errorf("no %s falsifier ran on stories260K (ran: %v)", k, kinds)
		}
	}
}

func TestJUnit(t *testing.T) {
	seed := int64(7)
	rep := &falsify.Report{ContractsDigest: "d", Seed: seed, Results: []falsify.Result{
		{ID: "a.pass", Binds: "model.llama", Verdict: verdict.Pass, Measured: map[string]float64{"v": 0}},
		{ID: "a.fail", Binds: "model.llama", Verdict: verdict.Fail, Reason: "v = 3, want == 0", Seed: &seed},
		{ID: "k.refused", Binds: "kernel.q4_k", Verdict: verdict.Refused, RemovedBy: "falsify", Reason: "needs --model"},
	}}
	var buf bytes.Buffer
	if err := falsify.WriteJUnit(&buf, rep, time.Second); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Error *struct {
					Type string `xml:"type,attr"`
				} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("WriteJUnit output is not XML: %v\n%s", err, buf.String())
	}
	if doc.Tests != 3 || doc.Failures != 1 || doc.Errors != 1 || len(doc.Suites) != 2 {
		t.Fatalf("WriteJUnit counts tests %d failures %d errors %d suites %d, want 3 1 1 2\n%s", doc.Tests, doc.Failures, doc.Errors, len(doc.Suites), buf.String())
	}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Skipped != nil {
				t.Errorf("case %s is <skipped>: a refusal must not read as a skip", c.Name)
			}
			if c.Name == "k.refused" && (c.Error == nil || c.Error.Type != "refused") {
				t.Errorf("refused case has no <error type=refused>")
			}
			if c.Name == "a.fail" && (c.Failure == nil || c.Failure.Message != "v = 3, want == 0") {
				t.Errorf("failed case has no <failure> with the reason")
			}
		}
	}
}

func TestParamsOverrideAndRefusalCodes(t *testing.T) {
	model := testutil.Fixture(t, "models/stories260K.gguf")
	reg := falsify.NewRegistry()
	reg.Register("greedy_golden", falsify.KindGolden, func(ctx context.Context, c *falsify.Check) error {
		b, err := c.ParamString("backend", "")
		if err != nil {
			return err
		}
		return falsify.RefuseCode("no_backend", "backend:"+b, "backend %s is not in this build", b)
	})
	rep, err := falsify.Run(context.Background(), falsify.Options{IDs: []string{"llama.greedy_golden"}, Model: model,
		Set: embedded(t), Registry: reg, Params: map[string]any{"backend": "cuda"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	got := [4]string{string(r.Verdict), r.RefusalCode, r.RemovedBy, r.Reason}
	want := [4]string{"refused", "no_backend", "backend:cuda", "backend cuda is not in this build"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Run with Params backend=cuda (-want +got):\n%s", diff)
	}
	if r.Optional || rep.Summary.Refused != 1 {
		t.Errorf("a refusal the contract does not list is optional = %v, summary %+v", r.Optional, rep.Summary)
	}
	// Listed in params.optional_refusals, the same refusal is optional:
	// still refused, never a pass, counted apart.
	rep, err = falsify.Run(context.Background(), falsify.Options{IDs: []string{"llama.greedy_golden"}, Model: model,
		Set: embedded(t), Registry: reg, Params: map[string]any{"backend": "cuda", "optional_refusals": []any{"no_backend"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Verdict != verdict.Refused || !r.Optional || rep.Summary != (falsify.Summary{RefusedOptional: 1}) {
		t.Errorf("optional refusal: verdict %s optional %v summary %+v", r.Verdict, r.Optional, rep.Summary)
	}
	// The contract set itself is not changed by the override.
	if f, _ := embedded(t).Falsifier("llama.greedy_golden"); f.Params["backend"] != "ref" {
		t.Errorf("Params override leaked into the contract set: backend = %v", f.Params["backend"])
	}
}
