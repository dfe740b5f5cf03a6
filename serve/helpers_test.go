package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/sample"
	"github.com/aprqa/apr/engine/synth"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/serve"
)

var (
	tinyOnce sync.Once
	tinyPath string
	tinyErr  error
)

// tinyQwen2 writes apr synth's tiny qwen2 (F32, seed 1; it has a chat
// template) once per test binary.
func tinyQwen2(tb testing.TB) string {
	tb.Helper()
	tinyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "apr-serve-test-")
		if err != nil {
			tinyErr = err
			return
		}
		p, err := synth.FindPreset("qwen2", "tiny")
		if err != nil {
			tinyErr = err
			return
		}
		tinyPath = filepath.Join(dir, "tiny-qwen2.gguf")
		_, tinyErr = synth.Write(tinyPath, synth.Options{Preset: p, Type: quant.F32, Seed: 1})
	})
	if tinyErr != nil {
		tb.Fatal(tinyErr)
	}
	return tinyPath
}

func stories(tb testing.TB) string {
	tb.Helper()
	return testutil.Fixture(tb, "models/stories260K.gguf")
}

// start loads o.Model and serves it on loopback until the test ends.
func start(tb testing.TB, o serve.Options) (*serve.Server, string) {
	tb.Helper()
	if o.Backend == "" {
		o.Backend = "cpu"
	}
	if o.Threads == 0 {
		o.Threads = 1
	}
	s, err := serve.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Load(context.Background()); err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	tb.Cleanup(func() { ts.Close(); s.Close() })
	return s, ts.URL
}

// solo is apr run's result for the same request.
func solo(tb testing.TB, model, prompt string, raw bool, n int, p sampleParams) generate.Result {
	tb.Helper()
	res, err := generate.Run(context.Background(), generate.Options{Model: model, Backend: "cpu", Prompt: prompt, Raw: raw,
		MaxTokens: n, Sampling: p.params(), Threads: 1, IgnoreEOS: p.IgnoreEOS})
	if err != nil {
		tb.Fatalf("generate.Run(%q): %v", prompt, err)
	}
	return res
}

// post sends body to url+path and returns the status and decoded JSON.
func post(tb testing.TB, url, path, body string, hdr ...string) (int, map[string]any) {
	tb.Helper()
	req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("POST %s: status %d, body is not JSON: %v\n%s", path, resp.StatusCode, err, b)
	}
	return resp.StatusCode, v
}

// ids reads a choice's token_ids.
func ids(tb testing.TB, v map[string]any) []int32 {
	tb.Helper()
	ch := v["choices"].([]any)[0].(map[string]any)
	var out []int32
	for _, x := range ch["token_ids"].([]any) {
		out = append(out, int32(x.(float64)))
	}
	return out
}

func metricsText(tb testing.TB, url string) string {
	tb.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func totalIDs(ids [][]int32) int {
	n := 0
	for _, x := range ids {
		n += len(x)
	}
	return n
}

// metric reads one sample's value from /metrics.
func metric(tb testing.TB, url, name string) float64 {
	tb.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		tb.Fatalf("/metrics has no %s:\n%s", name, b)
	}
	f, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// sampleParams are a request's sampling fields, as apr run takes them.
type sampleParams struct {
	Temp      float64
	Seed      uint64
	TopK      int
	IgnoreEOS bool
}

func (p sampleParams) params() sample.Params {
	return sample.Params{Temp: p.Temp, Seed: p.Seed, TopK: p.TopK}
}

// promptIDs is text as a raw prompt of model tokenizes (BOS as the model
// says): what a client sending token ids would send for it.
func promptIDs(tb testing.TB, model, text string) []int32 {
	tb.Helper()
	ids, err := generate.PromptTokens(context.Background(), modelTokenizer(tb, model), nil, text, true)
	if err != nil {
		tb.Fatal(err)
	}
	return ids
}

// logprob is log softmax(row)[id] in float64, the test's own.
func logprob(row []float32, id int32) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(row[id]) - mx - math.Log(sum)
}

// modelTokenizer is model's tokenizer, built from its GGUF header.
func modelTokenizer(tb testing.TB, model string) *tokenizer.Tokenizer {
	tb.Helper()
	f, err := gguf.Open(model)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() }) // the tokenizer may read the file's mapping
	tok, err := tokenizer.New(f)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
