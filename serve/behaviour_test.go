package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/serve"
)

// TestPrefixReuse: a request whose prompt extends what a slot holds
// prefills only its new tokens (cached_tokens says how many were reused),
// and its ids equal a cold server's for the same request.
func TestPrefixReuse(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 2})
	first := `{"prompt": "Once upon a time, there was a little girl", "max_tokens": 12, "temperature": 0}`
	code, v1 := post(t, url, "/v1/completions", first)
	if code != 200 {
		t.Fatalf("turn 1: %d %v", code, v1)
	}
	text1 := v1["choices"].([]any)[0].(map[string]any)["text"].(string)
	u1 := v1["usage"].(map[string]any)
	fed := int(u1["prompt_tokens"].(float64) + u1["completion_tokens"].(float64) - 1) // the last sampled token is never fed
	// The next "turn": the first prompt, its answer, and more.
	second := fmt.Sprintf(`{"prompt": %q, "max_tokens": 16, "temperature": 0}`, "Once upon a time, there was a little girl"+text1+" One day")
	code, v2 := post(t, url, "/v1/completions", second)
	if code != 200 {
		t.Fatalf("turn 2: %d %v", code, v2)
	}
	u2 := v2["usage"].(map[string]any)
	cached := int(u2["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64))
	if cached == 0 {
		t.Fatalf("turn 2 reused nothing (usage %v); turn 1 fed %d tokens", u2, fed)
	}
	if cached != fed {
		t.Errorf("cached_tokens %d, want every token turn 1 fed (%d)", cached, fed)
	}
	if got := metric(t, url, "apr_serve_cached_prompt_tokens_total"); got != float64(cached) {
		t.Errorf("apr_serve_cached_prompt_tokens_total %v, want %d", got, cached)
	}
	_, cold := start(t, serve.Options{Model: model, Parallel: 1})
	code, v3 := post(t, cold, "/v1/completions", second)
	if code != 200 {
		t.Fatalf("cold: %d %v", code, v3)
	}
	if c := v3["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64); c != 0 {
		t.Errorf("a cold server reused %v tokens", c)
	}
	if diff := cmp.Diff(ids(t, v3), ids(t, v2)); diff != "" {
		t.Errorf("turn 2 ids (-cold +reused):\n%s", diff)
	}
}

// TestStopAcrossTokens: a stop string that spans two tokens' text ends the
// answer before it, and its text is never sent (streaming or not).
func TestStopAcrossTokens(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 1})
	const prompt = "Once upon a time"
	want := solo(t, model, prompt, true, 24, sampleParams{})
	tok := tokenizerOf(t, model)
	var pieces []string
	for _, id := range want.TokenIDs {
		p, _ := tok.Piece(id)
		pieces = append(pieces, p)
	}
	// A stop string made of the end of one piece and the start of the next.
	k := -1
	for i := 3; i+1 < len(pieces); i++ {
		if len(pieces[i]) >= 2 && len(pieces[i+1]) >= 2 {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatalf("no two adjacent pieces of 2+ bytes in %q", pieces)
	}
	stop := pieces[k][len(pieces[k])-2:] + pieces[k+1][:2]
	before := strings.Join(pieces[:k+1], "")
	before = before[:len(before)-2]
	full := strings.Join(pieces, "")
	if i := strings.Index(full, stop); i < len(before) {
		before = full[:i]
	}
	before = strings.TrimPrefix(before, " ") // SentencePiece's leading space
	body := fmt.Sprintf(`{"prompt": %q, "max_tokens": 24, "temperature": 0, "stop": ["zzzz", %q]`, prompt, stop)
	code, v := post(t, url, "/v1/completions", body+"}")
	if code != 200 {
		t.Fatalf("%d %v", code, v)
	}
	ch := v["choices"].([]any)[0].(map[string]any)
	got := strings.TrimPrefix(ch["text"].(string), " ")
	if got != before || ch["finish_reason"] != "stop" {
		t.Errorf("stop %q: text %q finish %v, want %q and stop", stop, got, ch["finish_reason"], before)
	}
	var streamed strings.Builder
	for _, l := range sseLines(t, url, "/v1/completions", body+`, "stream": true}`) {
		if l == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(l), &c)
		for _, x := range c.Choices {
			streamed.WriteString(x.Text)
		}
	}
	if s := strings.TrimPrefix(streamed.String(), " "); s != before {
		t.Errorf("streamed text %q, want %q", s, before)
	}
}

