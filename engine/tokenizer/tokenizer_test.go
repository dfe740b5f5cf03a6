package tokenizer_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/refuse"
)

func fixtureTokenizer(tb testing.TB, name string) *tokenizer.Tokenizer {
	tb.Helper()
	return openTokenizer(tb, filepath.Join(testutil.Fixtures(tb), "vocab", name))
}

// byteLevelAlphabet returns GPT-2's 256 byte-level characters in byte order.
func byteLevelAlphabet() []string {
	var out []string
	n := 0
	for b := range 256 {
		r := rune(b)
		if !((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
			r = rune(256 + n)
			n++
		}
		out = append(out, string(r))
	}
	return out
}

// tinyBPE builds a small byte-level BPE vocabulary: the 256 byte characters
// (ids 0..255), a few merges, and control/user-defined tokens. edit may
// change the keys before the file is encoded.
func tinyBPE(tb testing.TB, edit func(b *gguf.Builder)) *gguf.File {
	tb.Helper()
	toks := byteLevelAlphabet()
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = 1
	}
	merges := []string{"h e", "l l", "he ll", "hell o", "Ġ w", "Ġw o", "r l", "Ġwo rl", "Ġworl d"}
	for _, m := range merges {
		toks = append(toks, strings.ReplaceAll(m, " ", ""))
		types = append(types, 1)
	}
	for _, s := range []struct {
		text string
		typ  int32
	}{{"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<think>", 4}} {
		toks = append(toks, s.text)
		types = append(types, s.typ)
	}
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.V("qwen2"))
	b.Set("tokenizer.ggml.model", gguf.V("gpt2"))
	b.Set("tokenizer.ggml.pre", gguf.V("qwen2"))
	b.Set("tokenizer.ggml.tokens", gguf.V(toks))
	b.Set("tokenizer.ggml.token_type", gguf.V(types))
	b.Set("tokenizer.ggml.merges", gguf.V(merges))
	b.Set("tokenizer.ggml.bos_token_id", gguf.V(uint32(265)))
	b.Set("tokenizer.ggml.eos_token_id", gguf.V(uint32(267)))
	if edit != nil {
		edit(b)
	}
	data, _, err := b.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	f, err := gguf.Parse("tiny-bpe.gguf", data)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func tinyTokenizer(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	tok, err := tokenizer.New(tinyBPE(tb, nil))
	if err != nil {
		tb.Fatalf("tokenizer.New(tiny): %v", err)
	}
	return tok
}

func TestTinyBPE(t *testing.T) {
	tok := tinyTokenizer(t)
	tests := []struct {
		name string
		text string
		opt  tokenizer.Options
		want []int32
	}{
		{"merges", "hello world", tokenizer.Options{}, []int32{259, 264}},
		{"control not parsed", "<|im_end|>", tokenizer.Options{}, []int32{60, 124, 105, 109, 95, 101, 110, 100, 124, 62}},
		{"control parsed", "<|im_start|>hello<|im_end|>", tokenizer.Options{ParseSpecial: true}, []int32{266, 259, 267}},
		{"user-defined always", "<think>hello", tokenizer.Options{}, []int32{268, 259}},
		{"add special: no BOS flag", "hello", tokenizer.Options{AddSpecial: true}, []int32{259}},
		{"empty", "", tokenizer.Options{AddSpecial: true}, []int32{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tok.Encode(tc.text, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(%q, %+v) mismatch (-want +got):\n%s", tc.text, tc.opt, diff)
			}
		})
	}
}

func TestAddSpecialFlags(t *testing.T) {
	f := tinyBPE(t, func(b *gguf.Builder) {
		b.Set("tokenizer.ggml.add_bos_token", gguf.V(true))
		b.Set("tokenizer.ggml.add_eos_token", gguf.V(true))
	})
	tok, err := tokenizer.New(f)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opt  tokenizer.Options
		want []int32
	}{
		{"add special", tokenizer.Options{AddSpecial: true}, []int32{265, 259, 267}},
		{"skip bos", tokenizer.Options{AddSpecial: true, SkipBOS: true}, []int32{259, 267}},
		{"no special", tokenizer.Options{}, []int32{259}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tok.Encode("hello", tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(hello, %+v) mismatch (-want +got):\n%s", tc.opt, diff)
			}
		})
	}
}

