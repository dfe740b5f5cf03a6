package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"github.com/spf13/cobra"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/ladder"
	"github.com/aprqa/apr/refuse"
)

func init() { register(40, newContractsCmd) }

func newContractsCmd(env *Env) *cobra.Command {
	c := &cobra.Command{
		Use:   "contracts",
		Short: "Check, list and show the contracts falsifiers hold engines to",
		Long: `contracts works with apr's contracts: CUE data, embedded in the binary, that
describe each architecture (model.*), each ggml weight type (kernel.*) and
each verb's output (verb.*), and name the falsifiers that check them.

  apr contracts vet [DIR]   check the embedded contracts, or a directory of .cue
                            files (a complete set, e.g. a checkout's contracts/)
  apr contracts list        every contract and its falsifiers
  apr contracts show ID     one contract (or falsifier) as canonical CUE`,
	}
	c.AddCommand(newContractsVetCmd(env), newContractsListCmd(env), newContractsShowCmd(env))
	return c
}

// loadContracts loads dir, or the embedded contracts when dir is "".
func loadContracts(dir string) (*contracts.Set, error) {
	if dir == "" {
		return contracts.Embedded()
	}
	return contracts.LoadDir(dir)
}

type contractsVetOptions struct {
	Dir  string
	JSON bool
}

// VetReport is what apr contracts vet --json prints.
type VetReport struct {
	OK         bool                `json:"ok"`
	Source     string              `json:"source"`
	Digest     string              `json:"digest,omitempty"`
	Contracts  int                 `json:"contracts"`
	Falsifiers int                 `json:"falsifiers"`
	Bound      []string            `json:"bound"` // registered codes the contracts use
	Problems   []contracts.Problem `json:"problems"`
}

