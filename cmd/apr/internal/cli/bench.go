package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/cpu" // registers the "cpu" backend; StreamRead
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/stats"
	"github.com/aprqa/apr/refuse"
)

func init() { register(32, newBenchCmd) }

type benchOptions struct {
	Model         string
	Backend       string
	Compare       []string
	Prompt        int
	Gen           int
	Reps          int
	Warmup        int
	CompareReps   int // repetitions of the --compare backends (-1: --reps)
	CompareWarmup int // warm-up runs of the --compare backends (-1: --warmup)
	Threads       int
	Seed          uint64
	Stream        bool
	JSON          bool
	Quiet         bool

	prog *progress // test by test and repetition by repetition, on stderr
}

// benchStats summarises one test's repetitions.
type benchStats struct {
	Name    string    `json:"name"`      // llama-bench's name: pp512, tg128
	Tokens  int       `json:"tokens"`    // tokens per repetition
	Seconds []float64 `json:"seconds"`   // wall time of each counted repetition
	TokPerS []float64 `json:"tok_per_s"` // tokens / seconds of each counted repetition
	Min     float64   `json:"min"`
	Median  float64   `json:"median"`
	Max     float64   `json:"max"`
	Mean    float64   `json:"mean"`
	// CI95 is the 95% percentile-bootstrap confidence interval of the mean
	// tok/s (10000 resamples of the repetitions, fixed seed).
	CI95 [2]float64 `json:"ci95"`
}

// benchRun is one backend's measurements.
type benchRun struct {
	Backend string   `json:"backend"`
	Threads int      `json:"threads"`           // the engine's own count when it reports one, else the requested (0: the backend's choice)
	Kernels []string `json:"kernels,omitempty"` // contract ids of the kernels the engine selected
	LoadMS  float64  `json:"load_ms"`           // open + model description + engine construction
	H2DMS   float64  `json:"h2d_ms"`            // the engine's upload (0 without one)
	// Reps counted repetitions per test; WarmupRuns per test ran before
	// them and are excluded from every figure.
	Reps       int          `json:"reps"`
	WarmupRuns int          `json:"warmup_runs"`
	Tests      []benchStats `json:"tests"`
	// PeakRSSBytes is VmHWM of this process after the run (/proc/self/status);
	// PeakRSSNote says when it is not this run's own peak.
	PeakRSSBytes int64  `json:"peak_rss_bytes"`
	PeakRSSNote  string `json:"peak_rss_note,omitempty"`
	// DecodeGBps is the tg test's median tok/s × DecodeBytesPerToken, and
	// DecodeStreamFraction that over the stream read on as many threads
	// (--stream only; 0 without a tg test or a stream read).
	DecodeGBps           float64 `json:"decode_gbps,omitempty"`
	DecodeStreamFraction float64 `json:"decode_stream_fraction,omitempty"`
}

// benchStream is one streaming-read measurement (--stream): the memory
// bandwidth a decode step is bound by.
type benchStream struct {
	Threads int     `json:"threads"`
	Bytes   int     `json:"bytes"` // buffer size
	GBps    float64 `json:"gbps"`  // best of the repetitions, 1e9 bytes/s
}

// benchRatio is a test's median tok/s on one backend over another's,
// measured in the same invocation.
type benchRatio struct {
	Test     string  `json:"test"`
	Backend  string  `json:"backend"`
	Baseline string  `json:"baseline"`
	Ratio    float64 `json:"median_ratio"`
}

// benchResult is apr bench --json's document.
type benchResult struct {
	Model     string `json:"model"`
	Arch      string `json:"arch"`
	FileBytes int64  `json:"file_bytes"`
	// KVBytesF32 is the F32 KV cache of one session of max(-p, -n)
	// positions, computed from the model's shape: with FileBytes, the memory
	// budget peak RSS is read against.
	KVBytesF32 int64 `json:"kv_bytes_f32"`
	// StartRSSBytes is this process's resident set before the model was
	// opened (the binary and runtime), so that a run's own share of its
	// peak can be told apart.
	StartRSSBytes int64 `json:"start_rss_bytes"`
	// DecodeBytesPerToken is what one decode step reads of the weights:
	// every matrix and vector once, the token embedding once more in full
	// when it is also the output projection (else one row), experts' tensors
	// in the share n_expert_used/n_expert.
	DecodeBytesPerToken int64         `json:"decode_bytes_per_token"`
	Stream              []benchStream `json:"stream,omitempty"`
	NPrompt             int           `json:"n_prompt"`
	NGen                int           `json:"n_gen"`
	Runs                []benchRun    `json:"runs"`
	Ratios              []benchRatio  `json:"ratios,omitempty"`
}

