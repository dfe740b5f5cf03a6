package serve

import (
	"encoding/json"
	"net/http"
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
		for _, s := range r.Stop {
			if s == "" {
				t.Fatalf("empty stop string accepted")
			}
		}
	})
}
