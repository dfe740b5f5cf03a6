package cli_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/internal/testutil"
)

// writeTinyVocab writes a byte-level BPE vocabulary (the 256 byte-level
// characters, merges for "hello", a control token) with the given pre.
func writeTinyVocab(tb testing.TB, pre string) string {
	tb.Helper()
	var toks []string
	n := 0
	for b := range 256 {
		r := rune(b)
		if !((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
			r = rune(256 + n)
			n++
		}
		toks = append(toks, string(r))
	}
	toks = append(toks, "he", "ll", "hell", "hello", "<|im_end|>")
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = 1
	}
	types[len(types)-1] = 3
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.V("qwen2"))
	b.Set("tokenizer.ggml.model", gguf.V("gpt2"))
	b.Set("tokenizer.ggml.pre", gguf.V(pre))
	b.Set("tokenizer.ggml.tokens", gguf.V(toks))
	b.Set("tokenizer.ggml.token_type", gguf.V(types))
	b.Set("tokenizer.ggml.merges", gguf.V([]string{"h e", "l l", "he ll", "hell o"}))
	b.Set("tokenizer.ggml.eos_token_id", gguf.V(uint32(260)))
	path := filepath.Join(tb.TempDir(), "tiny-vocab.gguf")
	if err := b.WriteFile(path); err != nil {
		tb.Fatal(err)
	}
	return path
}

type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(stdin string, args ...string) cliResult {
	var out, errb bytes.Buffer
	code := cli.Main(args, strings.NewReader(stdin), &out, &errb)
	return cliResult{code, out.String(), errb.String()}
}

func TestTokenizeTiny(t *testing.T) {
	model := writeTinyVocab(t, "qwen2")
	tests := []struct {
		name   string
		stdin  string
		args   []string
		stdout string
	}{
		{"human", "", []string{"tokenize", model, "hello<|im_end|>"},
			"259\t\"hello\"\n60\t\"<\"\n124\t\"|\"\n105\t\"i\"\n109\t\"m\"\n95\t\"_\"\n101\t\"e\"\n110\t\"n\"\n100\t\"d\"\n124\t\"|\"\n62\t\">\"\n"},
		{"parse special", "", []string{"tokenize", "--parse-special", model, "hello<|im_end|>"}, "259\t\"hello\"\n260\t\"<|im_end|>\"\n"},
		{"stdin", "hello", []string{"tokenize", model, "-"}, "259\t\"hello\"\n"},
		{"byte piece quoted", "", []string{"tokenize", model, "\xff"}, "255\t\"\\xff\"\n"},
		{"detokenize spaces and commas", "", []string{"detokenize", model, "259,60", "124 62"}, "hello<|>"},
		{"detokenize control as text", "", []string{"detokenize", model, "259", "260"}, "hello<|im_end|>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(tc.stdin, tc.args...)
			if r.code != cli.ExitOK {
				t.Fatalf("apr %q: exit %d, stderr %q", tc.args, r.code, r.stderr)
			}
			if diff := cmp.Diff(tc.stdout, r.stdout); diff != "" {
				t.Errorf("apr %q stdout mismatch (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

func TestTokenizeJSON(t *testing.T) {
	model := writeTinyVocab(t, "qwen2")
	r := runCLI("", "tokenize", "--json", model, "hello hello")
	if r.code != cli.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var got cli.TokenizeReport
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
	}
	// No merge joins "Ġ" (the space's byte-level character, id 32 here) to
	// "hello", so the space stays a token of its own.
	want := cli.TokenizeReport{IDs: []int32{259, 32, 259}, NTokens: 3, Pieces: []string{"hello", " ", "hello"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokenize --json mismatch (-want +got):\n%s", diff)
	}

	r = runCLI("", "detokenize", "--json", model, "259", "255")
	var det cli.DetokenizeReport
	if err := json.Unmarshal([]byte(r.stdout), &det); err != nil {
		t.Fatalf("detokenize --json: %v\n%s", err, r.stdout)
	}
	if det.Hex != "68656c6c6fff" || det.ValidUTF8 || det.NBytes != 6 || det.NTokens != 2 {
		t.Errorf("detokenize --json = %+v, want hex 68656c6c6fff, 6 bytes, not valid UTF-8", det)
	}
}

func TestTokenizeErrors(t *testing.T) {
	model := writeTinyVocab(t, "qwen2")
	unknownPre := writeTinyVocab(t, "qwen3")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown pre refused", []string{"tokenize", unknownPre, "x"}, cli.ExitRefused, `"qwen3"`},
		{"missing model", []string{"tokenize", filepath.Join(t.TempDir(), "none.gguf"), "x"}, cli.ExitBadInput, "none.gguf"},
		{"id out of range", []string{"detokenize", model, "1", "999"}, cli.ExitBadInput, "999"},
		{"id not a number", []string{"detokenize", model, "1,x"}, cli.ExitBadInput, `"x"`},
		{"no ids", []string{"detokenize", model, ","}, cli.ExitBadInput, "no token ids"},
		{"too few args", []string{"tokenize", model}, cli.ExitBadInput, "arg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI("", tc.args...)
			if r.code != tc.code {
				t.Errorf("apr %q: exit %d, want %d (stderr %q)", tc.args, r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("apr %q: stderr %q does not mention %q", tc.args, r.stderr, tc.stderr)
			}
			if r.stdout != "" {
				t.Errorf("apr %q: stdout %q, want nothing", tc.args, r.stdout)
			}
		})
	}
}

func TestTokenizeFixtures(t *testing.T) {
	dir := filepath.Join(testutil.Fixtures(t), "vocab")
	synth := filepath.Join(dir, "synth-tokenizer.gguf")
	spm := filepath.Join(dir, "ggml-vocab-llama-spm.gguf")
	tests := []struct {
		name string
		args []string
		ids  []int32
	}{
		// The example of the fixtures' README.
		{"synth", []string{"tokenize", "--json", synth, "Hello world, 2+2=4"}, []int32{39, 301, 385, 1879, 11, 220, 17, 10, 17, 28, 19}},
		{"synth chat", []string{"tokenize", "--json", "--parse-special", synth, "<|im_start|>user\nHi<|im_end|>"}, []int32{2001, 872, 198, 39, 72, 2002}},
		{"spm adds bos", []string{"tokenize", "--json", spm, "Hello world"}, []int32{1, 15043, 3186}},
		{"spm no bos", []string{"tokenize", "--json", "--no-bos", spm, "Hello world"}, []int32{15043, 3186}},
		{"spm </s> parsed", []string{"tokenize", "--json", "--parse-special", spm, "Hi</s>"}, []int32{1, 6324, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI("", tc.args...)
			if r.code != cli.ExitOK {
				t.Fatalf("apr %q: exit %d, stderr %q", tc.args, r.code, r.stderr)
			}
			var got cli.TokenizeReport
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("apr %q: %v", tc.args, err)
			}
			if diff := cmp.Diff(tc.ids, got.IDs); diff != "" {
				t.Errorf("apr %q ids mismatch (-want +got):\n%s", tc.args, diff)
			}
		})
	}
	r := runCLI("", "detokenize", spm, "1 15043 3186")
	if r.code != cli.ExitOK || r.stdout != "<s> Hello world" {
		t.Errorf("apr detokenize spm 1 15043 3186: exit %d, stdout %q", r.code, r.stdout)
	}
}