func newBenchCmd(env *Env) *cobra.Command {
	var opts benchOptions
	c := &cobra.Command{
		Use:   "bench MODEL [--backend B] [-p 512] [-n 128] [--reps 5] [--threads T] [--json]",
		Short: "Measure prompt processing (pp) and generation (tg) speed",
		Long: `bench measures a backend the way llama-bench does: ppN feeds N random tokens
to an empty sequence in one evaluation (prompt processing, tok/s = N over its
wall time); tgN feeds N random tokens one at a time to an empty sequence
(generation, tok/s = N over the wall time of the N evaluations). Each test runs
--warmup times first; warm-up runs are excluded from every figure. Each test then
runs --reps times and reports min, median and max tok/s and a 95% bootstrap
confidence interval of the mean. Load time (open, model description, engine
construction) and h2d (upload) are measured once, separately. Peak RSS is the
process's VmHWM.

--stream, after every run, reads a 512 MiB buffer (as kern's BenchmarkStreamRead:
best of 5) on each run's thread count and reports the tg test's bandwidth, tok/s
× the weight bytes one decode step reads, as a fraction of it: how close decode
is to the memory bound.

--compare B runs the same tests on backend B after the first (e.g. --compare ref)
and reports the ratio of the medians; --compare-reps and --compare-warmup set its
repetitions apart (the reference is slow). An unknown backend is refused (exit 3).

The human table goes to stderr; with --json stdout carries one JSON document.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model = args[0]
			return runBench(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Backend, "backend", "cpu", "backend to measure")
	fl.StringArrayVar(&opts.Compare, "compare", nil, "also measure this backend and report the ratio (repeatable)")
	fl.IntVarP(&opts.Prompt, "n-prompt", "p", 512, "prompt tokens of the pp test (0: no pp test)")
	fl.IntVarP(&opts.Gen, "n-gen", "n", 128, "generated tokens of the tg test (0: no tg test)")
	fl.IntVar(&opts.Reps, "reps", 5, "counted repetitions of each test")
	fl.IntVar(&opts.Warmup, "warmup", 1, "warm-up runs of each test, excluded from the figures")
	fl.IntVar(&opts.CompareReps, "compare-reps", -1, "counted repetitions on the --compare backends (default: --reps)")
	fl.IntVar(&opts.CompareWarmup, "compare-warmup", -1, "warm-up runs on the --compare backends (default: --warmup)")
	threadsFlag(fl, &opts.Threads, "threads for the backend (0: its choice)")
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the random tokens")
	fl.BoolVar(&opts.Stream, "stream", false, "after the runs, measure the streaming read (512 MiB) on each run's threads and report decode against it")
	quietFlag(c, &opts.Quiet)
	jsonFlag(c, &opts.JSON)
	return c
}

func runBench(ctx context.Context, env *Env, opts benchOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	switch {
	case opts.Prompt < 0 || opts.Gen < 0:
		return badInputf("bench: -p %d and -n %d must not be negative", opts.Prompt, opts.Gen)
	case opts.Prompt == 0 && opts.Gen == 0:
		return badInputf("bench: -p and -n are both 0: nothing to measure")
	case opts.Reps < 1:
		return badInputf("bench: --reps %d must be at least 1", opts.Reps)
	case opts.Warmup < 0:
		return badInputf("bench: --warmup %d must not be negative", opts.Warmup)
	case opts.Threads < 0:
		return badInputf("bench: --threads %d must not be negative", opts.Threads)
	case opts.CompareReps == 0 || opts.CompareReps < -1:
		return badInputf("bench: --compare-reps %d must be at least 1", opts.CompareReps)
	case opts.CompareWarmup < -1:
		return badInputf("bench: --compare-warmup %d must not be negative", opts.CompareWarmup)
	}
	backends := append([]string{opts.Backend}, opts.Compare...)
	for _, b := range backends {
		if !contains(model.Backends(), b) {
			return refuse.New("backend", "backend %q is not available in this build (available: %s)", b, strings.Join(model.Backends(), ", "))
		}
	}
	res := benchResult{Model: opts.Model, NPrompt: opts.Prompt, NGen: opts.Gen}
	res.StartRSSBytes, _ = procStatus("VmRSS")
	opts.prog = newProgress(env.Stderr, "bench", opts.Quiet)
	defer opts.prog.Done()
	for i, b := range backends {
		if err := ctx.Err(); err != nil {
			return err
		}
		o := opts
		if i > 0 {
			if opts.CompareReps > 0 {
				o.Reps = opts.CompareReps
			}
			if opts.CompareWarmup >= 0 {
				o.Warmup = opts.CompareWarmup
			}
		}
		run, err := benchBackend(ctx, env, o, b, &res)
		if err != nil {
			return err
		}
		if i > 0 && !resetPeakRSS() {
			run.PeakRSSNote = "the process's peak over every run so far (VmHWM could not be reset)"
		}
		res.Runs = append(res.Runs, run)
		if i+1 < len(backends) {
			// The next run's peak RSS should be its own.
			runtime.GC()
			resetPeakRSS()
		}
	}
	if opts.Stream {
		opts.prog.Step("measuring the streaming read")
		if err := benchStreamRead(&res); err != nil {
			return err
		}
	}
	for _, base := range res.Runs[1:] {
		for ti, t := range res.Runs[0].Tests {
			if ti < len(base.Tests) && base.Tests[ti].Median > 0 {
				res.Ratios = append(res.Ratios, benchRatio{Test: t.Name, Backend: res.Runs[0].Backend, Baseline: base.Backend,
					Ratio: t.Median / base.Tests[ti].Median})
			}
		}
	}
	opts.prog.Done()
	printBench(env.Stderr, &res)
	if opts.JSON {
		return writeJSON(env.Stdout, res)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// benchBackend loads the model on backend b and runs the tests.
func benchBackend(ctx context.Context, env *Env, opts benchOptions, b string, res *benchResult) (benchRun, error) {
	run := benchRun{Backend: b, Threads: opts.Threads, Reps: opts.Reps, WarmupRuns: opts.Warmup}
	opts.prog.Step("%s: loading %s", b, opts.Model)
	start := time.Now()
	f, err := gguf.Open(opts.Model)
	if err != nil {
		return run, err
	}
	defer f.Close()
	spec, err := model.Load(f)
	if err != nil {
		return run, err
	}
	eng, err := model.OpenBackend(b, f, spec, model.OpenOptions{Log: env.Log, Threads: opts.Threads})
	if err != nil {
		return run, err
	}
	defer eng.Close()
	run.LoadMS = msSince(start)
	if up, ok := eng.(model.Uploader); ok {
		start = time.Now()
		if err := up.Upload(); err != nil {
			return run, fmt.Errorf("bench: %s: upload: %w", b, err)
		}
		run.H2DMS = msSince(start)
	}
	if th, ok := eng.(interface{ Threads() int }); ok {
		run.Threads = th.Threads()
	}
	if ks, ok := eng.(interface{ Kernels() []string }); ok {
		run.Kernels = ks.Kernels()
	}
	res.Arch, res.FileBytes = spec.Arch, f.Size
	res.DecodeBytesPerToken = decodeBytes(f, spec)
	res.KVBytesF32 = kvBytesF32(spec, max(opts.Prompt, opts.Gen))
	if n := max(opts.Prompt, opts.Gen); n > spec.NCtxTrain {
		return run, refuse.New("bench", "%d positions exceed the model's context_length %d", n, spec.NCtxTrain)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x61707262656e6368))
	tokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(rng.IntN(spec.NVocab))
		}
		return out
	}
	// Each test reuses one session, emptied between repetitions, as
	// llama-bench clears its context's memory; a backend whose sessions
	// cannot be emptied gets a fresh session per repetition.
	type resetter interface{ Reset() error }
	type closer interface{ Close() error }
	var sess model.Session
	session := func(n int) (model.Session, error) {
		if r, ok := sess.(resetter); ok && sess != nil {
			return sess, r.Reset()
		}
		s, err := eng.NewSession(n)
		if err == nil {
			if _, ok := s.(resetter); ok {
				sess = s
			}
		}
		return s, err
	}
	endTest := func() {
		if c, ok := sess.(closer); ok {
			c.Close()
		}
		sess = nil
	}
	type test struct {
		name string
		n    int
		run  func(toks []int32) (time.Duration, error)
	}
	var tests []test
	if opts.Prompt > 0 {
		tests = append(tests, test{fmt.Sprintf("pp%d", opts.Prompt), opts.Prompt, func(toks []int32) (time.Duration, error) {
			s, err := session(len(toks))
			if err != nil {
				return 0, err
			}
			t0 := time.Now()
			_, err = s.Eval(toks, false)
			return time.Since(t0), err
		}})
	}
	if opts.Gen > 0 {
		tests = append(tests, test{fmt.Sprintf("tg%d", opts.Gen), opts.Gen, func(toks []int32) (time.Duration, error) {
			s, err := session(len(toks))
			if err != nil {
				return 0, err
			}
			t0 := time.Now()
			for i := range toks {
				if _, err := s.Eval(toks[i:i+1], false); err != nil {
					return 0, err
				}
			}
			return time.Since(t0), nil
		}})
	}
	for _, t := range tests {
		st := benchStats{Name: t.name, Tokens: t.n}
		for i := 0; i < opts.Warmup+opts.Reps; i++ {
			if err := ctx.Err(); err != nil {
				return run, err
			}
			if i < opts.Warmup {
				opts.prog.Step("%s %s: warm-up %d of %d", b, t.name, i+1, opts.Warmup)
			} else {
				opts.prog.Step("%s %s: repetition %d of %d", b, t.name, i-opts.Warmup+1, opts.Reps)
			}
			d, err := t.run(tokens(t.n))
			if err != nil {
				return run, fmt.Errorf("bench: %s %s: %w", b, t.name, err)
			}
			if i < opts.Warmup {
				continue
			}
			sec := d.Seconds()
			st.Seconds = append(st.Seconds, sec)
			st.TokPerS = append(st.TokPerS, float64(t.n)/sec)
			env.Log.Debug("bench repetition", "backend", b, "test", t.name, "rep", i-opts.Warmup, "tok_per_s", float64(t.n)/sec)
		}
		endTest()
		summarize(&st, opts.Seed)
		run.Tests = append(run.Tests, st)
	}
	if hwm, err := procStatus("VmHWM"); err == nil {
		run.PeakRSSBytes = hwm
	} else {
		run.PeakRSSNote = "unknown: " + err.Error()
	}
	return run, nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

// summarize fills min, median, max, mean and the bootstrap CI of the mean
// (internal/stats).
func summarize(st *benchStats, seed uint64) {
	sum := stats.Summarize(st.TokPerS)
	st.Min, st.Median, st.Max, st.Mean = sum.Min, sum.Median, sum.Max, sum.Mean
	st.CI95 = bootstrapCI(slices.Sorted(slices.Values(st.TokPerS)), 0.95, 10000, seed)
}

// bootstrapCI is stats.MeanCI of v at level conf from b resamples, drawn
// with bench's seeded generator (--seed reproduces the interval).
func bootstrapCI(v []float64, conf float64, b int, seed uint64) [2]float64 {
	ci := stats.MeanCI(v, conf, b, rand.New(rand.NewPCG(seed, 0x626f6f74)))
	return [2]float64{ci.Lo, ci.Hi}
}

// streamBytes is the buffer of the --stream read: beyond any last-level
// cache of the machines apr runs on.
var streamBytes = 512 << 20

// benchStreamRead measures the streaming read on each run's thread count and
// sets each run's decode bandwidth against it.
func benchStreamRead(res *benchResult) error {
	gbps := map[int]float64{}
	for i := range res.Runs {
		run := &res.Runs[i]
		th := run.Threads
		if th <= 0 {
			th = runtime.NumCPU()
		}
		if _, ok := gbps[th]; !ok {
			bps, err := cpu.StreamRead(streamBytes, th, 5)
			if err != nil {
				return fmt.Errorf("bench: --stream: %w", err)
			}
			gbps[th] = bps / 1e9
			res.Stream = append(res.Stream, benchStream{Threads: th, Bytes: streamBytes, GBps: bps / 1e9})
		}
		for _, t := range run.Tests {
			if strings.HasPrefix(t.Name, "tg") && res.DecodeBytesPerToken > 0 {
				run.DecodeGBps = t.Median * float64(res.DecodeBytesPerToken) / 1e9
				run.DecodeStreamFraction = run.DecodeGBps / gbps[th]
			}
		}
	}
	return nil
}

// decodeBytes is what one decode step reads of the weights (see
// benchResult.DecodeBytesPerToken).
func decodeBytes(f *gguf.File, s *model.Spec) int64 {
	var b int64
	tied := s.Output != nil && s.TokEmbd != nil && s.Output.Name == s.TokEmbd.Name
	for i := range f.Tensors {
		t := &f.Tensors[i]
		switch {
		case s.TokEmbd != nil && t.Name == s.TokEmbd.Name && !tied:
			if rows := int64(s.TokEmbd.Rows()); rows > 0 {
				b += int64(t.Size) / rows
			}
		case strings.Contains(t.Name, "_exps") && s.NExpert > 0:
			b += int64(t.Size) * int64(s.NExpertUsed) / int64(s.NExpert)
		default:
			b += int64(t.Size)
		}
	}
	return b
}

// kvBytesF32 is the F32 KV cache of n positions over the model's attention
// layers (recurrent layers keep a fixed-size state instead).
func kvBytesF32(s *model.Spec, n int) int64 {
	var b int64
	for i, l := range s.Layers {
		if l.Kind != model.LayerAttention && l.Kind != model.LayerGatedAttention {
			continue
		}
		k, v := s.KVDims(i)
		b += int64(n) * int64(k+v) * 4
	}
	return b
}

// procStatus reads a "kB" field of /proc/self/status (VmHWM: the peak
// resident set; VmRSS: the current one) in bytes.
func procStatus(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("%s line %q", field, line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s line %q: %w", field, line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// resetPeakRSS resets VmHWM to the current RSS (Linux: "5" to clear_refs).
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

func printBench(w io.Writer, r *benchResult) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	fmt.Fprintf(bw, "model %s (%s, %s); KV cache F32 for %d positions %s; process RSS before loading %s\n", r.Model, r.Arch,
		mib(r.FileBytes), max(r.NPrompt, r.NGen), mib(r.KVBytesF32), mib(r.StartRSSBytes))
	fmt.Fprintf(bw, "| %-8s | %7s | %-7s | %10s | %10s | %10s | %-23s |\n", "backend", "threads", "test", "t/s median", "min", "max", "95% CI of mean t/s")
	fmt.Fprintf(bw, "|%s|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 10), strings.Repeat("-", 9), strings.Repeat("-", 9),
		strings.Repeat("-", 12), strings.Repeat("-", 12), strings.Repeat("-", 12), strings.Repeat("-", 25))
	for _, run := range r.Runs {
		for _, t := range run.Tests {
			threads := "auto"
			if run.Threads > 0 {
				threads = strconv.Itoa(run.Threads)
			}
			fmt.Fprintf(bw, "| %-8s | %7s | %-7s | %10.2f | %10.2f | %10.2f | %-23s |\n", run.Backend, threads, t.Name,
				t.Median, t.Min, t.Max, fmt.Sprintf("[%.2f, %.2f]", t.CI95[0], t.CI95[1]))
		}
	}
	for _, run := range r.Runs {
		// The memory line in words: the peak, how much of it came after
		// loading began, and what the model file and KV cache alone need.
		fmt.Fprintf(bw, "%s: load %.1f ms, h2d %.1f ms; memory: peak resident %s, of which %s was added after loading began (the model file and the F32 KV cache need %s; the process held %s before)",
			run.Backend, run.LoadMS, run.H2DMS, mib(run.PeakRSSBytes), mib(max(0, run.PeakRSSBytes-r.StartRSSBytes)),
			mib(r.FileBytes+r.KVBytesF32), mib(r.StartRSSBytes))
		if run.PeakRSSNote != "" {
			fmt.Fprintf(bw, " [%s]", run.PeakRSSNote)
		}
		fmt.Fprintf(bw, "; %d repetitions per test, %d warm-up run(s) per test excluded\n", run.Reps, run.WarmupRuns)
	}
	for _, st := range r.Stream {
		fmt.Fprintf(bw, "stream read (%d MiB, %d thread(s), best of 5): %.2f GB/s\n", st.Bytes>>20, st.Threads, st.GBps)
	}
	for _, run := range r.Runs {
		if run.DecodeGBps > 0 {
			fmt.Fprintf(bw, "%s, %d thread(s): decode reads %.1f MB of weights per token: %.2f GB/s at the median tg t/s = %.0f%% of the stream read\n",
				run.Backend, run.Threads, float64(r.DecodeBytesPerToken)/1e6, run.DecodeGBps, 100*run.DecodeStreamFraction)
		}
	}
	for _, q := range r.Ratios {
		fmt.Fprintf(bw, "%s: %s is %.2f× %s (median t/s)\n", q.Test, q.Backend, q.Ratio, q.Baseline)
	}
}