func TestNewRefusesAndRejects(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(b *gguf.Builder)
		refused bool
		bad     bool
		inMsg   string
	}{
		{"unknown pre", func(b *gguf.Builder) { b.Set("tokenizer.ggml.pre", gguf.V("qwen3")) }, true, false, `"qwen3"`},
		{"unknown model", func(b *gguf.Builder) { b.Set("tokenizer.ggml.model", gguf.V("t5")) }, true, false, `"t5"`},
		{"no model", func(b *gguf.Builder) { b.Delete("tokenizer.ggml.model") }, false, true, "tokenizer.ggml.model"},
		{"no tokens", func(b *gguf.Builder) { b.Delete("tokenizer.ggml.tokens") }, false, true, "tokenizer.ggml.tokens"},
		{"tokens not strings", func(b *gguf.Builder) { b.Set("tokenizer.ggml.tokens", gguf.V([]int32{1})) }, false, true, "tokenizer.ggml.tokens"},
		{"no merges", func(b *gguf.Builder) { b.Delete("tokenizer.ggml.merges") }, false, true, "tokenizer.ggml.merges"},
		{"short token types", func(b *gguf.Builder) { b.Set("tokenizer.ggml.token_type", gguf.V([]int32{1, 1})) }, false, true, "tokenizer.ggml.token_type"},
		{"short scores", func(b *gguf.Builder) { b.Set("tokenizer.ggml.scores", gguf.V([]float32{0})) }, false, true, "tokenizer.ggml.scores"},
		{"duplicate token", func(b *gguf.Builder) {
			toks := byteLevelAlphabet()
			toks[1] = toks[0]
			b.Set("tokenizer.ggml.tokens", gguf.V(toks))
			b.Delete("tokenizer.ggml.token_type")
		}, false, true, "duplicate"},
		{"add_bos not a bool", func(b *gguf.Builder) { b.Set("tokenizer.ggml.add_bos_token", gguf.V("yes")) }, false, true, "tokenizer.ggml.add_bos_token"},
		{"bos id not an integer", func(b *gguf.Builder) { b.Set("tokenizer.ggml.bos_token_id", gguf.V("1")) }, false, true, "tokenizer.ggml.bos_token_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tokenizer.New(tinyBPE(t, tc.edit))
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			if got := errors.Is(err, refuse.ErrRefused); got != tc.refused {
				t.Errorf("New: errors.Is(%v, ErrRefused) = %v, want %v", err, got, tc.refused)
			}
			if got := errors.Is(err, tokenizer.ErrVocab); got != tc.bad {
				t.Errorf("New: errors.Is(%v, ErrVocab) = %v, want %v", err, got, tc.bad)
			}
			if !strings.Contains(err.Error(), tc.inMsg) {
				t.Errorf("New: error %q does not name %q", err, tc.inMsg)
			}
		})
	}
}

func TestMissingPreUsesDefault(t *testing.T) {
	tok, err := tokenizer.New(tinyBPE(t, func(b *gguf.Builder) { b.Delete("tokenizer.ggml.pre") }))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Pre() != "default" || len(tok.Warnings()) == 0 {
		t.Errorf("Pre() = %q with warnings %q, want \"default\" and a warning", tok.Pre(), tok.Warnings())
	}
}

