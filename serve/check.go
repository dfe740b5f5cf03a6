package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/sample"
)

// local is a server on a loopback port of its own, for the checks below.
type local struct {
	s    *Server
	url  string
	stop func()
}

func startLocal(ctx context.Context, o Options) (*local, error) {
	s, err := New(o)
	if err != nil {
		return nil, err
	}
	if err := s.Load(ctx); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(sctx, ln); close(done) }()
	return &local{s: s, url: "http://" + ln.Addr().String(), stop: func() { cancel(); <-done }}, nil
}

// ParityOptions describe a serving-shape parity check.
type ParityOptions struct {
	Model    string
	Backend  string
	Threads  int
	Parallel int // slots (0: 4)
	Requests int // concurrent requests (0: 8)
	Tokens   int // tokens per request (0: 16)
	// Seed seeds the sampled requests (request i: Seed + i, mod 2^63), so a failing
	// run reproduces.
	Seed uint64
}

// ParityResult is what Parity measured.
type ParityResult struct {
	Requests   int      // requests sent
	Mismatches int      // requests whose ids differ from their solo run
	MaxBatch   int      // the most sequences one scheduler step advanced
	Notes      []string // one line per mismatch
}

// parityPrompts are the fixed prompts of the parity set.
var parityPrompts = []string{"Once upon a time", "The quick brown fox", "In the beginning", "Hello, my name is",
	"1, 2, 3, 4,", "def main():", "The capital of France is", "Water boils at"}

// Parity serves o.Model on loopback and sends Requests concurrent
// /v1/completions requests (greedy and seeded sampled, streamed and not,
// of different lengths; one chat request when the model has a template),
// then compares each response's token ids with the same request run alone
// through apr run's loop (engine/generate) on the same backend.
func Parity(ctx context.Context, o ParityOptions) (ParityResult, error) {
	if o.Parallel == 0 {
		o.Parallel = 4
	}
	if o.Requests == 0 {
		o.Requests = 8
	}
	if o.Tokens == 0 {
		o.Tokens = 16
	}
	l, err := startLocal(ctx, Options{Model: o.Model, Backend: o.Backend, Threads: o.Threads, Parallel: o.Parallel, Ctx: 512})
	if err != nil {
		return ParityResult{}, err
	}
	defer l.stop()
	type pr struct {
		chat   bool
		prompt string
		n      int
		p      sample.Params
		stream bool
	}
	var reqs []pr
	for i := range o.Requests {
		r := pr{prompt: parityPrompts[i%len(parityPrompts)], n: max(1, o.Tokens-i%4*o.Tokens/8), stream: i%2 == 1}
		if i%4 == 3 {
			r.p = sample.Params{Temp: 0.8, TopK: 40, Seed: (o.Seed + uint64(i)) & (1<<63 - 1)} // the API takes seeds in [0, 2^63)
		}
		reqs = append(reqs, r)
	}
	if l.s.m.Tmpl != nil {
		reqs[0].chat = true
	}
	got := make([][]int32, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := map[string]any{"max_tokens": r.n, "temperature": r.p.Temp, "top_k": r.p.TopK, "seed": r.p.Seed, "stream": r.stream}
			path := "/v1/completions"
			if r.chat {
				path = "/v1/chat/completions"
				body["messages"] = []any{map[string]any{"role": "user", "content": r.prompt}}
			} else {
				body["prompt"] = r.prompt
			}
			got[i], errs[i] = fetchIDs(ctx, l.url+path, body)
		}()
	}
	wg.Wait()
	// A failed request is reported before the solo engine is opened: a
	// device fault in the server (sticky for the process's CUDA context)
	// would otherwise surface as that engine's first driver call failing,
	// far from its cause (issue 11).
	for i := range reqs {
		if errs[i] != nil {
			return ParityResult{Requests: len(reqs)}, fmt.Errorf("serve: parity request %d: %w", i, errs[i])
		}
	}
	if plantParity != nil {
		for i := range got {
			got[i] = plantParity(i, got[i])
		}
	}
	res := ParityResult{Requests: len(reqs), MaxBatch: int(l.s.sch.maxBatchSize())}
	m, err := generate.Load(ctx, generate.LoadOptions{Model: o.Model, Backend: o.Backend, Threads: o.Threads})
	if err != nil {
		return res, err
	}
	defer m.Close()
	if _, err := m.Upload(); err != nil {
		return res, err
	}
	for i, r := range reqs {
		want, err := soloIDs(ctx, m, r.prompt, !r.chat, r.n, r.p)
		if err != nil {
			return res, err
		}
		if !slices.Equal(want, got[i]) {
			res.Mismatches++
			res.Notes = append(res.Notes, fmt.Sprintf("request %d (%q, %d tokens, temp %v, stream %v, chat %v): served %v, alone %v",
				i, r.prompt, r.n, r.p.Temp, r.stream, r.chat, got[i], want))
		}
	}
	return res, nil
}

