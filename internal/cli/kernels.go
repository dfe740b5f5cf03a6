package cli

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/schema"
)

func init() { register(33, newKernelsCmd) }

type kernelsOptions struct {
	JSON bool
}

// verdictNotRun is the only verdict apr kernels prints until falsifier
// results are recorded: a falsifier that has not run has not passed.
const verdictNotRun = "not run"

// kernelFalsifier is one falsifier that holds a kernel to its contract.
type kernelFalsifier struct {
	ID      string `json:"id"`
	Verdict string `json:"verdict"`
}

// kernelRow is one kernel of apr kernels' listing.
type kernelRow struct {
	cpu.KernelInfo
	KernelContract string            `json:"kernel_contract"`           // the contract it is held to ("kernel.q4_k")
	Unresolved     string            `json:"unresolved,omitempty"`      // why no contract holds it
	Tolerance      *schema.Tolerance `json:"tolerance,omitempty"`       // the op's tolerance in that contract
	Falsifiers     []kernelFalsifier `json:"falsifiers"`                // the contract's falsifiers and their verdicts
	FalsifierState string            `json:"falsifier_state,omitempty"` // summary: "not run" until results exist
}

func newKernelsCmd(env *Env) *cobra.Command {
	var opts kernelsOptions
	c := &cobra.Command{
		Use:   "kernels",
		Short: "List the CPU kernel registry and the contracts its kernels are held to",
		Long: `kernels lists every kernel of the CPU engine's registry: operation (matvec for
one activation row, matmul for many), weight type, instruction set, contract id,
the activation format it quantizes its input to, whether this machine can run
it, the kernel contract it resolves to and that contract's falsifiers.

Falsifier verdicts are "not run": this command does not run falsifiers (apr
falsify does), and a falsifier that has not run is never reported as passed.
A kernel whose id resolves to no contract is listed with the reason.

With --json, stdout carries one array of objects.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runKernels(env, opts) },
	}
	jsonFlag(c, &opts.JSON)
	return c
}

func kernelRows() ([]kernelRow, error) {
	set, err := contracts.Embedded()
	if err != nil {
		return nil, err
	}
	var rows []kernelRow
	for _, k := range cpu.Kernels() {
		r := kernelRow{KernelInfo: k, Falsifiers: []kernelFalsifier{}, FalsifierState: verdictNotRun}
		kc, op, err := set.ResolveKernel(k.Contract)
		if err != nil {
			r.Unresolved = err.Error()
			r.FalsifierState = "no contract"
		} else {
			r.KernelContract = kc.ID
			if o, ok := kc.Ops[op]; ok {
				tol := o.Tolerance
				r.Tolerance = &tol
			}
			for _, f := range kc.Falsifiers {
				if f.Binds == "" || f.Binds == kc.ID || f.Binds == k.Contract {
					r.Falsifiers = append(r.Falsifiers, kernelFalsifier{ID: f.ID, Verdict: verdictNotRun})
				}
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func runKernels(env *Env, opts kernelsOptions) error {
	rows, err := kernelRows()
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(env.Stdout, rows)
	}
	w := bufio.NewWriter(env.Stdout)
	fmt.Fprintf(w, "%-7s %-8s %-11s %-5s %-8s %-14s %-4s %s\n", "op", "type", "isa", "act", "runnable", "contract", "fals", "verdicts")
	runnable := 0
	for _, r := range rows {
		run := "no"
		if r.Runnable {
			run = "yes"
			runnable++
		}
		kc := r.KernelContract
		if kc == "" {
			kc = "(none)"
		}
		verdict := r.FalsifierState
		if len(r.Falsifiers) > 0 {
			verdict = fmt.Sprintf("%d %s", len(r.Falsifiers), verdictNotRun)
		}
		fmt.Fprintf(w, "%-7s %-8s %-11s %-5s %-8s %-14s %-4d %s\n", r.Op, r.Type, r.ISA, r.Act, run, kc, len(r.Falsifiers), verdict)
		if r.Unresolved != "" {
			fmt.Fprintf(w, "        unresolved: %s\n", strings.TrimSpace(r.Unresolved))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "%d kernels, %d runnable on this machine; falsifier verdicts: not run (apr falsify runs them)\n", len(rows), runnable)
	return nil
}
