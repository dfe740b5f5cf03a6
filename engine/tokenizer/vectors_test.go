package tokenizer_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/testutil"
)

const vocabSep = "\n__ggml_vocab_test__\n"

// readVectors reads llama.cpp's test-tokenizer-0 vectors: the cases of .inp
// (each followed by the separator) and the ids on the matching line of .out.
func readVectors(tb testing.TB, inp, out string) ([]string, [][]int32) {
	tb.Helper()
	in, err := os.ReadFile(inp)
	if err != nil {
		tb.Fatal(err)
	}
	o, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	cases := strings.Split(string(in), vocabSep)
	if cases[len(cases)-1] != "" {
		tb.Fatalf("%s: last case is not followed by the separator", inp)
	}
	cases = cases[:len(cases)-1]
	lines := strings.Split(strings.TrimSuffix(string(o), "\n"), "\n")
	if len(lines) != len(cases) {
		tb.Fatalf("%s has %d cases, %s has %d lines", inp, len(cases), out, len(lines))
	}
	ids := make([][]int32, len(lines))
	for i, l := range lines {
		ids[i] = []int32{}
		for _, f := range strings.Fields(l) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				tb.Fatalf("%s line %d: %v", out, i+1, err)
			}
			ids[i] = append(ids[i], int32(n))
		}
	}
	return cases, ids
}

// loaded keeps the tokenizers the tests build, one per file: a Tokenizer is
// immutable, and building the qwen one takes a good part of a second. Their
// files stay mapped until the test binary exits.
var loaded sync.Map // path → *tokenizer.Tokenizer

func openTokenizer(tb testing.TB, path string) *tokenizer.Tokenizer {
	tb.Helper()
	if tok, ok := loaded.Load(path); ok {
		return tok.(*tokenizer.Tokenizer)
	}
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenizer.New(f)
	if err != nil {
		f.Close()
		tb.Fatalf("tokenizer.New(%s): %v", filepath.Base(path), err)
	}
	loaded.Store(path, tok)
	return tok
}

// TestVocabVectors runs llama.cpp's tokenizer test vectors for every
// vocabulary GGUF in the fixtures: encoding must give exactly the ids, and
// decoding them must give back the text where llama.cpp round-trips it.
func TestVocabVectors(t *testing.T) {
	dir := filepath.Join(testutil.Fixtures(t), "vocab")
	tests := []struct {
		name, gguf, vectors string
	}{
		{"deepseek-coder", "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-deepseek-coder.gguf"},
		{"falcon", "ggml-vocab-falcon.gguf", "ggml-vocab-falcon.gguf"},
		{"gpt-2", "ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2.gguf"},
		{"llama-spm", "ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-spm.gguf"},
		{"phi-3", "ggml-vocab-phi-3.gguf", "ggml-vocab-phi-3.gguf"},
		{"starcoder", "ggml-vocab-starcoder.gguf", "ggml-vocab-starcoder.gguf"},
		{"qwen3 with qwen2 vectors", "qwen3-tokenizer.gguf", "ggml-vocab-qwen2.gguf"},
		{"synth", "synth-tokenizer.gguf", "synth-tokenizer.gguf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := openTokenizer(t, filepath.Join(dir, tc.gguf))
			cases, want := readVectors(t, filepath.Join(dir, tc.vectors+".inp"), filepath.Join(dir, tc.vectors+".out"))
			pass := 0
			for i, text := range cases {
				got, err := tok.Encode(text, tokenizer.Options{})
				if err != nil {
					t.Errorf("case %d Encode(%q): %v", i, text, err)
					continue
				}
				if diff := cmp.Diff(want[i], got); diff != "" {
					t.Errorf("case %d Encode(%q) mismatch (-want +got):\n%s", i, text, diff)
					continue
				}
				pass++
				back, err := tok.Decode(got)
				if err != nil {
					t.Errorf("case %d Decode: %v", i, err)
				} else if !bytes.Equal(back, []byte(text)) {
					t.Logf("case %d: Decode(Encode(%q)) = %q (no round trip)", i, text, back)
				}
			}
			t.Logf("%s: %d/%d cases give llama.cpp's ids", tc.name, pass, len(cases))
		})
	}
}

// TestExpectPrompts checks the tokenizer of every model in the fixtures
// against what llama.cpp did with it when it made the expected outputs:
// the prompt ids (add_special, parse_special), the logits tokens
// (add_special, no parse_special), the bytes of the generated ids
// (token_to_piece with special=true, concatenated) and which generated
// positions were end-of-generation tokens.
func TestExpectPrompts(t *testing.T) {
	fx := testutil.Fixtures(t)
	models := map[string]string{}
	for _, pattern := range []string{"models/*.gguf", "models/synth/*.gguf"} {
		paths, _ := filepath.Glob(filepath.Join(fx, pattern))
		for _, p := range paths {
			models[strings.TrimSuffix(filepath.Base(p), ".gguf")] = p
		}
	}
	expects, _ := filepath.Glob(filepath.Join(fx, "expect", "*.greedy.json"))
	if len(expects) == 0 {
		t.Fatal("no expect/*.greedy.json in the fixtures")
	}
	for _, path := range expects {
		name := strings.TrimSuffix(filepath.Base(path), ".greedy.json")
		t.Run(name, func(t *testing.T) {
			model, ok := models[name]
			if !ok {
				t.Skipf("SKIP (not a pass): model %s.gguf is not among the fixtures", name)
			}
			tok := openTokenizer(t, model)
			var greedy struct {
				Results []struct {
					Prompt       string  `json:"prompt"`
					PromptIDs    []int32 `json:"prompt_ids"`
					GeneratedIDs []int32 `json:"generated_ids"`
					GeneratedHex string  `json:"generated_text_hex"`
					EOGPositions []int   `json:"eog_positions"`
				} `json:"results"`
			}
			readJSON(t, path, &greedy)
			for _, r := range greedy.Results {
				got, err := tok.Encode(r.Prompt, tokenizer.Options{AddSpecial: true, ParseSpecial: true})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(r.PromptIDs, got); diff != "" {
					t.Errorf("Encode(%q, add+parse special) mismatch (-want +got):\n%s", r.Prompt, diff)
				}
				d := tokenizer.NewStreamDecoder(tok)
				var text []byte
				var eog []int
				for i, id := range r.GeneratedIDs {
					b, err := d.Write(id)
					if err != nil {
						t.Fatal(err)
					}
					text = append(text, b...)
					if tok.IsEOG(id) {
						eog = append(eog, i)
					}
				}
				text = append(text, d.Flush()...)
				want, err := hex.DecodeString(r.GeneratedHex)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(want, text) {
					t.Errorf("stream of the generated ids of %q = %q, want %q", r.Prompt, text, want)
				}
				if diff := cmp.Diff(r.EOGPositions, eog, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("end-of-generation positions for %q mismatch (-want +got):\n%s", r.Prompt, diff)
				}
			}
			var logits struct {
				Text   string  `json:"text"`
				Tokens []int32 `json:"tokens"`
			}
			readJSON(t, filepath.Join(fx, "expect", name+".logits.json"), &logits)
			got, err := tok.Encode(logits.Text, tokenizer.Options{AddSpecial: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > len(logits.Tokens) {
				got = got[:len(logits.Tokens)]
			}
			if diff := cmp.Diff(logits.Tokens, got); diff != "" {
				t.Errorf("Encode(%q, add special) mismatch (-want +got):\n%s", logits.Text, diff)
			}
		})
	}
}

func readJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}
