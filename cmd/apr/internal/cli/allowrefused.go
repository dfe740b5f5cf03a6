package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// allowRefusedFlag adds --allow-refused, shared by ladder and qa: refusals
// the user accepts in advance, named by who refuses.
func allowRefusedFlag(c *cobra.Command, p *[]string) {
	c.Flags().StringSliceVar(p, "allow-refused", nil,
		"refusals accepted in advance, by refuser (comma-separated or repeated): a name matches itself and the names it prefixes before ':' or '/' "+
			"(backend, engine/cuda, contract:cpu-types, qa); an accepted refusal does not make the run exit 3")
}

// refusalAllowed reports whether a refusal by `by` was accepted in advance:
// one of allowed is by itself, or a prefix of it ending where by continues
// with ':' or '/' ("contract" accepts "contract:cpu-types").
func refusalAllowed(by string, allowed []string) bool {
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if by == a {
			return true
		}
		if strings.HasPrefix(by, a) && (by[len(a)] == ':' || by[len(a)] == '/') {
			return true
		}
	}
	return false
}
