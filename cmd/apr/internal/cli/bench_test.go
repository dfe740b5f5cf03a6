package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/internal/testutil"
)

type benchDoc struct {
	Model      string `json:"model"`
	FileBytes  int64  `json:"file_bytes"`
	KVBytesF32 int64  `json:"kv_bytes_f32"`
	StartRSS   int64  `json:"start_rss_bytes"`
	NPrompt    int    `json:"n_prompt"`
	NGen       int    `json:"n_gen"`
	Runs       []struct {
		Backend    string   `json:"backend"`
		Reps       int      `json:"reps"`
		Threads    int      `json:"threads"`
		Kernels    []string `json:"kernels"`
		LoadMS     float64  `json:"load_ms"`
		WarmupRuns int      `json:"warmup_runs"`
		Tests      []struct {
			Name    string     `json:"name"`
			Tokens  int        `json:"tokens"`
			Seconds []float64  `json:"seconds"`
			TokPerS []float64  `json:"tok_per_s"`
			Min     float64    `json:"min"`
			Median  float64    `json:"median"`
			Max     float64    `json:"max"`
			CI95    [2]float64 `json:"ci95"`
		} `json:"tests"`
		PeakRSSBytes int64 `json:"peak_rss_bytes"`
	} `json:"runs"`
	Ratios []struct {
		Test     string  `json:"test"`
		Backend  string  `json:"backend"`
		Baseline string  `json:"baseline"`
		Ratio    float64 `json:"median_ratio"`
	} `json:"ratios"`
}

// TestBenchJSON: apr bench --json prints one document with each test's
// counted repetitions (warm-ups excluded), consistent statistics, load time
// and peak RSS; the human table goes to stderr and says the warm-ups were
// excluded.
func TestBenchJSON(t *testing.T) {
	dir := testutil.Fixtures(t)
	model := filepath.Join(dir, "models", "synth", "qwen2-tiny-Q8_0.gguf")
	code, stdout, stderr := run(t, "bench", model, "-p", "8", "-n", "4", "--reps", "3", "--warmup", "2", "--threads", "2", "--compare", "ref", "--compare-reps", "2", "--compare-warmup", "0", "--json")
	if code != 0 {
		t.Fatalf("apr bench: exit %d, stderr:\n%s", code, stderr)
	}
	var doc benchDoc
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("apr bench --json printed invalid JSON: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("apr bench --json printed more than one document")
	}
	if doc.NPrompt != 8 || doc.NGen != 4 || doc.FileBytes <= 0 || doc.KVBytesF32 <= 0 || doc.StartRSS <= 0 {
		t.Errorf("header: %+v", doc)
	}
	if len(doc.Runs) != 2 || doc.Runs[0].Backend != "cpu" || doc.Runs[1].Backend != "ref" {
		t.Fatalf("runs: want cpu then ref, got %d runs", len(doc.Runs))
	}
	if doc.Runs[0].Threads != 2 || len(doc.Runs[0].Kernels) == 0 {
		t.Errorf("cpu run: threads %d, kernels %v", doc.Runs[0].Threads, doc.Runs[0].Kernels)
	}
	for i, r := range doc.Runs {
		reps, warmup := 3, 2
		if i > 0 {
			reps, warmup = 2, 0
		}
		if r.Reps != reps || r.WarmupRuns != warmup || r.LoadMS <= 0 || r.PeakRSSBytes <= 0 {
			t.Errorf("%s: reps %d (want %d), warmup %d (want %d), load %.3f ms, peak RSS %d", r.Backend, r.Reps, reps, r.WarmupRuns, warmup, r.LoadMS, r.PeakRSSBytes)
		}
		var names []string
		for _, ts := range r.Tests {
			names = append(names, ts.Name)
			if len(ts.TokPerS) != reps || len(ts.Seconds) != reps {
				t.Errorf("%s %s: %d rates and %d times, want the %d counted repetitions", r.Backend, ts.Name, len(ts.TokPerS), len(ts.Seconds), reps)
				continue
			}
			for i, v := range ts.TokPerS {
				if want := float64(ts.Tokens) / ts.Seconds[i]; v != want {
					t.Errorf("%s %s rep %d: %g tok/s, but %d tokens in %g s is %g", r.Backend, ts.Name, i, v, ts.Tokens, ts.Seconds[i], want)
				}
			}
			if !(ts.Min <= ts.Median && ts.Median <= ts.Max && ts.Min <= ts.CI95[0] && ts.CI95[0] <= ts.CI95[1] && ts.CI95[1] <= ts.Max) {
				t.Errorf("%s %s: min %g median %g max %g CI %v are inconsistent", r.Backend, ts.Name, ts.Min, ts.Median, ts.Max, ts.CI95)
			}
		}
		if strings.Join(names, ",") != "pp8,tg4" {
			t.Errorf("%s: tests %v, want pp8, tg4", r.Backend, names)
		}
	}
	if len(doc.Ratios) != 2 || doc.Ratios[0].Baseline != "ref" || doc.Ratios[0].Ratio <= 0 {
		t.Errorf("ratios: %+v", doc.Ratios)
	}
	if !strings.Contains(stderr, "warm-up run(s) per test excluded") || !strings.Contains(stderr, "pp8") {
		t.Errorf("stderr lacks the table or the warm-up note:\n%s", stderr)
	}
}

