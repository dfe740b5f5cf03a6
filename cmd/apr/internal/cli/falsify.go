package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
)

func init() { register(41, newFalsifyCmd) }

type falsifyOptions struct {
	IDs       []string
	Model     string
	Fixtures  string
	Contracts string
	Seed      int64
	SeedSet   bool
	JSON      bool
	JUnit     string
	KLDBase   string
}

func newFalsifyCmd(env *Env) *cobra.Command {
	var opts falsifyOptions
	c := &cobra.Command{
		Use:   "falsify [ID...]",
		Short: "Run the contracts' falsifiers and report a verdict for each",
		Long: `falsify runs falsifiers named by the contracts (apr contracts list): the ids
given (falsifier or contract ids), or every falsifier that applies to the
inputs. Model falsifiers apply to --model when its architecture matches,
kernel falsifiers to the ggml types --model holds (all of them without a
model), golden falsifiers to the model object their golden was made from, and
some need apr's shared fixtures (--fixtures). Falsifiers that do not apply are
listed as not run; a falsifier named explicitly that cannot run is refused.

Each result has a verdict: pass, fail (with the reason) or refused (with who
refused and why); measured values; thresholds; the seed of randomized
(property) falsifiers, so that --seed reproduces a failure; and the duration.
The table goes to stderr; --json prints the report on stdout; --junit FILE
writes JUnit XML for CI systems.

Exit codes: 0 every falsifier run passed, 1 one failed, 3 none failed but
one was refused (or none applied), 2 bad usage. A refusal whose code the
contract lists in params.optional_refusals is reported as refused (optional)
and does not by itself make the run refused.`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.IDs = args
			opts.SeedSet = c.Flags().Changed("seed")
			return runFalsify(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Model, "model", "", "GGUF model the model, kernel and verb falsifiers run on")
	fl.StringVar(&opts.Fixtures, "fixtures", "", "apr's shared fixtures directory (../shared/fixtures in a checkout)")
	fl.StringVar(&opts.Contracts, "contracts", "", "load contracts from this directory instead of the embedded ones")
	fl.Int64Var(&opts.Seed, "seed", 0, "seed of property falsifiers (default: from the clock, and printed)")
	fl.StringVar(&opts.JUnit, "junit", "", "write JUnit XML results to FILE")
	fl.StringVar(&opts.KLDBase, "kld-base", "", "llama.cpp base file (--kl-divergence-base) the kld falsifiers compare --model with")
	jsonFlag(c, &opts.JSON)
	return c
}

func runFalsify(ctx context.Context, env *Env, opts falsifyOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	set, err := loadContracts(opts.Contracts)
	if err != nil {
		return badInput(err)
	}
	if opts.Model != "" {
		// A model that cannot be read is bad input, said with the reader's
		// one-line error before any falsifier runs: otherwise the verbs'
		// field checks fail on it, blaming apr's verbs for a broken file.
		if err := openModelCheck(opts.Model); err != nil {
			return badInput(fmt.Errorf("falsify: --model: %w", err))
		}
	}
	if opts.Fixtures != "" {
		if st, err := os.Stat(opts.Fixtures); err != nil || !st.IsDir() {
			return badInputf("falsify: --fixtures %s is not a directory", opts.Fixtures)
		}
	}
	if !opts.SeedSet {
		opts.Seed = time.Now().UnixNano()
	}
	fmt.Fprintf(env.Stderr, "falsify: contracts %.12s…, seed %d%s\n", set.Digest(), opts.Seed, falsifyInputs(opts))
	start := time.Now()
	var params map[string]any
	if opts.KLDBase != "" {
		if _, err := os.Stat(opts.KLDBase); err != nil {
			return badInput(err)
		}
		params = map[string]any{falsify.ParamKLDBase: opts.KLDBase}
	}
	rep, err := falsify.Run(ctx, falsify.Options{
		IDs: opts.IDs, Model: opts.Model, Fixtures: opts.Fixtures, Seed: opts.Seed, Set: set, Registry: registry(), Log: env.Log, Params: params,
		OnResult: func(r falsify.Result) { printResultLine(env.Stderr, r) },
	})
	if err != nil {
		return badInput(err)
	}
	printNotRun(env.Stderr, rep.NotRun)
	optional := ""
	if rep.Summary.RefusedOptional > 0 {
		optional = fmt.Sprintf(" (+%d refused, optional by contract)", rep.Summary.RefusedOptional)
	}
	fmt.Fprintf(env.Stderr, "falsify: %d pass, %d fail, %d refused%s, %d not run (%.1f s)\n",
		rep.Summary.Pass, rep.Summary.Fail, rep.Summary.Refused, optional, len(rep.NotRun), time.Since(start).Seconds())
	if opts.JUnit != "" {
		if err := writeJUnitFile(opts.JUnit, rep, time.Since(start)); err != nil {
			return err
		}
	}
	if opts.JSON {
		if err := writeJSON(env.Stdout, rep); err != nil {
			return err
		}
	}
	switch {
	case rep.Summary.Fail > 0:
		return ErrCheckFailed
	case rep.Summary.Refused > 0:
		return refuse.New(falsify.ByRunner, "%d falsifier(s) refused; a refusal is not a pass", rep.Summary.Refused)
	case len(rep.Results) == rep.Summary.RefusedOptional:
		return refuse.New(falsify.ByRunner, "no falsifier decided anything (%d not run, %d refused as the contracts allow); nothing was checked", len(rep.NotRun), rep.Summary.RefusedOptional)
	}
	return nil
}

func falsifyInputs(o falsifyOptions) string {
	var b strings.Builder
	if o.Model != "" {
		b.WriteString(", model " + o.Model)
	}
	if o.Fixtures != "" {
		b.WriteString(", fixtures " + o.Fixtures)
	}
	if o.Contracts != "" {
		b.WriteString(", contracts from " + o.Contracts)
	}
	return b.String()
}

// printResultLine prints one row of the table: id, kind, verdict, what was
// measured against which threshold, and the duration; then the reason.
func printResultLine(w io.Writer, r falsify.Result) {
	var m []string
	for _, name := range slices.Sorted(maps.Keys(r.Thresholds)) {
		got := "—"
		if v, ok := r.Measured[name]; ok {
			got = verdict.FormatValue(v)
		} else if nf, ok := r.NonFinite[name]; ok {
			got = nf
		}
		m = append(m, fmt.Sprintf("%s=%s (%s)", name, got, verdict.FormatThreshold(r.Thresholds[name])))
	}
	fmt.Fprintf(w, "%-38s %-10s %-7s %8.1f ms  %s\n", r.ID, r.Kind, strings.ToUpper(string(r.Verdict)), r.DurationMS, strings.Join(m, ", "))
	switch r.Verdict {
	case verdict.Fail:
		fmt.Fprintf(w, "    fail: %s\n", r.Reason)
		if r.Seed != nil {
			fmt.Fprintf(w, "    reproduce: apr falsify %s --seed %d\n", r.ID, *r.Seed)
		}
	case verdict.Refused:
		opt := ""
		if r.Optional {
			opt = fmt.Sprintf(" (optional by contract: %s)", r.RefusalCode)
		}
		fmt.Fprintf(w, "    refused by %s%s: %s\n", r.RemovedBy, opt, r.Reason)
	}
}

func printNotRun(w io.Writer, nr []falsify.NotRun) {
	if len(nr) == 0 {
		return
	}
	why := map[string][]string{}
	for _, n := range nr {
		why[n.Why] = append(why[n.Why], n.ID)
	}
	reasons := make([]string, 0, len(why))
	for r := range why {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	fmt.Fprintf(w, "not run (%d; never counted as passed):\n", len(nr))
	for _, r := range reasons {
		ids := why[r]
		shown := ids
		if len(shown) > 4 {
			shown = append(append([]string(nil), ids[:4]...), fmt.Sprintf("… %d more", len(ids)-4))
		}
		fmt.Fprintf(w, "    %s: %s\n", r, strings.Join(shown, ", "))
	}
}

func writeJUnitFile(path string, rep *falsify.Report, d time.Duration) error {
	var buf bytes.Buffer
	if err := falsify.WriteJUnit(&buf, rep, d); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("falsify: --junit: %w", err)
	}
	return nil
}

// runVerb runs apr's own command line in-process with args, for verb_fields.
func runVerb(ctx context.Context, args []string) (stdout, stderr []byte, err error) {
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Log: slog.New(slog.DiscardHandler)}
	root := NewRoot(env)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.Bytes(), errb.Bytes(), err
}