func TestQwenSpecialTokens(t *testing.T) {
	tok := fixtureTokenizer(t, "qwen3-tokenizer.gguf")
	prompt := "<|im_start|>user\nHi<|im_end|>\n<think>\n\n</think>"
	got, err := tok.Encode(prompt, tokenizer.Options{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{151644, 872, 198, 13048, 151645, 198, 151667, 271, 151668}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Encode(%q, parse special) mismatch (-want +got):\n%s", prompt, diff)
	}
	// Without parse_special, control tokens are plain text; user-defined
	// tokens (<think>) are still matched, as in llama.cpp.
	plain, err := tok.Encode("<|im_start|><think>", tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plain[0] == 151644 || plain[len(plain)-1] != 151667 {
		t.Errorf("Encode(<|im_start|><think>) = %v: want <|im_start|> as text and <think> as 151667", plain)
	}
	if diff := cmp.Diff([]int32{151643, 151645, 151662, 151663, 151664}, without(tok.EOGs(), 128247)); diff != "" {
		t.Errorf("EOGs() mismatch (-want +got):\n%s", diff)
	}
	if !tok.IsControl(151644) || tok.IsControl(151667) || tok.IsControl(9707) {
		t.Errorf("IsControl(151644, 151667, 9707) = %v %v %v, want true false false",
			tok.IsControl(151644), tok.IsControl(151667), tok.IsControl(9707))
	}
	if id, ok := tok.TokenID("<|im_end|>"); !ok || id != 151645 {
		t.Errorf("TokenID(<|im_end|>) = %d, %v", id, ok)
	}
	if bos, ok := tok.BOS(); !ok || bos != 151643 || tok.AddBOS() {
		t.Errorf("BOS() = %d, %v, AddBOS() = %v; want 151643, true, false", bos, ok, tok.AddBOS())
	}
	back, err := tok.Decode(got)
	if err != nil || string(back) != prompt {
		t.Errorf("Decode(Encode(%q)) = %q, %v", prompt, back, err)
	}
}

func without(ids []int32, x int32) []int32 {
	var out []int32
	for _, id := range ids {
		if id != x {
			out = append(out, id)
		}
	}
	return out
}

func TestSPM(t *testing.T) {
	tok := fixtureTokenizer(t, "ggml-vocab-llama-spm.gguf")
	tests := []struct {
		name string
		text string
		opt  tokenizer.Options
		want []int32
	}{
		{"bos and space prefix", "Hello world", tokenizer.Options{AddSpecial: true}, []int32{1, 15043, 3186}},
		{"</s> parsed is eos", "Hi</s>", tokenizer.Options{AddSpecial: true, ParseSpecial: true}, []int32{1, 6324, 2}},
		{"</s> not parsed is text", "</s>", tokenizer.Options{}, []int32{1533, 29879, 29958}},
		{"byte fallback", "\xff", tokenizer.Options{}, []int32{29871, 258}},
		{"no bos", "Hello", tokenizer.Options{AddSpecial: true, SkipBOS: true}, []int32{15043}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tok.Encode(tc.text, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(%q, %+v) mismatch (-want +got):\n%s", tc.text, tc.opt, diff)
			}
		})
	}
	// Every non-ASCII byte that is not part of a known piece falls back to
	// its byte token, never to <unk> (id 0).
	for b := 0x80; b < 0x100; b++ {
		ids, err := tok.Encode(string([]byte{'a', byte(b), 'z'}), tokenizer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if id == 0 {
				t.Errorf("Encode(a\\x%02x z) = %v contains <unk>", b, ids)
			}
		}
		if back, _ := tok.Decode(ids); !bytes.Equal(back, []byte{'a', byte(b), 'z'}) {
			t.Errorf("Decode(Encode(a\\x%02xz)) = %q", b, back)
		}
	}
	if eos, ok := tok.EOS(); !ok || eos != 2 || !tok.IsEOG(2) {
		t.Errorf("EOS() = %d, %v; IsEOG(2) = %v", eos, ok, tok.IsEOG(2))
	}
}

func TestPieceAndDecode(t *testing.T) {
	tok := fixtureTokenizer(t, "ggml-vocab-llama-spm.gguf")
	tests := []struct {
		name string
		ids  []int32
		want string
	}{
		{"leading space of first token dropped", []int32{15043, 3186}, "Hello world"},
		{"special rendered", []int32{1, 15043, 2}, "<s> Hello</s>"},
		{"byte tokens", []int32{243, 162, 169, 156}, "🦙"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tok.Decode(tc.ids)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Decode(%v) = %q, want %q", tc.ids, got, tc.want)
			}
		})
	}
	if p, err := tok.Piece(15043); err != nil || p != " Hello" {
		t.Errorf("Piece(15043) = %q, %v; want \" Hello\"", p, err)
	}
	if _, err := tok.Piece(32000); !errors.Is(err, tokenizer.ErrID) {
		t.Errorf("Piece(32000) error = %v, want ErrID", err)
	}
	if _, err := tok.Decode([]int32{1, -1}); !errors.Is(err, tokenizer.ErrID) {
		t.Errorf("Decode([1 -1]) error = %v, want ErrID", err)
	}
}

// TestStreamDecoder feeds the ids of every vector case one at a time: each
// Write returns only complete characters, and Write+Flush output is exactly
// the concatenated pieces.
func TestStreamDecoder(t *testing.T) {
	for _, name := range []string{"qwen3-tokenizer.gguf", "ggml-vocab-llama-spm.gguf"} {
		t.Run(name, func(t *testing.T) {
			tok := fixtureTokenizer(t, name)
			vec := "ggml-vocab-qwen2.gguf"
			if strings.Contains(name, "spm") {
				vec = "ggml-vocab-llama-spm.gguf"
			}
			dir := filepath.Join(testutil.Fixtures(t), "vocab")
			cases, _ := readVectors(t, filepath.Join(dir, vec+".inp"), filepath.Join(dir, vec+".out"))
			cases = append(cases, "🦙🚀 ấ 你好", "\xe4\xbd", "a\xffb")
			for _, text := range cases {
				ids, err := tok.Encode(text, tokenizer.Options{})
				if err != nil {
					t.Fatal(err)
				}
				var want []byte
				for _, id := range ids {
					p, _ := tok.Piece(id)
					want = append(want, p...)
				}
				d := tokenizer.NewStreamDecoder(tok)
				var got []byte
				for _, id := range ids {
					b, err := d.Write(id)
					if err != nil {
						t.Fatal(err)
					}
					if utf8.Valid(want) && !utf8.Valid(b) {
						t.Errorf("Write(%d) for %q returned %q, not complete UTF-8", id, text, b)
					}
					got = append(got, b...)
				}
				got = append(got, d.Flush()...)
				if !bytes.Equal(got, want) {
					t.Errorf("stream of %q = %q, want %q", text, got, want)
				}
			}
		})
	}
}

