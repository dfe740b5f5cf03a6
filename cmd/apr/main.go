// Command apr decides whether an LLM inference engine may ship.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
)

// envCPUProfile names a file for a Go CPU profile of the whole command (a
// developer's view of where host time goes, e.g. around a GPU's decode
// steps; read it with go tool pprof).
const envCPUProfile = "APR_CPUPROFILE"

// envMemProfile names a file for a Go heap profile written when the command
// ends (every allocation of 64 KiB or more is sampled; alloc_space shows
// who allocated what over the whole command, inuse_space what was still
// live at its end).
const envMemProfile = "APR_MEMPROFILE"

// envTrace names a file for a Go execution trace of the whole command: every
// goroutine's timeline, with regions named for the stages of a run (the
// load's steps, F2's reference beside it, the upload, prefill, decode) —
// what runs beside what, and what the time to first token waits on. Read
// it with go tool trace (or go tool trace -d=parsed FILE | grep Region).
const envTrace = "APR_TRACE"

func main() {
	memProfile := os.Getenv(envMemProfile)
	if memProfile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	code := run()
	if memProfile != "" {
		if err := writeHeapProfile(memProfile); err != nil {
			fmt.Fprintf(os.Stderr, "apr: %s=%s: %v\n", envMemProfile, memProfile, err)
			if code == 0 {
				code = 2
			}
		}
	}
	os.Exit(code)
}

func run() int {
	for _, r := range []struct {
		env   string
		start func(io.Writer) error
		stop  func()
	}{
		{envTrace, trace.Start, trace.Stop},
		{envCPUProfile, pprof.StartCPUProfile, pprof.StopCPUProfile},
	} {
		p := os.Getenv(r.env)
		if p == "" {
			continue
		}
		f, err := os.Create(p)
		if err == nil {
			err = r.start(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "apr: %s=%s: %v\n", r.env, p, err)
			return 2
		}
		defer func() { r.stop(); f.Close() }()
	}
	return cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
