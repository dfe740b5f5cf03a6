package ladder

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
)

// ByLadder is the refuser named when no executor exists for a cell.
const ByLadder = "ladder"

// The verbs and backends of a default universe.
var (
	DefaultVerbs    = []string{"run", "logits", "qa"}
	DefaultBackends = []string{"ref", "cpu", "cuda"}
)

// Result is what an executor returns for one cell.
type Result struct {
	Verdict   verdict.Verdict
	Reason    string             // required for fail and refused: what failed, or why it was refused
	RemovedBy string             // refused only: the contract, falsifier or component id
	Detail    string             // optional longer text (a stack, a diff)
	Phases    map[string]float64 // seconds measured by the executor: load, prefill, decode …
	Values    []Value            // what was measured, with thresholds where one applies
}

// Value is one measured number with the threshold it was held to, where
// one applies: package verdict's.
type Value = verdict.Value

// Passed returns a pass with the measured values.
func Passed(values ...Value) Result { return Result{Verdict: verdict.Pass, Values: values} }

// Failed returns a fail whose reason is formatted.
func Failed(format string, args ...any) Result {
	return Result{Verdict: verdict.Fail, Reason: fmt.Sprintf(format, args...)}
}

// RefusedBy returns a refusal by by.
func RefusedBy(by, format string, args ...any) Result {
	return Result{Verdict: verdict.Refused, RemovedBy: by, Reason: fmt.Sprintf(format, args...)}
}

// FromOutcome is a cell's result from a check's outcome: its verdict,
// reason, refuser and values; its details joined into Detail.
func FromOutcome(o verdict.Outcome) Result {
	r := Result{Verdict: o.Verdict, Reason: o.Reason, Values: o.Values, Detail: strings.Join(o.Details, "; ")}
	if o.Verdict == verdict.Refused {
		r.RemovedBy = o.RemovedBy
	}
	return r
}

// FromError turns an error into a result: a *refuse.Error becomes refused
// by its id, anything else a fail with the error's message.
func FromError(err error) Result {
	if r, ok := refuse.As(err); ok {
		return Result{Verdict: verdict.Refused, RemovedBy: r.By, Reason: r.Reason}
	}
	return Result{Verdict: verdict.Fail, Reason: err.Error()}
}

// normalize makes a result recordable: a verdict outside the three, a fail
// or refusal without a reason, a refusal without a refuser and non-finite
// values are turned into what they honestly are.
func (r Result) normalize() Result {
	switch r.Verdict {
	case verdict.Pass, verdict.Fail, verdict.Refused:
	default:
		return Result{Verdict: verdict.Fail, Reason: fmt.Sprintf("executor returned verdict %q (want pass, fail or refused)", r.Verdict),
			Values: r.Values, Phases: r.Phases}
	}
	if r.Verdict != verdict.Pass && strings.TrimSpace(r.Reason) == "" {
		r.Reason = fmt.Sprintf("executor returned %s without a reason", r.Verdict)
	}
	if r.Verdict == verdict.Refused && r.RemovedBy == "" {
		r.RemovedBy = "unnamed"
		r.Reason += " (the executor named no refuser)"
	}
	if r.Verdict != verdict.Refused {
		r.RemovedBy = ""
	}
	var bad []string
	r.Values = slices.Clone(r.Values)
	for i := range r.Values {
		v := &r.Values[i]
		if *v = v.Finite(); v.NonFinite != "" {
			bad = append(bad, v.Name+"="+v.NonFinite)
		}
	}
	for k, s := range r.Phases {
		if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			bad = append(bad, fmt.Sprintf("phase %s=%v s", k, s))
			delete(r.Phases, k)
		}
	}
	if len(bad) > 0 && r.Verdict == verdict.Pass {
		sort.Strings(bad)
		r.Verdict, r.Reason = verdict.Fail, "measured a non-finite or negative value: "+strings.Join(bad, ", ")
	}
	return r
}

// CellFunc executes one cell: verb on model m with the named backend. It
// must honour ctx (each cell has a deadline) and return a Result; a panic is
// caught and becomes the cell's fail.
type CellFunc func(ctx context.Context, m *Model, backend string) Result