func newContractsVetCmd(env *Env) *cobra.Command {
	var opts contractsVetOptions
	c := &cobra.Command{
		Use:   "vet [DIR]",
		Short: "Check contracts: schema, ids, expressions, and that every falsifier resolves to code and back",
		Long: `vet loads the embedded contracts (or DIR's .cue files, package contracts,
against the embedded schema) and fails (exit 1) when a contract does not
validate, two contracts or falsifiers share an id, a falsifier names code that
is not registered or of another kind, a threshold or param the code needs is
missing, a registered falsifier is used by no contract (dead code), or a
kernel id an engine's kernel registry names does not resolve. Every problem is
printed with its position.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Dir = args[0]
			}
			return runContractsVet(env, opts)
		},
	}
	jsonFlag(c, &opts.JSON)
	return c
}

func runContractsVet(env *Env, opts contractsVetOptions) error {
	rep := VetReport{Source: "embedded", Bound: []string{}, Problems: []contracts.Problem{}}
	if opts.Dir != "" {
		rep.Source = opts.Dir
	}
	set, err := loadContracts(opts.Dir)
	var ce *contracts.Error
	switch {
	case errors.As(err, &ce):
		rep.Problems = ce.Problems
	case err != nil:
		return badInput(err)
	default:
		rep.Digest = set.Digest()
		rep.Contracts = len(set.IDs())
		rep.Falsifiers = len(set.Falsifiers)
		rep.Problems = append(rep.Problems, falsify.Vet(set, registry())...)
		used := map[string]bool{}
		for _, f := range set.Falsifiers {
			if _, ok := registry().Lookup(f.Code); ok && !used[f.Code] {
				used[f.Code] = true
				rep.Bound = append(rep.Bound, f.Code)
			}
		}
	}
	rep.OK = len(rep.Problems) == 0
	for _, p := range rep.Problems {
		fmt.Fprintln(env.Stderr, p)
	}
	if rep.OK {
		fmt.Fprintf(env.Stderr, "contracts vet: %s: %d contracts, %d falsifiers, %d codes bound (%s); digest %s\n",
			rep.Source, rep.Contracts, rep.Falsifiers, len(rep.Bound), strings.Join(slices.Sorted(slices.Values(rep.Bound)), " "), rep.Digest)
	} else {
		fmt.Fprintf(env.Stderr, "contracts vet: %s: %s\n", rep.Source, plural(len(rep.Problems), "problem", "problems"))
	}
	if opts.JSON {
		if err := writeJSON(env.Stdout, rep); err != nil {
			return err
		}
	}
	if !rep.OK {
		return ErrCheckFailed
	}
	return nil
}

type contractsListOptions struct {
	JSON bool
}

// ContractsList is what apr contracts list --json prints.
type ContractsList struct {
	Digest     string              `json:"digest"`
	Contracts  []contracts.Entry   `json:"contracts"`
	Falsifiers []FalsifierListItem `json:"falsifiers"`
}

// FalsifierListItem is one falsifier in apr contracts list --json.
type FalsifierListItem struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Code    string `json:"code"`
	Binds   string `json:"binds"`
	Bound   bool   `json:"bound"` // its code is registered in this binary
	Summary string `json:"summary"`
}

func newContractsListCmd(env *Env) *cobra.Command {
	var opts contractsListOptions
	c := &cobra.Command{
		Use:   "list",
		Short: "List every contract and falsifier",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, args []string) error { return runContractsList(env, opts) },
	}
	jsonFlag(c, &opts.JSON)
	return c
}

func runContractsList(env *Env, opts contractsListOptions) error {
	set, err := contracts.Embedded()
	if err != nil {
		return err
	}
	out := ContractsList{Digest: set.Digest(), Contracts: set.List(), Falsifiers: []FalsifierListItem{}}
	for _, f := range set.Falsifiers {
		_, bound := registry().Lookup(f.Code)
		out.Falsifiers = append(out.Falsifiers, FalsifierListItem{ID: f.ID, Kind: f.Kind, Code: f.Code, Binds: f.Binds, Bound: bound, Summary: f.Summary})
	}
	if opts.JSON {
		return writeJSON(env.Stdout, out)
	}
	w := bufio.NewWriter(env.Stdout)
	fmt.Fprintf(w, "%-16s %4s  %s\n", "CONTRACT", "FALS", "SUMMARY")
	for _, e := range out.Contracts {
		fmt.Fprintf(w, "%-16s %4d  %s\n", e.ID, len(e.Falsifiers), e.Summary)
	}
	fmt.Fprintf(w, "\n%-40s %-10s %-22s %-16s %s\n", "FALSIFIER", "KIND", "CODE", "BINDS", "BOUND")
	for _, f := range out.Falsifiers {
		fmt.Fprintf(w, "%-40s %-10s %-22s %-16s %v\n", f.ID, f.Kind, f.Code, f.Binds, f.Bound)
	}
	fmt.Fprintf(w, "\ndigest %s\n", set.Digest())
	return w.Flush()
}

type contractsShowOptions struct {
	ID   string
	JSON bool
}

func newContractsShowCmd(env *Env) *cobra.Command {
	var opts contractsShowOptions
	c := &cobra.Command{
		Use:   "show ID",
		Short: "Print one contract as canonical CUE (defaults filled in), or one falsifier",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			return runContractsShow(env, opts)
		},
	}
	jsonFlag(c, &opts.JSON)
	return c
}

func runContractsShow(env *Env, opts contractsShowOptions) error {
	set, err := contracts.Embedded()
	if err != nil {
		return err
	}
	if f, ok := set.Falsifier(opts.ID); ok {
		if opts.JSON {
			return writeJSON(env.Stdout, f)
		}
		return contractsWriteFalsifier(env.Stdout, f, set.Pos(f.ID))
	}
	text, ok := set.Show(opts.ID)
	if !ok {
		return badInputf("contracts show: %q is not a contract or falsifier id (apr contracts list shows them)", opts.ID)
	}
	if opts.JSON {
		return writeJSON(env.Stdout, contractValue(set, opts.ID))
	}
	fmt.Fprintf(env.Stdout, "// %s (%s)\n%s", opts.ID, set.Pos(opts.ID), text)
	if !strings.HasSuffix(text, "\n") {
		fmt.Fprintln(env.Stdout)
	}
	return nil
}

// contractValue returns the decoded contract id (for --json).
func contractValue(set *contracts.Set, id string) any {
	g, n, _ := strings.Cut(id, ".")
	switch g {
	case contracts.GroupModel:
		return set.Contracts.Model[n]
	case contracts.GroupKernel:
		return set.Contracts.Kernel[n]
	case contracts.GroupVerb:
		return set.Contracts.Verb[n]
	}
	return nil
}

// contractsWriteFalsifier prints a falsifier as CUE, as the README and
// --help promise (--json prints it as JSON).
func contractsWriteFalsifier(w io.Writer, f any, pos string) error {
	v := cuecontext.New().Encode(f)
	if err := v.Err(); err != nil {
		return err
	}
	b, err := format.Node(v.Syntax(cue.Final(), cue.Concrete(true)))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "// falsifier (%s)\n%s", pos, b)
	if len(b) == 0 || b[len(b)-1] != '\n' {
		fmt.Fprintln(w)
	}
	return nil
}

// ladderGateContracts switches on contractsGate for apr ladder. It is off
// until the ladder's tests (which plant header-only models) can swap it.
var ladderGateContracts = true

// ladderContracts supplies the ladder's contracts: it runs under the
// embedded ones, its receipts carry their digest, and with
// ladderGateContracts a cell whose model the contracts exclude is refused by
// the contract's id before it runs.
func ladderContracts() (digest string, gate ladder.Gate, err error) {
	set, err := contracts.Embedded()
	if err != nil {
		return "", nil, err
	}
	if !ladderGateContracts {
		return set.Digest(), nil, nil
	}
	return set.Digest(), contractsGate(set), nil
}

// contractsGate refuses a cell whose model has no model contract, breaks it
// (any violation of contracts.CheckModel), or holds a tensor type with no
// kernel contract. The check runs once per model object.
func contractsGate(set *contracts.Set) ladder.Gate {
	var mu sync.Mutex
	decided := map[*ladder.Model]*refuse.Error{}
	return func(m *ladder.Model, verb, backend string) *refuse.Error {
		mu.Lock()
		defer mu.Unlock()
		if r, ok := decided[m]; ok {
			return r
		}
		r := gateModel(set, m)
		decided[m] = r
		return r
	}
}

func gateModel(set *contracts.Set, m *ladder.Model) *refuse.Error {
	f, err := m.File()
	if err != nil {
		return nil // the cell reads the file itself and reports the error
	}
	arch := f.Architecture()
	mc, ok := set.Model(arch)
	if !ok {
		return refuse.New("contracts", "no model contract for architecture %q (contracts %.12s)", arch, set.Digest())
	}
	r, err := contracts.CheckModel(mc, f)
	if err != nil {
		return refuse.Wrap(mc.ID, err)
	}
	if n := len(r.Violations); n > 0 {
		return refuse.New(mc.ID, "the model breaks its contract (%d violations; first: %s)", n, r.Violations[0])
	}
	for i := range f.Tensors {
		if _, ok := set.Kernel(f.Tensors[i].Type); !ok {
			return refuse.New("contracts", "tensor %s is %s, a type no kernel contract covers", f.Tensors[i].Name, f.Tensors[i].Type)
		}
	}
	return nil
}

// plural says "1 problem", "2 problems".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
