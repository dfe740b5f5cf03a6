package serve

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

var testTools = []tool{
	{Name: "get_weather", Params: map[string]string{"city": "string", "days": "integer", "units": "string", "opts": "object"}},
	{Name: "get_time", Params: map[string]string{}},
}

// split feeds text to a fresh splitter in the given pieces and returns
// the content passed on (finish included) and the calls.
func split(f toolFormat, pieces []string) (string, []toolCall) {
	s := &callSplitter{format: f, tools: testTools}
	var b strings.Builder
	var calls []toolCall
	for _, p := range pieces {
		c, cs := s.feed(p)
		b.WriteString(c)
		calls = append(calls, cs...)
	}
	rest, more := s.finish()
	b.WriteString(rest)
	return b.String(), append(calls, more...)
}

// TestCallSplitter: calls come out of the text in both formats, with the
// text around them as content; blocks that are not calls of a requested
// tool, unclosed calls and partial tags stay the model's text.
func TestCallSplitter(t *testing.T) {
	hermes := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"
	tests := []struct {
		name    string
		format  toolFormat
		text    string
		content string
		calls   []toolCall
	}{
		{"hermes, text first", toolsHermes, "Let me check.\n" + hermes, "Let me check.",
			[]toolCall{{"get_weather", `{"city":"Paris","days":3}`}}},
		{"hermes, two calls", toolsHermes, hermes + "\n<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>\n", "",
			[]toolCall{{"get_weather", `{"city":"Paris","days":3}`}, {"get_time", `{}`}}},
		{"hermes, <, > and & kept", toolsHermes, "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a<b>&c\"}}</tool_call>", "",
			[]toolCall{{"get_weather", `{"city":"a<b>&c"}`}}},
		{"hermes, unknown tool stays text", toolsHermes, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
			"<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", nil},
		{"hermes, bad JSON stays text", toolsHermes, "x <tool_call>{\"name\": \"get_time\",</tool_call> y",
			"x <tool_call>{\"name\": \"get_time\",</tool_call> y", nil},
		{"hermes, arguments not an object", toolsHermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>",
			"<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>", nil},
		{"hermes, the close tag inside a string", toolsHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\\\" </tool_call> b\"}}\n</tool_call>", "",
			[]toolCall{{"get_weather", `{"city":"a\" </tool_call> b"}`}}},
		{"unclosed call is text", toolsHermes, "ok <tool_call>\n{\"name\": \"get_time\"", "ok <tool_call>\n{\"name\": \"get_time\"", nil},
		{"partial tag is text", toolsHermes, "ok <tool_ca", "ok <tool_ca", nil},
		{"no call: text unchanged", toolsHermes, "  plain  text\n\n", "  plain  text\n\n", nil},
		{"xml", toolsXML, "Sure.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n" +
			"<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n<parameter=units>\n42\n</parameter>\n</function>\n</tool_call>", "Sure.",
			[]toolCall{{"get_weather", `{"city":"New York","days":3,"opts":{"a":[1,2]},"units":"42"}`}}},
		{"xml, multi-line value", toolsXML, "<tool_call>\n<function=get_weather>\n<parameter=city>\na\nb\n</parameter>\n</function>\n</tool_call>", "",
			[]toolCall{{"get_weather", `{"city":"a\nb"}`}}},
		{"xml, a typed value that is not JSON stays a string", toolsXML, "<tool_call><function=get_weather><parameter=days>three</parameter></function></tool_call>", "",
			[]toolCall{{"get_weather", `{"days":"three"}`}}},
		{"xml, the close tag inside a value", toolsXML, "<tool_call>\n<function=get_weather>\n<parameter=city>\nx</tool_call>y\n</parameter>\n</function>\n</tool_call>", "",
			[]toolCall{{"get_weather", `{"city":"x</tool_call>y"}`}}},
		{"xml, no parameters", toolsXML, "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", "", []toolCall{{"get_time", `{}`}}},
		{"llama3", toolsLlama3, "\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n", "",
			[]toolCall{{"get_weather", `{"city":"Paris"}`}}},
		{"llama3, python tag", toolsLlama3, "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}", "", []toolCall{{"get_time", `{}`}}},
		{"llama3, text", toolsLlama3, " It is sunny {\"name\": \"get_time\"}", " It is sunny {\"name\": \"get_time\"}", nil},
		{"llama3, an object that is no call", toolsLlama3, "{\"answer\": 42}", "{\"answer\": 42}", nil},
		{"llama3, a call and more", toolsLlama3, "{\"name\": \"get_time\", \"parameters\": {}} and more", "{\"name\": \"get_time\", \"parameters\": {}} and more", nil},
		{"mistral", toolsMistral, "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abcdefghi\"}]", "",
			[]toolCall{{"get_weather", `{"city":"Paris"}`}, {"get_time", `{}`}}},
		{"mistral, tag", toolsMistral, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]", "", []toolCall{{"get_time", `{}`}}},
		{"mistral, one unknown: all text", toolsMistral, "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"rm\", \"arguments\": {}}]",
			"[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"rm\", \"arguments\": {}}]", nil},
		{"mistral, text", toolsMistral, "Sure [1, 2]", "Sure [1, 2]", nil},
		{"xml, stray text inside stays text", toolsXML, "<tool_call><function=get_time>hi</function></tool_call>",
			"<tool_call><function=get_time>hi</function></tool_call>", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			content, calls := split(tc.format, []string{tc.text})
			if content != tc.content || !reflect.DeepEqual(calls, tc.calls) {
				t.Errorf("whole: content %q calls %q\nwant content %q calls %q", content, calls, tc.content, tc.calls)
			}
			// Fed in random pieces (a stream's deltas), the same result.
			r := rand.New(rand.NewPCG(1, uint64(len(tc.text))))
			for range 50 {
				var pieces []string
				for rest := tc.text; rest != ""; {
					n := min(1+r.IntN(6), len(rest))
					pieces, rest = append(pieces, rest[:n]), rest[n:]
				}
				c2, calls2 := split(tc.format, pieces)
				if c2 != content || !reflect.DeepEqual(calls2, calls) {
					t.Fatalf("pieces %q: content %q calls %q, whole gave %q %q", pieces, c2, calls2, content, calls)
				}
			}
		})
	}
}