// Executors maps (verb, backend) to the function that executes it. The zero
// value is empty and ready; a cell without an executor is refused by name.
type Executors struct {
	m map[string]map[string]CellFunc
}

// Register sets the executor of verb on each backend. Registering a pair
// twice replaces it.
func (e *Executors) Register(verb string, fn CellFunc, backends ...string) {
	if fn == nil || verb == "" || len(backends) == 0 {
		panic("ladder: Register needs a verb, a function and at least one backend")
	}
	if e.m == nil {
		e.m = map[string]map[string]CellFunc{}
	}
	if e.m[verb] == nil {
		e.m[verb] = map[string]CellFunc{}
	}
	for _, b := range backends {
		e.m[verb][b] = fn
	}
}

// Lookup returns the executor of (verb, backend), or a refusal that names
// what is missing.
func (e *Executors) Lookup(verb, backend string) (CellFunc, *refuse.Error) {
	var byVerb map[string]CellFunc
	if e != nil {
		byVerb = e.m[verb]
	}
	if len(byVerb) == 0 {
		return nil, refuse.New(ByLadder, "no executor for verb %s", verb)
	}
	fn, ok := byVerb[backend]
	if !ok {
		have := make([]string, 0, len(byVerb))
		for b := range byVerb {
			have = append(have, b)
		}
		sort.Strings(have)
		return nil, refuse.New(ByLadder, "no executor for verb %s on backend %s (it has: %s)", verb, backend, strings.Join(have, ", "))
	}
	return fn, nil
}

// Gate decides before a cell runs whether a contract excludes it (a backend
// or quant type the contract does not cover). A non-nil refusal's By is the
// contract or falsifier id; the cell is refused with it, visibly.
type Gate func(m *Model, verb, backend string) *refuse.Error

// Cell is one recorded cell: what ran, on what, and how it ended.
type Cell struct {
	ID              string          `json:"id"` // model key | verb | backend
	Model           CellModel       `json:"model"`
	Arch            string          `json:"arch,omitempty"`        // the model's general.architecture
	WeightType      string          `json:"weight_type,omitempty"` // the model's dominant tensor type (Header.DominantType)
	Verb            string          `json:"verb"`
	Backend         string          `json:"backend"`
	Verdict         verdict.Verdict `json:"verdict"`
	Reason          string          `json:"reason,omitempty"`
	RemovedBy       string          `json:"removed_by,omitempty"`
	Detail          string          `json:"detail,omitempty"`
	Timings         Timings         `json:"timings"`
	Values          []Value         `json:"values,omitempty"`
	Shard           string          `json:"shard"`            // the shard whose run produced it, "K/N"
	Binary          string          `json:"binary_sha256"`    // the executable that produced it
	ContractsDigest string          `json:"contracts_digest"` // the contracts it was judged under
}

// CellModel identifies the model object of a cell.
type CellModel struct {
	Key    string `json:"key"`
	Path   string `json:"path"`
	Target string `json:"target,omitempty"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256,omitempty"` // empty only for a model refused before it could be read
}

// Timings are the cell's measured times. Started and Wall are the runner's;
// Phases are the executor's own (load, prefill, decode …).
type Timings struct {
	Started     time.Time          `json:"started"`
	WallSeconds float64            `json:"wall_s"`
	Phases      map[string]float64 `json:"phases_s,omitempty"`
}

// CellID joins the parts of a cell's identity.
func CellID(modelKey, verb, backend string) string { return modelKey + "|" + verb + "|" + backend }

// Verbs returns the verbs that have an executor on some backend, sorted.
func (e *Executors) Verbs() []string {
	if e == nil {
		return nil
	}
	out := make([]string, 0, len(e.m))
	for v, byBackend := range e.m {
		if len(byBackend) > 0 {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// Backends returns the backends that have an executor for some verb, sorted.
func (e *Executors) Backends() []string {
	if e == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, byBackend := range e.m {
		for b := range byBackend {
			if !seen[b] {
				seen[b] = true
				out = append(out, b)
			}
		}
	}
	sort.Strings(out)
	return out
}
