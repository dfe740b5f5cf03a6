package generate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/testutil"
)

// randJSON is a random JSON value of depth at most d, written with random
// whitespace.
func randJSON(r *rand.Rand, d int, top bool) string {
	ws := func() string { return []string{"", " ", "\n", "\t ", "\r\n  "}[r.IntN(5)] }
	k := r.IntN(8)
	if top {
		k = 6
	}
	if d == 0 && k >= 6 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case 1, 2:
		nums := []string{"0", "-0", "7", "-12", "3.25", "1e5", "-2.5E-3", "6.02e+23", "0.0", "100"}
		return nums[r.IntN(len(nums))]
	case 3, 4, 5:
		strs := []string{`""`, `"a"`, `"h\"i"`, `"\\"`, `"\u00e9\n\t"`, `"日本"`, `"\/x"`, `"\uD83D\uDE00"`}
		return strs[r.IntN(len(strs))]
	case 6:
		var parts []string
		for i := range r.IntN(4) {
			parts = append(parts, ws()+`"k`+string(rune('a'+i))+`"`+ws()+":"+ws()+randJSON(r, d-1, false)+ws())
		}
		return "{" + strings.Join(parts, ",") + ws() + "}"
	default:
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, ws()+randJSON(r, d-1, false)+ws())
		}
		return "[" + strings.Join(parts, ",") + ws() + "]"
	}
}

// TestJSONPrefix: every prefix of a JSON object is accepted and the whole
// is complete; whatever the recognizer accepts as complete is valid JSON
// (encoding/json), an object, over random objects and single-byte
// mutations of them; non-objects at the top, whitespace around the object
// and runs of more than maxJSONSpace spaces are refused.
func TestJSONPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	complete, rejected := 0, 0
	for range 3000 {
		s := randJSON(r, 4, true)
		if !json.Valid([]byte(s)) {
			t.Fatalf("generator wrote invalid JSON %q", s)
		}
		var p jsonPrefix
		for i := 0; i < len(s); i++ {
			if !p.FeedString(s[i : i+1]) {
				t.Fatalf("%q: refused at byte %d (%q)", s, i, s[:i+1])
			}
			if p.Complete() && i+1 < len(s) {
				t.Fatalf("%q: complete at byte %d before the object ends", s, i)
			}
		}
		if !p.Complete() {
			t.Fatalf("%q: not complete at its end", s)
		}
		// One byte changed: accepted as complete only if valid.
		b := []byte(s)
		const alphabet = "{}[]:,\"\\ 0123456789.eE+-tfnrulsa\x01"
		b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
		var q jsonPrefix
		if q.FeedString(string(b)) && q.Complete() {
			if !json.Valid(b) {
				t.Fatalf("%q accepted as a complete object; encoding/json says invalid", b)
			}
			complete++
		} else {
			rejected++
		}
	}
	t.Logf("mutations: %d accepted complete (all valid), %d refused or incomplete", complete, rejected)
	var ok jsonPrefix
	if !ok.FeedString(`{"a":"`+strings.Repeat(" ", 3*maxJSONSpace)+`",`+strings.Repeat(" ", maxJSONSpace)+`"b":1}`) || !ok.Complete() {
		t.Error("spaces inside a string, then a run of maxJSONSpace outside, were refused")
	}
	var num jsonPrefix // a number's end is counted once: the run after it may be maxJSONSpace long
	if !num.FeedString(`{"a":1`+strings.Repeat(" ", maxJSONSpace)+`}`) || !num.Complete() {
		t.Error("a run of maxJSONSpace spaces after a number was refused")
	}
	for _, s := range []string{` {}`, "{}\n", `{"a":` + strings.Repeat(" ", maxJSONSpace+1) + `1}`, `[1]`, `"x"`, `1`, `{"a":01}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":tru }`, "{\"a\":\"\x01\"}", `{"a":1}x`, `{"a":1}}`, `{"a":[1}`, `{"a":1.}`, `{"a":-}`, `{"a":"\x"}`} {
		var p jsonPrefix
		if p.FeedString(s) && p.Complete() {
			t.Errorf("%q accepted as a complete object", s)
		}
	}
	deep := strings.Repeat(`{"a":`, maxJSONDepth+1)
	var p jsonPrefix
	if p.FeedString(deep) {
		t.Errorf("nesting past %d accepted", maxJSONDepth)
	}
}

