package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/sample"
	"github.com/aprqa/apr/serve"
)

func client(url string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(url + "/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0)}, opts...)...)
}

func choiceIDs(t *testing.T, raw string) []int32 {
	t.Helper()
	var c struct {
		IDs []int32 `json:"token_ids"`
	}
	if err := jsonUnmarshal(raw, &c); err != nil {
		t.Fatalf("choice %s: %v", raw, err)
	}
	return c.IDs
}

// TestOpenAIClient drives the server with the official OpenAI Go client:
// chat and completions, streaming and not; every answer's ids equal apr
// run's for the same prompt.
func TestOpenAIClient(t *testing.T) {
	model := tinyQwen2(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 2, APIKey: "sk-test"})
	c := client(url)
	ctx := context.Background()
	const n = 12
	want := solo(t, model, "hello there", false, n, sampleParams{})

	t.Run("chat", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:       "tiny-qwen2",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
			MaxTokens:   openai.Int(n),
			Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		if diff := cmp.Diff(want.TokenIDs, choiceIDs(t, ch.RawJSON())); diff != "" {
			t.Errorf("chat ids (-apr run +serve):\n%s", diff)
		}
		if string(ch.FinishReason) != want.FinishReason {
			t.Errorf("finish_reason %q, apr run %q", ch.FinishReason, want.FinishReason)
		}
		if resp.Usage.PromptTokens != int64(want.PromptTokens) || resp.Usage.CompletionTokens != int64(want.TokensOut) {
			t.Errorf("usage %+v, apr run prompt %d out %d", resp.Usage, want.PromptTokens, want.TokensOut)
		}
		if resp.Object != "chat.completion" || ch.Message.Role != "assistant" {
			t.Errorf("object %q role %q", resp.Object, ch.Message.Role)
		}
	})

	t.Run("chat-stream", func(t *testing.T) {
		st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
			MaxTokens:     openai.Int(n),
			Temperature:   openai.Float(0),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		acc := openai.ChatCompletionAccumulator{}
		var got []int32
		chunks := 0
		for st.Next() {
			ch := st.Current()
			acc.AddChunk(ch)
			chunks++
			if len(ch.Choices) > 0 {
				got = append(got, choiceIDs(t, ch.Choices[0].RawJSON())...)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.TokenIDs, got); diff != "" {
			t.Errorf("streamed ids (-apr run +serve):\n%s", diff)
		}
		if chunks < 3 {
			t.Errorf("%d chunks: want a role chunk, deltas, a finish chunk", chunks)
		}
		if acc.Usage.CompletionTokens != int64(want.TokensOut) {
			t.Errorf("usage chunk: completion_tokens %d, want %d", acc.Usage.CompletionTokens, want.TokensOut)
		}
		if fr := acc.Choices[0].FinishReason; fr != want.FinishReason {
			t.Errorf("finish_reason %q, want %q", fr, want.FinishReason)
		}
	})

	wantRaw := solo(t, model, "once upon", true, n, sampleParams{IgnoreEOS: true})
	t.Run("completions", func(t *testing.T) {
		resp, err := c.Completions.New(ctx, openai.CompletionNewParams{
			Model:       "tiny-qwen2",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon")},
			MaxTokens:   openai.Int(n),
			Temperature: openai.Float(0),
		}, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantRaw.TokenIDs, choiceIDs(t, resp.Choices[0].RawJSON())); diff != "" {
			t.Errorf("completion ids (-apr run +serve):\n%s", diff)
		}
		if resp.Object != "text_completion" || resp.Choices[0].FinishReason != "length" {
			t.Errorf("object %q finish %q", resp.Object, resp.Choices[0].FinishReason)
		}
	})

	t.Run("completions-stream", func(t *testing.T) {
		st := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon")},
			MaxTokens:   openai.Int(n),
			Temperature: openai.Float(0),
		}, option.WithJSONSet("ignore_eos", true))
		var got []int32
		var text strings.Builder
		finish := ""
		for st.Next() {
			ch := st.Current()
			if len(ch.Choices) == 0 {
				continue
			}
			got = append(got, choiceIDs(t, ch.Choices[0].RawJSON())...)
			text.WriteString(ch.Choices[0].Text)
			if ch.Choices[0].FinishReason != "" {
				finish = string(ch.Choices[0].FinishReason)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantRaw.TokenIDs, got); diff != "" {
			t.Errorf("streamed completion ids (-apr run +serve):\n%s", diff)
		}
		if finish != "length" {
			t.Errorf("finish_reason %q, want length", finish)
		}
		// With ignore_eos the tiny model samples <|endoftext|>: its text
		// must not reach the client.
		if strings.Contains(text.String(), "<|") {
			t.Errorf("a control token leaked into the text: %q", text.String())
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != "tiny-qwen2" {
			t.Errorf("models %+v", page.Data)
		}
		// Retrieve: the served model, and 404 model_not_found for another.
		m, err := c.Models.Get(ctx, "tiny-qwen2")
		if err != nil || m.ID != "tiny-qwen2" || m.Object != "model" || m.OwnedBy != "apr" {
			t.Errorf("models.retrieve(tiny-qwen2): %+v, %v", m, err)
		}
		_, err = c.Models.Get(ctx, "org/other-model")
		var apiErr *openai.Error
		if !asErr(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
			t.Errorf("models.retrieve(org/other-model): %v, want a 404 model_not_found", err)
		}
	})

	t.Run("wrong-key", func(t *testing.T) {
		wc := client(url, option.WithAPIKey("sk-wrong"))
		_, err := wc.Models.List(ctx)
		var apiErr *openai.Error
		if !asErr(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
			t.Errorf("wrong key: %v, want a 401", err)
		}
	})
}

