package generate_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/sample"
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

// TestPromptRows: a sequence that scores its prompt (SeqOptions.PromptRows)
// hands over every prompt position's row in order, each the row one Eval of
// the whole prompt gives, in passes of at most 64 tokens, never from the
// slot's cache; with MaxTokens 0 it ends after the prompt (FinishLength)
// without sampling, and with MaxTokens n it then generates what a plain
// sequence generates.
func TestPromptRows(t *testing.T) {
	m, err := generate.Load(context.Background(), generate.LoadOptions{Model: testutil.Fixture(t, "models/stories260K.gguf"), Backend: "ref", NoTemplate: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	text := "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her friends and her dog."
	prompt, _ := m.Tok.Encode(text+" "+text, tokenizerOpts)
	if len(prompt) <= 64 {
		t.Fatalf("the prompt has %d tokens: want more than one pass of 64", len(prompt))
	}
	sess, err := m.Eng.NewSession(256)
	if err != nil {
		t.Fatal(err)
	}
	want, err := sess.Eval(prompt, true)
	if err != nil {
		t.Fatal(err)
	}
	slot := m.NewSlot(256)
	defer slot.Close()
	// Fill the slot's cache with a prefix: scoring must not take it.
	q, _, _ := slot.Start(prompt[:10], generate.SeqOptions{MaxTokens: 1})
	runSeq(t, q)
	var got [][]float32
	var pos []int
	score := generate.SeqOptions{MaxTokens: 0, PromptRows: func(p int, row []float32) {
		pos = append(pos, p)
		got = append(got, slices.Clone(row))
	}}
	q, cached, err := slot.Start(prompt, score)
	if err != nil || cached != 0 {
		t.Fatalf("Start to score: cached %d, %v; want 0 and no error", cached, err)
	}
	passes := 0
	for !q.Done() {
		sampled, err := q.Advance(0)
		if err != nil || sampled {
			t.Fatalf("scoring pass %d: sampled %v, %v", passes, sampled, err)
		}
		passes++
	}
	if q.Finish() != generate.FinishLength || len(q.Tokens()) != 0 {
		t.Errorf("scored: finish %q, %d tokens; want length and none", q.Finish(), len(q.Tokens()))
	}
	if wantPasses := (len(prompt) + 63) / 64; passes != wantPasses {
		t.Errorf("%d passes for %d prompt tokens, want %d of at most 64", passes, len(prompt), wantPasses)
	}
	if !slices.Equal(pos, iota(len(prompt))) {
		t.Fatalf("rows at positions %v, want 0 … %d in order", pos, len(prompt)-1)
	}
	for p := range want {
		if !slices.Equal(got[p], want[p]) {
			t.Fatalf("position %d: the scored row differs from one Eval of the prompt", p)
		}
	}
	// Scoring then generating: the tokens a plain sequence gives.
	score.MaxTokens = 6
	q, _, _ = slot.Start(prompt, score)
	scored := runSeq(t, q)
	fresh := m.NewSlot(256)
	defer fresh.Close()
	q, _, _ = fresh.Start(prompt, generate.SeqOptions{MaxTokens: 6})
	if diff := cmp.Diff(runSeq(t, q), scored); diff != "" {
		t.Errorf("generated after scoring (-plain +scored):\n%s", diff)
	}
	if _, _, err := fresh.Start(prompt, generate.SeqOptions{MaxTokens: 0}); err == nil {
		t.Error("MaxTokens 0 without PromptRows was accepted")
	}
}

func iota(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestJSONMode: with SeqOptions.JSON every completion's text is a prefix of
// one JSON object at every step, greedy and sampled, and the sequence ends
// on an end-of-generation token only once the object is closed — even with
// that token biased by +100, when the text is then a whole valid object.
// Without it, the same model writes no JSON.
func TestJSONMode(t *testing.T) {
	m, err := generate.Load(context.Background(), generate.LoadOptions{Model: testutil.Fixture(t, "models/stories260K.gguf"), Backend: "cpu", NoTemplate: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt, _ := m.Tok.Encode("Once upon a time", tokenizerOpts)
	eog := int32(-1)
	for id := range int32(m.Tok.NVocab()) {
		if m.Tok.IsEOG(id) {
			eog = id
			break
		}
	}
	run := func(o generate.SeqOptions) (string, string) {
		t.Helper()
		slot := m.NewSlot(256)
		defer slot.Close()
		q, _, err := slot.Start(prompt, o)
		if err != nil {
			t.Fatal(err)
		}
		var text []byte
		for !q.Done() {
			sampled, err := q.Advance(0)
			if err != nil {
				t.Fatal(err)
			}
			if sampled {
				_, b, _ := q.Last()
				text = append(text, b...)
				if o.JSON && !generate.JSONObjectPrefix(string(text)) {
					t.Fatalf("%+v: %q is no prefix of a JSON object", o.Sampling, text)
				}
			}
		}
		return string(text), q.Finish()
	}
	// Biases that pull toward closing: the tokens of '"' and '}' and the
	// end-of-generation token (each drawn only where the object allows it).
	closing := map[int32]float64{eog: 100}
	for id := range int32(m.Tok.NVocab()) {
		if p, _ := m.Tok.Piece(id); (p == `"` || p == "}") && !m.Tok.IsControl(id) {
			closing[id] = 100
		}
	}
	if len(closing) < 3 {
		t.Fatalf("stories260K has no token of '\"' or '}': %v", closing)
	}
	closed := 0
	for seed := range uint64(6) {
		for _, p := range []sample.Params{{Seed: seed, Temp: 0}, {Seed: seed, Temp: 1}, {Seed: seed, Temp: 1, LogitBias: closing}} {
			text, finish := run(generate.SeqOptions{MaxTokens: 60, Sampling: p, JSON: true})
			if finish == generate.FinishStop {
				closed++
				if !json.Valid([]byte(text)) || !strings.HasPrefix(strings.TrimSpace(text), "{") {
					t.Errorf("%+v: ended on end-of-generation with %q, not one whole object", p, text)
				}
			}
		}
	}
	t.Logf("%d of 18 runs closed their object and stopped", closed)
	if closed < 6 {
		t.Errorf("%d runs closed their object: each of the 6 biased toward closing should", closed)
	}
	if text, _ := run(generate.SeqOptions{MaxTokens: 30}); generate.JSONObjectPrefix(text) {
		t.Errorf("without JSON mode the model wrote %q, a JSON prefix: the test would not see the mask", text)
	}
}
