package cli_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds are the testscript commands of issue 17's scripts.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"exits":     cmdExits,
	"emptydir":  cmdEmptyDir,
	"truncate":  cmdTruncate,
	"sleep":     cmdSleep,
	"mkfifo":    cmdMkfifo,
	"mode":      cmdMode,
	"contracts": cmdContracts,
}

// cmdExits runs a program and checks its exit code: exits CODE PROG ARGS...
// Its stdout and stderr are kept for the stdout/stderr commands that follow,
// as exec's are. (exec only tells zero from non-zero; apr's codes 1, 2, 3
// and 130 mean different things, and a CI gate reads them.)
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: code %q: %v", args[0], err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("aprexit: %v", err)
	}
	if got != want {
		ts.Fatalf("%q exited %d, want %d", args[1:], got, want)
	}
}

// cmdEmptyDir checks that a directory exists and is empty: emptydir DIR.
func cmdEmptyDir(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: emptydir DIR")
	}
	ents, err := os.ReadDir(ts.MkAbs(args[0]))
	ts.Check(err)
	if len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		ts.Fatalf("%s is not empty: %v", args[0], names)
	}
}

// interruptAfter is the program interrupt-after DURATION PROG ARGS...: it
// runs PROG, sends it SIGINT after DURATION (as Ctrl-C would), passes its
// output through and exits with its exit code.
func interruptAfter() int {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: interrupt-after DURATION PROG ARGS...")
		return 2
	}
	d, err := time.ParseDuration(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	t := time.AfterFunc(d, func() { cmd.Process.Signal(os.Interrupt) })
	err = cmd.Wait()
	t.Stop()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
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

// cmdMkfifo makes a named pipe: mkfifo PATH.
func cmdMkfifo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mkfifo PATH")
	}
	ts.Check(syscall.Mkfifo(ts.MkAbs(args[0]), 0o644))
}

// cmdMode checks a file's permission bits: mode PATH 0644.
func cmdMode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mode PATH PERM")
	}
	want, err := strconv.ParseUint(args[1], 8, 32)
	ts.Check(err)
	st, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	if got := st.Mode().Perm(); got != os.FileMode(want) {
		ts.Fatalf("%s has mode %#o, want %#o", args[0], got, want)
	}
}

// cmdContracts copies the checkout's contracts ($CONTRACTS) into DIR with
// OLD replaced by NEW in common.cue (which must hold OLD): contracts DIR
// OLD NEW. A script gates with them through apr qa --contracts DIR.
func cmdContracts(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: contracts DIR OLD NEW")
	}
	src := ts.Getenv("CONTRACTS")
	files, err := filepath.Glob(filepath.Join(src, "*.cue"))
	ts.Check(err)
	if len(files) == 0 {
		ts.Fatalf("no contracts under %q", src)
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	for _, f := range files {
		b, err := os.ReadFile(f)
		ts.Check(err)
		s := string(b)
		if filepath.Base(f) == "common.cue" {
			if !strings.Contains(s, args[1]) {
				ts.Fatalf("common.cue does not hold %q", args[1])
			}
			s = strings.ReplaceAll(s, args[1], args[2])
		}
		ts.Check(os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644))
	}
}

// umask reads the process's umask (setting it back at once).
func umask() int {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return m
}
