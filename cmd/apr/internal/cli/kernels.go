package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

func init() { register(33, newKernelsCmd) }

type kernelsOptions struct {
	NoRun    bool
	Fixtures string
	Seed     int64
	SeedSet  bool
	JSON     bool
}

// verdictNotRun is the verdict of a falsifier that did not run (--no-run,
// an input it needs is missing, or the kernel cannot run on this machine):
// it has not passed.
const verdictNotRun = "not run"

// kernelFalsifier is one falsifier that holds a kernel to its contract, and
// its verdict for this kernel: pass, fail, refused or not run.
type kernelFalsifier struct {
	ID      string `json:"id"`
	Code    string `json:"code"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"` // why it failed, was refused or did not run
	Seed    *int64 `json:"seed,omitempty"`   // a property falsifier's seed (--seed reproduces it)
}

// kernelRow is one kernel of apr kernels' listing.
type kernelRow struct {
	cpu.KernelInfo
	KernelContract string            `json:"kernel_contract"`           // the contract it is held to ("kernel.q4_k")
	Unresolved     string            `json:"unresolved,omitempty"`      // why no contract holds it
	Tolerance      *schema.Tolerance `json:"tolerance,omitempty"`       // the op's tolerance in that contract
	Falsifiers     []kernelFalsifier `json:"falsifiers"`                // the contract's falsifiers and their verdicts
	FalsifierState string            `json:"falsifier_state,omitempty"` // summary of the verdicts ("5 pass", "4 pass, 1 not run")
}

