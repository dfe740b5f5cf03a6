package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// Shared flags are declared and validated here, once: a value that makes no
// sense is refused while the flags are parsed, as bad usage (exit 2), by
// every verb that takes the flag alike.

// threadsFlag adds --threads: 0 lets the backend choose; negative counts
// are refused.
func threadsFlag(fs *pflag.FlagSet, p *int, usage string) {
	fs.Var((*countValue)(p), "threads", usage)
}

// countValue is an int flag that refuses negative values.
type countValue int

func (v *countValue) String() string { return strconv.Itoa(int(*v)) }
func (v *countValue) Type() string   { return "int" }

func (v *countValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if n < 0 {
		return fmt.Errorf("%d is negative (0 lets the backend choose)", n)
	}
	*v = countValue(n)
	return nil
}