// TestBenchRefusesAndRejects: an unknown backend is refused (exit 3); bad
// counts are bad usage (exit 2).
func TestBenchRefusesAndRejects(t *testing.T) {
	dir := testutil.Fixtures(t)
	model := filepath.Join(dir, "models", "synth", "qwen2-tiny-Q8_0.gguf")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown backend", []string{"--backend", "tpu"}, 3, `backend "tpu" is not available`},
		{"unknown compare backend", []string{"--compare", "cuda9"}, 3, `backend "cuda9" is not available`},
		{"no reps", []string{"--reps", "0"}, 2, "--reps 0"},
		{"no compare reps", []string{"--compare", "ref", "--compare-reps", "0"}, 2, "--compare-reps 0"},
		{"nothing to measure", []string{"-p", "0", "-n", "0"}, 2, "nothing to measure"},
		{"negative threads", []string{"--threads", "-1"}, 2, `"--threads" flag: -1 is negative`},
		{"beyond the context", []string{"-p", "5000", "-n", "1", "--reps", "1"}, 3, "context_length 4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"bench", model, "--json"}, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("apr bench %v: exit %d (want %d), stderr %q (want %q)", c.args, code, c.code, stderr, c.want)
			}
			if stdout != "" {
				t.Errorf("apr bench %v printed to stdout on failure: %q", c.args, stdout)
			}
		})
	}
}

// TestBenchDepth: -d D starts each test from a sequence that already holds
// D positions (fed before the clock starts); the tests carry llama-bench's
// "@ dD" names, and a negative depth or one past the context is rejected.
func TestBenchDepth(t *testing.T) {
	dir := testutil.Fixtures(t)
	model := filepath.Join(dir, "models", "synth", "qwen2-tiny-Q8_0.gguf")
	code, stdout, stderr := run(t, "bench", model, "-p", "4", "-n", "3", "-d", "16", "--reps", "1", "--warmup", "0", "--json")
	if code != 0 {
		t.Fatalf("apr bench -d 16: exit %d, stderr:\n%s", code, stderr)
	}
	var doc struct {
		Depth int `json:"n_depth"`
		Runs  []struct {
			Tests []struct {
				Name string `json:"name"`
			} `json:"tests"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Depth != 16 || len(doc.Runs) != 1 || len(doc.Runs[0].Tests) != 2 ||
		doc.Runs[0].Tests[0].Name != "pp4 @ d16" || doc.Runs[0].Tests[1].Name != "tg3 @ d16" {
		t.Fatalf("depth %d, runs %+v; want n_depth 16 and tests pp4 @ d16, tg3 @ d16", doc.Depth, doc.Runs)
	}
	if code, _, stderr := run(t, "bench", model, "-d", "-1"); code != 2 {
		t.Errorf("-d -1: exit %d, want 2\n%s", code, stderr)
	}
	if code, _, stderr := run(t, "bench", model, "-n", "4", "-p", "0", "-d", "100000000"); code != 3 || !strings.Contains(stderr, "context_length") {
		t.Errorf("-d past the context: exit %d, want 3 naming context_length\n%s", code, stderr)
	}
}
