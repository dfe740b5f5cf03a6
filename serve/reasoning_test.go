package serve_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/serve"
)

// TestReasoning: with Qwen3.5's template (its generation prompt opens
// <think>), a reply is reasoning until </think>: the tiny model's greedy
// reply, which never closes it, comes back whole in reasoning_content,
// streamed or not; reasoning_format "none" leaves it in content;
// chat_template_kwargs reach the template (enable_thinking false closes the
// block in the prompt: the reply is content); an assistant turn's
// reasoning_content reaches the template.
func TestReasoning(t *testing.T) {
	src, err := os.ReadFile(testutil.Fixture(t, "templates/Qwen3.5-4B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	model := templateModel(t, string(src))
	_, url := start(t, serve.Options{Model: model, Parallel: 1, Ctx: 2048})
	m, err := generate.Load(context.Background(), generate.LoadOptions{Model: model, Backend: "ref"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	type message struct {
		Content          *string `json:"content"`
		ReasoningContent *string `json:"reasoning_content"`
	}
	reply := func(body string) (message, string, int) {
		t.Helper()
		code, v := post(t, url, "/v1/chat/completions", body)
		if code != 200 {
			t.Fatalf("%s: %d %v", body, code, v)
		}
		b, _ := json.Marshal(v["choices"].([]any)[0].(map[string]any)["message"])
		var msg message
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatal(err)
		}
		text, err := m.Tok.Decode(ids(t, v))
		if err != nil {
			t.Fatal(err)
		}
		// The text as JSON carries it (each byte of invalid UTF-8 U+FFFD:
		// the tiny model's replies are such bytes).
		var s string
		b, _ = json.Marshal(string(text))
		_ = json.Unmarshal(b, &s)
		return msg, s, int(v["usage"].(map[string]any)["prompt_tokens"].(float64))
	}
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	const ask = `"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0`

	msg, text, thinking := reply(`{` + ask + `}`)
	if strings.Contains(text, "</think>") {
		t.Fatalf("the tiny model closed its reasoning (%q): the test needs another prompt", text)
	}
	if str(msg.ReasoningContent) != strings.TrimSpace(text) || str(msg.Content) != "" {
		t.Errorf("thinking: reasoning_content %q content %q; want the reply %q as reasoning, no content", str(msg.ReasoningContent), str(msg.Content), text)
	}
	// Streamed: the reasoning deltas add up to the same.
	var streamed strings.Builder
	for _, c := range sseChunks(t, url, "/v1/chat/completions", `{`+ask+`, "stream": true}`) {
		var ch struct {
			Choices []struct {
				Delta message `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(c), &ch); err != nil || len(ch.Choices) != 1 {
			t.Fatalf("chunk %s: %v", c, err)
		}
		if d := ch.Choices[0].Delta.ReasoningContent; d != nil {
			streamed.WriteString(*d)
		}
		if d := ch.Choices[0].Delta.Content; d != nil && *d != "" {
			t.Errorf("stream: content %q in a reply that is all reasoning", *d)
		}
	}
	if streamed.String() != str(msg.ReasoningContent) {
		t.Errorf("stream: reasoning %q, whole %q", streamed.String(), str(msg.ReasoningContent))
	}

	msg, text, _ = reply(`{` + ask + `, "reasoning_format": "none"}`)
	if str(msg.Content) != text || msg.ReasoningContent != nil {
		t.Errorf("reasoning_format none: content %q reasoning_content %q; want the reply %q as content", str(msg.Content), str(msg.ReasoningContent), text)
	}

	msg, text, closed := reply(`{` + ask + `, "chat_template_kwargs": {"enable_thinking": false}}`)
	if str(msg.Content) != text || msg.ReasoningContent != nil || closed <= thinking {
		t.Errorf("enable_thinking false: content %q reasoning_content %q, prompt %d tokens (thinking %d); want the reply %q as content, a longer prompt",
			str(msg.Content), str(msg.ReasoningContent), closed, thinking, text)
	}

	// An earlier turn's reasoning goes back to the template.
	turn := `[{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": "", "reasoning_content": "The user wants the weather.", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]`
	_, _, got := reply(`{"messages": ` + turn + `, "tools": [` + weatherTool + `], "max_tokens": 1}`)
	args, _ := chat.DecodeJSON([]byte(`{"city": "Paris"}`))
	tools, _ := chat.DecodeJSON([]byte(`[` + weatherTool + `]`))
	want, err := generate.MessagesTokens(context.Background(), m.Tok, m.Tmpl, chat.Input{Messages: []map[string]any{
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": "", "reasoning_content": "The user wants the weather.", "tool_calls": []any{chat.NewMap("id", "call_1", "type", "function",
			"function", chat.NewMap("name", "get_weather", "arguments", args))}},
		{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}}, Tools: tools.([]any)})
	if err != nil {
		t.Fatal(err)
	}
	if rendered, _ := m.Tok.Decode(want); !strings.Contains(string(rendered), "<think>\nThe user wants the weather.\n</think>") {
		t.Fatalf("the template does not render the turn's reasoning:\n%s", rendered)
	}
	if got != len(want) {
		t.Errorf("prompt_tokens %d, want %d (the template with the turn's reasoning)", got, len(want))
	}

	for _, tc := range []struct{ body, param string }{
		{`"reasoning_format": "hidden"`, "reasoning_format"},
		{`"chat_template_kwargs": [1]`, "chat_template_kwargs"},
		{`"chat_template_kwargs": {"messages": []}`, "chat_template_kwargs.messages"},
		{`"messages": [{"role": "assistant", "content": "a", "reasoning_content": 3}]`, "messages[0].reasoning_content"},
	} {
		body := `{"messages": [{"role": "user", "content": "hi"}], ` + tc.body + `}`
		if strings.HasPrefix(tc.body, `"messages"`) {
			body = `{` + tc.body + `}`
		}
		code, v := post(t, url, "/v1/chat/completions", body)
		e, _ := v["error"].(map[string]any)
		if code != 400 || e == nil || e["param"] != tc.param {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.body, code, v, tc.param)
		}
	}
}
