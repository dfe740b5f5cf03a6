package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
)

// spmPair returns the llama-spm tokenizer twice: as loaded (cutting the text
// before each ▁, see spm) and with the cut switched off (llama.cpp's one
// pass over the whole fragment).
func spmPair(tb testing.TB) (chunked, whole *Tokenizer) {
	tb.Helper()
	path := filepath.Join("..", "..", "..", "shared", "fixtures", "vocab", "ggml-vocab-llama-spm.gguf")
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("SKIP (not a pass): fixture %s not found", path)
	}
	load := func() *Tokenizer {
		f, err := gguf.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { f.Close() })
		t, err := New(f)
		if err != nil {
			tb.Fatal(err)
		}
		return t
	}
	chunked, whole = load(), load()
	if !chunked.spmChunks {
		tb.Fatal("llama-spm should allow cutting before ▁")
	}
	whole.spmChunks = false
	return chunked, whole
}

func checkSPMCut(t *testing.T, chunked, whole *Tokenizer, text string) {
	t.Helper()
	for _, opt := range []Options{{}, {AddSpecial: true, ParseSpecial: true}} {
		a, errA := chunked.Encode(text, opt)
		b, errB := whole.Encode(text, opt)
		if (errA == nil) != (errB == nil) || !slices.Equal(a, b) {
			t.Fatalf("Encode(%q, %+v): cut %v (%v), whole %v (%v)", text, opt, a, errA, b, errB)
		}
	}
}

func TestSPMCutMatchesWholePass(t *testing.T) {
	chunked, whole := spmPair(t)
	r := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the quick brown fox jumps over lazy dog Hello World 你好 世界 🦙 naïve ▁ ▁▁ 123 3.14 </s> <s> ' \t \n \xe4 \xff")
	for range 2000 {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteString(strings.Repeat(" ", r.IntN(3)))
		}
		checkSPMCut(t, chunked, whole, b.String())
	}
}

func FuzzSPMCutMatchesWholePass(f *testing.F) {
	f.Add("Hello world  and  you\xe4 ▁x")
	chunked, whole := spmPair(f)
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 1024 {
			t.Skip()
		}
		checkSPMCut(t, chunked, whole, text)
	})
}