// TestTemplateToolFormat: the fixture templates' formats.
func TestTemplateToolFormat(t *testing.T) {
	for file, want := range map[string]toolFormat{
		"Qwen-Qwen2.5-7B-Instruct.jinja":             toolsHermes,
		"Qwen-Qwen3-0.6B.jinja":                      toolsHermes,
		"Qwen-QwQ-32B.jinja":                         toolsHermes,
		"Qwen3.5-4B.jinja":                           toolsXML,
		"Qwen3-Coder.jinja":                          toolsXML,
		"meta-llama-Llama-3.1-8B-Instruct.jinja":     toolsLlama3,
		"mistralai-Mistral-Nemo-Instruct-2407.jinja": toolsMistral,
	} {
		b, err := os.ReadFile(testutil.Fixture(t, "templates/"+file))
		if err != nil {
			t.Fatal(err)
		}
		if got := templateToolFormat(string(b)); got != want {
			t.Errorf("%s: format %d, want %d", file, got, want)
		}
	}
	if got := templateToolFormat("{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"); got != toolsOther {
		t.Errorf("a template that shows tools in no format apr reads: format %d, want %d (other)", got, toolsOther)
	}
	if got := templateToolFormat("{% for m in messages %}{{ m.content }}{% endfor %}"); got != toolsNone {
		t.Errorf("a template without tools: format %d, want %d (none)", got, toolsNone)
	}
}

// textJob is a finished job whose events carry pieces, a token each, the
// last one stopping.
func textJob(pieces []string) *job {
	j := &job{events: make(chan event, len(pieces))}
	for k, p := range pieces {
		ev := event{Text: p, IDs: []int32{int32(k)}}
		if k == len(pieces)-1 {
			ev.Finish = "stop"
		}
		j.events <- ev
	}
	return j
}

