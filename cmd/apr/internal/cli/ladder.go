package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/ladder"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
)

func init() { register(51, newLadderCmd) }

// ladderExecutors builds the executors of the ladder's cells; tests replace it
// to plant failures.
var ladderExecutors = func(opts ladder.ExecOptions) *ladder.Executors { return ladder.DefaultExecutors(opts) }

type ladderOptions struct {
	Roots    []string
	Out      string
	Verbs    []string
	Backends []string
	Shard    string
	Timeout  time.Duration
	Report   string
	Expect   string
	SumCache string
	Progress string
	Fresh    bool
	Isolate  string
	Allow    []string
	Quiet    bool
	JSON     bool
}

func newLadderCmd(env *Env) *cobra.Command {
	var opts ladderOptions
	c := &cobra.Command{
		Use:   "ladder DIR...",
		Short: "Run every model × verb × backend cell and write a receipt",
		Long: `ladder finds the GGUF models under each DIR (by their magic bytes, not their
names; a *.gguf without the magic and a dangling symlink are refused models),
and runs each cell model × verb × backend. A cell ends pass, fail with a
reason, or refused by a named contract, falsifier or component: a cell whose
verb or backend has no executor in this binary is refused by name, never left
out.

Every finished cell is written atomically under --out; running the same
command again after an interruption finishes only the missing cells (cells
are reused only when the binary, the model's sha256 and the contracts digest
are unchanged). The receipt (--out/receipt.json) records the binary, host,
contracts digest and every cell; it is validated against the #Receipt schema.

--shard K/N runs a deterministic slice (whole models, balanced by bytes);
'apr ladder merge' combines the shards' receipts and 'apr ladder matrix'
prints the shard list for a CI matrix. --report writes a self-contained HTML
page of the matrix. --expect DIR compares logits with reference outputs whose
recorded model sha256 matches.

stdout carries the matrix (or, with --json, the receipt); progress goes to
stderr.

Exit codes (a CI gate never goes green on a broken run):
  0    every cell passed, or was refused by a refuser named in --allow-refused
  1    a cell failed; a model that cannot be read (a truncated or corrupt
       GGUF, a *.gguf that is not GGUF, a dangling symlink, a FIFO) is a
       failed cell: the file is broken, not the question unanswerable
  2    bad usage: an unknown verb or backend name, an empty universe (no
       model under the directories, or no cell in it), a missing directory
  3    no cell failed, but one was refused and its refuser is not in
       --allow-refused (e.g. --allow-refused backend accepts the cells of a
       backend this binary does not link, such as cuda)
  130  interrupted (Ctrl-C): finished cells are kept; run again to resume`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Roots = args
			if opts.Quiet {
				opts.Progress = "none"
			}
			if err := checkLadderUniverse(c, opts.Verbs, opts.Backends); err != nil {
				return err
			}
			return runLadder(c.Context(), env, opts)
		},
	}
	f := c.Flags()
	f.StringVarP(&opts.Out, "out", "o", "apr-ladder", "run directory: cell results and receipt.json (resumable)")
	f.StringSliceVar(&opts.Verbs, "verbs", ladder.DefaultVerbs, "verbs of the universe")
	f.StringSliceVar(&opts.Backends, "backends", ladder.DefaultBackends, "backends of the universe")
	f.StringVar(&opts.Shard, "shard", "1/1", "run only shard K of N")
	f.DurationVar(&opts.Timeout, "timeout", ladder.DefaultTimeout, "time limit of each cell")
	f.StringVar(&opts.Report, "report", "", "also write an HTML report to this file")
	f.StringVar(&opts.Expect, "expect", "", "directory of reference outputs (*.logits.json, matched by model sha256)")
	f.StringVar(&opts.SumCache, "sum-cache", defaultSumCache(), `file caching model sha256 by path, size and mtime ("" disables)`)
	f.StringVar(&opts.Progress, "progress", "auto", "progress on stderr: auto (a bar on a terminal, lines otherwise), bar, lines, none")
	f.BoolVar(&opts.Fresh, "fresh", false, "ignore cell results already in --out")
	f.StringVar(&opts.Isolate, "isolate", "process", "where cells run: process (a worker process per model; a crash or hard hang costs one cell) or goroutine")
	allowRefusedFlag(c, &opts.Allow)
	quietFlag(c, &opts.Quiet)
	jsonFlag(c, &opts.JSON)
	c.AddCommand(newLadderMergeCmd(env), newLadderMatrixCmd(env), newLadderWorkerCmd(env))
	return c
}

func defaultSumCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "apr", "ladder-sha256.json")
}

func runLadder(ctx context.Context, env *Env, opts ladderOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	shard, err := ladder.ParseShard(opts.Shard)
	if err != nil {
		return badInput(err)
	}
	if opts.Timeout <= 0 {
		return badInputf("ladder: --timeout %v must be positive", opts.Timeout)
	}
	progress, err := newLadderProgress(env.Stderr, opts.Progress)
	if err != nil {
		return badInput(err)
	}
	cfg := ladder.Config{
		Roots: opts.Roots, Verbs: opts.Verbs, Backends: opts.Backends, Shard: shard,
		Timeout: opts.Timeout, OutDir: opts.Out, Fresh: opts.Fresh,
		SumCache: ladder.OpenSumCache(opts.SumCache), Progress: progress, Log: env.Log,
	}
	digest, gate, err := ladderContracts()
	if err != nil {
		return fmt.Errorf("ladder: loading contracts: %w", err)
	}
	cfg.ContractsDigest, cfg.Gate = digest, gate
	cfg.Executors = ladderExecutors(ladder.ExecOptions{ExpectDir: opts.Expect, Registry: registry(), Log: env.Log})
	switch opts.Isolate {
	case "goroutine":
	case "process":
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("ladder: --isolate process needs this binary's path: %w", err)
		}
		cfg.Worker = func() *exec.Cmd {
			cmd := exec.Command(exe, "ladder", "worker", "--expect", opts.Expect)
			cmd.Args[0] = "apr" // the same binary; tests' binaries dispatch on this name
			return cmd
		}
	default:
		return badInputf("ladder: --isolate %q: want process or goroutine", opts.Isolate)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec, err := ladder.Run(ctx, cfg)
	if err != nil {
		var ie *ladder.InterruptedError
		if errors.As(err, &ie) {
			return err
		}
		if rec == nil {
			return badInput(err)
		}
		return err
	}
	return finishLadder(env, rec, opts.Report, opts.JSON, filepath.Join(opts.Out, ladder.ReceiptFile), opts.Allow)
}

// finishLadder validates the receipt, writes the report and prints the
// result; it returns ErrCheckFailed when a cell failed.
func finishLadder(env *Env, rec *ladder.Receipt, report string, asJSON bool, receiptPath string, allow []string) error {
	verr := rec.Validate()
	if report != "" {
		var buf bytes.Buffer
		if err := ladder.WriteReport(&buf, rec); err != nil {
			return err
		}
		if err := os.WriteFile(report, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("ladder: writing the report: %w", err)
		}
	}
	if asJSON {
		if err := writeJSON(env.Stdout, rec); err != nil {
			return err
		}
	} else {
		printMatrix(env.Stdout, rec)
	}
	fmt.Fprintf(env.Stderr, "ladder: %s\n", rec.Summary)
	if receiptPath != "" {
		fmt.Fprintf(env.Stderr, "ladder: receipt %s\n", receiptPath)
	}
	if report != "" {
		fmt.Fprintf(env.Stderr, "ladder: report %s\n", report)
	}
	if verr != nil {
		return fmt.Errorf("ladder: the receipt does not satisfy the #Receipt schema (it was written all the same): %w", verr)
	}
	if rec.Summary.Fail > 0 {
		for _, c := range rec.Cells {
			if c.Verdict == verdict.Fail {
				fmt.Fprintf(env.Stderr, "FAIL %s: %s\n", c.ID, c.Reason)
			}
		}
		return ErrCheckFailed
	}
	if rec.Universe.Cells == 0 {
		return badInputf("ladder: the universe is empty (%d models × %d verbs × %d backends under %s): nothing was checked",
			len(rec.Universe.Models), len(rec.Universe.Verbs), len(rec.Universe.Backends), strings.Join(rec.Universe.Roots, ", "))
	}
	var refused []string
	by := ""
	for _, c := range rec.Cells {
		if c.Verdict == verdict.Refused && !refusalAllowed(c.RemovedBy, allow) {
			if by == "" {
				by = c.RemovedBy
			}
			refused = append(refused, c.ID)
			if len(refused) <= maxRefusedShown {
				fmt.Fprintf(env.Stderr, "REFUSED %s by %s: %s\n", c.ID, c.RemovedBy, c.Reason)
			}
		}
	}
	if n := len(refused) - maxRefusedShown; n > 0 {
		fmt.Fprintf(env.Stderr, "REFUSED … %d more (the receipt lists every cell)\n", n)
	}
	if len(refused) > 0 {
		return refuse.New("ladder", "%d cell(s) refused and none failed (first refused by %s); accept a refuser in advance with --allow-refused NAME", len(refused), by)
	}
	return nil
}

