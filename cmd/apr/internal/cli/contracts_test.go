package cli_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/contracts"
)

// cfApr runs apr in-process.
func cfApr(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// cfContractsDir copies the embedded contracts (and goldens) into a
// temporary directory, with edit applied (path → content; "" deletes).
func cfContractsDir(t *testing.T, edit func(f map[string]string)) string {
	t.Helper()
	files := map[string]string{}
	err := fs.WalkDir(contracts.EmbeddedFS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(contracts.EmbeddedFS(), p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(files)
	}
	dir := t.TempDir()
	for p, c := range files {
		if c == "" {
			continue
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func cfReplace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not found", old)
	}
	return strings.Replace(s, old, new, 1)
}

func TestContractsVetEmbedded(t *testing.T) {
	code, stdout, stderr := cfApr(t, "contracts", "vet", "--json")
	if code != cli.ExitOK {
		t.Fatalf("apr contracts vet: exit %d\n%s", code, stderr)
	}
	var rep cli.VetReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("apr contracts vet --json: %v\n%s", err, stdout)
	}
	if !rep.OK || rep.Contracts < 35 || len(rep.Problems) != 0 || len(rep.Digest) != 64 {
		t.Errorf("apr contracts vet --json = %+v", rep)
	}
	if !strings.Contains(stderr, "contracts vet: embedded:") {
		t.Errorf("apr contracts vet stderr %q lacks the summary", stderr)
	}
	// The same files vetted from a directory pass too.
	if code, _, stderr := cfApr(t, "contracts", "vet", cfContractsDir(t, nil)); code != cli.ExitOK {
		t.Errorf("apr contracts vet DIR (a copy of the embedded set): exit %d\n%s", code, stderr)
	}
}

// TestContractsVetBroken feeds apr contracts vet a directory with each
// class of broken contract and checks it fails with a clear message.
func TestContractsVetBroken(t *testing.T) {
	tests := []struct {
		name string
		edit func(t *testing.T, f map[string]string)
		want []string // substrings of stderr
	}{
		{"does not validate", func(t *testing.T, f map[string]string) {
			f["verbs.cue"] = cfReplace(t, f["verbs.cue"], `kind:    "timing"`, `kind:    "vibes"`)
		}, []string{"verbs.cue:", "kind", "[cue]"}},
		{"names code with no registered implementation", func(t *testing.T, f map[string]string) {
			f["verbs.cue"] = cfReplace(t, f["verbs.cue"], `code:    "timing"`, `code:    "nonesuch"`)
		}, []string{"verbs.cue:", "run.timing", `names code "nonesuch", which no Go code registers`, "[unbound]",
			"registered falsifier code timing (timing) is used by no contract: dead code"}},
		{"two contracts share an id", func(t *testing.T, f map[string]string) {
			f["more.cue"] = "package contracts\n\nmodel: qwen2: summary: \"another qwen2\"\n"
		}, []string{"more.cue:3:8", "model.qwen2 is declared again", "[duplicate]"}},
		{"registered falsifier used by no contract", func(t *testing.T, f map[string]string) {
			// Drop run.timing, the only user of the timing code.
			v := f["verbs.cue"]
			start := strings.Index(v, "}, {\n\t\tid:      \"run.timing\"")
			end := strings.Index(v, "figures are not honest\"\n\t}]")
			if start < 0 || end < 0 {
				t.Fatal("verbs.cue: run.timing not found")
			}
			f["verbs.cue"] = v[:start] + "}]" + v[end+len("figures are not honest\"\n\t}]"):]
		}, []string{"registered falsifier code timing (timing) is used by no contract: dead code", "[dead]"}},
		{"threshold missing", func(t *testing.T, f map[string]string) {
			f["verbs.cue"] = cfReplace(t, f["verbs.cue"], `params: args: ["tensors", "{model}", "--json"]
		thresholds: violations: {op: "==", value: 0}`, `params: args: ["tensors", "{model}", "--json"]
		thresholds: count: {op: "==", value: 0}`)
		}, []string{"tensors.fields", `threshold "violations" is missing`, "[threshold]"}},
		{"threshold absent altogether", func(t *testing.T, f map[string]string) {
			f["verbs.cue"] = cfReplace(t, f["verbs.cue"], `params: args: ["tensors", "{model}", "--json"]
		thresholds: violations: {op: "==", value: 0}`, `params: args: ["tensors", "{model}", "--json"]`)
		}, []string{"tensors", "thresholds", "[cue]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := cfContractsDir(t, func(f map[string]string) { tt.edit(t, f) })
			code, _, stderr := cfApr(t, "contracts", "vet", dir)
			if code != cli.ExitFail {
				t.Fatalf("apr contracts vet (%s): exit %d, want %d\n%s", tt.name, code, cli.ExitFail, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("apr contracts vet (%s) stderr lacks %q:\n%s", tt.name, w, stderr)
				}
			}
		})
	}
}

func TestContractsListAndShow(t *testing.T) {
	code, stdout, stderr := cfApr(t, "contracts", "list", "--json")
	if code != cli.ExitOK {
		t.Fatalf("apr contracts list --json: exit %d\n%s", code, stderr)
	}
	var list cli.ContractsList
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range list.Contracts {
		if e.ID == "model.llama" {
			found = strings.Contains(strings.Join(e.Falsifiers, " "), "llama.tensor_contract")
		}
	}
	if !found {
		t.Errorf("apr contracts list --json: model.llama with llama.tensor_contract not listed")
	}
	for _, f := range list.Falsifiers {
		if !f.Bound {
			t.Errorf("apr contracts list: falsifier %s's code %s is not bound in this binary", f.ID, f.Code)
		}
	}
	if code, stdout, _ := cfApr(t, "contracts", "list"); code != cli.ExitOK || !strings.Contains(stdout, "kernel.q4_k") {
		t.Errorf("apr contracts list: exit %d, table lacks kernel.q4_k", code)
	}

	code, stdout, _ = cfApr(t, "contracts", "show", "model.qwen35")
	if code != cli.ExitOK || !strings.Contains(stdout, `arch:`) || !strings.Contains(stdout, `"blk.{i}.ssm_conv1d.weight"`) {
		t.Errorf("apr contracts show model.qwen35: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = cfApr(t, "contracts", "show", "run.timing", "--json")
	var f struct{ ID, Code string }
	if code != cli.ExitOK || json.Unmarshal([]byte(stdout), &f) != nil || f.Code != "timing" {
		t.Errorf("apr contracts show run.timing --json: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := cfApr(t, "contracts", "show", "model.gpt5"); code != cli.ExitBadInput || !strings.Contains(stderr, "model.gpt5") {
		t.Errorf("apr contracts show model.gpt5: exit %d (%s), want %d", code, stderr, cli.ExitBadInput)
	}
}