func tokenizerOf(t *testing.T, model string) *tokenizer.Tokenizer {
	t.Helper()
	m, err := generate.Load(context.Background(), generate.LoadOptions{Model: model, Backend: "cpu", NoTemplate: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m.Tok
}

// TestLogprobs: logprobs are log-softmax of the logits apr logits gives,
// the sampled token among the top alternatives.
func TestLogprobs(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 1})
	code, v := post(t, url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}]}`)
	if code != 400 { // stories260K has no chat template
		t.Errorf("chat on a model without a template: %d %v", code, v)
	}
	code, v = post(t, url, "/v1/completions", `{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0, "logprobs": 3}`)
	if code != 200 {
		t.Fatalf("%d %v", code, v)
	}
	got := ids(t, v)
	lp := v["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
	tl := lp["token_logprobs"].([]any)
	top := lp["top_logprobs"].([]any)
	if len(tl) != len(got) || len(top) != len(got) {
		t.Fatalf("%d ids, %d token_logprobs, %d top_logprobs", len(got), len(tl), len(top))
	}
	tok := tokenizerOf(t, model)
	prompt, _ := tok.Encode("Once upon a time", tokenizer.Options{AddSpecial: true, ParseSpecial: true})
	all := append(prompt, got[:len(got)-1]...)
	lg, err := generate.Logits(context.Background(), generate.LogitsOptions{Model: model, Backend: "cpu", Tokens: all, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range got {
		want := logprob(lg.Logits[len(prompt)-1+i], id)
		if g := tl[i].(float64); math.Abs(g-want) > 1e-9 {
			t.Errorf("token %d: logprob %v, want %v", i, g, want)
		}
		tops := top[i].(map[string]any)
		if n := len(tops); n != 3 {
			t.Errorf("token %d: %d top_logprobs, want 3", i, n)
		}
		best := math.Inf(-1)
		for _, x := range tops {
			best = math.Max(best, x.(float64))
		}
		if best != tl[i].(float64) { // greedy: the sampled token is the most likely
			t.Errorf("token %d: best top_logprob %v, the greedy token's %v", i, best, tl[i])
		}
	}
}

// TestCancelOnDisconnect: a streaming client that goes away stops its
// sequence (counted in apr_serve_cancelled_total) and frees the only slot
// for the next request.
func TestCancelOnDisconnect(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 1})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions",
		strings.NewReader(`{"prompt": "Once", "max_tokens": 200, "temperature": 0, "ignore_eos": true, "stream": true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the first chunk
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, url, "apr_serve_cancelled_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled sequence was never stopped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := metric(t, url, "apr_serve_completion_tokens_total"); got >= 200 {
		t.Errorf("%v tokens generated: the sequence ran to its end after the client left", got)
	}
	if code, v := post(t, url, "/v1/completions", `{"prompt": "Once", "max_tokens": 3, "temperature": 0}`); code != 200 {
		t.Errorf("the next request: %d %v", code, v)
	}
}

// TestGracefulShutdown: cancelling Serve's context lets an in-flight
// request finish, refuses new connections and returns nil.
func TestGracefulShutdown(t *testing.T) {
	s, err := serve.New(serve.Options{Model: stories(t), Backend: "cpu", Threads: 1, Parallel: 1, Grace: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	type result struct {
		code int
		v    map[string]any
	}
	inflight := make(chan result, 1)
	go func() {
		code, v := post(t, url, "/v1/completions", `{"prompt": "Once", "max_tokens": 150, "temperature": 0, "ignore_eos": true}`)
		inflight <- result{code, v}
	}()
	for metric(t, url, "apr_serve_active_sequences") < 1 {
		time.Sleep(2 * time.Millisecond)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return")
	}
	r := <-inflight
	if r.code != 200 || len(ids(t, r.v)) != 150 {
		t.Errorf("in-flight request: %d, want it finished with 150 tokens", r.code)
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Errorf("the server still accepts connections after shutdown")
	}
}
