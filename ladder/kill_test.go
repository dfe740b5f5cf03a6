package ladder_test

import (
	"context"
	"github.com/aprqa/apr/engine/backends"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/ladder"
)

// TestMain lets the test binary act as a ladder process that TestKillAndResume
// kills with SIGKILL half-way (with APR_LADDER_HELPER_OUT set it runs the
// ladder slowly over APR_LADDER_HELPER_ROOT and exits), or as the worker
// process of TestProcessIsolation (APR_LADDER_WORKER=1).
func TestMain(m *testing.M) {
	backends.Register() // the engines as backends by name, as the program does
	if os.Getenv("APR_LADDER_WORKER") == "1" {
		if err := ladder.ServeWorker(context.Background(), os.Stdin, os.Stdout, crashExecutors(), nil); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	if out := os.Getenv("APR_LADDER_HELPER_OUT"); out != "" {
		cfg := baseConfig(os.Getenv("APR_LADDER_HELPER_ROOT"))
		cfg.OutDir = out
		inner := deterministicExecutors(&counter{}, 0, nil)
		slow := &ladder.Executors{}
		for _, vb := range [][2]string{{"run", "ref"}, {"run", "cpu"}, {"logits", "ref"}, {"logits", "cpu"}, {"logits", "cuda"}} {
			fn, _ := inner.Lookup(vb[0], vb[1])
			slow.Register(vb[0], func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
				time.Sleep(40 * time.Millisecond)
				return fn(ctx, m, b)
			}, vb[1])
		}
		cfg.Executors = slow
		if _, err := ladder.Run(context.Background(), cfg); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func cellFiles(t *testing.T, out string) int {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(out, "cells"))
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP (not a pass): -short: this test kills a ladder subprocess")
	}
	root := modelTree(t, 4)
	total := 4 * len(ladder.DefaultVerbs) * len(ladder.DefaultBackends)
	want, err := runWith(t, baseConfig(root), t.TempDir(), &counter{}, 0)
	if err != nil {
		t.Fatalf("uninterrupted Run: %v", err)
	}

	out := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "APR_LADDER_HELPER_OUT="+out, "APR_LADDER_HELPER_ROOT="+root)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for cellFiles(t, out) < 8 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("killing the ladder: %v", err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the ladder subprocess ended with %v before it was killed; it should have been slow enough to kill half-way", err)
	}
	done := cellFiles(t, out)
	if done < 8 || done >= total {
		t.Fatalf("killed with %d of %d cells written, want a run killed half-way", done, total)
	}

	cnt := &counter{}
	got, err := runWith(t, baseConfig(root), out, cnt, 0)
	if err != nil {
		t.Fatalf("Run after the kill: %v", err)
	}
	if got.Runs[0].Reused != done || got.Runs[0].Executed != total-done {
		t.Errorf("run after the kill reused %d and decided %d cells, want %d and %d", got.Runs[0].Reused, got.Runs[0].Executed, done, total-done)
	}
	if diff := cmp.Diff(want.Verdicts(), got.Verdicts()); diff != "" {
		t.Errorf("verdicts after kill and resume differ from an uninterrupted run's (-uninterrupted +resumed):\n%s", diff)
	}
}
