package serve

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// FuzzDecodeRequest: any body decodes to a request or a 400 that names a
// field or position; never a panic, never another status; an accepted
// request's parameters are in range.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "seed": 3, "stop": ["\n", "END"], "stream": true, "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 2}`,
		`{"prompt": "Once upon", "max_tokens": 4, "logprobs": 2, "stop": "x", "n": 1, "min_p": 0.05, "top_k": 40}`,
		`{"messages": [{"role": "system", "content": [{"type": "text", "text": "be brief"}]}, {"role": "user", "content": "hi", "name": "u"}]}`,
		`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "ok"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}], "tool_choice": "auto"}`,
		`{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": false}`,
		`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}], "chat_template_kwargs": {"enable_thinking": false, "x": [1, {"y": null}]}, "reasoning_format": "none"}`,
		`{"prompt": ["one"]}`, `{"messages": [}`, `[]`, `null`, `{"prompt": 1e400}`, `{"max_tokens": -1}`, "", `{"prompt":"a"} x`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		if len(body) > 1<<16 {
			return
		}
		r, err := decodeRequest(body, chat)
		if err != nil {
			if r != nil {
				t.Fatalf("both a request and an error")
			}
			if err.Status != http.StatusBadRequest || err.Message == "" {
				t.Fatalf("error %+v: want a 400 with a message", err)
			}
			if _, jerr := json.Marshal(map[string]any{"error": err}); jerr != nil {
				t.Fatalf("error does not marshal: %v", jerr)
			}
			return
		}
		if err := r.Sampling.Validate(); err != nil {
			t.Fatalf("accepted out-of-range sampling: %v", err)
		}
		if r.MaxTokens < 0 || r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs || len(r.Stop) > MaxStops {
			t.Fatalf("accepted %+v", r)
		}
		if chat && len(r.Messages) == 0 {
			t.Fatalf("chat request without messages accepted")
		}
		if len(r.Tools) != len(r.ToolDefs) || (!chat && len(r.Tools) > 0) {
			t.Fatalf("tools %d, their definitions %d (chat %v)", len(r.Tools), len(r.ToolDefs), chat)
		}
		for _, f := range r.ForceTools {
			if !slices.ContainsFunc(r.ToolDefs, func(d tool) bool { return d.Name == f }) {
				t.Fatalf("forced call of %q, not among the tools", f)
			}
		}
		for _, d := range r.ToolDefs {
			if !toolName.MatchString(d.Name) {
				t.Fatalf("tool name %q accepted", d.Name)
			}
		}
		for _, s := range r.Stop {
			if s == "" {
				t.Fatalf("empty stop string accepted")
			}
		}
	})
}

// FuzzCallSplitter: any completion text, in any format apr reads, fed in
// pieces gives the content and calls it gives fed whole; never a panic;
// every call names a requested tool with a JSON object of arguments; with
// no call the content is the text itself.
func FuzzCallSplitter(f *testing.F) {
	for _, s := range []string{
		"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		"<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
		"{\"name\": \"get_time\", \"parameters\": {}}", "[{\"name\": \"get_time\", \"arguments\": {}}]", "<tool_ca", "  \n", "",
	} {
		for fm := toolsHermes; fm <= toolsMistral; fm++ {
			f.Add(s, uint8(fm), uint8(3))
		}
	}
	f.Fuzz(func(t *testing.T, text string, fm, step uint8) {
		format := toolsHermes + toolFormat(fm)%(toolsMistral-toolsHermes+1)
		content, calls := split(format, []string{text})
		n := 1 + int(step)%7
		var pieces []string
		for rest := text; rest != ""; {
			k := min(n, len(rest))
			pieces, rest = append(pieces, rest[:k]), rest[k:]
		}
		c2, calls2 := split(format, pieces)
		if c2 != content || len(calls2) != len(calls) {
			t.Fatalf("in pieces of %d: content %q calls %q; whole: %q %q", n, c2, calls2, content, calls)
		}
		for i, c := range calls {
			if c != calls2[i] {
				t.Fatalf("call %d: %q in pieces, %q whole", i, calls2[i], c)
			}
			var args map[string]any
			if json.Unmarshal([]byte(c.Arguments), &args) != nil || (c.Name != "get_weather" && c.Name != "get_time") {
				t.Fatalf("call %q", c)
			}
		}
		if len(calls) == 0 && content != text {
			t.Fatalf("no call, yet content %q is not the text %q", content, text)
		}
	})
}

// FuzzThinkSplitter: any reply, starting inside its reasoning or not, fed
// in pieces gives the reasoning and content it gives fed whole; never a
// panic; nothing is invented: the reasoning is text of the reply, and so
// is the content (the reply itself when no reasoning block opened it).
func FuzzThinkSplitter(f *testing.F) {
	for _, s := range []string{"<think>\nhm\n</think>\n\nHello.", "hm </think> x", "<thi", "  <think>", "</think>", ""} {
		f.Add(s, false, uint8(3))
		f.Add(s, true, uint8(1))
	}
	f.Fuzz(func(t *testing.T, text string, in bool, step uint8) {
		r, c, _ := thinkSplit(in, toolsNone, []string{text})
		n := 1 + int(step)%7
		var pieces []string
		for rest := text; rest != ""; {
			k := min(n, len(rest))
			pieces, rest = append(pieces, rest[:k]), rest[k:]
		}
		r2, c2, _ := thinkSplit(in, toolsNone, pieces)
		if r2 != r || c2 != c {
			t.Fatalf("in pieces of %d: reasoning %q content %q; whole: %q %q", n, r2, c2, r, c)
		}
		if !strings.Contains(text, r) || !strings.HasSuffix(text, c) {
			t.Fatalf("reasoning %q or content %q is not the reply's %q", r, c, text)
		}
		if !in && r == "" && !strings.Contains(text, thinkOpen) && c != text {
			t.Fatalf("no reasoning block, yet content %q is not the reply %q", c, text)
		}
	})
}
