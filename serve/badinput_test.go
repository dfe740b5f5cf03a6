package serve_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aprqa/apr/serve"
)

// TestBadInput: every class of bad request gets its status code and an
// error that names the field or position; the server keeps serving.
func TestBadInput(t *testing.T) {
	model := tinyQwen2(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 1, Ctx: 64, APIKey: "k", MaxBody: 4096})
	auth := []string{"Authorization", "Bearer k"}
	msgs := `"messages": [{"role": "user", "content": "hi"}]`
	long := strings.Repeat("hello ", 200)
	tests := []struct {
		name, path, body string
		hdr              []string
		code             int
		want             string // in error.message
		param            string // error.param ("" : not checked)
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [}`, auth, 400, "byte offset 14 (line 1, column 15)", ""},
		{"truncated JSON", "/v1/completions", `{"prompt": "a"`, auth, 400, "malformed JSON at byte offset 14", ""},
		{"not an object", "/v1/completions", `[1, 2]`, auth, 400, "must be a JSON object", ""},
		{"trailing data", "/v1/completions", `{"prompt": "a"} {}`, auth, 400, "after the request object", ""},
		{"temperature type", "/v1/chat/completions", `{` + msgs + `, "temperature": "hot"}`, auth, 400, "want a number, got a string", "temperature"},
		{"temperature range", "/v1/chat/completions", `{` + msgs + `, "temperature": 3}`, auth, 400, "out of range", "temperature"},
		{"top_p range", "/v1/completions", `{"prompt": "a", "top_p": 1.5}`, auth, 400, "out of range", "top_p"},
		{"top_k negative", "/v1/completions", `{"prompt": "a", "top_k": -1}`, auth, 400, "out of range", "top_k"},
		{"max_tokens zero", "/v1/completions", `{"prompt": "a", "max_tokens": 0}`, auth, 400, "only allowed with echo", "max_tokens"},
		{"max_tokens negative", "/v1/completions", `{"prompt": "a", "max_tokens": -1}`, auth, 400, "out of range", "max_tokens"},
		{"echo type", "/v1/completions", `{"prompt": "a", "echo": "yes"}`, auth, 400, "want a boolean", "echo"},
		{"echo in chat", "/v1/chat/completions", `{` + msgs + `, "echo": true}`, auth, 400, "unrecognized", "echo"},
		{"max_tokens fraction", "/v1/completions", `{"prompt": "a", "max_tokens": 1.5}`, auth, 400, "not an integer", "max_tokens"},
		{"n = 17", "/v1/chat/completions", `{` + msgs + `, "n": 17}`, auth, 400, "out of range [1, 16]", "n"},
		{"n = 0", "/v1/chat/completions", `{` + msgs + `, "n": 0}`, auth, 400, "out of range", "n"},
		{"stop type", "/v1/completions", `{"prompt": "a", "stop": 7}`, auth, 400, "a string or an array of strings", "stop"},
		{"too many stops", "/v1/completions", `{"prompt": "a", "stop": ["a","b","c","d","e"]}`, auth, 400, "at most 4", "stop"},
		{"messages missing", "/v1/chat/completions", `{"max_tokens": 3}`, auth, 400, "required", "messages"},
		{"bad role", "/v1/chat/completions", `{"messages": [{"role": "wizard", "content": "x"}]}`, auth, 400, "wizard", "messages[0].role"},
		{"image part", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, auth, 400, "only text parts", ""},
		{"unknown field", "/v1/completions", `{"prompt": "a", "frobnicate": 1}`, auth, 400, "frobnicate", "frobnicate"},
		{"tool without a function", "/v1/chat/completions", `{` + msgs + `, "tools": [{"type": "function"}]}`, auth, 400, "want {\"type\": \"function\"", "tools[0]"},
		{"tools on a template without them", "/v1/chat/completions", `{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f"}}]}`, auth, 400, "renders no tools", "tools"},
		{"tools on completions", "/v1/completions", `{"prompt": "hi", "tools": [{"type": "function", "function": {"name": "f"}}]}`, auth, 400, "send tools on /v1/chat/completions", "tools"},
		{"tool_choice required without tools", "/v1/chat/completions", `{` + msgs + `, "tool_choice": "required"}`, auth, 400, "\"required\" with no tools", "tool_choice"},
		{"tool_choice a function not among the tools", "/v1/chat/completions", `{` + msgs + `, "tool_choice": {"type": "function", "function": {"name": "f"}}}`, auth, 400, "not among the tools", "tool_choice"},
		{"tool_choice malformed", "/v1/chat/completions", `{` + msgs + `, "tool_choice": {"type": "function"}}`, auth, 400, "want \"auto\"", "tool_choice"},
		{"tools not a list", "/v1/chat/completions", `{` + msgs + `, "tools": {}}`, auth, 400, "want an array", "tools"},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{` + msgs + `, "top_logprobs": 2}`, auth, 400, "needs logprobs", "top_logprobs"},
		{"stream_options without stream", "/v1/chat/completions", `{` + msgs + `, "stream_options": {"include_usage": true}}`, auth, 400, "only allowed with stream", "stream_options"},
		{"prompt over context", "/v1/completions", `{"prompt": "` + long[:1000] + `"}`, auth, 400, "longer than the context of 64", "prompt"},
		{"max_tokens over context", "/v1/completions", `{"prompt": "hello", "max_tokens": 500}`, auth, 400, "context of 64", "max_tokens"},
		{"unknown model", "/v1/completions", `{"model": "gpt-9", "prompt": "a"}`, auth, 404, "gpt-9", "model"},
		{"no key", "/v1/completions", `{"prompt": "a"}`, nil, 401, "missing API key", ""},
		{"wrong key", "/v1/completions", `{"prompt": "a"}`, []string{"Authorization", "Bearer nope"}, 401, "wrong API key", ""},
		{"body too large", "/v1/completions", `{"prompt": "` + strings.Repeat("x", 5000) + `"}`, auth, 413, "over the limit of 4096 bytes", ""},
		{"no route", "/v1/embeddings", `{}`, auth, 404, "no route", ""},
		{"frequency_penalty range", "/v1/chat/completions", `{` + msgs + `, "frequency_penalty": 2.5}`, auth, 400, "out of range", "frequency_penalty"},
		{"presence_penalty type", "/v1/completions", `{"prompt": "a", "presence_penalty": "lots"}`, auth, 400, "want a number", "presence_penalty"},
		{"logit_bias key", "/v1/completions", `{"prompt": "a", "logit_bias": {"abc": 1}}`, auth, 400, "not a token id", "logit_bias.abc"},
		{"logit_bias range", "/v1/completions", `{"prompt": "a", "logit_bias": {"5": -101}}`, auth, 400, "out of range [-100, 100]", "logit_bias.5"},
		{"logit_bias type", "/v1/completions", `{"prompt": "a", "logit_bias": [1]}`, auth, 400, "an object of token ids", "logit_bias"},
		{"logit_bias past the vocabulary", "/v1/completions", `{"prompt": "a", "logit_bias": {"99999999": 1}}`, auth, 400, "past the vocabulary", "logit_bias"},
		{"a prompt of the batch is neither", "/v1/completions", `{"prompt": ["a", 5]}`, auth, 400, "want a string or a non-empty array of token ids", "prompt[1]"},
		{"too many sequences", "/v1/completions", `{"prompt": ["a", "b", "c", "d", "e"], "n": 16}`, auth, 400, "at most 64", "n"},
		{"a batch prompt past the vocabulary", "/v1/completions", `{"prompt": [[1, 2], [3, 99999999]]}`, auth, 400, "not in the vocabulary", "prompt[1][1]"},
		{"token past the vocabulary", "/v1/completions", `{"prompt": [1, 99999999]}`, auth, 400, "not in the vocabulary", "prompt[1]"},
		{"negative token", "/v1/completions", `{"prompt": [-1]}`, auth, 400, "not in the vocabulary", "prompt[0]"},
		{"empty token prompt", "/v1/completions", `{"prompt": []}`, auth, 400, "want a string or an array of token ids", "prompt"},
		{"a batch prompt over the context", "/v1/completions", `{"prompt": ["hi", "` + long[:1000] + `"]}`, auth, 400, "longer than the context of 64", "prompt[1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, v := post(t, url, tc.path, tc.body, tc.hdr...)
			e, _ := v["error"].(map[string]any)
			if code != tc.code || e == nil {
				t.Fatalf("POST %s %s: status %d %v, want %d with an error object", tc.path, tc.body[:min(len(tc.body), 60)], code, v, tc.code)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q does not contain %q", msg, tc.want)
			}
			if tc.param != "" && e["param"] != tc.param {
				t.Errorf("param %v, want %q", e["param"], tc.param)
			}
		})
	}
	// What asks for no tool is accepted: empty lists, "none", "auto".
	for _, extra := range []string{`"tools": []`, `"tool_choice": "none"`, `"tool_choice": "auto", "tools": []`, `"functions": [], "function_call": "none"`} {
		if code, v := post(t, url, "/v1/chat/completions", `{`+msgs+`, "max_tokens": 2, `+extra+`}`, auth...); code != 200 {
			t.Errorf("chat with %s: %d %v, want 200", extra, code, v)
		}
	}
	// Still serving, and /health stays open without the key.
	if code, v := post(t, url, "/v1/completions", `{"prompt": "a", "max_tokens": 2}`, auth...); code != 200 {
		t.Errorf("after the bad requests: %d %v", code, v)
	}
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/health: %v %v", resp, err)
	}
}

// TestHealthWhileLoading: before Load, /health is 503 with the reason and
// completions are refused with 503.
func TestHealthWhileLoading(t *testing.T) {
	s, err := serve.New(serve.Options{Model: tinyQwen2(t), Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := httptestServer(t, s)
	resp, err := http.Get(ts + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("/health before Load: %d, want 503", resp.StatusCode)
	}
	if code, v := post(t, ts, "/v1/completions", `{"prompt": "a"}`); code != 503 || !strings.Contains(v["error"].(map[string]any)["message"].(string), "loading") {
		t.Errorf("completion before Load: %d %v", code, v)
	}
}

// TestUnknownBackendRefused: a backend that is not registered is refused by
// name, never replaced.
func TestUnknownBackendRefused(t *testing.T) {
	_, err := serve.New(serve.Options{Model: tinyQwen2(t), Backend: "tpu"})
	if err == nil || !strings.Contains(err.Error(), `backend "tpu" is not available`) {
		t.Errorf("New with backend tpu: %v, want a refusal naming it", err)
	}
}

// TestQueueFull: with one slot and room for one waiting request, a burst of
// concurrent requests gets 503 with Retry-After for those beyond the queue
// instead of waiting without bound; the others complete.
func TestQueueFull(t *testing.T) {
	_, url := start(t, serve.Options{Model: stories(t), Parallel: 1, MaxQueue: 1})
	const n = 24
	long := `{"prompt": "Once", "max_tokens": 400, "temperature": 0, "ignore_eos": true}`
	type result struct {
		code  int
		retry string
	}
	done := make(chan result, n)
	for range n {
		go func() {
			resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(long))
			if err != nil {
				done <- result{code: -1}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			done <- result{resp.StatusCode, resp.Header.Get("Retry-After")}
		}()
	}
	counts := map[int]int{}
	for range n {
		r := <-done
		counts[r.code]++
		if r.code == 503 && r.retry == "" {
			t.Errorf("503 without Retry-After")
		}
	}
	if counts[503] == 0 || counts[200] < 2 || counts[200]+counts[503] != n {
		t.Errorf("%d concurrent requests on 1 slot + 1 queue place: %v, want some 503 and the rest 200", n, counts)
	}
}

// TestCORS: with CORSOrigins, a listed origin's preflight is answered 204
// before the API key is asked for, and its requests carry
// Access-Control-Allow-Origin; another origin gets no CORS header; "*"
// allows any; without CORSOrigins nothing changes (OPTIONS is 404); an
// origin that is no scheme://host is refused at New.
func TestCORS(t *testing.T) {
	model := tinyQwen2(t)
	const app = "http://app.example:3000"
	_, url := start(t, serve.Options{Model: model, Parallel: 1, APIKey: "k", CORSOrigins: []string{app + "/"}})
	do := func(method, origin string, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url+"/v1/completions", strings.NewReader(`{"prompt": "a", "max_tokens": 1}`))
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	pre := do("OPTIONS", app, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight from %s: %d %v, want 204 allowing it, POST and Authorization", app, pre.StatusCode, pre.Header)
	}
	if r := do("POST", app, "Authorization", "Bearer k"); r.StatusCode != 200 || r.Header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("POST from %s: %d, Allow-Origin %q; want 200 and the origin", app, r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := do("POST", app); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST from %s without the key: %d, want 401", app, r.StatusCode)
	}
	for _, m := range []string{"POST", "OPTIONS"} {
		if r := do(m, "http://evil.example", "Authorization", "Bearer k", "Access-Control-Request-Method", "POST"); r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s from another origin: Allow-Origin %q, want none", m, r.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	_, anyURL := start(t, serve.Options{Model: model, Parallel: 1, CORSOrigins: []string{"*"}})
	req, _ := http.NewRequest("OPTIONS", anyURL+"/v1/chat/completions", nil)
	req.Header.Set("Origin", "http://whatever.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight with *: %v %v", r, err)
	}
	_, plainURL := start(t, serve.Options{Model: model, Parallel: 1})
	req, _ = http.NewRequest("OPTIONS", plainURL+"/v1/chat/completions", nil)
	req.Header.Set("Origin", app)
	req.Header.Set("Access-Control-Request-Method", "POST")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusNotFound || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight without CORSOrigins: %v %v, want 404 and no CORS header", r, err)
	}
	for _, bad := range []string{"app.example", "http://app.example/path", ""} {
		if _, err := serve.New(serve.Options{Model: model, Backend: "cpu", CORSOrigins: []string{bad}}); err == nil || !strings.Contains(err.Error(), "CORS origin") {
			t.Errorf("CORS origin %q: %v, want it refused", bad, err)
		}
	}
}
