package qa

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aprqa/apr/internal/junit"
	"github.com/aprqa/apr/verdict"
)

// WriteHeader writes the line that introduces a model's gates.
func WriteHeader(w io.Writer, m *ModelReport) {
	how := ""
	if m.Synth != "" {
		how = "; " + m.Synth
	}
	fmt.Fprintf(w, "apr qa %s (%s, %d bytes, sha256 %.12s…%s; backends %s)\n", m.Path, m.Arch, m.Bytes, m.SHA256, how, strings.Join(m.Backends, ", "))
}

// WriteTable writes every model's gates as a table: gate, backend, status,
// measured values with their thresholds, duration; the reason of every gate
// that did not pass under its row; then the summary.
func WriteTable(w io.Writer, r *Report) {
	for i := range r.Models {
		WriteModelTable(w, &r.Models[i])
	}
	WriteSummary(w, r)
}

// WriteSummary writes the backends left out (with the reason) and the
// report's one-line summary.
func WriteSummary(w io.Writer, r *Report) {
	for _, n := range r.NotGated {
		fmt.Fprintf(w, "qa: not gated (not a pass): backend %s: %s; --backend %s gates it\n", n.Backend, n.Reason, n.Backend)
	}
	fmt.Fprintf(w, "qa: %s\n", r.Summary)
}

// WriteModelTable writes one model's header and gate table.
func WriteModelTable(w io.Writer, m *ModelReport) {
	WriteHeader(w, m)
	rows := [][]string{{"#", "gate", "backend", "verdict", "measured", "threshold", "time"}}
	for k, g := range m.Gates {
		meas, thr := Measured(g)
		b := g.Backend
		if b == "" {
			b = "-"
		}
		rows = append(rows, []string{fmt.Sprint(k + 1), g.Name, b, g.Status, meas, thr, Duration(g.DurationMS)})
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for c, cell := range row {
			width[c] = max(width[c], utf8.RuneCountInString(cell))
		}
	}
	for k, row := range rows {
		var b strings.Builder
		b.WriteString(" ")
		for c, cell := range row {
			b.WriteString(" ")
			b.WriteString(cell)
			if c < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[c]-utf8.RuneCountInString(cell)+1))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		if k > 0 {
			if g := m.Gates[k-1]; g.Verdict != verdict.Pass || g.Reason != "" {
				fmt.Fprintf(w, "      ↳ %s\n", GateReason(g))
			}
		}
	}
}

// GateReason is the line explaining a gate's verdict.
func GateReason(g Gate) string {
	switch g.Verdict {
	case verdict.Refused:
		line := fmt.Sprintf("refused by %s (%s): %s", g.By, g.Code, g.Reason)
		if !g.Optional && g.By != "" {
			// What the user can do about a refusal that counts.
			line += fmt.Sprintf(" [not a pass; to accept this refusal in advance: --allow-refused %s]", g.By)
		}
		return line
	case verdict.Fail:
		return "fail: " + g.Reason
	}
	return g.Reason
}

// Measured renders a gate's thresholded values and their thresholds; a gate
// with no thresholded value shows its first values instead. A refused gate
// shows none: "mismatches=0" beside "refused" reads like a pass (its values,
// if any, stay in the JSON report). A value judged beyond the model's noise
// floor shows what was measured beside it: "min_cosine=1 (measured 0.9981)"
// (the judged 1 alone reads as if the engines agreed exactly).
func Measured(g Gate) (string, string) {
	if g.Verdict == verdict.Refused {
		return "-", "-"
	}
	raw := map[string]Value{}
	for _, v := range g.Values {
		if name, ok := strings.CutPrefix(v.Name, "measured_"); ok {
			raw[name] = v
		}
	}
	var ms, ts []string
	for _, v := range g.Values {
		if v.Threshold == "" {
			continue
		}
		m := v.Name + "=" + valueString(v)
		if r, ok := raw[v.Name]; ok && valueString(r) != valueString(v) {
			m += " (measured " + valueString(r) + ")"
		}
		ms = append(ms, m)
		ts = append(ts, v.Threshold)
	}
	if len(ms) == 0 {
		for i, v := range g.Values {
			if i == 3 {
				break
			}
			ms = append(ms, v.Name+"="+valueString(v))
		}
	}
	if len(ms) == 0 {
		return "-", "-"
	}
	if len(ts) == 0 {
		ts = []string{"-"}
	}
	return strings.Join(ms, " "), strings.Join(ts, ", ")
}

func valueString(v Value) string {
	if v.NonFinite != "" {
		return v.NonFinite
	}
	return strconv.FormatFloat(v.Value, 'g', 4, 64)
}

// Duration renders milliseconds for the table.
func Duration(msec float64) string {
	switch {
	case msec >= 1000:
		return fmt.Sprintf("%.1fs", msec/1000)
	case msec >= 10:
		return fmt.Sprintf("%.0fms", msec)
	}
	return fmt.Sprintf("%.1fms", msec)
}

// WriteJUnit writes the report as JUnit XML (internal/junit): a suite per
// model, a case per gate. A fail is a <failure>; a refusal that counts is an
// <error> of type "refused" (it did not pass); a refusal the contract marks
// optional is <skipped> with its reason, so no CI tool reads it as a pass.
func WriteJUnit(w io.Writer, r *Report) error {
	out := junit.Suites{Name: "apr qa", Time: secs(r.DurationMS)}
	for _, m := range r.Models {
		s := junit.Suite{Name: "apr qa " + m.Name, Properties: []junit.Property{
			{Name: "path", Value: m.Path}, {Name: "sha256", Value: m.SHA256}, {Name: "arch", Value: m.Arch},
			{Name: "contracts_digest", Value: r.ContractsDigest}, {Name: "host", Value: r.Host.Fingerprint}}}
		var total float64
		for _, g := range m.Gates {
			name := g.Name
			if g.Backend != "" {
				name += "[" + g.Backend + "]"
			}
			meas, thr := Measured(g)
			c := junit.Case{Name: name, Classname: "apr.qa." + m.Arch, Time: secs(g.DurationMS),
				SystemOut: fmt.Sprintf("falsifier %s; measured %s; threshold %s", orNone(g.Falsifier), meas, thr)}
			switch {
			case g.Verdict == verdict.Fail:
				c.Failure = &junit.Problem{Message: g.Reason, Type: "fail", Text: GateReason(g)}
			case g.Verdict == verdict.Refused && g.Optional:
				c.Skipped = &junit.Problem{Message: StatusRefusedOptional + ": " + g.Reason, Type: g.Code}
			case g.Verdict == verdict.Refused:
				c.Error = &junit.Problem{Message: g.Reason, Type: "refused", Text: GateReason(g)}
			}
			total += g.DurationMS
			s.Add(c)
		}
		s.Time = secs(total)
		out.Add(s)
	}
	return junit.Write(w, out)
}

func secs(msec float64) string { return junit.Seconds(msec / 1000) }