// TestToolCallResponses: the calls in a whole response's message and in a
// stream's deltas, with finish_reason tool_calls; content around them.
func TestToolCallResponses(t *testing.T) {
	pieces := []string{"Checking", ".\n<tool", "_call>\n{\"name\": \"get_", "time\", \"arguments\": {}}\n</tool_call>", "\n"}
	newJobs := func() []*job { return []*job{textJob(pieces)} }
	rs := &responder{s: &Server{o: Options{Name: "m", Backend: "cpu"}}, chat: true, format: toolsHermes,
		req: &request{Chat: true, N: 1, ToolDefs: testTools}}
	rec := httptest.NewRecorder()
	rs.whole(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), newJobs())
	var whole struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &whole); err != nil || len(whole.Choices) != 1 {
		t.Fatalf("whole: %v: %s", err, rec.Body)
	}
	c := whole.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content == nil || *c.Message.Content != "Checking." || len(c.Message.ToolCalls) != 1 ||
		c.Message.ToolCalls[0].Type != "function" || !strings.HasPrefix(c.Message.ToolCalls[0].ID, "call_") ||
		c.Message.ToolCalls[0].Function.Name != "get_time" || c.Message.ToolCalls[0].Function.Arguments != "{}" {
		t.Errorf("whole: %s", rec.Body)
	}

	rec = httptest.NewRecorder()
	rs.stream(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), newJobs())
	events, bad := parseSSE(rec.Body.Bytes())
	if len(bad) > 0 {
		t.Fatalf("stream: %q", bad)
	}
	var content strings.Builder
	var names []string
	finish := ""
	for _, ev := range events {
		var ch struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    *int `json:"index"`
						ID       string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(ev, &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			content.WriteString(c.Delta.Content)
			if strings.Contains(c.Delta.Content, "<tool") {
				t.Errorf("stream: a delta shows the call's tag: %q", c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				if tc.Index == nil || *tc.Index != len(names) || tc.ID == "" {
					t.Errorf("stream: tool call delta without its index or id: %s", ev)
				}
				names = append(names, tc.Function.Name+" "+tc.Function.Arguments)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if content.String() != "Checking." || !reflect.DeepEqual(names, []string{"get_time {}"}) || finish != "tool_calls" {
		t.Errorf("stream: content %q, calls %q, finish %q; want \"Checking.\", [get_time {}], tool_calls\n%s", content.String(), names, finish, rec.Body)
	}
}

// TestToolCallsOpenAIClient: openai-go (a client apr did not write) reads
// the calls of a whole response and assembles them from a stream; the
// assistant message it builds from the answer (ToParam), with the tool's
// result, is a request apr serve takes, the call's arguments decoded for
// the template. That is an agent's loop.
func TestToolCallsOpenAIClient(t *testing.T) {
	pieces := []string{"<tool_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"}
	rs := &responder{s: &Server{o: Options{Name: "m", Backend: "cpu"}}, chat: true, format: toolsHermes,
		req: &request{Chat: true, N: 1, ToolDefs: testTools}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.Stream {
			rs.stream(w, r, []*job{textJob(pieces)})
		} else {
			rs.whole(w, r, []*job{textJob(pieces)})
		}
	}))
	defer ts.Close()
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Description: openai.String("Weather in a city"),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})},
	}
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" ||
		msg.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || msg.ToolCalls[0].ID == "" {
		t.Fatalf("whole: %+v", resp.Choices[0])
	}
	st := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	var finished []string
	for st.Next() {
		acc.AddChunk(st.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc.Name+" "+tc.Arguments)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 || acc.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` ||
		acc.Choices[0].FinishReason != "tool_calls" || !reflect.DeepEqual(finished, []string{`get_weather {"city":"Paris"}`}) {
		t.Errorf("stream: accumulated %+v, finished %q", acc.Choices, finished)
	}
	// The next turn, as the client builds it.
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("sunny, 21 C", msg.ToolCalls[0].ID))
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	req, aerr := decodeRequest(body, true)
	if aerr != nil {
		t.Fatalf("the client's next turn was refused: %v\n%s", aerr, body)
	}
	calls, _ := req.Messages[1]["tool_calls"].([]any)
	if len(calls) != 1 || req.Messages[2]["role"] != "tool" || req.Messages[2]["tool_call_id"] != msg.ToolCalls[0].ID || len(req.ToolDefs) != 1 {
		t.Fatalf("decoded turn: %+v", req.Messages)
	}
	fn, _ := calls[0].(*chat.Map).Get("function")
	args, _ := fn.(*chat.Map).Get("arguments")
	if m, ok := args.(*chat.Map); !ok || m.Len() != 1 {
		t.Errorf("the call's arguments reach the template as %T %v, want the decoded object", args, args)
	}
}

// TestToolTemplatesRender: an agent's conversation as apr serve decodes
// it (the tools, an assistant turn's call, the tool's answer) renders with
// each fixture template whose calls apr reads, showing the tool, the
// call's name and argument, and the answer (the call's id is 9 letters and
// digits, as Mistral's template demands and callID gives it).
func TestToolTemplatesRender(t *testing.T) {
	body := `{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3}"}}]},
		{"role": "tool", "tool_call_id": "abc123XYZ", "content": "sunny, 21 C"}, {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "Thanks"}],
		"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]}`
	req, aerr := decodeRequest([]byte(body), true)
	if aerr != nil {
		t.Fatal(aerr)
	}
	n := 0
	for _, file := range []string{"Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen-QwQ-32B.jinja", "Qwen3.5-4B.jinja",
		"Qwen3-Coder.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja"} {
		src, err := os.ReadFile(testutil.Fixture(t, "templates/"+file))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := chat.Parse(file, string(src), map[string]any{"bos_token": "<s>", "eos_token": "</s>"})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		text, err := tmpl.Render(context.Background(), chat.Input{Messages: req.Messages, Tools: req.Tools, AddGenerationPrompt: true})
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, s := range []string{"Weather in a city", "get_weather", "Paris", "3", "sunny, 21 C", "Thanks"} {
			if !strings.Contains(text, s) {
				t.Errorf("%s: the rendered conversation lacks %q:\n%s", file, s, text)
			}
		}
		n++
	}
	if n != 7 {
		t.Errorf("%d of 7 templates rendered", n)
	}
	// A call without arguments (an empty text) is an empty object, which
	// the templates that iterate arguments render.
	empty, aerr := decodeRequest([]byte(`{"messages": [{"role": "user", "content": "time?"},
		{"role": "assistant", "tool_calls": [{"id": "abc123XYZ", "type": "function", "function": {"name": "get_time", "arguments": ""}}]}]}`), true)
	if aerr != nil {
		t.Fatal(aerr)
	}
	src, err := os.ReadFile(testutil.Fixture(t, "templates/Qwen3.5-4B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse("Qwen3.5", string(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := tmpl.Render(context.Background(), chat.Input{Messages: empty.Messages}); err != nil || !strings.Contains(text, "<function=get_time>") {
		t.Errorf("a call without arguments: %v\n%s", err, text)
	}
}