// plantParity, set only by serve's own tests, alters served ids to prove
// that Parity can fail.
var plantParity func(i int, ids []int32) []int32

// soloIDs runs one request alone through apr run's loop on m.
func soloIDs(ctx context.Context, m *generate.Model, prompt string, raw bool, n int, p sample.Params) ([]int32, error) {
	toks, err := generate.PromptTokens(ctx, m.Tok, m.Tmpl, prompt, raw)
	if err != nil {
		return nil, err
	}
	q, _, err := m.NewSlot(len(toks)+n).Start(toks, generate.SeqOptions{MaxTokens: n, Sampling: p, SkipControl: true})
	if err != nil {
		return nil, err
	}
	for !q.Done() {
		if _, err := q.Advance(0); err != nil {
			return nil, err
		}
	}
	return slices.Clone(q.Tokens()), nil
}

// fetchIDs posts body and returns the token ids of the answer, streamed
// (every chunk's token_ids) or not.
func fetchIDs(ctx context.Context, url string, body map[string]any) ([]int32, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %.300s", resp.StatusCode, raw)
	}
	type choices struct {
		Choices []struct {
			IDs []int32 `json:"token_ids"`
		} `json:"choices"`
	}
	if stream, _ := body["stream"].(bool); !stream {
		var c choices
		if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) != 1 {
			return nil, fmt.Errorf("response %.300s: %v", raw, err)
		}
		return c.Choices[0].IDs, nil
	}
	events, framing := parseSSE(raw)
	if len(framing) > 0 {
		return nil, fmt.Errorf("SSE framing: %s", strings.Join(framing, "; "))
	}
	ids := []int32{}
	for _, e := range events {
		var c choices
		json.Unmarshal(e, &c)
		for _, ch := range c.Choices {
			ids = append(ids, ch.IDs...)
		}
	}
	return ids, nil
}

// parseSSE splits an SSE body into its data payloads (without the final
// [DONE]) and reports every framing violation: a line that is not "data:
// …", events not separated by a blank line, a payload that is not a JSON
// object, a missing, repeated or non-final [DONE], bytes after it.
func parseSSE(body []byte) ([]json.RawMessage, []string) {
	var out []json.RawMessage
	var bad []string
	done := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	expectBlank := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if expectBlank {
			if line != "" {
				bad = append(bad, fmt.Sprintf("line %d: an event is not followed by a blank line", n))
			}
			expectBlank = false
			continue
		}
		if done > 0 {
			bad = append(bad, fmt.Sprintf("line %d: %q after [DONE]", n, line))
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			bad = append(bad, fmt.Sprintf("line %d: %q is not a data: line", n, line))
			continue
		}
		expectBlank = true
		if d == "[DONE]" {
			done++
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(d), &obj); err != nil {
			bad = append(bad, fmt.Sprintf("line %d: payload is not a JSON object: %v", n, err))
			continue
		}
		out = append(out, json.RawMessage(d))
	}
	if done == 0 {
		bad = append(bad, "no data: [DONE] at the end")
	}
	return out, bad
}

