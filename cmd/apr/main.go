// Command apr decides whether an LLM inference engine may ship.
package main

import (
	"os"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
