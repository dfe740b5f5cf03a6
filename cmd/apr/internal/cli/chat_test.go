package cli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/internal/testutil"
)

type chatJSON struct {
	Turns []struct {
		User             string  `json:"user"`
		Assistant        string  `json:"assistant"`
		TokenIDs         []int32 `json:"token_ids"`
		PromptTokens     int     `json:"prompt_tokens"`
		CachedTokens     int     `json:"cached_tokens"`
		PrefillTokens    int     `json:"prefill_tokens"`
		CompletionTokens int     `json:"completion_tokens"`
		FinishReason     string  `json:"finish_reason"`
	} `json:"turns"`
}

// TestChatKeepsKV: apr chat --json over three lines (two turns, then
// /reset and a third): turn 2 prefills only its new tokens and answers as a
// cold run of the whole conversation does; after /reset nothing is reused.
func TestChatKeepsKV(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if code, _, stderr := runApr(t, "synth", "--arch", "qwen2", "--preset", "tiny", "-o", model); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	var stdout, stderr bytes.Buffer
	in := "hello\nhow are you\n/reset\nhello\n"
	code := cli.Main([]string{"chat", model, "-n", "8", "--json", "--threads", "1"}, strings.NewReader(in), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("apr chat: exit %d\n%s", code, stderr.String())
	}
	var tr chatJSON
	oneJSON(t, stdout.String(), &tr)
	if len(tr.Turns) != 3 {
		t.Fatalf("%d turns, want 3", len(tr.Turns))
	}
	t1, t2, t3 := tr.Turns[0], tr.Turns[1], tr.Turns[2]
	if fed := t1.PromptTokens + t1.CompletionTokens - 1; t2.CachedTokens != fed || t2.PrefillTokens != t2.PromptTokens-fed {
		t.Errorf("turn 2: cached %d prefill %d of %d, want %d cached (everything turn 1 fed)", t2.CachedTokens, t2.PrefillTokens, t2.PromptTokens, fed)
	}
	if t3.CachedTokens != 0 {
		t.Errorf("after /reset: %d tokens cached, want 0", t3.CachedTokens)
	}
	if diff := cmp.Diff(t1.TokenIDs, t3.TokenIDs); diff != "" {
		t.Errorf("the same first turn after /reset answered differently:\n%s", diff)
	}
	// A cold run of the whole conversation.
	m, err := generate.Load(context.Background(), generate.LoadOptions{Model: model, Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The answer's exact bytes (the JSON transcript shows invalid UTF-8 as
	// U+FFFD; the tiny random model's answers are such bytes).
	answer, err := m.Tok.Decode(t1.TokenIDs)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := generate.MessagesTokens(context.Background(), m.Tok, m.Tmpl, chat.Input{Messages: []map[string]any{
		{"role": "user", "content": "hello"}, {"role": "assistant", "content": string(answer)}, {"role": "user", "content": "how are you"}}})
	if err != nil {
		t.Fatal(err)
	}
	q, cached, err := m.NewSlot(len(prompt)+8).Start(prompt, generate.SeqOptions{MaxTokens: 8, SkipControl: true})
	if err != nil || cached != 0 {
		t.Fatalf("cold start: %v (cached %d)", err, cached)
	}
	for !q.Done() {
		if _, err := q.Advance(0); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(q.Tokens(), t2.TokenIDs); diff != "" {
		t.Errorf("turn 2 (-cold run of the conversation +apr chat):\n%s", diff)
	}
	if !strings.Contains(stderr.String(), "cached, ") {
		t.Errorf("stderr has no per-turn prefill line:\n%s", stderr.String())
	}
}

// TestChatRefusesNoTemplate: a model without a chat template is refused.
func TestChatRefusesNoTemplate(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli.Main([]string{"chat", testutil.Fixture(t, "models/stories260K.gguf")}, strings.NewReader("hi\n"), &stdout, &stderr)
	if code != cli.ExitRefused || !strings.Contains(stderr.String(), "no usable chat template") {
		t.Errorf("exit %d, stderr %q; want 3 naming the missing template", code, stderr.String())
	}
}
