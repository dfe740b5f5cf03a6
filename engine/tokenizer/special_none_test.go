package tokenizer_test

import (
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
)

// TestSpecialIDNone: 0xFFFFFFFF (-1 written unsigned) for a special token
// whose default is "none" means none, and is not warned about (stories260K
// printed two WARN lines on every tokenize); any other out-of-range id, or
// 0xFFFFFFFF where the default is a real token, still is.
func TestSpecialIDNone(t *testing.T) {
	tests := []struct {
		name string
		key  string
		id   uint32
		warn string // "" for none
	}{
		{"pad none", "tokenizer.ggml.padding_token_id", 0xFFFFFFFF, ""},
		{"sep none", "tokenizer.ggml.seperator_token_id", 0xFFFFFFFF, ""},
		{"pad out of range", "tokenizer.ggml.padding_token_id", 100000, "padding_token_id = 100000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := tokenizer.New(tinyBPE(t, func(b *gguf.Builder) { b.Set(tc.key, gguf.V(tc.id)) }))
			if err != nil {
				t.Fatal(err)
			}
			w := strings.Join(tok.Warnings(), "\n")
			if tc.warn == "" && w != "" || tc.warn != "" && !strings.Contains(w, tc.warn) {
				t.Errorf("%s = %d: warnings %q, want %q", tc.key, tc.id, w, tc.warn)
			}
		})
	}
}
