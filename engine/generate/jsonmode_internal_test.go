package generate

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
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
	f.Fuzz(func(t *testing.T, s string) {
		var p jsonPrefix
		if p.FeedString(s) && p.Complete() {
			if !json.Valid([]byte(s)) || s[0] != '{' {
				t.Fatalf("%q accepted as one complete object", s)
			}
		}
	})
}
