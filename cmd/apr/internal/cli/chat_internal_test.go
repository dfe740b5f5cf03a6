package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
)

// TestChatInterruptStopsTheAnswer: Ctrl-C during an answer stops it after
// the token being generated (finish "interrupted"), and the conversation
// goes on from what was said.
func TestChatInterruptStopsTheAnswer(t *testing.T) {
	p, err := synth.FindPreset("qwen2", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := synth.Write(path, synth.Options{Preset: p, Type: quant.F32, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	m, err := generate.Load(context.Background(), generate.LoadOptions{Model: path, Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	slot := m.NewSlot(256)
	defer slot.Close()
	var out, errw bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errw}
	sigs := make(chan os.Signal, 1)
	sigs <- os.Interrupt // pressed while the first token is being sampled
	msgs := []map[string]any{{"role": "user", "content": "hello"}}
	turn, err := chatAnswer(context.Background(), env, m, slot, msgs, chatOptions{N: 50, JSON: true}, sigs)
	if err != nil {
		t.Fatal(err)
	}
	if turn.FinishReason != "interrupted" || turn.CompletionTokens != 1 {
		t.Errorf("interrupted turn: finish %q after %d tokens, want interrupted after 1", turn.FinishReason, turn.CompletionTokens)
	}
	// The next turn runs normally on the same slot.
	msgs = append(msgs, map[string]any{"role": "assistant", "content": turn.Assistant}, map[string]any{"role": "user", "content": "again"})
	turn, err = chatAnswer(context.Background(), env, m, slot, msgs, chatOptions{N: 5, JSON: true}, make(chan os.Signal))
	if err != nil || turn.FinishReason == "interrupted" || turn.CompletionTokens == 0 {
		t.Errorf("next turn: %+v, %v", turn, err)
	}
}
