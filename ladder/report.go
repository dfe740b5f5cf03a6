package ladder

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aprqa/apr/verdict"
)

// WriteReport writes r as one self-contained HTML page (inline CSS, no
// scripts, no external resources): a summary line, the matrix of models ×
// verb/backend with one coloured cell each linking to its details, and the
// details (verdict, reason, refuser, timings, measured values) of every cell.
//
// Every matrix cell is a <td class="cell …" data-verdict="…">, and there is
// exactly one per cell of the receipt, so a test (or a browser) can count
// them.
func WriteReport(w io.Writer, r *Receipt) error {
	return reportTmpl.Execute(w, buildReportData(r))
}

type reportData struct {
	Title    string
	Summary  Summary
	Refusers string // "ladder 168 · ladder:universe 9"
	Binary   string
	Dirty    string
	Hosts    []string
	Shards   string
	Digest   string
	Verbs    []string
	Backends []string
	Rows     []reportRow
	Details  []reportDetail
	Extra    []reportDetail // cells whose verb/backend/model is outside the matrix (should not happen)
}

type reportRow struct {
	Key    string
	Info   string
	Refuse string
	Cells  []*reportCell
}

type reportCell struct {
	Verdict verdict.Verdict
	Anchor  string
	Label   string
	Title   string
	Empty   bool
}

type reportDetail struct {
	Anchor string
	Cell   Cell
	Phases string
}

