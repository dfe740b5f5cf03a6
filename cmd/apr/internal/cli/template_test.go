package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/internal/testutil"
)

func writeTemplateFile(tb testing.TB, dir, name, body string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

func runTemplateCmd(args []string, stdin string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cli.Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestTemplateFixtureCases runs `apr template --template` on every case of
// the shared fixtures and compares stdout byte for byte.
func TestTemplateFixtureCases(t *testing.T) {
	dir := testutil.Fixture(t, "templates")
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Template            string          `json:"template"`
		ID                  string          `json:"id"`
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		Kwargs              map[string]any  `json:"kwargs"`
		Special             map[string]any  `json:"special_tokens"`
		Expected            *string         `json:"expected"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	pass := 0
	for i, c := range cases {
		kw := map[string]any{}
		for k, v := range c.Special {
			kw[k] = v
		}
		for k, v := range c.Kwargs {
			kw[k] = v
		}
		kwJSON, _ := json.Marshal(kw)
		args := []string{"template", "--template", filepath.Join(dir, c.Template),
			"--messages", writeTemplateFile(t, tmp, c.ID+".json", string(c.Messages)), "--kwargs", string(kwJSON)}
		if len(c.Tools) > 0 && string(c.Tools) != "null" {
			args = append(args, "--tools", writeTemplateFile(t, tmp, c.ID+"-tools.json", string(c.Tools)))
		}
		if c.AddGenerationPrompt {
			args = append(args, "--add-generation-prompt")
		}
		code, stdout, stderr := runTemplateCmd(args, "")
		switch {
		case c.Expected == nil && code != 0:
			pass++
		case c.Expected == nil:
			t.Errorf("case %d %s/%s: exit 0, want an error", i, c.Template, c.ID)
		case code != 0:
			t.Errorf("case %d %s/%s: exit %d: %s", i, c.Template, c.ID, code, stderr)
		case stdout != *c.Expected:
			t.Errorf("case %d %s/%s: stdout %q, want %q", i, c.Template, c.ID, stdout, *c.Expected)
		default:
			pass++
		}
	}
	t.Logf("apr template: %d/%d fixture cases byte-for-byte", pass, len(cases))
}

func TestTemplateFromModel(t *testing.T) {
	model := testutil.Fixture(t, "vocab/qwen3-tokenizer.gguf")
	msgs := writeTemplateFile(t, t.TempDir(), "m.json", `[{"role":"user","content":"Hello"}]`)
	code, stdout, stderr := runTemplateCmd([]string{"template", model, "--messages", msgs, "--add-generation-prompt", "--kwargs", `{"enable_thinking": false}`}, "")
	if code != 0 {
		t.Fatalf("apr template: exit %d: %s", code, stderr)
	}
	want := "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if stdout != want {
		t.Errorf("apr template stdout = %q, want %q", stdout, want)
	}

	// Messages from stdin, and --json.
	code, stdout, stderr = runTemplateCmd([]string{"template", model, "--messages", "-", "--json"}, `[{"role":"user","content":"Hi"}]`)
	if code != 0 {
		t.Fatalf("apr template --json: exit %d: %s", code, stderr)
	}
	var rep struct{ Template, Prompt string }
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Prompt != "<|im_start|>user\nHi<|im_end|>\n" {
		t.Errorf("apr template --json = %q (%v)", stdout, err)
	}
}

func TestTemplateErrors(t *testing.T) {
	dir := t.TempDir()
	msgs := writeTemplateFile(t, dir, "m.json", `[{"role":"user","content":"x"}]`)
	noTemplate := filepath.Join(dir, "plain.gguf")
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.V("llama"))
	if err := b.WriteFile(noTemplate); err != nil {
		t.Fatal(err)
	}
	raises := writeTemplateFile(t, dir, "raise.jinja", "{{ raise_exception('roles must alternate') }}")
	broken := writeTemplateFile(t, dir, "broken.jinja", "{% for %}")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no model or template", []string{"template", "--messages", msgs}, cli.ExitBadInput, "give a MODEL or --template"},
		{"both", []string{"template", noTemplate, "--template", raises, "--messages", msgs}, cli.ExitBadInput, "not both"},
		{"no messages", []string{"template", "--template", raises}, cli.ExitBadInput, "--messages"},
		{"model without template", []string{"template", noTemplate, "--messages", msgs}, cli.ExitRefused, "refused by chat"},
		{"unparsable template", []string{"template", "--template", broken, "--messages", msgs}, cli.ExitRefused, "refused by chat"},
		{"template raises", []string{"template", "--template", raises, "--messages", msgs}, cli.ExitBadInput, "roles must alternate"},
		{"malformed messages", []string{"template", "--template", raises, "--messages", writeTemplateFile(t, dir, "bad.json", `[{"role":`)}, cli.ExitBadInput, "messages"},
		{"malformed kwargs", []string{"template", "--template", raises, "--messages", msgs, "--kwargs", `{x}`}, cli.ExitBadInput, "kwargs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runTemplateCmd(tt.args, "")
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("apr %v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
			}
			if stdout != "" {
				t.Errorf("apr %v: stdout %q, want nothing", tt.args, stdout)
			}
		})
	}
}