// maxRefusedShown is how many refused cells finishLadder names on stderr.
const maxRefusedShown = 10

// checkLadderUniverse refuses, as bad usage, a verb or backend name that
// nothing in apr knows: a typo must not become a column of refused cells.
// A verb is known when an executor runs it or when it is an apr command
// (serve, chat: refused by name until they have an executor); a backend
// when it is linked, has an executor, or is one the ladder knows of
// (ladder.DefaultBackends: cuda is refused by name where it is not linked).
func checkLadderUniverse(c *cobra.Command, verbs, backends []string) error {
	ex := ladderExecutors(ladder.ExecOptions{Registry: registry()})
	knownVerbs := append(ex.Verbs(), ladder.DefaultVerbs...)
	for _, sub := range c.Root().Commands() {
		switch sub.Name() {
		case "help", "completion", "version", "ladder":
		default:
			knownVerbs = append(knownVerbs, sub.Name())
		}
	}
	knownBackends := append(append(ex.Backends(), ladder.DefaultBackends...), model.Backends()...)
	for _, v := range verbs {
		if !slices.Contains(knownVerbs, v) {
			return badInputf("ladder: --verbs: unknown verb %q (the ladder runs: %s)", v, strings.Join(ladderSorted(ex.Verbs(), ladder.DefaultVerbs), ", "))
		}
	}
	for _, b := range backends {
		if !slices.Contains(knownBackends, b) {
			return badInputf("ladder: --backends: unknown backend %q (known: %s)", b, strings.Join(ladderSorted(knownBackends), ", "))
		}
	}
	if len(verbs) == 0 || len(backends) == 0 {
		return badInputf("ladder: the universe is empty: --verbs and --backends need at least one name each")
	}
	return nil
}

