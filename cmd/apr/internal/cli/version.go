package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/internal/buildinfo"
)

func init() {
	register(99, newVersionCmd)
	// apr --version prints versionLine(), computed only when asked (it
	// hashes the executable).
	cobra.AddTemplateFunc("aprVersion", versionLine)
}

// versionLine is what apr --version and apr version print:
// "apr <module> <version> <revision>[+dirty] <go version> sha256:<12 hex>".
func versionLine() string { return "apr " + buildinfo.Current().Short() }

func newVersionCmd(env *Env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's identity: revision, dirty flag, Go version, sha256",
		Long: `version prints the identity that receipts record for the binary that ran:
module, version, source revision (+dirty when built from a modified tree),
Go version, and the sha256 of the executable's bytes. --json prints every
field (build tags and settings, target, executable path). apr --version prints
the same one line.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			id := buildinfo.Current()
			if asJSON {
				return writeJSON(env.Stdout, id)
			}
			fmt.Fprintln(env.Stdout, versionLine())
			if id.Error != "" {
				fmt.Fprintf(env.Stderr, "apr: the executable could not be hashed: %s\n", id.Error)
			}
			return nil
		},
	}
	jsonFlag(c, &asJSON)
	return c
}
