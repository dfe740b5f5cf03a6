// Package bench measures a backend the way llama-bench does: ppN (N random
// tokens fed to an empty sequence in one evaluation) and tgN (N tokens one at
// a time), warm-up runs excluded, each test's repetitions summarised with
// internal/stats (min, median, max, mean and a bootstrap interval of the
// mean); load and upload times, peak RSS, and with Stream the decode
// bandwidth against a streaming read. apr bench is its command line.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/stats"
	"github.com/aprqa/apr/refuse"
)

// Options say what to measure. The command line validates them.
type Options struct {
	Model         string
	Backend       string
	Compare       []string // further backends, measured after Backend; ratios of the medians are reported
	Prompt        int      // tokens of the pp test (0: none)
	Gen           int      // tokens of the tg test (0: none)
	Depth         int      // positions already in the sequence when each test starts (llama-bench's -d; fed untimed)
	Reps          int
	Warmup        int
	CompareReps   int // repetitions of the Compare backends (-1: Reps)
	CompareWarmup int // warm-up runs of the Compare backends (-1: Warmup)
	Threads       int
	Seed          uint64
	Stream        bool
	Log           *slog.Logger
	// Step, when set, is told each step (loading, warm-up, repetition).
	Step func(format string, args ...any)
}

func (o Options) step(format string, args ...any) {
	if o.Step != nil {
		o.Step(format, args...)
	}
}

