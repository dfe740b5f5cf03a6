package serve

import (
	"context"
	"strings"
	"testing"

	"github.com/aprqa/apr/internal/testutil"
)

func TestParseSSE(t *testing.T) {
	tests := []struct {
		name, body string
		events     int
		bad        string // "" : no violation
	}{
		{"good", "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n", 2, ""},
		{"no done", "data: {\"a\":1}\n\n", 1, "no data: [DONE]"},
		{"not json", "data: {oops\n\ndata: [DONE]\n\n", 0, "not a JSON object"},
		{"after done", "data: [DONE]\n\ndata: {\"a\":1}\n\n", 0, "after [DONE]"},
		{"no blank line", "data: {\"a\":1}\ndata: [DONE]\n\n", 0, "not followed by a blank line"},
		{"not data", "event: x\n\ndata: [DONE]\n\n", 0, "not a data: line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, bad := parseSSE([]byte(tc.body))
			if tc.bad == "" {
				if len(bad) > 0 || len(ev) != tc.events {
					t.Errorf("parseSSE: %d events, violations %q; want %d and none", len(ev), bad, tc.events)
				}
				return
			}
			if !strings.Contains(strings.Join(bad, "; "), tc.bad) {
				t.Errorf("parseSSE: violations %q, want one with %q", bad, tc.bad)
			}
		})
	}
}

// TestParityCatchesAPlantedDifference: a served answer altered after the
// fact is counted as a mismatch (the check can fail).
func TestParityCatchesAPlantedDifference(t *testing.T) {
	model := testutil.Fixture(t, "models/stories260K.gguf")
	plantParity = func(i int, ids []int32) []int32 {
		if i == 2 && len(ids) > 0 {
			ids[len(ids)-1]++
		}
		return ids
	}
	defer func() { plantParity = nil }()
	res, err := Parity(context.Background(), ParityOptions{Model: model, Backend: "cpu", Threads: 1, Tokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mismatches != 1 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "request 2") {
		t.Errorf("planted difference in request 2: %+v", res)
	}
}