// TestCallIDs: Mistral's template refuses a call id that is not 9 letters
// and digits when the call comes back; the others get OpenAI's form.
func TestCallIDs(t *testing.T) {
	for range 100 {
		if id := callID(toolsMistral); !regexp.MustCompile(`^[A-Za-z0-9]{9}$`).MatchString(id) {
			t.Fatalf("mistral id %q", id)
		}
		if id := callID(toolsHermes); !regexp.MustCompile(`^call_[0-9a-f]{24}$`).MatchString(id) {
			t.Fatalf("hermes id %q", id)
		}
	}
}

// TestForcedCall: in each format with JSON arguments, a forced call's text,
// a completion (the chosen lead, if any, and the arguments) and its end
// read back as that call; the prompt's start is the text (Mistral's after
// its tag); Qwen's XML has none.
func TestForcedCall(t *testing.T) {
	for _, f := range []toolFormat{toolsHermes, toolsLlama3, toolsMistral} {
		for _, names := range [][]string{{"get_weather"}, {"get_weather", "get_time"}} {
			start, text, end, leads, ok := forcedCall(f, names)
			if !ok || !strings.HasSuffix(start, text) || (len(names) == 1) != (leads == nil) || (leads != nil && len(leads) != len(names)) {
				t.Fatalf("format %d, %q: start %q text %q leads %q ok %v", f, names, start, text, leads, ok)
			}
			for i, n := range names {
				completion := `{"city": "Paris"}`
				if leads != nil {
					completion = leads[i] + completion
				}
				content, calls := split(f, []string{text, completion, end})
				if content != "" || len(calls) != 1 || calls[0].Name != n || calls[0].Arguments != `{"city":"Paris"}` {
					t.Errorf("format %d, %q, %s: content %q calls %q", f, names, n, content, calls)
				}
			}
		}
	}
	if _, _, _, _, ok := forcedCall(toolsXML, []string{"get_time"}); ok {
		t.Error("a forced call in Qwen's XML")
	}
}

// TestOneCall: with parallel_tool_calls false, a reply's text ends with
// its first call's end tag (kept), however the tokens split the text; a
// stop string before it still cuts first; decodeRequest reads the field.
func TestOneCall(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
	text := "Sure.\n" + call + "\n" + call + "\nDone."
	for _, tc := range []struct {
		stop []string
		want string
	}{
		{nil, "Sure.\n" + call},
		{[]string{"Done"}, "Sure.\n" + call},
		{[]string{"Sure"}, ""},
		{[]string{"}}"}, "Sure.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {"},
	} {
		r := rand.New(rand.NewPCG(3, uint64(len(tc.stop))))
		for range 50 {
			// The scheduler's loop over the tokens' texts (sched.step).
			j := &job{stop: tc.stop, stopAfter: callClose}
			var out strings.Builder
			stopped := false
			for rest := text; rest != "" && !stopped; {
				n := min(1+r.IntN(6), len(rest))
				j.pending += rest[:n]
				rest = rest[n:]
				if end, ok := j.stopAt(); ok {
					out.WriteString(j.pending[:end])
					stopped = true
					break
				}
				keep := j.held()
				out.WriteString(j.pending[:len(j.pending)-keep])
				j.pending = j.pending[len(j.pending)-keep:]
			}
			if !stopped || out.String() != tc.want {
				t.Fatalf("stop %q: stopped %v, text %q, want %q", tc.stop, stopped, out.String(), tc.want)
			}
		}
	}
	r, err := decodeRequest([]byte(`{"messages": [{"role": "user", "content": "hi"}], "parallel_tool_calls": false}`), true)
	if err != nil || !r.OneCall {
		t.Errorf("parallel_tool_calls false: %v, OneCall %v", err, r != nil && r.OneCall)
	}
	if r, err := decodeRequest([]byte(`{"messages": [{"role": "user", "content": "hi"}], "parallel_tool_calls": true}`), true); err != nil || r.OneCall {
		t.Errorf("parallel_tool_calls true: %v", err)
	}
}
