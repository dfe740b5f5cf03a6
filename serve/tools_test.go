package serve_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/serve"
)

// qwenToolModel writes apr synth's tiny qwen2 with the chat template of
// Qwen2.5-Instruct (fixtures/templates), which renders tools and teaches
// Hermes's <tool_call> format.
func qwenToolModel(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(testutil.Fixture(t, "templates/Qwen-Qwen2.5-7B-Instruct.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return templateModel(t, string(src))
}

// templateModel writes apr synth's tiny qwen2 with the chat template src.
func templateModel(t *testing.T, src string) string {
	t.Helper()
	p, err := synth.FindPreset("qwen2", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	r, err := synth.Build(synth.Options{Preset: p, Type: quant.F32, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Builder.Set("tokenizer.chat_template", gguf.V(src))
	r.Builder.Set("qwen2.context_length", gguf.V(uint32(2048))) // the template's tool prompt alone is ~700 byte-level tokens
	path := filepath.Join(t.TempDir(), "qwen2-tools.gguf")
	if err := r.Builder.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

const weatherTool = `{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
	"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`

// TestTools: tools reach the model's template, with an earlier turn's
// call and the tool's answer, as generate renders them (the prompt's token
// count); tool_choice none hides them; what cannot be served is refused by
// field.
func TestTools(t *testing.T) {
	model := qwenToolModel(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 1, Ctx: 2048})
	msgs := `[{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
		{"role": "user", "content": "And tomorrow?"}]`
	code, v := post(t, url, "/v1/chat/completions", `{"messages": `+msgs+`, "tools": [`+weatherTool+`], "max_tokens": 6, "temperature": 0}`)
	if code != 200 {
		t.Fatalf("tools: %d %v", code, v)
	}
	m, err := generate.Load(context.Background(), generate.LoadOptions{Model: model, Backend: "ref"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	args, _ := chat.DecodeJSON([]byte(`{"city": "Paris"}`))
	tools, _ := chat.DecodeJSON([]byte(`[` + weatherTool + `]`))
	want, err := generate.MessagesTokens(context.Background(), m.Tok, m.Tmpl, chat.Input{Messages: []map[string]any{
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": "", "tool_calls": []any{chat.NewMap("id", "call_1", "type", "function",
			"function", chat.NewMap("name", "get_weather", "arguments", args))}},
		{"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
		{"role": "user", "content": "And tomorrow?"}}, Tools: tools.([]any)})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := m.Tok.Decode(want)
	for _, s := range []string{`"name": "get_weather"`, `<tool_call>`, `{"name": "get_weather", "arguments": {"city": "Paris"}}`, "<tool_response>\nsunny, 21 C\n</tool_response>"} {
		if !strings.Contains(string(text), s) {
			t.Errorf("the rendered prompt lacks %q:\n%s", s, text)
		}
	}
	usage := v["usage"].(map[string]any)
	if got := int(usage["prompt_tokens"].(float64)); got != len(want) {
		t.Errorf("prompt_tokens %d, want %d (the template with the tools, the call and its answer)", got, len(want))
	}
	// tool_choice none: the model does not see the tools.
	_, none := post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": [`+weatherTool+`], "tool_choice": "none", "max_tokens": 2}`)
	_, plain := post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	_, with := post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": [`+weatherTool+`], "max_tokens": 2}`)
	pt := func(v map[string]any) float64 { return v["usage"].(map[string]any)["prompt_tokens"].(float64) }
	if pt(none) != pt(plain) || pt(with) <= pt(plain) {
		t.Errorf("prompt tokens: tool_choice none %v, no tools %v, tools %v; want none = no tools < tools", pt(none), pt(plain), pt(with))
	}

	for _, tc := range []struct{ name, body, param string }{
		{"named, unknown", `"tools": [` + weatherTool + `], "tool_choice": {"type": "function", "function": {"name": "get_time"}}`, "tool_choice"},
		{"bad name", `"tools": [{"type": "function", "function": {"name": "get weather"}}]`, "tools[0].function.name"},
		{"twice", `"tools": [` + weatherTool + `, ` + weatherTool + `]`, "tools[1].function.name"},
		{"not a function", `"tools": [{"type": "retrieval"}]`, "tools[0]"},
		{"parameters not an object", `"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]`, "tools[0].function.parameters"},
		{"arguments not JSON", `"tools": [` + weatherTool + `], "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]`,
			"messages[0].tool_calls[0].function.arguments"},
		{"legacy functions", `"functions": [{"name": "f"}]`, "functions"},
	} {
		body := `{"messages": [{"role": "user", "content": "hi"}], ` + tc.body + `}`
		if strings.Contains(tc.body, `"messages"`) {
			body = `{` + tc.body + `}`
		}
		code, v := post(t, url, "/v1/chat/completions", body)
		e, _ := v["error"].(map[string]any)
		if code != 400 || e == nil || e["param"] != tc.param {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.name, code, v, tc.param)
		}
	}

	// A forced call (tool_choice a named function, or required with one
	// tool): the model writes the arguments, one JSON object, and the
	// call comes back whole and streamed. The bias closes the object at
	// once ("{}"); without it the random model's object is longer.
	tok := modelTokenizer(t, model)
	bias := map[string]float64{}
	for id := range int32(tok.NVocab()) {
		if p, _ := tok.Piece(id); p == "}" {
			bias[strconv.Itoa(int(id))] = 100
		}
	}
	lb, _ := json.Marshal(bias)
	for _, choice := range []string{`{"type": "function", "function": {"name": "get_weather"}}`, `"required"`} {
		for _, stream := range []bool{false, true} {
			body := `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50, "tools": [` + weatherTool + `], "tool_choice": ` + choice + `, "logit_bias": ` + string(lb) + `}`
			finish, content, calls := chatCall(t, url, body, stream)
			if finish != "tool_calls" || content != "" || len(calls) != 1 || calls[0] != "get_weather {}" {
				t.Errorf("forced %s (stream %v), biased to close: finish %q content %q calls %q; want tool_calls, no content, [get_weather {}]", choice, stream, finish, content, calls)
			}
		}
	}
	// "required" among two tools: the model writes the name too, held to
	// one of theirs (the one its logits favour: a bias on "t" or "w" after
	// "get_" picks it), then the arguments.
	two := weatherTool + `, {"type": "function", "function": {"name": "get_time"}}`
	for _, pick := range []struct{ piece, call string }{{"t", "get_time {}"}, {"w", "get_weather {}"}} {
		b := map[string]float64{}
		for k, v := range bias {
			b[k] = v
		}
		for id := range int32(tok.NVocab()) {
			if p, _ := tok.Piece(id); p == pick.piece {
				b[strconv.Itoa(int(id))] = 50
			}
		}
		lb2, _ := json.Marshal(b)
		for _, stream := range []bool{false, true} {
			body := `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50, "tools": [` + two + `], "tool_choice": "required", "logit_bias": ` + string(lb2) + `}`
			finish, content, calls := chatCall(t, url, body, stream)
			if finish != "tool_calls" || content != "" || len(calls) != 1 || calls[0] != pick.call {
				t.Errorf("required among two, %q favoured (stream %v): finish %q content %q calls %q; want tool_calls, no content, [%s]", pick.piece, stream, finish, content, calls, pick.call)
			}
		}
	}
	anyIDs, err := tok.Encode("<tool_call>\n{\"name\": \"", tokenizer.Options{ParseSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	_, forcedAny := post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "tools": [`+two+`], "tool_choice": "required"}`)
	_, autoTwo := post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "tools": [`+two+`]}`)
	if d := pt(forcedAny) - pt(autoTwo); int(d) != len(anyIDs) {
		t.Errorf("required among two: the prompt has %v tokens more than the same request's, want %d (the call's start up to the name)", d, len(anyIDs))
	}
	// The forced call's start ends the prompt, as the template's tokens.
	startIDs, err := tok.Encode("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", tokenizer.Options{ParseSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	_, forced := post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "tools": [`+weatherTool+`], "tool_choice": "required"}`)
	_, auto := post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "tools": [`+weatherTool+`]}`)
	if d := pt(forced) - pt(auto); int(d) != len(startIDs) {
		t.Errorf("a forced call's prompt has %v tokens more than the same request's, want %d (the call's start)", d, len(startIDs))
	}
	// A forced call the model does not finish is its text, with the call's
	// start, and finishes for length.
	code, v = post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0, "tools": [`+weatherTool+`], "tool_choice": "required"}`)
	if ch, _ := v["choices"].([]any); code != 200 || len(ch) != 1 || ch[0].(map[string]any)["finish_reason"] != "length" ||
		!strings.HasPrefix(ch[0].(map[string]any)["message"].(map[string]any)["content"].(string), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {") {
		t.Errorf("an unfinished forced call: %d %v, want finish length and the call's text", code, v)
	}
	// Qwen's XML has no JSON arguments to hold the model to: refused.
	xml, err := os.ReadFile(testutil.Fixture(t, "templates/Qwen3.5-4B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	_, url4 := start(t, serve.Options{Model: templateModel(t, string(xml)), Parallel: 1, Ctx: 2048})
	code, v = post(t, url4, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "tools": [`+weatherTool+`], "tool_choice": "required"}`)
	if e, _ := v["error"].(map[string]any); code != 400 || e == nil || e["param"] != "tool_choice" {
		t.Errorf("a forced call in Qwen's XML: %d %v, want 400 naming tool_choice", code, v)
	}
	code, _ = post(t, url4, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "tools": [`+weatherTool+`]}`)
	if code != 200 {
		t.Errorf("tools on Qwen3.5's template: %d, want 200", code)
	}

	// A template that shows tools in a format apr does not read is
	// refused, never given tools whose calls would come back as text.
	_, url3 := start(t, serve.Options{Model: templateModel(t, "{% if tools %}Tools: {{ tools | tojson }}\n{% endif %}"+
		"{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:"), Parallel: 1, Ctx: 2048})
	code, v = post(t, url3, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": [`+weatherTool+`]}`)
	if e, _ := v["error"].(map[string]any); code != 400 || e == nil || e["param"] != "tools" || !strings.Contains(e["message"].(string), "does not read") {
		t.Errorf("tools on a template of another format: %d %v, want 400 naming tools", code, v)
	}
	// A template that renders no tools is refused too.
	_, url2 := start(t, serve.Options{Model: tinyQwen2(t), Parallel: 1})
	code, v = post(t, url2, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": [`+weatherTool+`]}`)
	if e, _ := v["error"].(map[string]any); code != 400 || e == nil || e["param"] != "tools" || !strings.Contains(e["message"].(string), "renders no tools") {
		t.Errorf("tools on a template without them: %d %v, want 400 naming tools", code, v)
	}
}

// streamedChat posts a streamed chat request and returns its one choice's
// finish reason, content and calls ("name arguments"), as the deltas add up.
func streamedChat(t *testing.T, url, body string) (finish, content string, calls []string) {
	t.Helper()
	for _, data := range sseChunks(t, url, "/v1/chat/completions", strings.TrimSuffix(body, "}")+`, "stream": true}`) {
		var ch struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("stream chunk %q: %v", data, err)
		}
		for _, c := range ch.Choices {
			content += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				calls = append(calls, tc.Function.Name+" "+tc.Function.Arguments)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	return finish, content, calls
}

// chatCall posts a chat request, streamed or not, and returns its one
// choice's finish reason, content and calls ("name arguments").
func chatCall(t *testing.T, url, body string, stream bool) (finish, content string, calls []string) {
	t.Helper()
	if stream {
		return streamedChat(t, url, body)
	}
	code, v := post(t, url, "/v1/chat/completions", body)
	ch, _ := v["choices"].([]any)
	if code != 200 || len(ch) != 1 {
		t.Fatalf("%s: %d %v", body, code, v)
	}
	c := ch[0].(map[string]any)
	msg := c["message"].(map[string]any)
	finish, _ = c["finish_reason"].(string)
	content, _ = msg["content"].(string)
	tcs, _ := msg["tool_calls"].([]any)
	for _, tc := range tcs {
		fn := tc.(map[string]any)["function"].(map[string]any)
		calls = append(calls, fn["name"].(string)+" "+fn["arguments"].(string))
	}
	return finish, content, calls
}