// TestBatchInvariance sends 16 concurrent greedy requests of different
// prompts and lengths and 16 seeded sampled ones, all at once, to a server
// with 8 slots (some wait in the queue): each
// answer's ids equal the request's solo apr run, and the server's own
// counters show that sequences shared decode steps.
func TestBatchInvariance(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 8})
	words := []string{"Once upon a time", "The cat", "Lily wanted", "One day, a big", "Tom and", "The sun was", "She saw a", "He ran to the"}
	type reqT struct {
		prompt string
		n      int
		p      sampleParams
	}
	var reqs []reqT
	for i := range 32 {
		r := reqT{prompt: words[i%len(words)], n: 6 + 3*(i%16)}
		if i >= 16 { // seeded sampling
			r.p = sampleParams{Temp: 0.9, Seed: uint64(100 + i), TopK: 40}
		}
		reqs = append(reqs, r)
	}
	// One prompt longer than a prefill chunk (64 tokens): its prefill is
	// interleaved with the others' decode steps.
	reqs[5].prompt = strings.Repeat("The little dog ran to the park and played with a red ball. ", 6)
	got := make([][]int32, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "temperature": %v, "seed": %d, "top_k": %d, "stream": %v}`,
				r.prompt, r.n, r.p.Temp, r.p.Seed, r.p.TopK, i%2 == 1)
			if i%2 == 1 {
				got[i] = streamIDs(t, url, "/v1/completions", body)
				return
			}
			code, v := post(t, url, "/v1/completions", body)
			if code != 200 {
				t.Errorf("request %d: status %d %v", i, code, v)
				return
			}
			got[i] = ids(t, v)
		}()
	}
	wg.Wait()
	for i, r := range reqs {
		want := solo(t, model, r.prompt, true, r.n, r.p)
		if diff := cmp.Diff(want.TokenIDs, got[i]); diff != "" {
			t.Errorf("request %d (%q, n=%d, %+v): ids (-apr run +serve):\n%s", i, r.prompt, r.n, r.p, diff)
		}
	}
	for _, name := range []string{"apr_serve_requests_total", "apr_serve_prompt_tokens_total", "apr_serve_completion_tokens_total",
		"apr_serve_queue_depth", "apr_serve_batch_size_bucket", "apr_serve_time_to_first_token_seconds_bucket", "apr_serve_token_latency_seconds_bucket"} {
		if !strings.Contains(metricsText(t, url), name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if got, want := metric(t, url, "apr_serve_completion_tokens_total"), float64(totalIDs(got)); got != want {
		t.Errorf("apr_serve_completion_tokens_total %v, want %v (the tokens answered)", got, want)
	}
	if mx := metric(t, url, "apr_serve_batch_size_max"); mx < 2 {
		t.Errorf("apr_serve_batch_size_max = %v: the requests never shared a step", mx)
	} else {
		t.Logf("apr_serve_batch_size_max = %v over %v steps", mx, metric(t, url, "apr_serve_steps_total"))
	}
}

// TestSamplingFields: frequency_penalty, presence_penalty, logit_bias and a
// prompt of token ids reach engine/sample and the scheduler as apr run's
// options do: each answer's ids equal the solo run's with the same
// sample.Params, and each field changes the answer (a field dropped on the
// way would leave it as the plain request's).
func TestSamplingFields(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 2})
	const prompt, n = "Once upon a time", 24
	run := func(p sample.Params) []int32 {
		t.Helper()
		res, err := generate.Run(context.Background(), generate.Options{Model: model, Backend: "cpu", Prompt: prompt, Raw: true,
			MaxTokens: n, Sampling: p, Threads: 1, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.TokenIDs
	}
	ask := func(extra string) []int32 {
		t.Helper()
		body := fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "ignore_eos": true%s}`, prompt, n, extra)
		if !strings.Contains(extra, "temperature") {
			body = strings.Replace(body, "{", `{"temperature": 0, `, 1)
		}
		code, v := post(t, url, "/v1/completions", body)
		if code != 200 {
			t.Fatalf("%s: %d %v", body, code, v)
		}
		return ids(t, v)
	}
	plain := run(sample.Params{})
	if diff := cmp.Diff(plain, ask("")); diff != "" {
		t.Fatalf("the plain request (-apr run +serve):\n%s", diff)
	}
	cases := []struct {
		extra string
		p     sample.Params
	}{
		// stories260K's greedy margins outlast any penalty in range: the
		// penalties are tested on seeded draws, against the same draw
		// without them.
		{`, "temperature": 1, "seed": 5`, sample.Params{Temp: 1, Seed: 5}},
		{`, "temperature": 1, "seed": 5, "frequency_penalty": 1.5, "repeat_last_n": 16`, sample.Params{Temp: 1, Seed: 5, FrequencyPenalty: 1.5, RepeatLastN: 16}},
		// repeat_last_n unset: 64, apr run's default.
		{`, "temperature": 1, "seed": 5, "presence_penalty": 2`, sample.Params{Temp: 1, Seed: 5, PresencePenalty: 2, RepeatLastN: 64}},
		{fmt.Sprintf(`, "logit_bias": {"%d": -100, "%d": 3}`, plain[0], plain[3]), sample.Params{LogitBias: map[int32]float64{plain[0]: -100, plain[3]: 3}}},
	}
	var seeded []int32
	for i, c := range cases {
		want := run(c.p)
		if i == 0 {
			seeded = want
		} else if cmp.Equal(want, plain) || cmp.Equal(want, seeded) {
			t.Errorf("%s: apr run's ids equal those without the field: the case tests nothing", c.extra)
		}
		if diff := cmp.Diff(want, ask(c.extra)); diff != "" {
			t.Errorf("%s (-apr run +serve):\n%s", c.extra, diff)
		}
	}
	// The penalties' window defaults to the last 64 tokens, as apr run's
	// --repeat-last-n does: on a prompt longer than that, a request without
	// repeat_last_n gives apr run's default answer, not the one over every
	// token.
	long := strings.Repeat("The cat sat on the mat and looked at the dog. ", 8)
	p64 := sample.Params{Temp: 1, Seed: 9, FrequencyPenalty: 2, RepeatLastN: 64}
	pAll := p64
	pAll.RepeatLastN = 0
	solo := func(p sample.Params) []int32 {
		t.Helper()
		res, err := generate.Run(context.Background(), generate.Options{Model: model, Backend: "cpu", Prompt: long, Raw: true,
			MaxTokens: n, Sampling: p, Threads: 1, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.TokenIDs
	}
	w64 := solo(p64)
	if cmp.Equal(w64, solo(pAll)) {
		t.Fatal("a window of 64 and of every token give the same ids: the default is not tested")
	}
	code, v := post(t, url, "/v1/completions", fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "temperature": 1, "seed": 9, "frequency_penalty": 2, "ignore_eos": true}`, long, n))
	if code != 200 {
		t.Fatalf("long prompt: %d %v", code, v)
	}
	if diff := cmp.Diff(w64, ids(t, v)); diff != "" {
		t.Errorf("repeat_last_n unset (-apr run's default window of 64 +serve):\n%s", diff)
	}
	// The prompt as token ids: the text's own tokens give the text's answer,
	// whether bare or as the one element of OpenAI's batch form.
	pids := promptIDs(t, model, prompt)
	for _, form := range []string{"%s", "[%s]"} {
		js, _ := json.Marshal(pids)
		body := fmt.Sprintf(`{"prompt": `+form+`, "max_tokens": %d, "temperature": 0, "ignore_eos": true}`, js, n)
		code, v := post(t, url, "/v1/completions", body)
		if code != 200 {
			t.Fatalf("%s: %d %v", body, code, v)
		}
		if diff := cmp.Diff(plain, ids(t, v)); diff != "" {
			t.Errorf("prompt %s (-apr run of the text +serve):\n%s", body, diff)
		}
	}
}

// TestEcho: /v1/completions with echo (what lm-eval-harness's loglikelihood
// requests send: the prompt as token ids, max_tokens 0, logprobs): the
// prompt's text comes back first, and with logprobs each prompt token's
// log-probability given the tokens before it (the first null), as the
// engine's logits of the whole prompt give it — across several passes of
// the prompt (more than 64 tokens) — then the completion, whose ids are
// the ones without echo. Streamed, the prompt is the first chunk.
func TestEcho(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 2})
	text := "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her friends and her dog, who was called Max. " +
		"One day, Lily and Max went to the park. They saw a big tree with red apples and a bird that sang a happy song."
	pids := promptIDs(t, model, text)
	if len(pids) <= 64 {
		t.Fatalf("prompt of %d tokens: want more than one pass of 64", len(pids))
	}
	want, err := generate.Logits(context.Background(), generate.LogitsOptions{Model: model, Backend: "cpu", Tokens: pids, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	type lps struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
	type resp struct {
		Choices []struct {
			Text     string  `json:"text"`
			IDs      []int32 `json:"token_ids"`
			Logprobs *lps    `json:"logprobs"`
			Finish   string  `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	ask := func(body string) resp {
		t.Helper()
		code, v := post(t, url, "/v1/completions", body)
		if code != 200 {
			t.Fatalf("%s: %d %v", body, code, v)
		}
		b, _ := json.Marshal(v)
		var r resp
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	js, _ := json.Marshal(pids)
	r := ask(fmt.Sprintf(`{"prompt": %s, "max_tokens": 0, "echo": true, "logprobs": 1, "temperature": 0}`, js))
	c := r.Choices[0]
	if c.Text != text || c.Finish != "length" || r.Usage.Prompt != len(pids) || r.Usage.Completion != 0 {
		t.Fatalf("scored: text %q, finish %q, usage %+v; want the prompt's text, length, %d prompt tokens and none generated", c.Text, c.Finish, r.Usage, len(pids))
	}
	lp := c.Logprobs
	if lp == nil || len(lp.TokenLogprobs) != len(pids) || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
		t.Fatalf("logprobs %+v: want %d entries, the first null", lp, len(pids))
	}
	for i := 1; i < len(pids); i++ {
		w := logprob(want.Logits[i-1], pids[i])
		if g := lp.TokenLogprobs[i]; g == nil || math.Abs(*g-w) > 1e-4 {
			t.Errorf("token %d (%d): logprob %v, want %.6f", i, pids[i], g, w)
		}
		if len(lp.TopLogprobs[i]) != 1 {
			t.Errorf("token %d: %d top logprobs, want 1", i, len(lp.TopLogprobs[i]))
		}
	}
	for i := 1; i < len(lp.TextOffset); i++ {
		if lp.TextOffset[i] < lp.TextOffset[i-1] || lp.TextOffset[i] > len(c.Text) {
			t.Fatalf("text_offset %v: want non-decreasing offsets within the text", lp.TextOffset)
		}
	}
	// Echo and generate: the prompt, then the completion the same request
	// without echo gives.
	plain := ask(fmt.Sprintf(`{"prompt": %q, "max_tokens": 8, "temperature": 0, "ignore_eos": true}`, text))
	both := ask(fmt.Sprintf(`{"prompt": %q, "max_tokens": 8, "temperature": 0, "ignore_eos": true, "echo": true}`, text))
	if b, p := both.Choices[0], plain.Choices[0]; b.Text != text+p.Text || !slices.Equal(b.IDs, p.IDs) {
		t.Errorf("echo and generate: %q ids %v; want %q then %q, ids %v", b.Text, b.IDs, text, p.Text, p.IDs)
	}
	// Streamed: the prompt first.
	cl := client(url)
	st := cl.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(text)},
		MaxTokens:   openai.Int(4),
		Temperature: openai.Float(0),
		Echo:        openai.Bool(true),
	})
	var chunks []string
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 {
			chunks = append(chunks, ch.Choices[0].Text)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 2 || chunks[0] != text {
		t.Errorf("streamed echo: chunks %q, want the prompt's text first", chunks)
	}
}

