package qa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/internal/hostinfo"
	"github.com/aprqa/apr/verdict"
)

// StatusRefusedOptional is the status of a refused gate whose refusal the
// contract marks optional.
const StatusRefusedOptional = "refused-optional"

// The gates, in the order they run.
const (
	GateTensorContract = "tensor_contract"
	GateMetadata       = "metadata_plausibility"
	GateTokenizer      = "tokenizer"
	GateTemplate       = "template"
	GateGolden         = "golden_output"
	GateParity         = "parity"
	GateFailClosed     = "failclosed"
	GateGPUCPU         = "gpu_cpu"
	GateF2             = "f2"
	GateTiming         = "timing"
	GateThroughput     = "throughput"
	// GateKLD runs only when a base file is given (Options.KLDBase, apr qa
	// --kld-base) or the gate is selected by name.
	GateKLD = "kld"
	// GateServing holds apr serve to apr run: concurrent requests to the
	// server on the backend give the ids of the same requests run alone
	// (verb.serve's serve.parity), so the receipt covers the shape users
	// run, not only the CLI's.
	GateServing = "serving"
)

// Gates lists every gate in order.
func Gates() []string {
	return []string{GateTensorContract, GateMetadata, GateTokenizer, GateTemplate, GateGolden,
		GateParity, GateFailClosed, GateF2, GateGPUCPU, GateTiming, GateThroughput, GateServing, GateKLD}
}

// The code each gate's contract falsifier carries (schema #Falsifier.code).
var gateCode = map[string]string{
	GateTensorContract: "tensor_contract",
	GateMetadata:       "metadata_plausibility",
	GateTokenizer:      "tokenizer_roundtrip",
	GateTemplate:       "chat_template",
	GateGolden:         "golden_output",
	GateParity:         "engine_parity",
	GateFailClosed:     "failclosed",
	GateGPUCPU:         "gpu_cpu",
	GateF2:             "f2",
	GateTiming:         "timing",
	GateThroughput:     "throughput",
	GateKLD:            "kld",
	GateServing:        FalsifierServeParity,
}

// perBackend reports whether a gate runs once per backend.
func perBackend(gate string) bool {
	switch gate {
	case GateGolden, GateParity, GateFailClosed, GateF2, GateGPUCPU, GateTiming, GateThroughput, GateServing, GateKLD:
		return true
	}
	return false
}

// againstReference reports whether a per-backend gate compares the backend
// with the reference (and so skips the reference itself).
func againstReference(gate string) bool { return gate == GateParity || gate == GateFailClosed }

// Refusal codes: why a gate did not decide. A contract may list some of them
// as optional for a gate (params.optional_refusals).
const (
	CodeNoContract   = verdict.CodeNoContract      // the contract set has no falsifier (or threshold) for the gate
	CodeBackend      = falsify.RefusalBackend      // the gated backend is not in this build, or refused the model
	CodeReference    = "reference_unavailable"     // the reference could not run or gave unusable output
	CodeModel        = falsify.RefusalModel        // the model (or its tokenizer) was refused before the gate could run
	CodeNoTemplate   = falsify.RefusalNoTemplate   // the model carries no chat template
	CodeNoGolden     = "no_golden"                 // no reviewed golden for this model (reference backend)
	CodeNoBaseline   = falsify.RefusalNoBaseline   // no comparable throughput baseline for (model, host, backend)
	CodeBaselineFile = falsify.RefusalBaselineFile // the baseline file exists but cannot be read
	CodeTooNoisy     = falsify.RefusalTooNoisy     // the runs vary more than the contract's bound
	CodeUndecided    = falsify.RefusalUndecided    // the confidence interval straddles the threshold
	CodeRecorded     = falsify.RefusalRecorded     // --accept-baseline recorded the first baseline: nothing compared yet
)

// Value is one measured number and, where the contract holds it to one, its
// threshold ("<= 42", ">= 0.9999"): package verdict's.
type Value = verdict.Value

