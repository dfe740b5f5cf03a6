package qa_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/internal/testutil"

	"github.com/aprqa/apr/qa"
	"github.com/aprqa/apr/qa/qatest"
)

func init() { qatest.Register() }

// gateRun runs qa with a baseline file of the test's own.
func gateRun(t *testing.T, o qa.Options) qa.Report {
	t.Helper()
	if o.BaselineFile == "" {
		o.BaselineFile = filepath.Join(t.TempDir(), "baselines.json")
	}
	rep, err := qa.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("qa.Run(%s, gates %v): %v", o.Model, o.Gates, err)
	}
	return rep
}

// gate returns the gate named name on backend ("" for model gates) of the
// report's first model.
func gate(t *testing.T, rep qa.Report, name, backend string) qa.Gate {
	t.Helper()
	for _, g := range rep.Gates() {
		if g.Name == name && g.Backend == backend {
			return g
		}
	}
	var have []string
	for _, g := range rep.Gates() {
		have = append(have, g.Name+"["+g.Backend+"]")
	}
	t.Fatalf("no gate %s[%s] in the report (have %v)", name, backend, have)
	return qa.Gate{}
}

func value(t *testing.T, g qa.Gate, name string) qa.Value {
	t.Helper()
	i := slices.IndexFunc(g.Values, func(v qa.Value) bool { return v.Name == name })
	if i < 0 {
		t.Fatalf("gate %s[%s] measured no %s (values %+v)", g.Name, g.Backend, name, g.Values)
	}
	return g.Values[i]
}

// notPassed asserts g did not pass (fail, or a refusal that counts).
func wantStatus(t *testing.T, g qa.Gate, status string) {
	t.Helper()
	if g.Status != status {
		t.Errorf("gate %s[%s] = %s (%s), want %s", g.Name, g.Backend, g.Status, g.Reason, status)
	}
	if status != "pass" && g.Passed() && g.Status != qa.StatusRefusedOptional {
		t.Errorf("gate %s[%s] is %s but counts as passed", g.Name, g.Backend, g.Status)
	}
}

// plainNumerics returns the embedded contracts with the engine gates held
// to the plain reference at the plain-numerics tiers (params.numerics
// "plain", _parity_tiers.quantized) as they were before the reference had a
// ggml numerics: the near-tie and routing-flip rules are exercised there,
// where the engines' routers really differ (they still judge gpu_cpu, a
// plain-numerics engine against cpu).
func plainNumerics(t *testing.T) *contracts.Set {
	t.Helper()
	return editedContracts(t, func(s string) string {
		if !strings.Contains(s, `_engine_numerics: {cpu: "ggml", cuda: "ggml"}`) || !strings.Contains(s, "_parity_tiers.deployed[_arch]") {
			t.Fatal(`common.cue no longer holds _engine_numerics: {cpu: "ggml", cuda: "ggml"} and _parity_tiers.deployed[_arch]`)
		}
		s = strings.ReplaceAll(s, `_engine_numerics: {cpu: "ggml", cuda: "ggml"}`, `_engine_numerics: {cpu: "plain", cuda: "plain"}`)
		return strings.ReplaceAll(s, "_parity_tiers.deployed[_arch]", "_parity_tiers.quantized[_arch]")
	})
}

// editedContracts returns the repository's contracts with common.cue
// passed through edit.
func editedContracts(t *testing.T, edit func(common string) string) *contracts.Set {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(testutil.RepoRoot(t), "contracts")
	files, err := filepath.Glob(filepath.Join(src, "*.cue"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no contracts under %s: %v", src, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if filepath.Base(f) == "common.cue" {
			s = edit(s)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := contracts.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}