func buildReportData(r *Receipt) reportData {
	d := reportData{
		Title:    "apr ladder",
		Summary:  r.Summary,
		Binary:   r.Binary.Short(),
		Dirty:    r.Binary.Dirty,
		Digest:   r.ContractsDigest,
		Verbs:    r.Universe.Verbs,
		Backends: r.Universe.Backends,
	}
	var shards []string
	for _, run := range r.Runs {
		shards = append(shards, run.Shard)
		h := fmt.Sprintf("%s: %s, %d cores, %.1f GiB", run.Shard, run.Host.CPUModel, run.Host.Cores, float64(run.Host.MemoryBytes)/(1<<30))
		for _, g := range run.Host.GPUs {
			h += ", " + g.Model
		}
		d.Hosts = append(d.Hosts, h)
	}
	d.Shards = strings.Join(shards, ", ")
	by := map[string]int{}
	for _, c := range r.Cells {
		if c.Verdict == verdict.Refused {
			by[c.RemovedBy]++
		}
	}
	var refusers []string
	for k := range by {
		refusers = append(refusers, k)
	}
	slices.Sort(refusers)
	for i, k := range refusers {
		refusers[i] = fmt.Sprintf("%s %d", k, by[k])
	}
	d.Refusers = strings.Join(refusers, " · ")
	byID := map[string]int{}
	for i, c := range r.Cells {
		byID[c.ID] = i
	}
	used := make([]bool, len(r.Cells))
	infos := map[string]ModelInfo{}
	for _, m := range r.Models {
		infos[m.Key] = m
	}
	// Rows: the models that have cells in this receipt, in key order.
	var keys []string
	seen := map[string]bool{}
	for _, c := range r.Cells {
		if !seen[c.Model.Key] {
			seen[c.Model.Key] = true
			keys = append(keys, c.Model.Key)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		row := reportRow{Key: k}
		if m, ok := infos[k]; ok {
			if m.Header != nil {
				row.Info = fmt.Sprintf("%s · %s · %s params · %s", m.Header.Architecture, m.Header.DominantType, humanCount(m.Header.Params), humanBytes(m.Bytes))
			} else {
				row.Info = humanBytes(m.Bytes)
			}
			if m.RemovedBy != "" {
				row.Refuse = m.RemovedBy + ": " + m.Reason
			}
		}
		for _, v := range d.Verbs {
			for _, b := range d.Backends {
				i, ok := byID[CellID(k, v, b)]
				if !ok {
					row.Cells = append(row.Cells, &reportCell{Empty: true})
					continue
				}
				used[i] = true
				c := r.Cells[i]
				d.Details = append(d.Details, reportDetail{Anchor: anchor(i), Cell: c, Phases: phases(c.Timings)})
				rc := &reportCell{Verdict: c.Verdict, Anchor: anchor(i), Label: string(c.Verdict)}
				switch c.Verdict {
				case verdict.Refused:
					rc.Title = c.RemovedBy + ": " + c.Reason
				case verdict.Fail:
					rc.Title = c.Reason
				default:
					rc.Title = fmt.Sprintf("%.3g s", c.Timings.WallSeconds)
				}
				row.Cells = append(row.Cells, rc)
			}
		}
		d.Rows = append(d.Rows, row)
	}
	for i, c := range r.Cells {
		if !used[i] {
			d.Extra = append(d.Extra, reportDetail{Anchor: anchor(i), Cell: c, Phases: phases(c.Timings)})
		}
	}
	return d
}

func anchor(i int) string { return fmt.Sprintf("cell-%d", i+1) }

func phases(t Timings) string {
	parts := []string{fmt.Sprintf("wall %.3f s", t.WallSeconds)}
	keys := make([]string, 0, len(t.Phases))
	for k := range t.Phases {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.3f s", k, t.Phases[k]))
	}
	if !t.Started.IsZero() {
		parts = append(parts, "started "+t.Started.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, " · ")
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"value": func(v Value) string {
		s := fmt.Sprintf("%s = %g", v.Name, v.Value)
		if v.NonFinite != "" {
			s = v.Name + " = " + v.NonFinite
		}
		if v.Unit != "" {
			s += " " + v.Unit
		}
		if v.Threshold != "" {
			s += " (threshold " + v.Threshold + ")"
		}
		return s
	},
	"span": func(n int) int { return n },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} — {{.Summary}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1b1f24; background: #fff; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
p.summary { font-size: 1.1em; font-weight: 600; margin: .2em 0 .8em; }
.meta { color: #57606a; font-size: .9em; margin: 0 0 1em; }
.meta div { margin: .1em 0; }
table.matrix { border-collapse: collapse; margin: 0 0 1.5em; }
table.matrix th, table.matrix td { border: 1px solid #d0d7de; padding: .25em .5em; text-align: center; }
table.matrix th.model { text-align: left; font-weight: normal; white-space: nowrap; }
table.matrix th.model small { display: block; color: #57606a; }
table.matrix th.model small.refused { color: #9a6700; }
td.cell a { color: inherit; text-decoration: none; display: block; }
td.pass { background: #2da44e; color: #fff; }
td.fail { background: #cf222e; color: #fff; font-weight: 700; }
td.refused { background: #eaeef2; color: #57606a; }
td.empty { background: #fff; }
.legend span { display: inline-block; padding: 0 .5em; margin-right: .5em; }
section.cells h2 { font-size: 1.1em; }
div.detail { border-left: 4px solid #d0d7de; padding: .2em .8em; margin: .6em 0; }
div.detail.pass { border-color: #2da44e; }
div.detail.fail { border-color: #cf222e; }
div.detail.refused { border-color: #8c959f; }
div.detail:target { background: #fff8c5; }
div.detail code { font-size: .95em; }
pre { white-space: pre-wrap; font-size: .85em; background: #f6f8fa; padding: .5em; max-height: 20em; overflow: auto; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="summary" id="summary">{{.Summary}}</p>
<div class="meta">
<div>binary: <code>{{.Binary}}</code>{{if ne .Dirty "false"}} (dirty: {{.Dirty}}){{end}}</div>
<div>contracts: <code>{{.Digest}}</code></div>
{{if .Refusers}}<div>refused by: {{.Refusers}}</div>{{end}}
{{range .Hosts}}<div>host {{.}}</div>
{{end}}</div>
<p class="legend"><span style="background:#2da44e;color:#fff">pass</span><span style="background:#cf222e;color:#fff">fail</span><span style="background:#eaeef2;color:#57606a">refused</span></p>
<table class="matrix" id="matrix">
<thead>
<tr><th rowspan="2">model</th>{{range .Verbs}}<th colspan="{{span (len $.Backends)}}">{{.}}</th>{{end}}</tr>
<tr>{{range .Verbs}}{{range $.Backends}}<th>{{.}}</th>{{end}}{{end}}</tr>
</thead>
<tbody>
{{range .Rows}}<tr><th class="model" scope="row">{{.Key}}{{if .Info}}<small>{{.Info}}</small>{{end}}{{if .Refuse}}<small class="refused">{{.Refuse}}</small>{{end}}</th>{{range .Cells}}{{if .Empty}}<td class="empty"></td>{{else}}<td class="cell {{.Verdict}}" data-verdict="{{.Verdict}}" title="{{.Title}}"><a href="#{{.Anchor}}">{{.Label}}</a></td>{{end}}{{end}}</tr>
{{end}}</tbody>
</table>
<section class="cells">
<h2>Cells</h2>
{{range .Details}}{{template "detail" .}}{{end}}
{{if .Extra}}<h2>Cells outside the matrix</h2>
{{range .Extra}}{{template "detail" .}}{{end}}{{end}}
</section>
</body>
</html>
{{define "detail"}}<div class="detail {{.Cell.Verdict}}" id="{{.Anchor}}">
<div><strong>{{.Cell.Verdict}}</strong> · <code>{{.Cell.Model.Key}}</code> · {{.Cell.Verb}} on {{.Cell.Backend}}</div>
{{if .Cell.RemovedBy}}<div>removed by <code>{{.Cell.RemovedBy}}</code></div>{{end}}
{{if .Cell.Reason}}<div class="reason">{{.Cell.Reason}}</div>{{end}}
<div class="timings">{{.Phases}}</div>
{{if .Cell.Values}}<ul>{{range .Cell.Values}}<li>{{value .}}</li>{{end}}</ul>{{end}}
<div class="model">{{if .Cell.Model.SHA256}}sha256 <code>{{.Cell.Model.SHA256}}</code>{{else}}sha256 not measured{{end}} · {{.Cell.Model.Bytes}} bytes · shard {{.Cell.Shard}}</div>
{{if .Cell.Detail}}<details><summary>detail</summary><pre>{{.Cell.Detail}}</pre></details>{{end}}
</div>
{{end}}`))
