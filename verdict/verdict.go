// Package verdict is apr's one vocabulary for how a check ended: the verdict
// (pass, fail or refused — never a skip that reads as a pass), a measured
// value with the threshold it was held to, and an outcome that carries both
// with the reason and, for a refusal, who refused. falsify's results, qa's
// gate rows and the ladder's cells are all written in it, and every
// threshold is printed by one function (FormatThreshold).
//
// # Conventions
//
// A value that is NaN or ±Inf cannot be written as a JSON number: Finite
// records it by name in NonFinite ("NaN", "+Inf", "-Inf") and zeroes Value,
// and a non-finite value never satisfies a threshold.
package verdict

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
)

// Verdict is how a check ended. There is no "skipped".
type Verdict string

// The three verdicts.
const (
	Pass    Verdict = "pass"
	Fail    Verdict = "fail"
	Refused Verdict = "refused"
)

// Valid reports whether v is one of the three verdicts.
func (v Verdict) Valid() bool { return v == Pass || v == Fail || v == Refused }

// rank orders verdicts from best to worst: pass, refused, fail.
func (v Verdict) rank() int {
	switch v {
	case Pass:
		return 0
	case Refused:
		return 1
	}
	return 2 // fail, and anything that is not a verdict
}

// Worse reports whether v is worse than w (fail is worse than refused, which
// is worse than pass).
func (v Verdict) Worse(w Verdict) bool { return v.rank() > w.rank() }

// Value is one measured number and, where a contract holds it to one, the
// threshold it was held to, as FormatThreshold prints it (">= 0.999").
type Value struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit,omitempty"`
	Threshold string  `json:"threshold,omitempty"`
	// NonFinite holds "NaN", "+Inf" or "-Inf" when the value was not finite
	// (JSON has no such numbers); Value is 0 then.
	NonFinite string `json:"non_finite,omitempty"`
}

// Finite returns v recordable as JSON: a NaN or infinite Value moves into
// NonFinite by name and Value becomes 0. A finite value is returned as is.
func (v Value) Finite() Value {
	if s := NonFinite(v.Value); s != "" {
		v.NonFinite, v.Value = s, 0
	}
	return v
}

// NonFinite names a value JSON cannot hold: "NaN", "+Inf" or "-Inf"; "" for
// a finite one.
func NonFinite(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	return ""
}

// Outcome is how one check ended and what it measured.
type Outcome struct {
	Verdict Verdict
	Reason  string // fail and refused: what failed, or why it could not decide
	// RemovedBy is who refused (a component, contract or falsifier id):
	// refused only.
	RemovedBy string
	// Code is a refusal's machine-readable class ("no_baseline"), so that a
	// contract can list some refusals as optional.
	Code    string
	Values  []Value
	Details []string // what the check noted: violations, mismatches
}

// Passed returns a pass with the measured values.
func Passed(values ...Value) Outcome { return Outcome{Verdict: Pass, Values: values} }

// Failed returns a fail whose reason is formatted.
func Failed(values []Value, format string, args ...any) Outcome {
	return Outcome{Verdict: Fail, Reason: fmt.Sprintf(format, args...), Values: values}
}

// RefusedBy returns a refusal by by, of class code, whose reason is
// formatted.
func RefusedBy(code, by string, values []Value, format string, args ...any) Outcome {
	return Outcome{Verdict: Refused, Code: code, RemovedBy: by, Reason: fmt.Sprintf(format, args...), Values: values}
}

// FromError turns an error into an outcome: a refusal (refuse.Error) stays a
// refusal by its refuser, of class code, anything else is a fail. what, when
// not empty, prefixes the reason.
func FromError(code string, err error, what string) Outcome {
	prefix := ""
	if what != "" {
		prefix = what + ": "
	}
	if r, ok := refuse.As(err); ok {
		return Outcome{Verdict: Refused, Code: code, RemovedBy: r.By, Reason: prefix + r.Reason}
	}
	return Outcome{Verdict: Fail, Reason: prefix + err.Error()}
}

// FormatThreshold prints a threshold as every report shows it: the operator,
// the value in the fewest digits that read back exactly, and the unit when
// there is one (">= 0.999", "<= 5 %").
func FormatThreshold(t schema.Threshold) string {
	s := t.Op + " " + strconv.FormatFloat(t.Value, 'g', -1, 64)
	if t.Unit != "" {
		s += " " + t.Unit
	}
	return s
}

// Limit prints the threshold "op value" (no unit), as FormatThreshold does.
func Limit(op string, value float64) string {
	return FormatThreshold(schema.Threshold{Op: op, Value: value})
}