func TestStreamDecoderHoldsSplitCharacter(t *testing.T) {
	tok := fixtureTokenizer(t, "ggml-vocab-llama-spm.gguf")
	d := tokenizer.NewStreamDecoder(tok)
	// 🦙 is F0 9F A6 99: byte tokens <0xF0>=243, <0x9F>=162, <0xA6>=169, <0x99>=156.
	steps := []struct {
		id   int32
		want string
	}{{243, ""}, {162, ""}, {169, ""}, {156, "🦙"}, {243, ""}}
	for _, s := range steps {
		got, err := d.Write(s.id)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != s.want {
			t.Errorf("Write(%d) = %q, want %q", s.id, got, s.want)
		}
	}
	if got := d.Flush(); !bytes.Equal(got, []byte{0xF0}) {
		t.Errorf("Flush() = %q, want the held byte F0", got)
	}
	// A byte that can never start a character is passed through at once.
	if got, _ := d.Write(258); !bytes.Equal(got, []byte{0xFF}) {
		t.Errorf("Write(<0xFF>) = %q, want FF", got)
	}
}

// TestConcurrentEncode encodes the qwen2 vectors from several goroutines at
// once (run with -race): a Tokenizer is safe for concurrent use.
func TestConcurrentEncode(t *testing.T) {
	tok := fixtureTokenizer(t, "qwen3-tokenizer.gguf")
	dir := filepath.Join(testutil.Fixtures(t), "vocab")
	cases, want := readVectors(t, filepath.Join(dir, "ggml-vocab-qwen2.gguf.inp"), filepath.Join(dir, "ggml-vocab-qwen2.gguf.out"))
	errs := make(chan string, 64)
	done := make(chan struct{})
	const workers = 4
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for round := range 5 {
				for i := range cases {
					j := (i + w + round) % len(cases)
					got, err := tok.Encode(cases[j], tokenizer.Options{})
					if err != nil || !slices.Equal(got, want[j]) {
						select {
						case errs <- fmt.Sprintf("worker %d: Encode(%q) = %v, %v; want %v", w, cases[j], got, err, want[j]):
						default:
						}
						return
					}
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestIgnoreMerges: with a llama3-type pre-tokenizer, a word that is a token
// is taken whole even where the merges would not build it (llama.cpp's
// ignore_merges); other pre-tokenizers merge.
func TestIgnoreMerges(t *testing.T) {
	edit := func(pre string) func(b *gguf.Builder) {
		return func(b *gguf.Builder) {
			toks := byteLevelAlphabet()
			toks = append(toks, "he", "ll", "hell", "hello", "Ġw", "Ġwo", "rl", "Ġworl", "Ġworld", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "xyz")
			types := make([]int32, len(toks))
			for i := range types {
				types[i] = 1
			}
			b.Set("tokenizer.ggml.tokens", gguf.V(toks))
			b.Set("tokenizer.ggml.token_type", gguf.V(types))
			b.Set("tokenizer.ggml.pre", gguf.V(pre))
		}
	}
	tests := []struct {
		pre  string
		want []int32
	}{
		{"llama-bpe", []int32{269}},
		{"qwen2", []int32{120, 121, 122}},
	}
	for _, tc := range tests {
		t.Run(tc.pre, func(t *testing.T) {
			tok, err := tokenizer.New(tinyBPE(t, edit(tc.pre)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tok.Encode("xyz", tokenizer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pre %s: Encode(xyz) mismatch (-want +got):\n%s", tc.pre, diff)
			}
		})
	}
	// llama-bpe adds BOS by default (llama.cpp's LLAMA3 type), qwen2 does not.
	tok, err := tokenizer.New(tinyBPE(t, edit("llama-bpe")))
	if err != nil {
		t.Fatal(err)
	}
	if !tok.AddBOS() {
		t.Error("llama-bpe: AddBOS() = false, want true")
	}
}
