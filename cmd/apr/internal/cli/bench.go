package cli

import (
	"context"

	"github.com/aprqa/apr/bench"
	"github.com/spf13/cobra"
	// registers the "cpu" backend; StreamRead
)

func init() { register(32, newBenchCmd) }

type benchOptions struct {
	Model         string
	Backend       string
	Compare       []string
	Prompt        int
	Gen           int
	Depth         int // positions already in the sequence when each test starts (llama-bench's -d)
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

func newBenchCmd(env *Env) *cobra.Command {
	var opts benchOptions
	c := &cobra.Command{
		Use:   "bench MODEL [--backend B] [-p 512] [-n 128] [-d DEPTH] [--reps 5] [--threads T] [--json]",
		Short: "Measure prompt processing (pp) and generation (tg) speed",
		Long: `bench measures a backend the way llama-bench does: ppN feeds N random tokens
to an empty sequence in one evaluation (prompt processing, tok/s = N over its
wall time); tgN feeds N random tokens one at a time to an empty sequence
(generation, tok/s = N over the wall time of the N evaluations). With -d D each
test starts from a sequence that already holds D random tokens (llama-bench's
depth: pp512 @ d4096, tg128 @ d4096), fed before the clock starts. Each test runs
--warmup times first; warm-up runs are excluded from every figure. Each test then
runs --reps times and reports min, median and max tok/s and a 95% bootstrap
confidence interval of the mean. Load time (open, model description, engine
construction) and h2d (upload) are measured once, separately. Peak RSS is the
process's VmHWM.

--stream, after every run, reads a 512 MiB buffer (as kern's BenchmarkStreamRead:
best of 5) on each run's thread count and reports the tg test's bandwidth, tok/s
× the weight bytes one decode step reads, as a fraction of it: how close decode
is to the memory bound. A backend with memory of its own (cuda) reads its device
memory instead (a 1 GiB buffer, best of 10, timed with the device's events), and
its decode is read against that.

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
	fl.IntVarP(&opts.Depth, "n-depth", "d", 0, "positions already in the sequence when each test starts (untimed)")
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
	case opts.Prompt < 0 || opts.Gen < 0 || opts.Depth < 0:
		return badInputf("bench: -p %d, -n %d and -d %d must not be negative", opts.Prompt, opts.Gen, opts.Depth)
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
	opts.prog = newProgress(env.Stderr, "bench", opts.Quiet)
	defer opts.prog.Done()
	res, err := bench.Measure(ctx, bench.Options{Model: opts.Model, Backend: opts.Backend, Compare: opts.Compare,
		Prompt: opts.Prompt, Gen: opts.Gen, Depth: opts.Depth, Reps: opts.Reps, Warmup: opts.Warmup, CompareReps: opts.CompareReps,
		CompareWarmup: opts.CompareWarmup, Threads: opts.Threads, Seed: opts.Seed, Stream: opts.Stream, Log: env.Log,
		Step: opts.prog.Step})
	if err != nil {
		return err
	}
	opts.prog.Done()
	bench.Print(env.Stderr, &res)
	if opts.JSON {
		return writeJSON(env.Stdout, res)
	}
	return nil
}