// FormatValue prints a measured value in six significant digits, or its
// non-finite name.
func FormatValue(x float64) string {
	if s := NonFinite(x); s != "" {
		return s
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}

// CodeNoContract is the refusal class of a check whose contract lacks what
// it needs to decide (a falsifier, a threshold).
const CodeNoContract = "no_contract"

// Judge holds measured values to the named thresholds of one falsifier: the
// one place where a threshold decides. A value that is not finite fails its
// threshold; a threshold the contract lacks refuses (fail closed).
type Judge struct {
	By         string // the falsifier whose thresholds these are: the refuser when one is missing
	Thresholds map[string]schema.Threshold
	Values     []Value
	failing    []string
	missing    []string
}

// NewJudge returns a judge of falsifier by's thresholds.
func NewJudge(by string, thresholds map[string]schema.Threshold) *Judge {
	return &Judge{By: by, Thresholds: thresholds}
}

// Threshold returns threshold name.
func (j *Judge) Threshold(name string) (schema.Threshold, bool) {
	t, ok := j.Thresholds[name]
	return t, ok
}

// Hold records measured against threshold name; a threshold the contract
// lacks is recorded as missing (Outcome then refuses: fail closed).
func (j *Judge) Hold(name string, measured float64, unit string) {
	t, ok := j.Thresholds[name]
	if !ok {
		j.missing = append(j.missing, name)
		j.Values = append(j.Values, Value{Name: name, Value: measured, Unit: unit})
		return
	}
	j.Values = append(j.Values, Value{Name: name, Value: measured, Unit: unit, Threshold: FormatThreshold(t)})
	if !t.Holds(measured) {
		j.failing = append(j.failing, Violation(name, measured, t))
	}
}

// Compare records measured with threshold name and reports whether it
// holds, without deciding the outcome (the caller decides what a miss
// means). A missing threshold is recorded as Hold records it (and reads
// as held here).
func (j *Judge) Compare(name string, measured float64, unit string) bool {
	n := len(j.failing)
	j.Hold(name, measured, unit)
	held := len(j.failing) == n
	j.failing = j.failing[:n]
	return held
}

// HoldIf holds measured to threshold name when there is one, and notes it
// otherwise.
func (j *Judge) HoldIf(name string, measured float64, unit string) {
	if _, ok := j.Thresholds[name]; ok {
		j.Hold(name, measured, unit)
		return
	}
	j.Note(name, measured, unit)
}

// Note records a measured value that no threshold judges.
func (j *Judge) Note(name string, measured float64, unit string) {
	j.Values = append(j.Values, Value{Name: name, Value: measured, Unit: unit})
}

// Outcome decides: refused by the falsifier (CodeNoContract) when a
// threshold is missing, fail when one does not hold (detail, when given,
// follows the reason), pass otherwise.
func (j *Judge) Outcome(detail string) Outcome {
	if len(j.missing) > 0 {
		return RefusedBy(CodeNoContract, j.By, j.Values, "falsifier %s has no threshold %s", j.By, strings.Join(j.missing, ", "))
	}
	if len(j.failing) > 0 {
		r := strings.Join(j.failing, "; ")
		if detail != "" {
			r += ": " + detail
		}
		return Failed(j.Values, "%s", r)
	}
	return Passed(j.Values...)
}

// Violation says why measured fails threshold name: "name = v, want op t",
// or that the value is not finite.
func Violation(name string, measured float64, t schema.Threshold) string {
	if s := NonFinite(measured); s != "" {
		return fmt.Sprintf("%s is %s (threshold %s)", name, s, FormatThreshold(t))
	}
	return fmt.Sprintf("%s = %s, want %s", name, FormatValue(measured), FormatThreshold(t))
}

// Missing says that threshold name was never measured.
func Missing(name string, t schema.Threshold) string {
	return fmt.Sprintf("%s was not measured (threshold %s)", name, FormatThreshold(t))
}

// MaxListed bounds how many findings FirstN lists.
const MaxListed = 5

// FirstN joins the first MaxListed items for a reason, and says how many
// more there are.
func FirstN(items []string) string {
	if len(items) > MaxListed {
		return strings.Join(items[:MaxListed], "; ") + fmt.Sprintf("; … %d more", len(items)-MaxListed)
	}
	return strings.Join(items, "; ")
}

// SortValues orders values as reports list them: those held to a threshold
// first, then the others, each group by name.
func SortValues(vs []Value) {
	slices.SortStableFunc(vs, func(a, b Value) int {
		if (a.Threshold != "") != (b.Threshold != "") {
			if a.Threshold != "" {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// Merge combines the outcomes of the checks that make one decision: the
// worst verdict (fail, then refused, then pass) with the reasons of every
// outcome of that verdict, the refuser and class of the first of them, and
// every value and detail in order.
func Merge(os ...Outcome) Outcome {
	if len(os) == 0 {
		return Outcome{}
	}
	worst := 0
	var out Outcome
	for i, o := range os {
		if o.Verdict.Worse(os[worst].Verdict) {
			worst = i
		}
		out.Values = append(out.Values, o.Values...)
		out.Details = append(out.Details, o.Details...)
	}
	var reasons []string
	for _, o := range os {
		if o.Verdict == os[worst].Verdict && o.Reason != "" {
			reasons = append(reasons, o.Reason)
		}
	}
	out.Verdict = os[worst].Verdict
	out.Reason = strings.Join(reasons, "; ")
	if out.Verdict == Refused {
		out.Code, out.RemovedBy = os[worst].Code, os[worst].RemovedBy
	}
	return out
}
