package falsify

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aprqa/apr/internal/junit"
	"github.com/aprqa/apr/verdict"
)

// WriteJUnit writes rep as JUnit XML (internal/junit: a fail is a
// <failure>, a refusal an <error> of type "refused", a refusal the contract
// lists as optional <skipped>): one suite per contract a falsifier binds,
// one test case per falsifier.
func WriteJUnit(w io.Writer, rep *Report, total time.Duration) error {
	bySuite := map[string]*junit.Suite{}
	times := map[string]float64{}
	for _, r := range rep.Results {
		s := bySuite[r.Binds]
		if s == nil {
			s = &junit.Suite{Name: r.Binds, Properties: []junit.Property{
				{Name: "contracts_digest", Value: rep.ContractsDigest}, {Name: "seed", Value: fmt.Sprint(rep.Seed)}, {Name: "model", Value: rep.Model}}}
			bySuite[r.Binds] = s
		}
		tc := junit.Case{Classname: r.Binds, Name: r.ID, Time: junit.Seconds(r.DurationMS / 1000), SystemOut: resultText(r)}
		switch r.Verdict {
		case verdict.Fail:
			tc.Failure = &junit.Problem{Message: r.Reason, Type: "fail", Text: strings.Join(r.Details, "\n")}
		case verdict.Refused:
			msg := fmt.Sprintf("refused by %s: %s", r.RemovedBy, r.Reason)
			if r.Optional {
				// The contract accepts this refusal (params.optional_refusals):
				// neither a pass nor an error.
				tc.Skipped = &junit.Problem{Message: "optional " + msg, Type: "refused-optional"}
			} else {
				tc.Error = &junit.Problem{Message: msg, Type: "refused"}
			}
		}
		s.Add(tc)
		times[r.Binds] += r.DurationMS / 1000
	}
	out := junit.Suites{Time: junit.Seconds(total.Seconds())}
	for _, n := range slices.Sorted(maps.Keys(bySuite)) {
		s := bySuite[n]
		s.Time = junit.Seconds(times[n])
		out.Add(*s)
	}
	return junit.Write(w, out)
}

// resultText is a test case's system-out: kind, measured values against
// thresholds, seed.
func resultText(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind %s, code %s, verdict %s\n", r.Kind, r.Code, r.Verdict)
	for _, v := range r.Values() {
		x := strconv.FormatFloat(v.Value, 'g', -1, 64)
		if v.NonFinite != "" {
			x = v.NonFinite
		}
		fmt.Fprintf(&b, "%s = %s", v.Name, x)
		if v.Threshold != "" {
			fmt.Fprintf(&b, " (want %s)", v.Threshold)
		}
		b.WriteString("\n")
	}
	if r.Seed != nil {
		fmt.Fprintf(&b, "seed %d\n", *r.Seed)
	}
	return b.String()
}
