package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/refuse"
)

// Exit codes, documented in the README.
const (
	ExitOK       = 0 // everything asked for was done and every check passed
	ExitFail     = 1 // a check ran and failed
	ExitBadInput = 2 // bad usage or bad input (malformed file, unknown flag)
	ExitRefused  = 3 // apr cannot do what was asked; the reason is printed
	// ExitInterrupted (130, interrupt.go): stopped by Ctrl-C or SIGTERM.
)

// ErrCheckFailed marks a run whose checks ran and failed (exit 1). The verb
// has already printed what failed.
var ErrCheckFailed = errors.New("a check failed")

// usageError marks bad usage or bad input (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// badInput wraps err so that it exits with ExitBadInput.
func badInput(err error) error { return usageError{err} }

func badInputf(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Env is what a command sees of the world: its streams and a logger on
// stderr. Tests build one over buffers.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Log    *slog.Logger
	// Level is Log's level when the caller made Log with one (Main does):
	// --log-level sets it. Without it --log-level replaces Log by a logger
	// on Stderr at that level.
	Level *slog.LevelVar
}

type cmdFactory struct {
	order int
	make  func(*Env) *cobra.Command
}

var factories []cmdFactory

// register adds a verb. order sorts --help's list (lower first).
func register(order int, f func(*Env) *cobra.Command) {
	factories = append(factories, cmdFactory{order, f})
}

// NewRoot builds the apr command tree over env.
func NewRoot(env *Env) *cobra.Command {
	wire()
	root := &cobra.Command{
		Use:   "apr",
		Short: "apr decides whether an LLM inference engine may ship",
		Long: `apr reads GGUF models, runs them on a plain FP32 reference engine and on
optimized engines, and gates releases with falsifiable contracts.

Exit codes: 0 ok, 1 a check failed, 2 bad usage or bad input, 3 refused.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return badInput(err) })
	var level string
	root.PersistentFlags().StringVar(&level, "log-level", "warn", "what reaches stderr's log lines: debug, info, warn or error (info shows F2's details, debug each bench repetition)")
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if !c.Flags().Changed("log-level") {
			return nil
		}
		var l slog.Level
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return badInputf("--log-level %q: want debug, info, warn or error", level)
		}
		if env.Level != nil {
			env.Level.Set(l)
		} else {
			lv := new(slog.LevelVar)
			lv.Set(l)
			env.Log, env.Level = newLoggerAt(env.Stderr, lv), lv
		}
		return nil
	}
	root.Version = "set" // enables --version; the line is versionLine()
	root.SetVersionTemplate("{{aprVersion}}\n")
	fs := append([]cmdFactory(nil), factories...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].order < fs[j].order })
	for _, f := range fs {
		c := f.make(env)
		c.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return badInput(err) })
		root.AddCommand(c)
	}
	return root
}

// Main runs apr with args and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelWarn)
	env := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Log: newLoggerAt(stderr, lv), Level: lv}
	root := NewRoot(env)
	root.SetArgs(args)
	ctx, stop := withInterrupt(context.Background(), stderr)
	defer stop()
	err := root.ExecuteContext(ctx)
	return Report(stderr, err)
}

// newLogger is the CLI's logger: warnings and worse on stderr, without the
// timestamp (a user reads "level=WARN msg=…" lines as they come).
func newLogger(w io.Writer) *slog.Logger { return newLoggerAt(w, slog.LevelWarn) }

// newLoggerAt is newLogger at level (a slog.Level or a *slog.LevelVar that
// --log-level sets).
func newLoggerAt(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
}

// Report prints err (if any) as one line on w and returns its exit code.
func Report(w io.Writer, err error) int {
	code := ExitCode(err)
	var ie interrupted
	switch {
	case err == nil || errors.Is(err, ErrCheckFailed):
	case code == ExitInterrupted && !errors.As(err, &ie) && errors.Is(err, context.Canceled) && err.Error() == context.Canceled.Error():
		// A verb that stopped at the interrupt without saying more.
		fmt.Fprintln(w, "apr: interrupted: the command stopped before it finished; its output is incomplete")
	default:
		fmt.Fprintf(w, "apr: %v\n", err)
	}
	return code
}

// ExitCode maps an error to apr's exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var fe *gguf.FormatError
	var ue usageError
	switch {
	case isInterrupt(err):
		return ExitInterrupted
	case errors.Is(err, ErrCheckFailed):
		return ExitFail
	case errors.Is(err, refuse.ErrRefused):
		return ExitRefused
	case errors.As(err, &fe), errors.As(err, &ue):
		return ExitBadInput
	}
	// Anything else is about what was asked or given: cobra's argument
	// errors ("accepts 1 arg(s)", "unknown command"), a missing file.
	return ExitBadInput
}

// jsonFlag adds the shared --json flag.
func jsonFlag(c *cobra.Command, p *bool) {
	c.Flags().BoolVar(p, "json", false, "print one JSON document on stdout (logs stay on stderr)")
}

// writeJSON is the one JSON exporter: indented, one document, trailing newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
