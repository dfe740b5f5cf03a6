package tokenizer_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aprqa/apr/engine/tokenizer"
)

const maxFuzzInput = 4096

// fuzzSeeds are the vector cases (when the fixtures are there) and a few
// hand-picked strings.
func fuzzSeeds(f *testing.F) {
	for _, s := range []string{"", " ", "hello world", "<|im_start|>user\n<think>x</think><|im_end|>", "\xff\xfe\x00\x80",
		"\xe4\xbd", "a\u0301 \u3000 🦙 ½ 3333", "'s 'LL\r\n\r\n  \t"} {
		f.Add(s)
	}
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "vocab")
	for _, name := range []string{"ggml-vocab-qwen2.gguf.inp", "synth-tokenizer.gguf.inp", "ggml-vocab-qwen35.gguf.inp"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		for _, s := range strings.Split(string(b), vocabSep) {
			f.Add(s)
		}
	}
}

// fuzzTokenizers returns the tiny built vocabulary and, when the fixtures
// are there, every vocabulary GGUF among them.
func fuzzTokenizers(f *testing.F) map[string]*tokenizer.Tokenizer {
	toks := map[string]*tokenizer.Tokenizer{"tiny": tinyTokenizer(f)}
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "vocab")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	for _, p := range paths {
		toks[filepath.Base(p)] = openTokenizer(f, p)
	}
	return toks
}

// FuzzByteLevelRoundTrip: byte-level BPE gives back every byte string, with
// or without special tokens parsed.
func FuzzByteLevelRoundTrip(f *testing.F) {
	fuzzSeeds(f)
	toks := fuzzTokenizers(f)
	byteLevel := []*tokenizer.Tokenizer{toks["tiny"]}
	if tok, ok := toks["synth-tokenizer.gguf"]; ok {
		byteLevel = append(byteLevel, tok)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > maxFuzzInput {
			t.Skip()
		}
		for _, tok := range byteLevel {
			for _, opt := range []tokenizer.Options{{}, {ParseSpecial: true}} {
				ids, err := tok.Encode(text, opt)
				if err != nil {
					t.Fatalf("Encode(%q, %+v): %v", text, opt, err)
				}
				back, err := tok.Decode(ids)
				if err != nil {
					t.Fatalf("Decode(%v): %v", ids, err)
				}
				if !bytes.Equal(back, []byte(text)) {
					t.Fatalf("Decode(Encode(%q, %+v)) = %q", text, opt, back)
				}
			}
		}
	})
}

// FuzzEncode: no input makes any vocabulary panic or produce an id outside
// it; SentencePiece (llama-spm) round-trips every valid UTF-8 text without ▁
// in it. (Invalid UTF-8 need not: llama.cpp cuts symbols by lead byte, so a
// stray lead byte can swallow part of an escaped space, which then comes back
// as ▁'s bytes. apr does exactly the same.)
func FuzzEncode(f *testing.F) {
	fuzzSeeds(f)
	toks := fuzzTokenizers(f)
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > maxFuzzInput {
			t.Skip()
		}
		for name, tok := range toks {
			for _, opt := range []tokenizer.Options{{}, {AddSpecial: true, ParseSpecial: true}} {
				ids, err := tok.Encode(text, opt)
				if err != nil {
					t.Fatalf("%s: Encode(%q, %+v): %v", name, text, opt, err)
				}
				for _, id := range ids {
					if id < 0 || int(id) >= tok.NVocab() {
						t.Fatalf("%s: Encode(%q) gave id %d outside the vocabulary", name, text, id)
					}
				}
				back, err := tok.Decode(ids)
				if err != nil {
					t.Fatalf("%s: Decode(%v): %v", name, ids, err)
				}
				if name == "ggml-vocab-llama-spm.gguf" && opt == (tokenizer.Options{}) && utf8.ValidString(text) && !strings.Contains(text, "▁") &&
					!bytes.Equal(back, []byte(text)) {
					t.Fatalf("%s: Decode(Encode(%q)) = %q", name, text, back)
				}
			}
		}
	})
}