// TestChoices: n choices are n sequences, choice i sampling with seed + i:
// each has the ids of a solo run with that seed, whole or streamed (each
// chunk carries its choice's index, every choice ends with its own finish
// chunk), and the usage counts the prompt once and every choice's tokens.
func TestChoices(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 2})
	const prompt, n = "Once upon a time", 10
	var want [][]int32
	for i := range 3 {
		want = append(want, solo(t, model, prompt, true, n, sampleParams{Temp: 1, Seed: uint64(5 + i), IgnoreEOS: true}).TokenIDs)
	}
	if cmp.Equal(want[0], want[1]) {
		t.Fatal("seeds 5 and 6 give the same ids: the choices would test nothing")
	}
	code, v := post(t, url, "/v1/completions", fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "temperature": 1, "seed": 5, "n": 3, "ignore_eos": true}`, prompt, n))
	if code != 200 {
		t.Fatalf("n=3: %d %v", code, v)
	}
	chs := v["choices"].([]any)
	if len(chs) != 3 {
		t.Fatalf("%d choices, want 3", len(chs))
	}
	for i, c := range chs {
		c := c.(map[string]any)
		if int(c["index"].(float64)) != i {
			t.Errorf("choice %d has index %v", i, c["index"])
		}
		if diff := cmp.Diff(want[i], ids(t, map[string]any{"choices": []any{c}})); diff != "" {
			t.Errorf("choice %d (-apr run with seed %d +serve):\n%s", i, 5+i, diff)
		}
	}
	u := v["usage"].(map[string]any)
	if u["completion_tokens"].(float64) != 3*n || u["total_tokens"].(float64) != u["prompt_tokens"].(float64)+3*n {
		t.Errorf("usage %v: want the prompt once and 3 × %d completion tokens", u, n)
	}
	// Streamed, with openai-go: every chunk names its choice.
	cl := client(url)
	st := cl.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:     openai.Int(n),
		Temperature:   openai.Float(1),
		Seed:          openai.Int(5),
		N:             openai.Int(3),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithJSONSet("ignore_eos", true))
	got := make([][]int32, 3)
	finishes := 0
	var completion int64
	for st.Next() {
		ch := st.Current()
		if ch.Usage.CompletionTokens > 0 {
			completion = ch.Usage.CompletionTokens
		}
		for _, c := range ch.Choices {
			got[c.Index] = append(got[c.Index], choiceIDs(t, c.RawJSON())...)
			if c.FinishReason != "" {
				finishes++
			}
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streamed choices (-apr run +serve):\n%s", diff)
	}
	if finishes != 3 || completion != 3*n {
		t.Errorf("streamed: %d finish chunks, usage completion_tokens %d; want 3 and %d", finishes, completion, 3*n)
	}
}

// TestBatchPrompts: /v1/completions with a list of prompts (text or token
// ids; lm-eval-harness batches its requests so) answers each prompt's n
// choices at index k·n + c, each a solo run's ids (prompt k, seed + c), the
// usage counting each prompt once; scored with echo and max_tokens 0, each
// choice is its own prompt's text and logprobs.
func TestBatchPrompts(t *testing.T) {
	model := stories(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 2})
	texts := []string{"Once upon a time", "The cat sat"}
	ids1, _ := json.Marshal(promptIDs(t, model, texts[1]))
	const n = 6
	code, v := post(t, url, "/v1/completions", fmt.Sprintf(`{"prompt": [%q, %s], "max_tokens": %d, "temperature": 1, "seed": 3, "n": 2, "ignore_eos": true}`, texts[0], ids1, n))
	if code != 200 {
		t.Fatalf("batch: %d %v", code, v)
	}
	chs := v["choices"].([]any)
	if len(chs) != 4 {
		t.Fatalf("%d choices, want 2 prompts × 2", len(chs))
	}
	prompts := 0
	for k, text := range texts {
		res := solo(t, model, text, true, n, sampleParams{Temp: 1, Seed: 3, IgnoreEOS: true})
		prompts += res.PromptTokens
		for c := range 2 {
			want := solo(t, model, text, true, n, sampleParams{Temp: 1, Seed: uint64(3 + c), IgnoreEOS: true}).TokenIDs
			ch := chs[k*2+c].(map[string]any)
			if int(ch["index"].(float64)) != k*2+c {
				t.Errorf("choice %d has index %v", k*2+c, ch["index"])
			}
			if diff := cmp.Diff(want, ids(t, map[string]any{"choices": []any{ch}})); diff != "" {
				t.Errorf("prompt %d choice %d (-apr run +serve):\n%s", k, c, diff)
			}
		}
	}
	if u := v["usage"].(map[string]any); int(u["prompt_tokens"].(float64)) != prompts || int(u["completion_tokens"].(float64)) != 4*n {
		t.Errorf("usage %v: want the prompts' %d tokens once and 4 × %d completion tokens", u, prompts, n)
	}
	code, v = post(t, url, "/v1/completions", fmt.Sprintf(`{"prompt": [%q, %q], "max_tokens": 0, "echo": true, "logprobs": 1}`, texts[0], texts[1]))
	if code != 200 {
		t.Fatalf("batch scoring: %d %v", code, v)
	}
	for k, ch := range v["choices"].([]any) {
		ch := ch.(map[string]any)
		lp := ch["logprobs"].(map[string]any)["token_logprobs"].([]any)
		if ch["text"] != texts[k] || len(lp) != len(promptIDs(t, model, texts[k])) || lp[0] != nil {
			t.Errorf("scored prompt %d: text %q, %d logprobs (first %v); want its text, one per token, the first null", k, ch["text"], len(lp), lp[0])
		}
	}
}

// TestJSONResponseFormat: response_format json_object constrains each
// completion to one JSON object (generate.SeqOptions.JSON): the text is a
// prefix of one, and with the closing tokens biased it is one whole valid
// object ending on finish_reason stop; chat and completions alike.
func TestJSONResponseFormat(t *testing.T) {
	model := tinyQwen2(t)
	_, url := start(t, serve.Options{Model: model, Parallel: 1})
	tok := modelTokenizer(t, model)
	bias := map[string]float64{}
	for id := range int32(tok.NVocab()) {
		if p, _ := tok.Piece(id); p == `"` || p == "}" || tok.IsEOG(id) {
			bias[strconv.Itoa(int(id))] = 100
		}
	}
	lb, _ := json.Marshal(bias)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		in := `"prompt": "Give me JSON"`
		if strings.Contains(path, "chat") {
			in = `"messages": [{"role": "user", "content": "Give me JSON"}]`
		}
		code, v := post(t, url, path, `{`+in+`, "max_tokens": 40, "temperature": 1, "seed": 2, "response_format": {"type": "json_object"}}`)
		if code != 200 {
			t.Fatalf("%s: %d %v", path, code, v)
		}
		if text := choiceText(v); !generate.JSONObjectPrefix(text) {
			t.Errorf("%s: %q is no prefix of a JSON object", path, text)
		}
		code, v = post(t, url, path, `{`+in+`, "max_tokens": 40, "temperature": 0, "response_format": {"type": "json_object"}, "logit_bias": `+string(lb)+`}`)
		if code != 200 {
			t.Fatalf("%s biased: %d %v", path, code, v)
		}
		ch := v["choices"].([]any)[0].(map[string]any)
		if text := choiceText(v); ch["finish_reason"] != "stop" || !json.Valid([]byte(text)) || !strings.HasPrefix(text, "{") {
			t.Errorf("%s biased toward closing: finish %v, text %q; want stop on one whole object", path, ch["finish_reason"], text)
		}
	}
}

func choiceText(v map[string]any) string {
	ch := v["choices"].([]any)[0].(map[string]any)
	if m, ok := ch["message"].(map[string]any); ok {
		return m["content"].(string)
	}
	return ch["text"].(string)
}
