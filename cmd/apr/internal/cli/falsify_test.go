package cli_test

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/verdict"
)

// TestFalsifyStories is the acceptance run: apr falsify --model
// stories260K.gguf runs the shape, property, timing and golden falsifiers
// that apply, and all pass; --json is one document; --junit writes XML.
func TestFalsifyStories(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP (not a pass): runs the model; not in -short")
	}
	model := testutil.Fixture(t, "models/stories260K.gguf")
	junit := filepath.Join(t.TempDir(), "falsify.xml")
	code, stdout, stderr := cfApr(t, "falsify", "--model", model, "--json", "--junit", junit, "--seed", "11")
	if code != cli.ExitOK {
		t.Fatalf("apr falsify --model stories260K: exit %d\n%s", code, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	var rep falsify.Report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("apr falsify --json: %v", err)
	}
	if dec.More() {
		t.Errorf("apr falsify --json printed more than one document")
	}
	kinds := map[falsify.Kind]int{}
	for _, r := range rep.Results {
		kinds[r.Kind]++
		if r.Verdict != verdict.Pass {
			t.Errorf("%s: %s (%s)", r.ID, r.Verdict, r.Reason)
		}
		if r.Kind == falsify.KindProperty && (r.Seed == nil || *r.Seed != 11) {
			t.Errorf("%s: seed %v, want 11 recorded", r.ID, r.Seed)
		}
	}
	for _, k := range []falsify.Kind{falsify.KindShape, falsify.KindProperty, falsify.KindTiming, falsify.KindGolden} {
		if kinds[k] == 0 {
			t.Errorf("no %s falsifier ran (ran %v)", k, kinds)
		}
	}
	if rep.Seed != 11 || len(rep.ContractsDigest) != 64 {
		t.Errorf("report seed %d digest %q", rep.Seed, rep.ContractsDigest)
	}
	for _, w := range []string{"llama.tensor_contract", "PASS", "not run", "never counted as passed"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("apr falsify table (stderr) lacks %q", w)
		}
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(b, &suites); err != nil || suites.Tests != len(rep.Results) || suites.Failures != 0 {
		t.Errorf("--junit: %v, tests %d failures %d, want %d and 0", err, suites.Tests, suites.Failures, len(rep.Results))
	}
}

func TestFalsifyExitCodes(t *testing.T) {
	model := testutil.Fixture(t, "models/stories260K.gguf")
	// A model with one tensor's shape changed: the shape falsifier fails.
	src, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := gguf.NewBuilder()
	for _, kv := range src.KV {
		b.Set(kv.Key, kv.Value)
	}
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		shape, data := ti.Shape, src.Data(ti)
		if ti.Name == "output_norm.weight" {
			shape, data = []int64{63}, data[:63*4]
		}
		if err := b.AddTensor(ti.Name, ti.Type, shape, data); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := b.WriteFile(bad); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"all pass", []string{"falsify", "llama.tensor_contract", "f32.dequant_exact", "--model", model}, cli.ExitOK, "2 pass, 0 fail"},
		{"a fail", []string{"falsify", "llama.tensor_contract", "--model", bad}, cli.ExitFail, "output_norm.weight: shape [63]"},
		{"refused: needs a model", []string{"falsify", "llama.tensor_contract"}, cli.ExitRefused, "refused by falsify: needs a model"},
		{"nothing applies", []string{"falsify", "model.qwen3", "--model", model}, cli.ExitRefused, "no falsifier decided anything"},
		{"unknown id", []string{"falsify", "nonesuch"}, cli.ExitBadInput, `"nonesuch": not a falsifier or contract id`},
		{"missing model file", []string{"falsify", "--model", filepath.Join(t.TempDir(), "none.gguf")}, cli.ExitBadInput, "none.gguf"},
		{"fixtures not a directory", []string{"falsify", "--fixtures", model}, cli.ExitBadInput, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := cfApr(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("apr %s: exit %d, want %d with %q in stderr:\n%s", strings.Join(tt.args, " "), code, tt.code, tt.want, stderr)
			}
		})
	}
}

// TestVerbFieldsPlanted plants output defects the verb contracts hunt.
func TestVerbFieldsPlanted(t *testing.T) {
	set, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	run, _ := set.Verb("run")
	tensors, _ := set.Verb("tensors")
	good := `{"model":"m","model_sha256":"s","backend":"ref","prompt_tokens":5,"tokens_out":4,"token_ids":[1,2,3,4],
		"text":"x","load_ms":1.5,"h2d_ms":0,"f2_ms":0,"f2_verdict":"not_required","prefill_ms":2,"decode_ms":3,"wall_ms":7,"decode_tok_per_s":1000,"finish_reason":"length"}`
	tests := []struct {
		name string
		verb string
		out  string
		want []string
	}{
		{"conforming", "run", good, nil},
		{"field missing", "run", strings.Replace(good, `"decode_ms":3,`, ``, 1), []string{"decode_ms: required, absent"}},
		{"wrong type", "run", strings.Replace(good, `"prompt_tokens":5`, `"prompt_tokens":"5"`, 1), []string{"prompt_tokens: a string, the contract says int"}},
		{"int where a float is", "run", strings.Replace(good, `"tokens_out":4`, `"tokens_out":4.5`, 1), []string{"tokens_out: a number, the contract says int"}},
		{"undeclared field", "run", strings.Replace(good, `"text":"x"`, `"text":"x","tok_s":9`, 1), []string{"tok_s: not in the contract"}},
		{"two documents", "run", good + good, []string{"more than one JSON document"}},
		{"not JSON", "run", "done.\n", []string{"not a JSON document"}},
		{"array rows checked", "tensors", `[{"name":"a","type":"F32","shape":[2],"offset":0,"bytes":8},{"name":"b","type":"F32","shape":[2],"offset":"x","bytes":8}]`,
			[]string{"[].offset: a string, the contract says int (element 1)"}},
		{"top-level not an array", "tensors", `{"name":"a"}`, []string{"[]: an object, the contract says array"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := run
			if tt.verb == "tensors" {
				v = tensors
			}
			got := falsify.CheckVerbOutput(v, []byte(tt.out))
			if len(tt.want) == 0 && len(got) != 0 {
				t.Errorf("CheckVerbOutput(%s) = %v, want none", tt.name, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(strings.Join(got, "\n"), w) {
					t.Errorf("CheckVerbOutput(%s) = %v, want one mentioning %q", tt.name, got, w)
				}
			}
		})
	}
}