func ladderSorted(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, s := range l {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// printMatrix prints one line per model and one column per verb/backend.
func printMatrix(w io.Writer, rec *ladder.Receipt) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	head := []string{"model"}
	for _, v := range rec.Universe.Verbs {
		for _, b := range rec.Universe.Backends {
			head = append(head, v+"/"+b)
		}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	byID := map[string]verdict.Verdict{}
	var keys []string
	seen := map[string]bool{}
	for _, c := range rec.Cells {
		byID[c.ID] = c.Verdict
		if !seen[c.Model.Key] {
			seen[c.Model.Key] = true
			keys = append(keys, c.Model.Key)
		}
	}
	for _, k := range keys {
		row := []string{k}
		for _, v := range rec.Universe.Verbs {
			for _, b := range rec.Universe.Backends {
				verdict, ok := byID[ladder.CellID(k, v, b)]
				if !ok {
					verdict = "-"
				}
				row = append(row, string(verdict))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w, rec.Summary)
}

// ladderProgress draws a bar on a terminal or prints a line per cell.
type ladderProgress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	lines bool
	done  int
	total int
}

func newLadderProgress(w io.Writer, mode string) (ladder.Progress, error) {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	switch mode {
	case "none":
		return nil, nil
	case "auto":
		return &ladderProgress{w: w, lines: !tty}, nil
	case "bar":
		return &ladderProgress{w: w}, nil
	case "lines":
		return &ladderProgress{w: w, lines: true}, nil
	}
	return nil, fmt.Errorf("ladder: --progress %q: want auto, bar, lines or none", mode)
}

func (p *ladderProgress) Begin(total int) {
	p.total = total
	if p.lines {
		fmt.Fprintf(p.w, "ladder: %d cells in this shard\n", total)
		return
	}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription("ladder"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
		progressbar.OptionSetWidth(30),
	)
}

func (p *ladderProgress) Cell(c *ladder.Cell, reused bool) {
	p.done++
	if p.lines {
		how := ""
		if reused {
			how = " (reused)"
		}
		line := fmt.Sprintf("[%d/%d] %s %s/%s %s%s", p.done, p.total, c.Model.Key, c.Verb, c.Backend, c.Verdict, how)
		if c.Verdict != verdict.Pass {
			line += ": " + c.Reason
		}
		fmt.Fprintln(p.w, line)
		return
	}
	p.bar.Describe(fmt.Sprintf("%-40.40s", c.Model.Key+" "+c.Verb+"/"+c.Backend))
	_ = p.bar.Add(1)
}

func (p *ladderProgress) End() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// newLadderWorkerCmd is the child side of --isolate process: it serves the
// cells of one model that the parent ladder sends on stdin.
func newLadderWorkerCmd(env *Env) *cobra.Command {
	var expect string
	c := &cobra.Command{
		Use:    "worker",
		Short:  "Run cells for a parent 'apr ladder' (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			// The parent decides when the worker stops: an interrupt that
			// reaches the whole process group must not kill a cell here
			// before the parent knows the run is being interrupted.
			signal.Ignore(os.Interrupt, syscall.SIGTERM)
			ex := ladderExecutors(ladder.ExecOptions{ExpectDir: expect, Registry: registry(), Log: env.Log})
			return ladder.ServeWorker(context.Background(), env.Stdin, env.Stdout, ex, env.Log)
		},
	}
	c.Flags().StringVar(&expect, "expect", "", "as apr ladder --expect")
	return c
}

type ladderMergeOptions struct {
	Receipts []string
	Out      string
	Report   string
	Allow    []string
	JSON     bool
}

func newLadderMergeCmd(env *Env) *cobra.Command {
	var opts ladderMergeOptions
	c := &cobra.Command{
		Use:   "merge RECEIPT...",
		Short: "Combine shard receipts into one",
		Long: `merge combines the receipts of 'apr ladder --shard K/N' runs into one receipt.
It refuses receipts of different binaries (executable sha256), contracts or
universes, cells whose verdicts disagree, and any cell of the universe that
no receipt covers. The merged receipt goes to -o (default merged-receipt.json).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Receipts = args
			return runLadderMerge(env, opts)
		},
	}
	c.Flags().StringVarP(&opts.Out, "out", "o", "merged-receipt.json", "where to write the merged receipt")
	c.Flags().StringVar(&opts.Report, "report", "", "also write an HTML report to this file")
	allowRefusedFlag(c, &opts.Allow)
	jsonFlag(c, &opts.JSON)
	return c
}

func runLadderMerge(env *Env, opts ladderMergeOptions) error {
	var rs []*ladder.Receipt
	for _, p := range opts.Receipts {
		r, err := ladder.ReadReceipt(p)
		if err != nil {
			return badInput(err)
		}
		rs = append(rs, r)
	}
	merged, err := ladder.Merge(rs)
	if err != nil {
		return badInput(err)
	}
	if err := merged.WriteFile(opts.Out); err != nil {
		return fmt.Errorf("ladder merge: %w", err)
	}
	return finishLadder(env, merged, opts.Report, opts.JSON, opts.Out, opts.Allow)
}

type ladderMatrixOptions struct {
	Shards int
	Format string
}

func newLadderMatrixCmd(env *Env) *cobra.Command {
	var opts ladderMatrixOptions
	c := &cobra.Command{
		Use:   "matrix [--shards N] [--format github|lines]",
		Short: "Print the shard list for a CI matrix",
		Long: `matrix prints the shards 1/N … N/N. --format github prints one line of JSON,
{"shard":["1/3","2/3","3/3"]}, for a GitHub Actions matrix:

  jobs:
    plan:
      runs-on: ubuntu-latest
      outputs: {matrix: ${{ steps.m.outputs.matrix }}}
      steps:
        - id: m
          run: echo "matrix=$(apr ladder matrix --shards 3 --format github)" >> "$GITHUB_OUTPUT"
    ladder:
      needs: plan
      strategy: {matrix: ${{ fromJSON(needs.plan.outputs.matrix) }}}
      steps:
        - run: apr ladder --shard ${{ matrix.shard }} --out out models/
        - uses: actions/upload-artifact@v4   # then: apr ladder merge */receipt.json

--format lines prints one shard per line.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runLadderMatrix(env, opts)
		},
	}
	c.Flags().IntVar(&opts.Shards, "shards", 1, "number of shards N")
	c.Flags().StringVar(&opts.Format, "format", "github", "github (one JSON line) or lines")
	return c
}

func runLadderMatrix(env *Env, opts ladderMatrixOptions) error {
	shards, err := ladder.Matrix(opts.Shards)
	if err != nil {
		return badInputf("ladder matrix: --shards: %v", err)
	}
	switch opts.Format {
	case "github":
		b, err := json.Marshal(map[string][]string{"shard": shards})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
		return err
	case "lines":
		for _, s := range shards {
			fmt.Fprintln(env.Stdout, s)
		}
		return nil
	}
	return badInputf("ladder matrix: --format %q: want github or lines", opts.Format)
}