// FuzzJSONPrefix: the recognizer never panics, and whatever it accepts as
// one complete object is valid JSON (encoding/json) that is an object.
func FuzzJSONPrefix(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5e3,"x\u00e9"],"b":{"c":null}}`, `{"a":tru`, `[1]`, "{\"a\":\"\x01\"}"} {
		f.Add(s)
	}
	f.Add(`get_time", "arguments": {}`)
	f.Fuzz(func(t *testing.T, s string) {
		var p jsonPrefix
		if p.FeedString(s) && p.Complete() {
			if !json.Valid([]byte(s)) || s[0] != '{' {
				t.Fatalf("%q accepted as one complete object", s)
			}
		}
		// With lead choices: a complete text is one choice, then one
		// object.
		leads := []string{`get_time", "arguments": `, `get_timezone", "arguments": `}
		if q := newJSONPrefix(leads); q.FeedString(s) && q.Complete() {
			for _, l := range leads {
				if rest, ok := strings.CutPrefix(s, l); ok && json.Valid([]byte(rest)) && rest[0] == '{' {
					return
				}
			}
			t.Fatalf("%q accepted as a lead and one complete object", s)
		}
	})
}

// qwen3Vocab is the Qwen3 tokenizer of the fixtures (151,669 tokens).
func qwen3Vocab(tb testing.TB) *Model {
	tb.Helper()
	f, err := gguf.Open(testutil.Fixture(tb, "vocab/qwen3-tokenizer.gguf"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	tok, err := tokenizer.New(f)
	if err != nil {
		tb.Fatal(err)
	}
	return &Model{Tok: tok}
}

// allowedByWalk is jsonAllowed's answer computed afresh for each token, as
// the mask was before states were cached: whether id may follow state p.
func allowedByWalk(m *Model, p jsonPrefix, id int32) bool {
	tok := m.Tok
	if tok.IsEOG(id) {
		return p.Complete()
	}
	pc, err := tok.Piece(id)
	if err != nil || pc == "" || tok.IsControl(id) {
		return false
	}
	return p.FeedString(pc)
}

// TestJSONAllowedCache: the cached bitsets are each state's own, through
// the states of random JSON texts (whitespace runs, strings, numbers,
// nesting) byte by byte — more states than the cache keeps, so evicted ones
// come back — on the Qwen3 vocabulary: every token of every state as
// afresh, and a state met again is served from the cache.
func TestJSONAllowedCache(t *testing.T) {
	m := qwen3Vocab(t)
	r := rand.New(rand.NewPCG(5, 6))
	var states []jsonPrefix
	// States that differ in one field each: the rest of a literal, \u
	// digits to read, a key or a value, the whitespace run, the depth.
	for _, s := range []string{`{"a":t`, `{"a":f`, `{"a":n`, `{"a":tr`, `{"a":"\u0`, `{"a":"\u00`, `{"a`, `{"a":"b`,
		`{"a":1 `, `{"a":1   `, `{"a":{"b":"c`, `{"a":["c`, `{"a":[{"b":"c`} {
		var p jsonPrefix
		p.FeedString(s)
		states = append(states, p)
	}
	for len(states) < 3*jsonMaskStates {
		s := randJSON(r, 3, true)
		var p jsonPrefix
		for i := 0; i < len(s); i++ {
			p.step(s[i])
			if r.IntN(3) == 0 {
				states = append(states, p)
			}
		}
		states = append(states, p) // complete: end-of-generation allowed
	}
	n := m.Tok.NVocab()
	for k, p := range states {
		set := m.jsonAllowed(p)
		for id := range n {
			want := allowedByWalk(m, p, int32(id))
			if got := set[id>>6]&(1<<(id&63)) != 0; got != want {
				piece, _ := m.Tok.Piece(int32(id))
				t.Fatalf("state %d (%+v): token %d %q allowed %v, want %v", k, p, id, piece, got, want)
			}
		}
	}
	// maskJSON keeps exactly the allowed tokens' logits, and masks the
	// rows past the vocabulary (an output padded beyond the tokenizer's).
	row := make([]float32, n+7)
	for i := range row {
		row[i] = float32(i%13) - 6
	}
	for _, p := range states[:16] {
		q := &Seq{slot: &Slot{m: m}, json: p}
		got := q.maskJSON(row)
		for id := range row {
			want := float32(math.Inf(-1))
			if id < n && allowedByWalk(m, p, int32(id)) {
				want = row[id]
			}
			if got[id] != want {
				t.Fatalf("maskJSON in state %+v: token %d %v, want %v", p, id, got[id], want)
			}
		}
	}
	p := states[len(states)-1]
	a, b := m.jsonAllowed(p), m.jsonAllowed(p)
	if &a[0] != &b[0] {
		t.Error("a state met twice was computed twice")
	}
}

// BenchmarkMaskJSON: a step's mask on the Qwen3 vocabulary in a state not
// met yet (walk) and in one met (cached), inside a string value and after
// a key's colon.
func BenchmarkMaskJSON(b *testing.B) {
	m := qwen3Vocab(b)
	row := make([]float32, m.Tok.NVocab())
	for _, c := range []struct{ name, text string }{{"string", `{"answer": "The capital of France is`}, {"colon", `{"answer":`}} {
		var p jsonPrefix
		p.FeedString(c.text)
		q := &Seq{slot: &Slot{m: m}, json: p}
		q.maskJSON(row) // the vocabulary's classes, once per model
		b.Run(c.name+"/walk", func(b *testing.B) {
			for range b.N {
				m.masks.sets, m.masks.order = nil, nil
				q.maskJSON(row)
			}
		})
		b.Run(c.name+"/cached", func(b *testing.B) {
			for range b.N {
				q.maskJSON(row)
			}
		})
	}
}

// TestJSONLead: with lead choices, the text is one of them, whole, then
// one JSON object; choices that share a start part where they differ.
func TestJSONLead(t *testing.T) {
	leads := []string{`get_time", "arguments": `, `get_timezone", "arguments": `, `x", "arguments": `}
	for _, s := range []string{
		`get_time", "arguments": {}`, `get_timezone", "arguments": {"a": [1]}`, `x", "arguments": {"q":"get_time"}`,
	} {
		p := newJSONPrefix(leads)
		if !p.FeedString(s) || !p.Complete() {
			t.Errorf("%q: refused or incomplete", s)
		}
		for i := range len(s) { // every prefix is accepted, none complete
			q := newJSONPrefix(leads)
			if !q.FeedString(s[:i]) || q.Complete() {
				t.Errorf("prefix %q of %q: refused or complete", s[:i], s)
			}
		}
	}
	for _, s := range []string{`{}`, `get_times", "arguments": {}`, `get_time", "arguments":{}`, `y", "arguments": {}`,
		`get_time", "arguments": get_time", "arguments": {}`, `get_time", "arguments": {}}`} {
		p := newJSONPrefix(leads)
		if p.FeedString(s) && p.Complete() {
			t.Errorf("%q accepted", s)
		}
	}
	// The lead's states through the cache: each token as afresh.
	m := qwen3Vocab(t)
	for _, s := range []string{``, `get_`, `get_time`, `get_time"`, `get_timez`, `x", "arguments": `} {
		p := newJSONPrefix(leads)
		p.FeedString(s)
		set := m.jsonAllowed(p)
		for id := range m.Tok.NVocab() {
			if got, want := set[id>>6]&(1<<(id&63)) != 0, allowedByWalk(m, p, int32(id)); got != want {
				piece, _ := m.Tok.Piece(int32(id))
				t.Fatalf("after %q: token %q allowed %v, want %v", s, piece, got, want)
			}
		}
	}
}
