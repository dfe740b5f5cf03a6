package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/qa"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
)

func init() { register(50, newQACmd) }

type qaOptions struct {
	Model          string
	Backends       []string
	Gates          []string
	JSON           bool
	JUnit          string
	MinGates       int
	Baseline       string
	AcceptBaseline bool
	Contracts      string
	Threads        int
	Seed           int64
	KLDBase        string
	Allow          []string
	Quiet          bool
}

func newQACmd(env *Env) *cobra.Command {
	var opts qaOptions
	c := &cobra.Command{
		Use:   "qa [MODEL]",
		Short: "Gate a model: every release gate, on every backend",
		Long: `qa runs apr's release gates on MODEL, in this order, each held to a falsifier
of the contracts (its thresholds and parameters come from there):

  1 tensor_contract        tensors and hyper-parameters against the architecture's
                           model contract; NaN/Inf and all-zero tensors found by
                           scanning the file's mapping
  2 metadata_plausibility  rope base, context length, norm epsilon, vocabulary size
                           within the contract's ranges and constraints
  3 tokenizer              a built-in multilingual text round-trips; control tokens
                           stay single tokens (and never come from plain text)
  4 template               the model's chat template renders a system prompt and two
                           user turns, keeps every message, tokenizes with control
                           tokens intact
  5 golden_output          per backend: greedy output equals the reviewed golden
                           (golden/), or without one the reference engine's output
  6 parity                 per non-reference backend: logits cosine and argmax
                           against the reference at every position of a probe
  7 failclosed             parity refuses when the reference cannot run
  8 timing                 a delay planted in each stage of apr run moves that
                           stage's field by the delay and no other field
  9 throughput             decode and prefill tok/s against the baseline recorded
                           for this model, host and backend (bootstrap confidence
                           intervals; "too noisy" and "undecided" are refusals)
 10 kld                    with --kld-base FILE only, per backend: KL divergence,
                           its 99th percentile and |ln(PPL ratio)| against a
                           llama.cpp base file (llama-perplexity
                           --kl-divergence-base), within the contract's bounds

With no MODEL, qa gates a tiny model of every architecture that it synthesizes
into a temporary directory (apr synth --preset tiny --type F32 --seed 1):
nothing is downloaded.

Each gate ends pass, fail or refused (with who refused and why). A refusal
counts as not passed unless the gate's contract marks that refusal optional
(throughput without a baseline, a base model without a chat template, the
reference's golden_output for a model without a reviewed golden): those show
as refused-optional, never as pass.

--backend chooses the gated backends (default: every backend in this build);
a backend apr knows but this build lacks (cuda) has every gate refused with
the reason; a name apr does not know is bad usage (exit 2).
The reference ("ref") judges parity and golden output whether gated or not.
Baselines live in --baseline FILE (default apr/qa-baselines.json under the
user's configuration directory), keyed by model sha256, host fingerprint and
backend; --accept-baseline records a missing one and raises one the runs
exceed; nothing ever lowers one.

The table goes to stderr, with progress gate by gate (a status line on a
terminal, a line per gate otherwise; --quiet silences it); --json prints the
report on stdout; --junit FILE writes JUnit XML.

Exit codes: 0 every gate passed (refused-optional included, and refusals by
a refuser named in --allow-refused, e.g. --allow-refused backend) and at
least --min-gates gates executed; 1 a gate failed or fewer than --min-gates
executed; 3 no gate failed but one was refused; 2 bad usage (an unknown
backend or gate name) or a model that cannot be read; 130 interrupted
(Ctrl-C): what was gated is printed, the synthesized models are removed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Model = args[0]
			}
			return runQA(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.StringSliceVar(&opts.Backends, "backend", nil, "backends to gate, comma-separated or repeated (default: every backend in this build)")
	fl.StringSliceVar(&opts.Gates, "gate", nil, "run only these gates (comma-separated or repeated), still in order")
	fl.StringVar(&opts.JUnit, "junit", "", "write JUnit XML results to FILE")
	fl.IntVar(&opts.MinGates, "min-gates", 0, "fail when fewer than N gates executed (pass or fail; refusals do not count)")
	fl.StringVar(&opts.Baseline, "baseline", "", "throughput baseline file (default: apr/qa-baselines.json in the user's configuration directory)")
	fl.BoolVar(&opts.AcceptBaseline, "accept-baseline", false, "record a missing throughput baseline, and raise one these runs exceed (never lowers one)")
	fl.StringVar(&opts.Contracts, "contracts", "", "load contracts from this directory instead of the embedded ones")
	threadsFlag(fl, &opts.Threads, "threads for every backend (0: its choice)")
	fl.StringVar(&opts.KLDBase, "kld-base", "", "llama.cpp base file (--kl-divergence-base layout): adds the kld gate against it")
	fl.Int64Var(&opts.Seed, "seed", 0, "seed of the randomized gates (default: from the clock; the report records it)")
	allowRefusedFlag(c, &opts.Allow)
	quietFlag(c, &opts.Quiet)
	jsonFlag(c, &opts.JSON)
	return c
}

func runQA(ctx context.Context, env *Env, opts qaOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.MinGates < 0 {
		return badInputf("qa: --min-gates %d is negative", opts.MinGates)
	}
	if opts.Threads < 0 {
		return badInputf("qa: --threads %d is negative", opts.Threads)
	}
	if opts.Model != "" {
		if err := checkModelPath(opts.Model); err != nil {
			return badInput(fmt.Errorf("qa: %w", err))
		}
	}
	if opts.KLDBase != "" {
		if opts.Model == "" {
			return badInputf("qa: --kld-base compares one MODEL with its base; name the model")
		}
		if _, err := os.Stat(opts.KLDBase); err != nil {
			return badInput(fmt.Errorf("qa: --kld-base: %w", err))
		}
	}
	known := knownBackends()
	for _, list := range opts.Backends {
		for _, b := range strings.Split(list, ",") {
			if b = strings.TrimSpace(b); b != "" && !slices.Contains(known, b) {
				return badInputf("qa: --backend: unknown backend %q (known: %s)", b, strings.Join(known, ", "))
			}
		}
	}
	for _, list := range opts.Gates {
		for _, g := range strings.Split(list, ",") {
			if g = strings.TrimSpace(g); g != "" && !slices.Contains(qa.Gates(), g) {
				return badInputf("qa: --gate: unknown gate %q (gates: %s)", g, strings.Join(qa.Gates(), ", "))
			}
		}
	}
	var set *contracts.Set
	var err error
	if opts.Contracts == "" {
		set, err = contracts.Embedded()
	} else {
		set, err = contracts.LoadDir(opts.Contracts)
	}
	if err != nil {
		return badInput(err)
	}
	prog := newProgress(env.Stderr, "qa", opts.Quiet)
	defer prog.Done()
	o := qa.Options{Model: opts.Model, Backends: opts.Backends, Gates: opts.Gates, Contracts: set, Registry: registry(),
		BaselineFile: opts.Baseline, AcceptBaseline: opts.AcceptBaseline, MinGates: opts.MinGates,
		Threads: opts.Threads, Seed: opts.Seed, Log: env.Log, KLDBase: opts.KLDBase,
		ModelDone: func(m *qa.ModelReport) { prog.Print(func() { qa.WriteModelTable(env.Stderr, m) }) },
		Progress: func(m *qa.ModelReport, g qa.Gate) {
			name := g.Name
			if g.Backend != "" {
				name += "[" + g.Backend + "]"
			}
			prog.Step("%s: gate %d %s %s (%.0f ms)", m.Name, len(m.Gates), name, g.Status, g.DurationMS)
		}}
	if opts.Model == "" {
		dir, remove, err := tempDir("apr-qa-")
		if err != nil {
			return fmt.Errorf("qa: %w", err)
		}
		defer remove()
		o.SynthDir = dir
		prog.Step("synthesizing a tiny model of every architecture")
	}
	rep, err := qa.Run(ctx, o)
	prog.Done()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return qaInterrupted(&rep)
		}
		if _, ok := refuse.As(err); ok {
			return err
		}
		return badInput(err)
	}
	// Refusals the user accepted in advance (--allow-refused) do not fail
	// the run: the report says which, and passes when nothing else kept it
	// from passing.
	var refused []string
	rep.AcceptedRefusals = []string{}
	for _, g := range rep.Gates() {
		if g.Verdict == verdict.Refused && !g.Optional {
			name := g.Name
			if g.Backend != "" {
				name += "[" + g.Backend + "]"
			}
			if refusalAllowed(g.By, opts.Allow) {
				rep.AcceptedRefusals = append(rep.AcceptedRefusals, name)
			} else {
				refused = append(refused, name)
			}
		}
	}
	if !rep.Passed && rep.Counts.Fail == 0 && rep.Executed >= rep.MinGates && rep.Executed > 0 && len(refused) == 0 && len(rep.AcceptedRefusals) > 0 {
		rep.Passed = true
		rep.Summary = strings.Replace(rep.Summary, "NOT PASSED", "PASS", 1) +
			fmt.Sprintf("; every refusal was accepted in advance (--allow-refused %s)", strings.Join(opts.Allow, ","))
	}
	qa.WriteSummary(env.Stderr, &rep)
	if opts.JUnit != "" {
		var buf bytes.Buffer
		if err := qa.WriteJUnit(&buf, &rep); err != nil {
			return err
		}
		if err := os.WriteFile(opts.JUnit, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("qa: --junit: %w", err)
		}
	}
	if opts.JSON {
		if err := writeJSON(env.Stdout, rep); err != nil {
			return err
		}
	}
	switch {
	case rep.Passed:
		return nil
	case rep.Counts.Fail > 0 || rep.Executed < rep.MinGates || rep.Executed == 0 && rep.Counts.Refused == 0:
		return ErrCheckFailed
	}
	if len(refused) == 0 {
		return refuse.New("qa", "no gate executed: every gate was refused (accepted with --allow-refused, but nothing was checked)")
	}
	return refuse.New("qa", "%d gate(s) refused and none failed: %s", len(refused), strings.Join(refused, ", "))
}

// qaInterrupted says what an interrupted qa run decided and what it did not.
func qaInterrupted(rep *qa.Report) error {
	decided, cancelled := 0, 0
	for _, g := range rep.Gates() {
		if g.Verdict == verdict.Pass || g.Verdict == verdict.Fail {
			decided++
		} else if strings.HasPrefix(g.Reason, "cancelled") {
			cancelled++
		}
	}
	return interruptedf("qa: interrupted: %d model(s) started, %d gate(s) decided, %d cancelled, the rest not run; nothing is passed (temporary models removed)",
		len(rep.Models), decided, cancelled)
}
