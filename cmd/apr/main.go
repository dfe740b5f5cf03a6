// Command apr decides whether an LLM inference engine may ship.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
)

// envCPUProfile names a file for a Go CPU profile of the whole command (a
// developer's view of where host time goes, e.g. around a GPU's decode
// steps; read it with go tool pprof).
const envCPUProfile = "APR_CPUPROFILE"

func main() {
	if p := os.Getenv(envCPUProfile); p != "" {
		f, err := os.Create(p)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "apr: %s=%s: %v\n", envCPUProfile, p, err)
			os.Exit(2)
		}
		code := cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		pprof.StopCPUProfile()
		f.Close()
		os.Exit(code)
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