func newKernelsCmd(env *Env) *cobra.Command {
	var opts kernelsOptions
	c := &cobra.Command{
		Use:   "kernels [--no-run] [--fixtures DIR] [--seed N] [--json]",
		Short: "List the CPU kernel registry with its kernel contracts' falsifier verdicts",
		Long: `kernels lists every kernel of the CPU engine's registry: operation (matvec for
one activation row, matmul for many), weight type, instruction set, contract id,
the activation format it quantizes its input to, whether this machine can run
it, the kernel contract it resolves to, and the verdict of each of that
contract's falsifiers.

The falsifiers of every kernel contract the registry resolves to run first
(through the same runner as apr falsify, in well under a second): kernel_dot
holds every kernel of the type that this machine runs to Σ dequant(w)·
dequant(act(x)) within the op's tolerance; the dequantizer and quantizer
falsifiers hold the type's format. A verdict is pass, fail (with the reason)
or refused (with who refused and why). "not run" is never a pass: it is shown
for every falsifier under --no-run, for kernel_dot on a kernel this machine
cannot run, and for falsifiers that need an input not given (the golden ones
need apr's shared fixtures: --fixtures DIR). Property falsifiers draw from
--seed (default: from the clock, and printed), which reproduces a failure.

A kernel whose id resolves to no contract is listed with the reason.

Exit codes: 0 no falsifier failed or was refused, 1 one failed, 3 none failed
but one was refused. With --json, stdout carries one array of objects.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			opts.SeedSet = c.Flags().Changed("seed")
			return runKernels(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.BoolVar(&opts.NoRun, "no-run", false, "list only: run no falsifier (every verdict \"not run\")")
	fl.StringVar(&opts.Fixtures, "fixtures", "", "apr's shared fixtures directory, for the falsifiers that need it")
	fl.Int64Var(&opts.Seed, "seed", 0, "seed of the property falsifiers (default: from the clock, and printed)")
	jsonFlag(c, &opts.JSON)
	return c
}

// cudaKernels lists the CUDA engine's product kernels as registry rows
// (runnable where the backend can run).
func cudaKernels() []cpu.KernelInfo {
	runnable := model.Available(cuda.Name) == nil
	var out []cpu.KernelInfo
	for _, id := range cuda.KernelIDs() {
		parts := strings.Split(id, ".")
		out = append(out, cpu.KernelInfo{Op: parts[1], Type: parts[2], Backend: cuda.Name, ISA: parts[4], Contract: id, Act: "F32", Runnable: runnable})
	}
	return out
}

// kernelRows lists the registry, each kernel resolved to its contract and
// that contract's falsifiers, all "not run".
func kernelRows(set *contracts.Set) []kernelRow {
	var rows []kernelRow
	for _, k := range append(cpu.Kernels(), cudaKernels()...) {
		r := kernelRow{KernelInfo: k, Falsifiers: []kernelFalsifier{}}
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
					r.Falsifiers = append(r.Falsifiers, kernelFalsifier{ID: f.ID, Code: f.Code, Verdict: verdictNotRun, Reason: "--no-run"})
				}
			}
			r.FalsifierState = verdictSummary(r.Falsifiers)
		}
		rows = append(rows, r)
	}
	return rows
}

// runKernelFalsifiers runs the falsifiers of every kernel contract the rows
// resolve to.
func runKernelFalsifiers(ctx context.Context, env *Env, set *contracts.Set, rows []kernelRow, opts kernelsOptions) (*falsify.Report, error) {
	seen := map[string]bool{}
	var ids []string
	for _, r := range rows {
		if r.KernelContract != "" && !seen[r.KernelContract] {
			seen[r.KernelContract] = true
			ids = append(ids, r.KernelContract)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return &falsify.Report{}, nil
	}
	return falsify.Run(ctx, falsify.Options{IDs: ids, Fixtures: opts.Fixtures, Seed: opts.Seed, Set: set, Registry: registry(), Log: env.Log})
}

// applyVerdicts writes the report's verdicts into the rows' falsifiers.
// kernel_dot judges every kernel of its type this machine runs at once: its
// verdict is each runnable kernel's, and a kernel this machine cannot run
// gets "not run" (kernel_dot skipped it), whatever the others did.
func applyVerdicts(rows []kernelRow, rep *falsify.Report) {
	results := map[string]falsify.Result{}
	for _, res := range rep.Results {
		results[res.ID] = res
	}
	notRun := map[string]string{}
	for _, n := range rep.NotRun {
		notRun[n.ID] = n.Why
	}
	for i := range rows {
		r := &rows[i]
		for j := range r.Falsifiers {
			f := &r.Falsifiers[j]
			res, ran := results[f.ID]
			switch {
			case f.Code == "kernel_dot" && r.Backend == cuda.Name:
				f.Verdict, f.Reason = verdictNotRun, "kernel_dot runs the CPU kernels (ggml's activation formats); the CUDA kernels (F32 activations) are held to Σ dequant(w)·x by engine/cuda's TestProducts on a GPU or the driver emulator"
			case f.Code == "kernel_dot" && !r.Runnable:
				f.Verdict, f.Reason = verdictNotRun, "this machine cannot run the kernel"
			case ran:
				f.Verdict, f.Reason, f.Seed = string(res.Verdict), res.Reason, res.Seed
				if res.Verdict == verdict.Refused && res.RemovedBy != "" {
					f.Reason = res.RemovedBy + ": " + res.Reason
				}
			default:
				f.Verdict, f.Reason = verdictNotRun, notRun[f.ID]
				if f.Reason == "" {
					f.Reason = "the runner did not select it"
				}
			}
		}
		if r.KernelContract != "" {
			r.FalsifierState = verdictSummary(r.Falsifiers)
		}
	}
}

// verdictSummary counts verdicts: "5 pass", "3 pass, 1 fail, 1 not run".
func verdictSummary(fs []kernelFalsifier) string {
	if len(fs) == 0 {
		return "no falsifiers"
	}
	n := map[string]int{}
	for _, f := range fs {
		n[f.Verdict]++
	}
	var parts []string
	for _, v := range []string{string(verdict.Pass), string(verdict.Fail), string(verdict.Refused), verdictNotRun} {
		if n[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[v], v))
		}
	}
	return strings.Join(parts, ", ")
}

func runKernels(ctx context.Context, env *Env, opts kernelsOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.NoRun && (opts.Fixtures != "" || opts.SeedSet) {
		return badInputf("kernels: --no-run runs no falsifier: --fixtures and --seed have nothing to apply to")
	}
	if opts.Fixtures != "" {
		if st, err := os.Stat(opts.Fixtures); err != nil || !st.IsDir() {
			return badInputf("kernels: --fixtures %s is not a directory", opts.Fixtures)
		}
	}
	set, err := contracts.Embedded()
	if err != nil {
		return err
	}
	rows := kernelRows(set)
	var rep *falsify.Report
	start := time.Now()
	if !opts.NoRun {
		if !opts.SeedSet {
			opts.Seed = time.Now().UnixNano()
		}
		if rep, err = runKernelFalsifiers(ctx, env, set, rows, opts); err != nil {
			return err
		}
		applyVerdicts(rows, rep)
	}
	if opts.JSON {
		if err := writeJSON(env.Stdout, rows); err != nil {
			return err
		}
	} else if err := printKernels(env.Stdout, rows); err != nil {
		return err
	}
	runnable := 0
	counts, notRunWhy := map[string]int{}, map[string]int{}
	for _, r := range rows {
		if r.Runnable {
			runnable++
		}
		for _, f := range r.Falsifiers {
			counts[f.Verdict]++
			if f.Verdict == verdictNotRun {
				notRunWhy[f.Reason]++
			}
		}
	}
	if rep == nil {
		fmt.Fprintf(env.Stderr, "%d kernels, %d runnable on this machine; falsifiers not run (--no-run)\n", len(rows), runnable)
		return nil
	}
	fmt.Fprintf(env.Stderr, "%d kernels, %d runnable on this machine; per kernel, falsifier verdicts: %d pass, %d fail, %d refused, %d not run (never counted as passed); %d falsifiers run in %.2f s, seed %d\n",
		len(rows), runnable, counts["pass"], counts["fail"], counts["refused"], counts[verdictNotRun], len(rep.Results), time.Since(start).Seconds(), opts.Seed)
	for _, why := range slices.Sorted(maps.Keys(notRunWhy)) {
		fmt.Fprintf(env.Stderr, "    not run %d× (per kernel): %s\n", notRunWhy[why], why)
	}
	switch {
	case rep.Summary.Fail > 0:
		fmt.Fprintf(env.Stderr, "kernels: %d falsifier(s) failed; reproduce with apr falsify ID --seed %d\n", rep.Summary.Fail, opts.Seed)
		return ErrCheckFailed
	case rep.Summary.Refused > 0:
		return refuse.New(falsify.ByRunner, "%d kernel falsifier(s) refused; a refusal is not a pass", rep.Summary.Refused)
	}
	return nil
}

func printKernels(out io.Writer, rows []kernelRow) error {
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "%-7s %-8s %-11s %-5s %-8s %-14s %s\n", "op", "type", "isa", "act", "runnable", "contract", "falsifier verdicts")
	for _, r := range rows {
		run := "no"
		if r.Runnable {
			run = "yes"
		}
		kc := r.KernelContract
		if kc == "" {
			kc = "(none)"
		}
		fmt.Fprintf(w, "%-7s %-8s %-11s %-5s %-8s %-14s %s\n", r.Op, r.Type, r.ISA, r.Act, run, kc, r.FalsifierState)
		if r.Unresolved != "" {
			fmt.Fprintf(w, "        unresolved: %s\n", strings.TrimSpace(r.Unresolved))
		}
		for _, f := range r.Falsifiers {
			if f.Verdict == string(verdict.Fail) || f.Verdict == string(verdict.Refused) {
				fmt.Fprintf(w, "        %s %s: %s\n", f.ID, strings.ToUpper(f.Verdict), f.Reason)
			}
		}
	}
	return w.Flush()
}
