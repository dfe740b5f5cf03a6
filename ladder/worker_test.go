package ladder_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aprqa/apr/ladder"
	"github.com/aprqa/apr/verdict"
)

// crashExecutors are executed in a worker process (the test binary started
// with APR_LADDER_WORKER=1): some of them kill that process.
func crashExecutors() *ladder.Executors {
	e := &ladder.Executors{}
	reg := func(verb string, fn func(ctx context.Context, m *ladder.Model) ladder.Result) {
		e.Register(verb, func(ctx context.Context, m *ladder.Model, b string) ladder.Result { return fn(ctx, m) }, "ref")
	}
	reg("pass", func(ctx context.Context, m *ladder.Model) ladder.Result {
		f, err := m.File()
		if err != nil {
			return ladder.FromError(err)
		}
		return ladder.Passed(ladder.Value{Name: "tensors", Value: float64(len(f.Tensors)), Unit: "pid " + itoa(os.Getpid())})
	})
	reg("crash", func(ctx context.Context, m *ladder.Model) ladder.Result {
		go func() { panic("driver exploded") }() // not recoverable: another goroutine
		time.Sleep(10 * time.Second)
		return ladder.Passed()
	})
	reg("exit", func(ctx context.Context, m *ladder.Model) ladder.Result {
		os.Exit(7)
		return ladder.Passed()
	})
	reg("freeze", func(ctx context.Context, m *ladder.Model) ladder.Result {
		syscall.Kill(os.Getpid(), syscall.SIGSTOP) // the whole worker stops
		// Should the worker be continued (seen once on a fully loaded
		// machine: the cell came back pass), it still never answers.
		select {}
	})
	reg("fail", func(ctx context.Context, m *ladder.Model) ladder.Result {
		return ladder.Failed("planted failure")
	})
	return e
}

func itoa(n int) string { return strconv.Itoa(n) }

func workerCmd() *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "APR_LADDER_WORKER=1")
	return cmd
}

func TestProcessIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP (not a pass): -short: this test crashes worker processes")
	}
	root := modelTree(t, 1)
	cfg := baseConfig(root)
	cfg.Verbs = []string{"pass", "crash", "exit", "freeze", "fail", "none"}
	cfg.Backends = []string{"ref"}
	cfg.Executors = crashExecutors()
	cfg.Worker = workerCmd
	cfg.Timeout, cfg.Grace = time.Second, 100*time.Millisecond
	cfg.OutDir = t.TempDir()
	rec, err := ladder.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run with process isolation: %v", err)
	}
	tests := []struct {
		verb    string
		verdict verdict.Verdict
		reason  string
	}{
		{"pass", verdict.Pass, ""},
		{"crash", verdict.Fail, "the worker process died while running this cell (exit status 2): panic: driver exploded"},
		{"exit", verdict.Fail, "the worker process died while running this cell (exit status 7)"},
		{"freeze", verdict.Fail, "timed out after 1s"}, // ": the worker process did not answer and was killed" while it stays stopped
		{"fail", verdict.Fail, "planted failure"},
		{"none", verdict.Refused, "no executor for verb none"},
	}
	cells := map[string]ladder.Cell{}
	for _, c := range rec.Cells {
		cells[c.Verb] = c
	}
	for _, tc := range tests {
		c := cells[tc.verb]
		if c.Verdict != tc.verdict || !strings.HasPrefix(c.Reason, tc.reason) {
			t.Errorf("cell %s = %s %q, want %s starting %q", c.ID, c.Verdict, c.Reason, tc.verdict, tc.reason)
		}
	}
	if f := cells["freeze"]; !strings.Contains(f.Reason, "did not answer and was killed") {
		t.Logf("the frozen worker was continued and answered itself: %q", f.Reason)
	}
	if p := cells["pass"]; len(p.Values) != 1 || p.Values[0].Unit == "pid "+itoa(os.Getpid()) {
		t.Errorf("the pass cell ran in pid %v, want a worker process, not the runner (pid %d)", p.Values, os.Getpid())
	}
	if err := rec.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}
