package qa_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

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
