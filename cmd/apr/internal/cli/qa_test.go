package cli_test

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/qa"
	"github.com/aprqa/apr/qa/qatest"
	"github.com/aprqa/apr/verdict"
)

// The planted backends are registered by the tests that use them, not in
// init: an init would also run in the "apr" subprocesses that testscript and
// TestREADME start from this binary, and plant broken backends into every
// default `apr qa` there.

// qaArgs are apr qa's arguments with a baseline file of the test's own, and
// the backends ref and cpu unless args name others (this test binary also
// links qatest's planted ones).
func qaArgs(t *testing.T, args ...string) []string {
	out := []string{"qa", "--baseline", filepath.Join(t.TempDir(), "b.json")}
	if !strings.Contains(strings.Join(args, " "), "--backend") {
		out = append(out, "--backend", "ref,cpu")
	}
	return append(out, args...)
}

func TestQAExitCodes(t *testing.T) {
	qatest.Register()
	stories := testutil.Fixture(t, "models/stories260K.gguf")
	llama := qatest.Synth(t, "llama")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"clean model passes", []string{stories, "--gate", "tensor_contract,parity,failclosed"}, 0,
			[]string{"parity", "pass", "qa: 3 passed, 0 failed"}},
		{"perturbed cpu fails parity", []string{llama, "--backend", "ref," + qatest.Perturbed, "--gate", "parity"}, 1,
			[]string{"parity", "fail", "min_cosine"}},
		{"fewer gates than --min-gates", []string{llama, "--gate", "tensor_contract", "--min-gates", "2"}, 1,
			[]string{"fewer than --min-gates 2"}},
		{"forced backend that cannot run here is refused", []string{llama, "--backend", "cuda", "--gate", "golden_output"}, 3,
			[]string{`backend "cuda" cannot run here`, "refused"}},
		{"only refused-optional gates: nothing executed", []string{stories, "--gate", "template"}, 1,
			[]string{"refused-optional", "no gate executed"}},
		{"missing model", []string{filepath.Join(t.TempDir(), "nope.gguf")}, 2, []string{"nope.gguf"}},
		{"unknown gate", []string{llama, "--gate", "vibes"}, 2, []string{`unknown gate "vibes"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runApr(t, qaArgs(t, tt.args...)...)
			if code != tt.code {
				t.Errorf("apr qa %v: exit %d, want %d\nstderr:\n%s", tt.args, code, tt.code, stderr)
			}
			if stdout != "" {
				t.Errorf("apr qa without --json printed on stdout: %q", stdout)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

// TestQAJSONAndJUnit: --json prints one report on stdout (the table stays
// on stderr); --junit writes XML with one case per gate.
func TestQAJSONAndJUnit(t *testing.T) {
	qatest.Register()
	stories := testutil.Fixture(t, "models/stories260K.gguf")
	junit := filepath.Join(t.TempDir(), "qa.xml")
	code, stdout, stderr := runApr(t, qaArgs(t, stories, "--gate", "tensor_contract,template,parity", "--json", "--junit", junit)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var rep qa.Report
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil || dec.More() {
		t.Fatalf("stdout is not one qa.Report (%v):\n%s", err, stdout)
	}
	if !rep.Passed || len(rep.Models) != 1 || len(rep.Models[0].Gates) != 3 {
		t.Errorf("report: passed %v, %d models: %+v", rep.Passed, len(rep.Models), rep)
	}
	if g := rep.Models[0].Gates[1]; g.Status != "refused-optional" || g.Verdict != verdict.Refused || !g.Optional || g.Code != qa.CodeNoTemplate {
		t.Errorf("template gate in JSON = %+v, want verdict refused, optional, status refused-optional", g)
	}
	if !strings.Contains(stderr, "tensor_contract") {
		t.Errorf("the table is not on stderr:\n%s", stderr)
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Tests   int `xml:"tests,attr"`
		Skipped int `xml:"skipped,attr"`
		Suites  []struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Skipped *struct{} `xml:"skipped"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &suites); err != nil {
		t.Fatalf("--junit wrote no XML: %v\n%s", err, b)
	}
	if suites.Tests != 3 || suites.Skipped != 1 || suites.Suites[0].Cases[2].Name != "parity[cpu]" {
		t.Errorf("junit: %d tests, %d skipped, cases %+v", suites.Tests, suites.Skipped, suites.Suites)
	}
}

// TestQADefaultModels: with no MODEL, apr qa synthesizes the tiny model of
// every architecture and gates each (nothing downloaded).
func TestQADefaultModels(t *testing.T) {
	qatest.Register()
	code, stdout, stderr := runApr(t, qaArgs(t, "--gate", "tensor_contract,template", "--json")...)
	if code != 0 {
		t.Fatalf("apr qa (no model): exit %d\n%s", code, stderr)
	}
	var rep qa.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, m := range rep.Models {
		archs = append(archs, m.Arch)
	}
	if strings.Join(archs, ",") != "llama,qwen2,qwen3,qwen3moe,qwen35,qwen35moe" || rep.Counts.Pass != 12 {
		t.Errorf("apr qa (no model): models %v, %s", archs, rep.Summary)
	}
	if !strings.Contains(stderr, "apr synth --arch qwen35 --preset tiny --type F32 --seed 1") {
		t.Errorf("the table does not say how the default models were made:\n%s", stderr)
	}
}