// Responses serves o.Model on loopback and collects one of each response
// the API gives: a completion (with logprobs), a chat completion (when the
// model has a template), both streamed (with usage), an error, the model
// list and /health, as one JSON document keyed by kind (verb.serve's
// contract describes it). It also returns the SSE framing violations of
// the streams, and of their chunk sequence (one finish chunk with stop or
// length, the usage chunk after it, [DONE] last).
func Responses(ctx context.Context, o Options) (map[string]any, []string, error) {
	if o.Parallel == 0 {
		o.Parallel = 2
	}
	l, err := startLocal(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	defer l.stop()
	doc := map[string]any{}
	var framing []string
	do := func(method, path string, body any) (int, http.Header, []byte, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, l.url+path, rd)
		if err != nil {
			return 0, nil, nil, err
		}
		if o.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+o.APIKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, raw, err
	}
	one := func(key, method, path string, body any, wantCode int) error {
		code, _, raw, err := do(method, path, body)
		if err != nil {
			return err
		}
		if code != wantCode {
			return fmt.Errorf("serve: %s %s: status %d, want %d: %.300s", method, path, code, wantCode, raw)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("serve: %s %s: body is not JSON: %v", method, path, err)
		}
		doc[key] = v
		return nil
	}
	stream := func(key, path string, body map[string]any) error {
		code, hdr, raw, err := do("POST", path, body)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("serve: POST %s: status %d: %.300s", path, code, raw)
		}
		if ct := hdr.Get("Content-Type"); ct != "text/event-stream" {
			framing = append(framing, fmt.Sprintf("%s: Content-Type %q, want text/event-stream", key, ct))
		}
		events, bad := parseSSE(raw)
		for _, b := range bad {
			framing = append(framing, key+": "+b)
		}
		var chunks []any
		finishes, usageAt, finishAt := 0, -1, -1
		for i, e := range events {
			var c struct {
				Choices []struct {
					Finish *string `json:"finish_reason"`
				} `json:"choices"`
				Usage any `json:"usage"`
			}
			json.Unmarshal(e, &c)
			for _, ch := range c.Choices {
				if ch.Finish != nil {
					finishes++
					finishAt = i
					if *ch.Finish != generate.FinishStop && *ch.Finish != generate.FinishLength {
						framing = append(framing, fmt.Sprintf("%s: chunk %d: finish_reason %q", key, i, *ch.Finish))
					}
				}
			}
			if c.Usage != nil {
				usageAt = i
				if len(c.Choices) != 0 {
					framing = append(framing, fmt.Sprintf("%s: the usage chunk has choices", key))
				}
			}
			var v any
			json.Unmarshal(e, &v)
			chunks = append(chunks, v)
		}
		switch {
		case finishes != 1:
			framing = append(framing, fmt.Sprintf("%s: %d chunks carry a finish_reason, want 1", key, finishes))
		case usageAt < 0:
			framing = append(framing, key+": no usage chunk although include_usage was asked")
		case usageAt != len(events)-1 || finishAt > usageAt:
			framing = append(framing, key+": the usage chunk is not the last before [DONE]")
		}
		doc[key] = chunks
		return nil
	}
	steps := []func() error{
		func() error {
			return one("completion", "POST", "/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0, "logprobs": 2}, 200)
		},
		func() error {
			return stream("completion_chunks", "/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0,
				"stream": true, "stream_options": map[string]any{"include_usage": true}})
		},
		func() error {
			return one("error", "POST", "/v1/completions", map[string]any{"prompt": "x", "temperature": "hot"}, 400)
		},
		func() error { return one("models", "GET", "/v1/models", nil, 200) },
		func() error { return one("health", "GET", "/health", nil, 200) },
	}
	if l.s.m.Tmpl != nil {
		msgs := []any{map[string]any{"role": "user", "content": "Hello"}}
		steps = append(steps,
			func() error {
				return one("chat", "POST", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 4, "temperature": 0,
					"logprobs": true, "top_logprobs": 2}, 200)
			},
			func() error {
				return stream("chat_chunks", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 4, "temperature": 0,
					"stream": true, "stream_options": map[string]any{"include_usage": true}})
			})
	}
	for _, st := range steps {
		if err := st(); err != nil {
			return nil, nil, err
		}
	}
	return doc, framing, nil
}
