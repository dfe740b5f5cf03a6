package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds are the testscript commands of issue 17's scripts.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"aprexit":  cmdAprExit,
	"truncate": cmdTruncate,
	"sleep":    cmdSleep,
}

// cmdAprExit runs apr and checks its exit code: aprexit CODE ARGS... Its
// stdout and stderr are kept for the stdout/stderr commands that follow, as
// exec's are. (exec only tells zero from non-zero; apr's codes 1, 2, 3 and
// 130 mean different things, and a CI gate reads them.)
func cmdAprExit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: aprexit CODE ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("aprexit: code %q: %v", args[0], err)
	}
	err = ts.Exec("apr", args[1:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("aprexit: %v", err)
	}
	if got != want {
		ts.Fatalf("apr %q exited %d, want %d", args[1:], got, want)
	}
}

// cmdTruncate cuts a file to N bytes: truncate FILE N.
func cmdTruncate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: truncate FILE N")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("truncate: %v", err)
	}
	ts.Check(os.Truncate(ts.MkAbs(args[0]), n))
}

// cmdSleep waits: sleep DURATION.
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sleep DURATION")
	}
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	time.Sleep(d)
}
