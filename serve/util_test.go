package serve_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

// sseLines posts body and returns the data: payloads of the SSE stream.
func sseLines(t *testing.T, url, path, body string) []string {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: status %d", path, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Errorf("SSE line without data: %q", line)
			continue
		}
		out = append(out, d)
	}
	return out
}

// sseChunks posts a streaming request and returns its chunks' payloads;
// the stream must end with [DONE] (not returned).
func sseChunks(t *testing.T, url, path, body string) []string {
	t.Helper()
	lines := sseLines(t, url, path, body)
	if len(lines) == 0 || lines[len(lines)-1] != "[DONE]" {
		t.Errorf("stream does not end with [DONE]: %q", lines)
		return nil
	}
	return lines[:len(lines)-1]
}

// streamIDs posts a streaming request and returns the ids of its chunks;
// the stream must end with [DONE].
func streamIDs(t *testing.T, url, path, body string) []int32 {
	t.Helper()
	var ids []int32
	for _, l := range sseChunks(t, url, path, body) {
		var c struct {
			Choices []struct {
				IDs []int32 `json:"token_ids"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Errorf("chunk %q: %v", l, err)
			continue
		}
		for _, ch := range c.Choices {
			ids = append(ids, ch.IDs...)
		}
	}
	return ids
}

func httptestServer(t *testing.T, s interface{ Handler() http.Handler }) string {
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}