// Gate is one gate's result.
type Gate struct {
	Name      string          `json:"gate"`
	Backend   string          `json:"backend,omitempty"`   // per-backend gates
	Falsifier string          `json:"falsifier,omitempty"` // the contract falsifier it was held to
	Verdict   verdict.Verdict `json:"verdict"`
	// Status is the verdict as shown: pass, fail, refused or refused-optional.
	Status     string   `json:"status"`
	Optional   bool     `json:"optional,omitempty"` // refused, and the contract marks this refusal optional
	Code       string   `json:"code,omitempty"`     // refusal code
	By         string   `json:"by,omitempty"`       // who refused
	Reason     string   `json:"reason,omitempty"`   // what failed, or why it was refused
	Values     []Value  `json:"values"`
	Details    []string `json:"details,omitempty"` // what the falsifiers noted (violations, mismatches, per-stage moves)
	DurationMS float64  `json:"duration_ms"`
}

// Passed reports whether the gate counts as passed: pass, or a refusal the
// contract marks optional.
func (g Gate) Passed() bool {
	return g.Verdict == verdict.Pass || (g.Verdict == verdict.Refused && g.Optional)
}

// Executed reports whether the gate ran to a decision (pass or fail).
func (g Gate) Executed() bool { return g.Verdict == verdict.Pass || g.Verdict == verdict.Fail }

// ModelReport is every gate of one model.
type ModelReport struct {
	Path     string   `json:"path"`
	Name     string   `json:"name"`
	SHA256   string   `json:"sha256"`
	Bytes    int64    `json:"bytes"`
	Arch     string   `json:"arch"`
	Synth    string   `json:"synthesized,omitempty"` // how apr made it, for the embedded default models
	Backends []string `json:"backends"`
	Gates    []Gate   `json:"gates"`
}

// Counts tallies gates by status.
type Counts struct {
	Pass            int `json:"pass"`
	Fail            int `json:"fail"`
	Refused         int `json:"refused"`
	RefusedOptional int `json:"refused_optional"`
}

// Report is the outcome of one qa run.
type Report struct {
	// Passed is true when every gate passed (refused-optional included)
	// and at least MinGates gates were executed.
	Passed          bool            `json:"passed"`
	Summary         string          `json:"summary"`
	Counts          Counts          `json:"counts"`
	Executed        int             `json:"gates_executed"`
	MinGates        int             `json:"min_gates"`
	Seed            int64           `json:"seed"` // of the randomized falsifiers: --seed reproduces the run
	Reference       string          `json:"reference"`
	ContractsDigest string          `json:"contracts_digest"`
	Host            falsify.HostKey `json:"host"`
	BaselineFile    string          `json:"baseline_file"`
	Models          []ModelReport   `json:"models"`
	// NotGated are the linked backends left out of a run that named none
	// because they cannot run on this machine (cuda without a device),
	// with the reason: not gated is not passed, and naming the backend
	// with --backend gates it (and refuses it).
	NotGated []NotGated `json:"not_gated"`
	// AcceptedRefusals are the refused gates (gate[backend]) the caller
	// accepted in advance (apr qa --allow-refused): listed, never passed,
	// and not counted against Passed.
	AcceptedRefusals []string `json:"accepted_refusals"`
	DurationMS       float64  `json:"duration_ms"`
}

