package falsify

import (
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// JUnit XML, as CI systems (GitHub, GitLab, Jenkins) read it. A fail is a
// <failure>; a refusal is an <error> of type "refused" — never <skipped>,
// which CI systems show as neither pass nor fail — except a refusal the
// contract lists as optional (params.optional_refusals), which is exactly
// that: <skipped> of type "refused-optional".
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Tests   int          `xml:"tests,attr"`
	Fail    int          `xml:"failures,attr"`
	Errors  int          `xml:"errors,attr"`
	Time    string       `xml:"time,attr"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Fail       int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Class   string        `xml:"classname,attr"`
	Name    string        `xml:"name,attr"`
	Time    string        `xml:"time,attr"`
	Failure *junitProblem `xml:"failure,omitempty"`
	Error   *junitProblem `xml:"error,omitempty"`
	Skipped *junitProblem `xml:"skipped,omitempty"`
	Out     string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes rep as JUnit XML: one suite per contract a falsifier
// binds, one test case per falsifier.
func WriteJUnit(w io.Writer, rep *Report, total time.Duration) error {
	bySuite := map[string]*junitSuite{}
	for _, r := range rep.Results {
		s := bySuite[r.Binds]
		if s == nil {
			s = &junitSuite{Name: r.Binds, Properties: []junitProperty{
				{"contracts_digest", rep.ContractsDigest}, {"seed", fmt.Sprint(rep.Seed)}, {"model", rep.Model}}}
			bySuite[r.Binds] = s
		}
		tc := junitCase{Class: r.Binds, Name: r.ID, Time: seconds(r.DurationMS / 1000), Out: resultText(r)}
		switch r.Verdict {
		case VerdictFail:
			tc.Failure = &junitProblem{Message: r.Reason, Type: "fail", Text: strings.Join(r.Details, "\n")}
			s.Fail++
		case VerdictRefused:
			msg := fmt.Sprintf("refused by %s: %s", r.RemovedBy, r.Reason)
			if r.Optional {
				// The contract accepts this refusal (params.optional_refusals):
				// neither a pass nor an error.
				tc.Skipped = &junitProblem{Message: "optional " + msg, Type: "refused-optional"}
				s.Skipped++
				break
			}
			tc.Error = &junitProblem{Message: msg, Type: "refused"}
			s.Errors++
		}
		s.Tests++
		s.Cases = append(s.Cases, tc)
	}
	out := junitSuites{Time: seconds(total.Seconds())}
	names := make([]string, 0, len(bySuite))
	for n := range bySuite {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := bySuite[n]
		var t float64
		for _, r := range rep.Results {
			if r.Binds == n {
				t += r.DurationMS / 1000
			}
		}
		s.Time = seconds(t)
		out.Tests += s.Tests
		out.Fail += s.Fail
		out.Errors += s.Errors
		out.Suites = append(out.Suites, *s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }

// resultText is a test case's system-out: kind, measured values against
// thresholds, seed.
func resultText(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind %s, code %s, verdict %s\n", r.Kind, r.Code, r.Verdict)
	for _, name := range slices.Sorted(maps.Keys(r.Measured)) {
		fmt.Fprintf(&b, "%s = %g", name, r.Measured[name])
		if th, ok := r.Thresholds[name]; ok {
			fmt.Fprintf(&b, " (want %s %g)", th.Op, th.Value)
		}
		b.WriteString("\n")
	}
	for name, v := range r.NonFinite {
		fmt.Fprintf(&b, "%s = %s\n", name, v)
	}
	if r.Seed != nil {
		fmt.Fprintf(&b, "seed %d\n", *r.Seed)
	}
	return b.String()
}
