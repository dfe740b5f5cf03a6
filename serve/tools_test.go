package serve_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
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
	want, err := generate.MessagesTokens(context.Background(), m.Tok, m.Tmpl, []map[string]any{
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": "", "tool_calls": []any{chat.NewMap("id", "call_1", "type", "function",
			"function", chat.NewMap("name", "get_weather", "arguments", args))}},
		{"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
		{"role": "user", "content": "And tomorrow?"}}, tools.([]any))
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
		{"required", `"tools": [` + weatherTool + `], "tool_choice": "required"`, "tool_choice"},
		{"named", `"tools": [` + weatherTool + `], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}`, "tool_choice"},
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
