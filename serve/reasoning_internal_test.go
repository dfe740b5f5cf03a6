package serve

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/aprqa/apr/internal/testutil"
)

// thinkSplit feeds pieces through a reply splitter (reasoning split off;
// tools when format is not toolsNone) and returns the reasoning, the
// content and the calls.
func thinkSplit(in bool, format toolFormat, pieces []string) (string, string, []toolCall) {
	rs := &responder{think: true, thinkIn: in, format: format, req: &request{}}
	if format != toolsNone {
		rs.req.ToolDefs = testTools
	}
	sp := rs.splitter()
	var r, c strings.Builder
	var calls []toolCall
	for _, p := range pieces {
		a, b, cs := sp.feed(p)
		r.WriteString(a)
		c.WriteString(b)
		calls = append(calls, cs...)
	}
	a, b, cs := sp.finish("stop")
	r.WriteString(a)
	c.WriteString(b)
	return r.String(), c.String(), append(calls, cs...)
}

// TestThinkSplitter: a reply's reasoning and content, whole and fed in
// random pieces (a stream's deltas) alike.
func TestThinkSplitter(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
	tests := []struct {
		name               string
		in                 bool // the prompt left <think> open
		format             toolFormat
		text               string
		reasoning, content string
		calls              int
	}{
		{"opened by the reply", false, toolsNone, "<think>\nLet me see.\n</think>\n\nHello.", "Let me see.", "Hello.", 0},
		{"opened by the prompt", true, toolsNone, "\nLet me see.\n\nStill.\n</think>\n\nHello.", "Let me see.\n\nStill.", "Hello.", 0},
		{"empty reasoning", false, toolsNone, "<think>\n\n</think>\n\nHello.", "", "Hello.", 0},
		{"no reasoning", false, toolsNone, "Hello <think> there.", "", "Hello <think> there.", 0},
		{"leading space kept", false, toolsNone, "  Hello.", "", "  Hello.", 0},
		{"a tag-like start", false, toolsNone, "<thin air>", "", "<thin air>", 0},
		{"cut inside", true, toolsNone, "Let me see. </thi", "Let me see. </thi", "", 0},
		{"cut inside, space", true, toolsNone, "Let me see.\n", "Let me see.", "", 0},
		{"only a start", false, toolsNone, "<thi", "", "<thi", 0},
		{"only whitespace", false, toolsNone, "\n\n", "", "\n\n", 0},
		{"second think is content", false, toolsNone, "<think>a</think>b<think>c</think>", "a", "b<think>c</think>", 0},
		{"a call after", true, toolsHermes, "I need the time.\n</think>\n\n" + call, "I need the time.", "", 1},
		{"a call inside is reasoning", true, toolsHermes, "Maybe " + call + "?\n</think>\n\nNo call.", "Maybe " + call + "?", "No call.", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, c, calls := thinkSplit(tc.in, tc.format, []string{tc.text})
			if r != tc.reasoning || c != tc.content || len(calls) != tc.calls {
				t.Fatalf("whole: reasoning %q content %q calls %d\nwant reasoning %q content %q calls %d", r, c, len(calls), tc.reasoning, tc.content, tc.calls)
			}
			rng := rand.New(rand.NewPCG(2, uint64(len(tc.text))))
			for range 50 {
				var pieces []string
				for rest := tc.text; rest != ""; {
					n := min(1+rng.IntN(5), len(rest))
					pieces, rest = append(pieces, rest[:n]), rest[n:]
				}
				r2, c2, calls2 := thinkSplit(tc.in, tc.format, pieces)
				if r2 != r || c2 != c || !reflect.DeepEqual(calls2, calls) {
					t.Fatalf("pieces %q: reasoning %q content %q calls %v; whole gave %q %q %v", pieces, r2, c2, calls2, r, c, calls)
				}
			}
		})
	}
}

// TestTemplateThinks: which fixture templates teach reasoning blocks, and
// which generation prompts leave one open.
func TestTemplateThinks(t *testing.T) {
	for file, want := range map[string]bool{
		"Qwen-Qwen2.5-7B-Instruct.jinja":         false,
		"Qwen-Qwen3-0.6B.jinja":                  true,
		"Qwen-QwQ-32B.jinja":                     true,
		"Qwen3.5-4B.jinja":                       true,
		"meta-llama-Llama-3.1-8B-Instruct.jinja": false,
	} {
		b, err := os.ReadFile(testutil.Fixture(t, "templates/"+file))
		if err != nil {
			t.Fatal(err)
		}
		if got := templateThinks(string(b)); got != want {
			t.Errorf("%s: templateThinks %v, want %v", file, got, want)
		}
	}
	for text, want := range map[string]bool{
		"<|im_start|>assistant\n<think>\n":                  true,
		"<|im_start|>assistant\n<think>\n\n</think>\n\n":    false,
		"<|im_start|>assistant\n":                           false,
		"<think>a</think>b<|im_start|>assistant\n<think>\n": true,
	} {
		if got := promptThinks(text); got != want {
			t.Errorf("promptThinks(%q) = %v, want %v", text, got, want)
		}
	}
}
