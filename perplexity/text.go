package perplexity

import (
	"bufio"
	"fmt"
	"io"

	"github.com/aprqa/apr/oracle"
)

// WriteChunks writes llama.cpp's running perplexities, "[1]x,[2]y,…", on one
// line.
func WriteChunks(w io.Writer, r Result) error {
	bw := bufio.NewWriter(w)
	for i, p := range r.ChunkPPL {
		fmt.Fprintf(bw, "[%d]%.4f,", i+1, p)
	}
	fmt.Fprintln(bw)
	return bw.Flush()
}

// FinalLine is llama.cpp's last line of a perplexity run.
func FinalLine(r Result) string {
	return fmt.Sprintf("Final estimate: PPL = %.4f +/- %.5f", r.PPL, r.PPLUnc)
}

// KLDHeader is the heading of llama.cpp's per-chunk rows.
const KLDHeader = "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p"

// ChunkRow formats chunk i's (1-based) row as llama.cpp prints it.
func ChunkRow(i int, r oracle.KLDRunning) string {
	return fmt.Sprintf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%",
		i, r.PPL.Value, r.PPL.Unc, r.LnPPLRatio.Value, r.LnPPLRatio.Unc, r.KLD.Value, r.KLD.Unc,
		100*r.RMSDp.Value, 100*r.RMSDp.Unc, 100*r.SameTop.Value, 100*r.SameTop.Unc)
}

// WriteKLD writes a KL-divergence run as llama.cpp prints it: the per-chunk
// rows, then (from oracle.KLDMinCount positions) the perplexity,
// KL-divergence and token-probability statistics.
func WriteKLD(w io.Writer, r KLDResult) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, KLDHeader)
	for i, c := range r.Chunks {
		fmt.Fprintln(bw, ChunkRow(i+1, c))
	}
	fmt.Fprintln(bw)
	s := r.Summary
	if s == nil {
		fmt.Fprintf(bw, "%d positions: llama.cpp computes no statistics on fewer than %d\n", r.Count, oracle.KLDMinCount)
		return bw.Flush()
	}
	p := func(format string, args ...any) { fmt.Fprintf(bw, format+"\n", args...) }
	p("====== Perplexity statistics ======")
	p("Mean PPL(Q)                   : %10.6f ± %10.6f", s.PPL.Value, s.PPL.Unc)
	p("Mean PPL(base)                : %10.6f ± %10.6f", s.PPLBase.Value, s.PPLBase.Unc)
	p("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%", 100*s.Cor)
	p("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f", s.LnPPLRatio.Value, s.LnPPLRatio.Unc)
	p("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f", s.PPLRatio.Value, s.PPLRatio.Unc)
	p("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f", s.PPLDiff.Value, s.PPLDiff.Unc)
	p("")
	p("====== KL divergence statistics ======")
	p("Mean    KLD: %10.6f ± %10.6f", s.KLD.Value, s.KLD.Unc)
	k := s.KLDDist
	for _, row := range []struct {
		label string
		v     float64
	}{{"Maximum", k.Max}, {"99.9%  ", k.P999}, {"99.0%  ", k.P99}, {"95.0%  ", k.P95}, {"90.0%  ", k.P90},
		{"Median ", k.Median}, {"10.0%  ", k.P10}, {" 5.0%  ", k.P5}, {" 1.0%  ", k.P1}, {" 0.1%  ", k.P01}, {"Minimum", k.Min}} {
		p("%s KLD: %10.6f", row.label, row.v)
	}
	p("")
	p("====== Token probability statistics ======")
	p("Mean    Δp: %6.3f ± %5.3f %%", 100*s.Dp.Value, 100*s.Dp.Unc)
	d := s.DpDist
	for _, row := range []struct {
		label string
		v     float64
	}{{"Maximum", d.Max}, {"99.9%  ", d.P999}, {"99.0%  ", d.P99}, {"95.0%  ", d.P95}, {"90.0%  ", d.P90},
		{"75.0%  ", d.P75}, {"Median ", d.Median}, {"25.0%  ", d.P25}, {"10.0%  ", d.P10}, {" 5.0%  ", d.P5},
		{" 1.0%  ", d.P1}, {" 0.1%  ", d.P01}, {"Minimum", d.Min}} {
		p("%s Δp: %6.3f%%", row.label, 100*row.v)
	}
	p("RMS Δp    : %6.3f ± %5.3f %%", 100*s.RMSDp.Value, 100*s.RMSDp.Unc)
	p("Same top p: %6.3f ± %5.3f %%", 100*s.SameTop.Value, 100*s.SameTop.Unc)
	return bw.Flush()
}
