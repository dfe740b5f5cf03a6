package generate_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/testutil"
)

func runSeq(t *testing.T, q *generate.Seq) []int32 {
	t.Helper()
	for !q.Done() {
		if _, err := q.Advance(5); err != nil { // prefill in chunks of 5
			t.Fatal(err)
		}
	}
	return slices.Clone(q.Tokens())
}

// TestSlotReuse: a slot reuses its fed tokens only when they are a strict
// prefix of the next prompt, and reusing changes no answer.
func TestSlotReuse(t *testing.T) {
	m, err := generate.Load(context.Background(), generate.LoadOptions{Model: testutil.Fixture(t, "models/stories260K.gguf"), Backend: "ref", NoTemplate: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.Tok.Encode("Once upon a time", tokenizerOpts)
	slot := m.NewSlot(128)
	defer slot.Close()
	opts := generate.SeqOptions{MaxTokens: 10}
	q, cached, err := slot.Start(a, opts)
	if err != nil || cached != 0 {
		t.Fatalf("first Start: cached %d, %v", cached, err)
	}
	first := runSeq(t, q)
	if got := len(slot.Fed()); got != len(a)+len(first)-1 {
		t.Errorf("fed %d tokens, want prompt + answer - 1 = %d", got, len(a)+len(first)-1)
	}
	// The same prompt again: shorter than what was fed, so no reuse.
	q, cached, _ = slot.Start(a, opts)
	if cached != 0 {
		t.Errorf("the same prompt reused %d tokens", cached)
	}
	if diff := cmp.Diff(first, runSeq(t, q)); diff != "" {
		t.Errorf("after a reset (-first +again):\n%s", diff)
	}
	// What was fed plus more: everything fed is reused, and the answer is
	// the one a fresh slot gives.
	b := append(slices.Clone(slot.Fed()), first[len(first)-1], 13)
	q, cached, _ = slot.Start(b, opts)
	if cached != len(slot.Fed()) {
		t.Errorf("extension reused %d tokens, want %d", cached, len(slot.Fed()))
	}
	reused := runSeq(t, q)
	fresh := m.NewSlot(128)
	defer fresh.Close()
	q, _, _ = fresh.Start(b, opts)
	if diff := cmp.Diff(runSeq(t, q), reused); diff != "" {
		t.Errorf("reused (-fresh +reused):\n%s", diff)
	}
	// Busy slots refuse a second generation.
	q, _, _ = slot.Start(a, opts)
	if _, _, err := slot.Start(a, opts); err == nil {
		t.Errorf("a busy slot started a second generation")
	}
	q.Stop("test")
	if _, _, err := slot.Start(a, opts); err != nil {
		t.Errorf("after Stop: %v", err)
	}
}

var tokenizerOpts = tokenizer.Options{AddSpecial: true, ParseSpecial: true}