// NotGated is a backend a default run left out, and why.
type NotGated struct {
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

// Gates returns every gate of every model, in order.
func (r *Report) Gates() []Gate {
	var out []Gate
	for _, m := range r.Models {
		out = append(out, m.Gates...)
	}
	return out
}

// Options configure a qa run.
type Options struct {
	// Model is the GGUF file to gate; "" gates the embedded default: a tiny
	// model of every architecture, synthesized into a temporary directory.
	Model string
	// SynthDir is where the default models are synthesized when Model is
	// "" ("": a temporary directory qa removes). The caller owns it: the
	// CLI removes it even when an interrupt ends apr before Run returns.
	SynthDir string
	// Backends are the backends gated; nil means every backend this binary
	// links (model.Backends()) that can run on this machine
	// (model.Available); the others are listed in Report.NotGated with the
	// reason. A named backend that is not available is gated anyway: each
	// of its gates is refused with the reason.
	Backends []string
	// Reference is the backend that judges the others ("" means "ref").
	Reference string
	// Gates restricts the run to these gates (nil: all), still in order.
	Gates []string
	// Contracts is the contract set the gates are held to (nil: embedded).
	Contracts *contracts.Set
	// Registry holds the falsifier code the gates run (nil: Registry(),
	// falsify's code and qa's).
	Registry *falsify.Registry
	// BaselineFile holds throughput baselines ("" means DefaultBaselineFile).
	BaselineFile string
	// AcceptBaseline records a baseline where none exists and raises one
	// that the runs show to be exceeded; it never lowers one.
	AcceptBaseline bool
	// KLDBase is a llama.cpp base file (--kl-divergence-base layout): with
	// it, the kld gate compares every backend with it over its tokens.
	KLDBase string
	// MinGates: fewer executed gates than this is a failure.
	MinGates int
	// Threads is passed to every backend (0: its choice).
	Threads int
	// Seed seeds the randomized (property) falsifiers; 0 means one from the
	// clock. The report records it, so a failure reproduces with it.
	Seed int64
	// Host identifies this machine for baselines (zero value: probed).
	Host *hostinfo.Host
	// Progress, when set, is called with each gate as it finishes.
	Progress func(m *ModelReport, g Gate)
	// ModelDone, when set, is called with each model's report as its last
	// gate finishes.
	ModelDone func(m *ModelReport)
	Log       *slog.Logger

	hooks *hooks
}

// defaults fills what the caller left out: the logger, the reference, the
// hooks, the embedded contracts, the default registry and baseline file.
func (o *Options) defaults() error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Reference == "" {
		o.Reference = "ref"
	}
	if o.hooks == nil {
		o.hooks = &hooks{} // nil hooks: falsify.Engines' defaults (generate.Run, …)
	}
	if o.Registry == nil {
		o.Registry = Registry()
	}
	if o.Contracts == nil {
		set, err := contracts.Embedded()
		if err != nil {
			return err
		}
		o.Contracts = set
	}
	if o.BaselineFile == "" {
		p, err := falsify.DefaultBaselineFile()
		if err != nil {
			return err
		}
		o.BaselineFile = p
	}
	return nil
}

// ErrNoGates is returned when Options.Gates names no known gate.
var ErrNoGates = errors.New("qa: no gate selected")

// Run gates opts.Model (or the embedded default models) and returns the
// report. The error is for inputs qa cannot gate at all (a missing or
// malformed file, an unknown gate name); everything a gate finds is in the
// report.
func Run(ctx context.Context, opts Options) (Report, error) {
	start := time.Now()
	for _, g := range opts.Gates {
		if !slices.Contains(Gates(), g) {
			return Report{}, fmt.Errorf("qa: unknown gate %q (gates: %s)", g, strings.Join(Gates(), ", "))
		}
	}
	if opts.Gates != nil && len(opts.Gates) == 0 {
		return Report{}, ErrNoGates
	}
	if opts.MinGates < 0 {
		return Report{}, fmt.Errorf("qa: min gates %d is negative", opts.MinGates)
	}
	if err := opts.defaults(); err != nil {
		return Report{}, err
	}
	var notGated []NotGated
	if opts.Backends == nil {
		for _, b := range model.Backends() {
			if err := model.Available(b); err != nil {
				notGated = append(notGated, NotGated{Backend: b, Reason: err.Error()})
				continue
			}
			opts.Backends = append(opts.Backends, b)
		}
	}
	opts.Backends = dedupe(opts.Backends)
	// The reference first: the other backends are judged against it.
	sort.SliceStable(opts.Backends, func(i, j int) bool {
		return opts.Backends[i] == opts.Reference && opts.Backends[j] != opts.Reference
	})
	host := falsify.ThisHost()
	if opts.Host != nil {
		host = falsify.HostKeyOf(*opts.Host)
	}
	if opts.Seed == 0 {
		opts.Seed = time.Now().UnixNano()
	}
	st := &state{opts: &opts, host: host}
	rep := Report{MinGates: opts.MinGates, Seed: opts.Seed, Reference: opts.Reference, ContractsDigest: opts.Contracts.Digest(),
		Host: st.host, BaselineFile: opts.BaselineFile, Models: []ModelReport{}, NotGated: notGated}
	if rep.NotGated == nil {
		rep.NotGated = []NotGated{}
	}

	type target struct{ path, synth string }
	var targets []target
	if opts.Model != "" {
		targets = append(targets, target{path: opts.Model})
	} else {
		dir := opts.SynthDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "apr-qa-")
			if err != nil {
				return Report{}, fmt.Errorf("qa: %w", err)
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
		models, err := SynthDefaults(dir)
		if err != nil {
			return Report{}, err
		}
		for _, m := range models {
			targets = append(targets, target{path: m.Path, synth: m.How})
		}
	}
	for _, t := range targets {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		mr, err := gateModel(ctx, st, t.path, t.synth)
		if err != nil {
			return Report{}, err
		}
		rep.Models = append(rep.Models, mr)
		if opts.ModelDone != nil {
			opts.ModelDone(&rep.Models[len(rep.Models)-1])
		}
	}
	rep.finish()
	rep.DurationMS = ms(time.Since(start))
	return rep, nil
}

