package serve_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aprqa/apr/serve"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestLoad is the bounded loopback load test, run only when APR_SERVE_LOAD
// names a model (with APR_SERVE_LOAD_URL, the same clients against another
// server already listening there, e.g. llama-server on the same file, for
// a side-by-side figure; --parallel is then that server's): APR_SERVE_CLIENTS clients (default 8) each send
// APR_SERVE_REQUESTS (2) streamed greedy /v1/completions requests of
// APR_SERVE_TOKENS (64) tokens, for each --parallel in APR_SERVE_PARALLEL
// (APR_SERVE_THREADS and APR_SERVE_CHUNK set apr serve's threads and prefill
// budget)
// ("1,8"). Each run's prompts carry a fresh number, so no server answers
// them from a cache of an earlier run. TTFT is the time from sending a
// request to the first chunk that carries a generated token. It stops by itself, fails on any error or incomplete stream, and
// logs p50/p99 TTFT, p50/p99 inter-token latency and aggregate tok/s.
//
//	APR_SERVE_LOAD=model.gguf go test ./serve -run TestLoad -v -timeout 30m
func TestLoad(t *testing.T) {
	model := os.Getenv("APR_SERVE_LOAD")
	if model == "" {
		t.Skip("SKIP (not a pass): set APR_SERVE_LOAD=MODEL to run the load test")
	}
	clients, perClient, tokens := envInt("APR_SERVE_CLIENTS", 8), envInt("APR_SERVE_REQUESTS", 2), envInt("APR_SERVE_TOKENS", 64)
	threads := envInt("APR_SERVE_THREADS", 0)
	par := os.Getenv("APR_SERVE_PARALLEL")
	if par == "" {
		par = "1,8"
	}
	for _, p := range strings.Split(par, ",") {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("parallel=%d", n), func(t *testing.T) {
			url := os.Getenv("APR_SERVE_LOAD_URL")
			if url == "" {
				_, url = start(t, serve.Options{Model: model, Parallel: n, Threads: threads, Ctx: 512, Chunk: envInt("APR_SERVE_CHUNK", 0)})
			}
			var mu sync.Mutex
			var ttft, itl []float64
			total, prompts := 0, 0
			load0, cpu0 := loadavg(), serverCPU(t)
			if p := os.Getenv("APR_SERVE_CPUPROFILE"); p != "" && os.Getenv("APR_SERVE_LOAD_URL") == "" {
				f, err := os.Create(fmt.Sprintf("%s.p%d", p, n))
				if err != nil {
					t.Fatal(err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					t.Fatal(err)
				}
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
			// A fresh connection per request: a kept-alive one that the other
			// server closed while idle fails the next request on it.
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			verbose := os.Getenv("APR_SERVE_LOAD_VERBOSE") != ""
			// Every run's prompts are new to the server: a server that kept
			// an earlier run's prompts in its slots (llama-server reuses a
			// slot's cached prefix) would otherwise prefill next to nothing
			// and report a TTFT of its cache, not of its prefill. The nonce
			// has a fixed width, so the prompts' lengths do not change.
			// (APR_SERVE_LOAD_NONCE fixes it, to show what a warm cache does.)
			nonce := time.Now().UnixNano() % 1_000_000
			if v, err := strconv.Atoi(os.Getenv("APR_SERVE_LOAD_NONCE")); err == nil {
				nonce = int64(v)
			}
			begin := time.Now()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range perClient {
						prompt := fmt.Sprintf("Run %06d. Client %d asks question %d: tell me a story about the number %d.", nonce, c, r, c*perClient+r)
						body := fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "temperature": 0, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}`, prompt, tokens)
						sent := time.Now()
						resp, err := client.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
						if err != nil {
							t.Errorf("client %d: %v", c, err)
							return
						}
						sc := bufio.NewScanner(resp.Body)
						var last time.Time
						n, done := 0, false
						var gaps []float64
						first, promptTok := 0.0, 0
						for sc.Scan() {
							d, ok := strings.CutPrefix(sc.Text(), "data: ")
							if !ok {
								continue
							}
							if d == "[DONE]" {
								done = true
								break
							}
							var ch struct {
								Usage *struct {
									Prompt int `json:"prompt_tokens"`
								} `json:"usage"`
								Choices []struct {
									IDs    []int32 `json:"token_ids"`
									Text   string  `json:"text"`
									Finish *string `json:"finish_reason"`
								} `json:"choices"`
							}
							if err := json.Unmarshal([]byte(d), &ch); err != nil {
								t.Errorf("chunk %q: %v", d, err)
								continue
							}
							now := time.Now()
							if ch.Usage != nil {
								promptTok = ch.Usage.Prompt
							}
							for _, x := range ch.Choices {
								if len(x.IDs) == 0 && x.Finish == nil && os.Getenv("APR_SERVE_LOAD_URL") != "" {
									// another server (llama-server): one chunk per token, no
									// ids (a token's text may be empty: part of a character)
									x.IDs = []int32{-1}
								}
								if len(x.IDs) == 0 {
									continue
								}
								if n == 0 {
									first = now.Sub(sent).Seconds()
								} else {
									gaps = append(gaps, now.Sub(last).Seconds()/float64(len(x.IDs)))
								}
								n += len(x.IDs)
								last = now
							}
						}
						resp.Body.Close()
						if verbose {
							t.Logf("client %d request %d: sent at %.2f s, %d prompt tokens, TTFT %.2f s, done at %.2f s",
								c, r, sent.Sub(begin).Seconds(), promptTok, first, time.Since(begin).Seconds())
						}
						if !done || n != tokens {
							t.Errorf("client %d request %d: %d tokens, [DONE] %v; want %d and [DONE]", c, r, n, done, tokens)
						}
						mu.Lock()
						ttft = append(ttft, first)
						itl = append(itl, gaps...)
						total += n
						prompts += promptTok
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			wall := time.Since(begin).Seconds()
			cpu := serverCPU(t) - cpu0
			pct := func(v []float64, p float64) float64 {
				if len(v) == 0 {
					return 0
				}
				s := slices.Clone(v)
				slices.Sort(s)
				return s[min(len(s)-1, int(p*float64(len(s))))]
			}
			t.Logf("parallel %d: %d clients × %d requests × %d tokens (%d prompt tokens in all): %d tokens in %.1f s = %.1f tok/s aggregate (server CPU %.1f s: %.1f tok per CPU-s); TTFT p50 %.2f s p99 %.2f s; inter-token p50 %.1f ms p99 %.1f ms; max batch %v; load average %s → %s",
				n, clients, perClient, tokens, prompts, total, wall, float64(total)/wall, cpu, float64(total)/cpu, pct(ttft, 0.5), pct(ttft, 0.99), 1e3*pct(itl, 0.5), 1e3*pct(itl, 0.99), maxBatch(t, url), load0, loadavg())
		})
	}
}

// loadavg is the machine's 1-minute load average ("?" where unreadable).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// maxBatch is apr serve's own max-batch gauge ("-" for another server).
func maxBatch(t *testing.T, url string) any {
	if os.Getenv("APR_SERVE_LOAD_URL") != "" {
		return "-"
	}
	return metric(t, url, "apr_serve_batch_size_max")
}