// Stats summarises one test's repetitions.
type Stats struct {
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

// Run is one backend's measurements.
type Run struct {
	Backend string   `json:"backend"`
	Threads int      `json:"threads"`           // the engine's own count when it reports one, else the requested (0: the backend's choice)
	Kernels []string `json:"kernels,omitempty"` // contract ids of the kernels the engine selected
	LoadMS  float64  `json:"load_ms"`           // open + model description + engine construction
	H2DMS   float64  `json:"h2d_ms"`            // the engine's upload (0 without one)
	// Reps counted repetitions per test; WarmupRuns per test ran before
	// them and are excluded from every figure.
	Reps       int     `json:"reps"`
	WarmupRuns int     `json:"warmup_runs"`
	Tests      []Stats `json:"tests"`
	// PeakRSSBytes is VmHWM of this process after the run (/proc/self/status);
	// PeakRSSNote says when it is not this run's own peak.
	PeakRSSBytes int64  `json:"peak_rss_bytes"`
	PeakRSSNote  string `json:"peak_rss_note,omitempty"`
	// DecodeGBps is the tg test's median tok/s × DecodeBytesPerToken, and
	// DecodeStreamFraction that over the stream read on as many threads
	// (--stream only; 0 without a tg test or a stream read).
	DecodeGBps           float64 `json:"decode_gbps,omitempty"`
	DecodeStreamFraction float64 `json:"decode_stream_fraction,omitempty"`
	// DeviceStream is the device's own streaming read (--stream on a
	// backend with device memory, e.g. cuda), which its decode is read
	// against instead of the host's.
	DeviceStream *Stream `json:"device_stream,omitempty"`
}

// Stream is one streaming-read measurement (--stream): the memory
// bandwidth a decode step is bound by.
type Stream struct {
	Device  string  `json:"device,omitempty"` // the backend whose device memory was read ("": host memory)
	Threads int     `json:"threads"`
	Bytes   int     `json:"bytes"` // buffer size
	GBps    float64 `json:"gbps"`  // best of the repetitions, 1e9 bytes/s
}

// Ratio is a test's median tok/s on one backend over another's,
// measured in the same invocation.
type Ratio struct {
	Test     string  `json:"test"`
	Backend  string  `json:"backend"`
	Baseline string  `json:"baseline"`
	Ratio    float64 `json:"median_ratio"`
}

// Result is apr bench --json's document.
type Result struct {
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
	DecodeBytesPerToken int64    `json:"decode_bytes_per_token"`
	Stream              []Stream `json:"stream,omitempty"`
	NPrompt             int      `json:"n_prompt"`
	NGen                int      `json:"n_gen"`
	Depth               int      `json:"n_depth,omitempty"`
	Runs                []Run    `json:"runs"`
	Ratios              []Ratio  `json:"ratios,omitempty"`
}

// Measure runs the tests on every backend and returns the results.
func Measure(ctx context.Context, opts Options) (Result, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	backends := append([]string{opts.Backend}, opts.Compare...)
	for _, b := range backends {
		if !slices.Contains(model.Backends(), b) {
			return Result{}, refuse.New("backend", "backend %q is not available in this build (available: %s)", b, strings.Join(model.Backends(), ", "))
		}
	}
	res := Result{Model: opts.Model, NPrompt: opts.Prompt, NGen: opts.Gen, Depth: opts.Depth}
	res.StartRSSBytes, _ = procStatus("VmRSS")
	for i, b := range backends {
		if err := ctx.Err(); err != nil {
			return res, err
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
		run, err := measureBackend(ctx, o, b, &res)
		if err != nil {
			return res, err
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
		opts.step("measuring the streaming read")
		if err := streamRead(&res); err != nil {
			return res, err
		}
	}
	for _, base := range res.Runs[1:] {
		for ti, t := range res.Runs[0].Tests {
			if ti < len(base.Tests) && base.Tests[ti].Median > 0 {
				res.Ratios = append(res.Ratios, Ratio{Test: t.Name, Backend: res.Runs[0].Backend, Baseline: base.Backend,
					Ratio: t.Median / base.Tests[ti].Median})
			}
		}
	}
	return res, nil
}

// measureBackend loads the model on backend b and runs the tests.
func measureBackend(ctx context.Context, opts Options, b string, res *Result) (Run, error) {
	run := Run{Backend: b, Threads: opts.Threads, Reps: opts.Reps, WarmupRuns: opts.Warmup}
	opts.step("%s: loading %s", b, opts.Model)
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
	eng, err := model.OpenBackend(b, f, spec, model.OpenOptions{Log: opts.Log, Threads: opts.Threads})
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
	res.KVBytesF32 = kvBytesF32(spec, opts.Depth+max(opts.Prompt, opts.Gen))
	if n := opts.Depth + max(opts.Prompt, opts.Gen); n > spec.NCtxTrain {
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
	// begin returns a session for a test of n tokens that already holds
	// the Depth positions (fed untimed).
	begin := func(n int) (model.Session, error) {
		s, err := session(opts.Depth + n)
		if err != nil || opts.Depth == 0 {
			return s, err
		}
		_, err = s.Eval(tokens(opts.Depth), false)
		return s, err
	}
	suffix := ""
	if opts.Depth > 0 {
		suffix = fmt.Sprintf(" @ d%d", opts.Depth)
	}
	var tests []test
	if opts.Prompt > 0 {
		tests = append(tests, test{fmt.Sprintf("pp%d%s", opts.Prompt, suffix), opts.Prompt, func(toks []int32) (time.Duration, error) {
			s, err := begin(len(toks))
			if err != nil {
				return 0, err
			}
			t0 := time.Now()
			_, err = s.Eval(toks, false)
			return time.Since(t0), err
		}})
	}
	if opts.Gen > 0 {
		tests = append(tests, test{fmt.Sprintf("tg%d%s", opts.Gen, suffix), opts.Gen, func(toks []int32) (time.Duration, error) {
			s, err := begin(len(toks))
			if err != nil {
				return 0, err
			}
			row, err := model.LogitsRow(s, spec.NVocab)
			if err != nil {
				return 0, err
			}
			t0 := time.Now()
			for i := range toks {
				// Each step's logits land in one row, as a sampling loop's do
				// (generate.Seq), rather than a new row per step.
				if err := model.EvalLast(s, toks[i:i+1], row); err != nil {
					return 0, err
				}
			}
			return time.Since(t0), nil
		}})
	}
	for _, t := range tests {
		st := Stats{Name: t.name, Tokens: t.n}
		for i := 0; i < opts.Warmup+opts.Reps; i++ {
			if err := ctx.Err(); err != nil {
				return run, err
			}
			if i < opts.Warmup {
				opts.step("%s %s: warm-up %d of %d", b, t.name, i+1, opts.Warmup)
			} else {
				opts.step("%s %s: repetition %d of %d", b, t.name, i-opts.Warmup+1, opts.Reps)
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
			opts.Log.Debug("bench repetition", "backend", b, "test", t.name, "rep", i-opts.Warmup, "tok_per_s", float64(t.n)/sec)
		}
		endTest()
		summarize(&st, opts.Seed)
		run.Tests = append(run.Tests, st)
	}
	if sr, ok := eng.(interface {
		StreamRead(n, reps int) (float64, error)
	}); ok && opts.Stream {
		opts.step("%s: measuring the device's streaming read", b)
		bps, err := sr.StreamRead(deviceStreamBytes, 10)
		if err != nil {
			return run, fmt.Errorf("bench: --stream on %s: %w", b, err)
		}
		run.DeviceStream = &Stream{Device: b, Bytes: deviceStreamBytes, GBps: bps / 1e9}
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
func summarize(st *Stats, seed uint64) {
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

// deviceStreamBytes is the device buffer of the --stream read: beyond the
// device's last-level cache (an H200's L2 is 60 MB).
const deviceStreamBytes = 1 << 30

// streamRead measures the streaming read on each run's thread count and
// sets each run's decode bandwidth against it.
func streamRead(res *Result) error {
	gbps := map[int]float64{}
	for i := range res.Runs {
		run := &res.Runs[i]
		if ds := run.DeviceStream; ds != nil {
			// A backend with its own memory: decode against the device's read.
			res.Stream = append(res.Stream, *ds)
			for _, t := range run.Tests {
				if strings.HasPrefix(t.Name, "tg") && res.DecodeBytesPerToken > 0 {
					run.DecodeGBps = t.Median * float64(res.DecodeBytesPerToken) / 1e9
					run.DecodeStreamFraction = run.DecodeGBps / ds.GBps
				}
			}
			continue
		}
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
			res.Stream = append(res.Stream, Stream{Threads: th, Bytes: streamBytes, GBps: bps / 1e9})
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
// Result.DecodeBytesPerToken).
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

// Print writes the human report of r (the table and the memory, stream and
// ratio lines), as apr bench shows it on stderr.
func Print(w io.Writer, r *Result) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	fmt.Fprintf(bw, "model %s (%s, %s); KV cache F32 for %d positions %s; process RSS before loading %s\n", r.Model, r.Arch,
		mib(r.FileBytes), r.Depth+max(r.NPrompt, r.NGen), mib(r.KVBytesF32), mib(r.StartRSSBytes))
	fmt.Fprintf(bw, "| %-8s | %7s | %-12s | %10s | %10s | %10s | %-23s |\n", "backend", "threads", "test", "t/s median", "min", "max", "95% CI of mean t/s")
	fmt.Fprintf(bw, "|%s|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 10), strings.Repeat("-", 9), strings.Repeat("-", 14),
		strings.Repeat("-", 12), strings.Repeat("-", 12), strings.Repeat("-", 12), strings.Repeat("-", 25))
	for _, run := range r.Runs {
		for _, t := range run.Tests {
			threads := "auto"
			if run.Threads > 0 {
				threads = strconv.Itoa(run.Threads)
			}
			fmt.Fprintf(bw, "| %-8s | %7s | %-12s | %10.2f | %10.2f | %10.2f | %-23s |\n", run.Backend, threads, t.Name,
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
		if st.Device != "" {
			fmt.Fprintf(bw, "stream read of %s device memory (%d MiB, best of 10): %.2f GB/s\n", st.Device, st.Bytes>>20, st.GBps)
			continue
		}
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