// finish computes counts, the executed total and the overall verdict.
func (r *Report) finish() {
	r.Counts = Counts{}
	r.Executed = 0
	for _, g := range r.Gates() {
		switch {
		case g.Verdict == verdict.Pass:
			r.Counts.Pass++
		case g.Verdict == verdict.Fail:
			r.Counts.Fail++
		case g.Optional:
			r.Counts.RefusedOptional++
		default:
			r.Counts.Refused++
		}
		if g.Executed() {
			r.Executed++
		}
	}
	r.Passed = r.Counts.Fail == 0 && r.Counts.Refused == 0 && r.Executed >= r.MinGates && r.Executed > 0
	var why []string
	if r.Counts.Fail > 0 {
		why = append(why, fmt.Sprintf("%d failed", r.Counts.Fail))
	}
	if r.Counts.Refused > 0 {
		why = append(why, fmt.Sprintf("%d refused", r.Counts.Refused))
	}
	if r.Executed < r.MinGates {
		why = append(why, fmt.Sprintf("%d gates executed, fewer than --min-gates %d", r.Executed, r.MinGates))
	}
	if r.Executed == 0 {
		why = append(why, "no gate executed")
	}
	head := fmt.Sprintf("%d passed, %d failed, %d refused, %d refused-optional; %d executed (min %d)",
		r.Counts.Pass, r.Counts.Fail, r.Counts.Refused, r.Counts.RefusedOptional, r.Executed, r.MinGates)
	if r.Passed {
		r.Summary = head + ": PASS"
	} else {
		r.Summary = head + ": NOT PASSED (" + strings.Join(why, "; ") + ")"
	}
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			p = strings.TrimSpace(p)
			if p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// hooks replace how engines are run: tests plant defects through them; a
// nil hook is falsify.Engines' default.
type hooks struct {
	run    func(context.Context, generate.Options) (generate.Result, error)
	logits func(context.Context, generate.LogitsOptions) (generate.LogitsResult, error)
	// sloppyParity plants a parity that passes without its reference (the
	// failclosed gate's own test; falsify.Engines.SloppyParity).
	sloppyParity bool
	// golden finds a model's reviewed golden.
	golden func(sha string) (*golden.File, bool, error)
	// router traces the reference's router for the parity gate's near-ties
	// (nil: falsify.RouterProbs).
	router falsify.RouterFunc
}

// Outcome sums the report up as one outcome, for a ladder cell: fail when a
// gate failed or fewer than MinGates executed, refused (by the first refused
// gate's refuser) when none failed but a refusal counts, pass otherwise. The
// reason names every gate that did not pass; the values are the gate counts.
func (r *Report) Outcome() verdict.Outcome {
	var failed, refusedGates []string
	by := ""
	for _, m := range r.Models {
		for _, g := range m.Gates {
			name := g.Name
			if g.Backend != "" {
				name += "[" + g.Backend + "]"
			}
			if len(r.Models) > 1 {
				name = m.Name + ":" + name
			}
			switch {
			case g.Verdict == verdict.Fail:
				failed = append(failed, name+": "+g.Reason)
			case g.Verdict == verdict.Refused && !g.Optional:
				if by == "" {
					by = g.By
				}
				refusedGates = append(refusedGates, name+": "+g.Reason)
			}
		}
	}
	values := []Value{
		{Name: "gates_pass", Value: float64(r.Counts.Pass)},
		{Name: "gates_fail", Value: float64(r.Counts.Fail), Threshold: verdict.Limit("==", 0)},
		{Name: "gates_refused", Value: float64(r.Counts.Refused)},
		{Name: "gates_executed", Value: float64(r.Executed)},
	}
	switch {
	case len(failed) > 0 || r.Executed < r.MinGates || (r.Executed == 0 && len(refusedGates) == 0):
		return verdict.Failed(values, "%s", r.Summary+"; "+strings.Join(append(failed, refusedGates...), "; "))
	case len(refusedGates) > 0:
		return verdict.RefusedBy("", by, values, "%s", r.Summary+"; "+strings.Join(refusedGates, "; "))
	}
	return verdict.Passed(values...)
}
