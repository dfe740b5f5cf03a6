package oracle

import (
	"fmt"
	"math"
)

// Parity is the one judge of two engines' logits over a sequence, used by
// every falsifier that compares logits (engine_parity, gpu_cpu,
// logits_parity), by apr diff and, through them, by apr qa and the ladder.
//
// The argmax rule: a position whose argmax differs counts as a mismatch
// only where the judge's (want's) top-1 minus top-2 logit is at least
// Margin — where the judge has decided; Margin 0 counts every mismatch.
// Near-ties of the judge's router (RouterNearTies) and routing flips that
// noise explains (RoutingFlip.Excused) are left out of every aggregate and
// reported: their Stats stay in Positions.
type Parity struct {
	Margin float64       // the argmax rule's margin, in logits
	Ties   []NearTie     // the judge's router near-ties, excluded
	Flips  []RoutingFlip // excused routing flips, excluded
}

// ParityReport is what Parity measured.
type ParityReport struct {
	SeqReport
	Margin float64
	Ties   []NearTie
	Flips  []RoutingFlip
	// Gap is the references' comparison in the two engines' numerics when
	// the report was judged Beyond it; nil otherwise.
	Gap *SeqReport
	// Floor is the noise floor the report was judged AtFloor of (the
	// judge against its jittered twin), and FloorK the multiple of it the
	// judgement allowed; nil and 0 otherwise.
	Floor  *SeqReport
	FloorK float64
}

// Judge compares got with want position by position (CompareSeqWith) under
// the argmax rule, leaving out the near-ties and flips. An error of the
// metrics at any position (a NaN, a zero row, a length) is returned.
func (p Parity) Judge(got, want [][]float32) (ParityReport, error) {
	exclude := TiePositions(p.Ties)
	for _, f := range p.Flips {
		exclude = append(exclude, f.Pos)
	}
	rep, err := CompareSeqWith(got, want, SeqOptions{Exclude: exclude, ArgmaxMargin: p.Margin})
	if err != nil {
		return ParityReport{}, err
	}
	return ParityReport{SeqReport: rep, Margin: p.Margin, Ties: p.Ties, Flips: p.Flips}, nil
}

// Metric is one measured number of a comparison, by the name contracts give
// it thresholds under.
type Metric struct {
	Name  string
	Value float64
	Unit  string
}

// Metrics are the report's measured values, by the names every parity
// contract uses: min_cosine, mean_cosine and argmax_mismatches (what the
// thresholds hold), argmax_agree (positions whose argmax agrees, of the
// compared), compared_positions, excluded_positions, excluded_min_cosine
// (only when a position was excluded), worst_position and max_kl.
func (r ParityReport) Metrics() []Metric {
	out := []Metric{
		{"min_cosine", r.MinCosine, ""},
		{"mean_cosine", r.MeanCosine, ""},
		{"argmax_mismatches", float64(len(r.ArgmaxMismatches)), "count"},
		{"argmax_agree", float64(r.ArgmaxAgree), "positions"},
		{"compared_positions", float64(r.Compared), "positions"},
		{"excluded_positions", float64(len(r.Excluded)), "positions"},
	}
	if len(r.Excluded) > 0 {
		out = append(out, Metric{"excluded_min_cosine", r.ExcludedMinCosine(), ""})
	}
	return append(out, Metric{"worst_position", float64(r.Worst), ""}, Metric{"max_kl", r.MaxKL, "nats"})
}

// ExcludedMinCosine is the lowest cosine among the excluded positions (1
// when none is excluded), a measured value for the record.
func (r ParityReport) ExcludedMinCosine() float64 {
	m := 1.0
	for _, p := range r.Excluded {
		m = math.Min(m, r.Positions[p].Cosine)
	}
	return m
}

// MismatchNotes describe each argmax mismatch the rule counts; judge names
// the reference ("reference", "llama.cpp").
func (r ParityReport) MismatchNotes(judge string) []string {
	out := make([]string, 0, len(r.ArgmaxMismatches))
	for _, p := range r.ArgmaxMismatches {
		s := r.Positions[p]
		out = append(out, fmt.Sprintf("position %d: argmax %d, %s %d (%s margin at least %g)", p, s.ArgmaxGot, judge, s.ArgmaxWant, judge, r.Margin))
	}
	return out
}

// TieNotes describe each excluded near-tie (eps: the near-tie rule's
// epsilon) with what the comparison measured there.
func (r ParityReport) TieNotes(eps float64) []string {
	out := make([]string, 0, len(r.Ties))
	for _, t := range r.Ties {
		s := r.Positions[t.Pos]
		out = append(out, fmt.Sprintf("position %d excluded: router near-tie at layer %d (k-th minus (k+1)-th expert probability %.3g < %g); there cosine %.9f, argmax %d vs %d",
			t.Pos, t.Layer, t.Gap, eps, s.Cosine, s.ArgmaxGot, s.ArgmaxWant))
	}
	return out
}

// FlipNotes describe each excused routing flip with what the comparison
// measured there (noise: the contract's router noise).
func (r ParityReport) FlipNotes(param string, noise float64) []string {
	out := make([]string, 0, len(r.Flips))
	for _, f := range r.Flips {
		s := r.Positions[f.Pos]
		out = append(out, fmt.Sprintf("%s; excluded, within params.%s %g; there cosine %.9f, argmax %d vs %d; the positions after it compared in a sequence that starts after it",
			f, param, noise, s.Cosine, s.ArgmaxGot, s.ArgmaxWant))
	}
	return out
}

// WorstNote describes the worst compared position.
func (r ParityReport) WorstNote() string {
	w := r.Positions[r.Worst]
	return fmt.Sprintf("worst position %d: cosine %.9f, max-abs %.3g, KL %.3g, argmax %d vs %d", r.Worst, w.Cosine, w.MaxAbs, w.KL, w.ArgmaxGot, w.ArgmaxWant)
}

// Beyond judges r (two engines that compute in different numerics, got
// against want) by what separates them beyond their numerics: gap compares
// the reference in got's numerics with the reference in want's over the
// same positions. At each compared position the engines' distance 1 − cos
// counts only where it exceeds the references' own, so min_cosine and
// mean_cosine become 1 − max(0, (1 − cos) − (1 − gap's cos)); an argmax
// mismatch counts only where the references agree (gap has no mismatch
// there). Where the numerics barely differ (gap's cosines ~1) the report
// is unchanged; a defect in either engine still shows as distance the
// references do not have. The positions' own Stats stay as measured;
// Gap keeps what the references measured, for the record.
func (r ParityReport) Beyond(gap ParityReport) (ParityReport, error) {
	if len(gap.Positions) != len(r.Positions) {
		return ParityReport{}, fmt.Errorf("%w: the numerics' gap has %d positions, the engines' comparison %d", ErrLength, len(gap.Positions), len(r.Positions))
	}
	excluded := make([]bool, len(r.Positions))
	for _, p := range r.Excluded {
		excluded[p] = true
	}
	flipped := make([]bool, len(r.Positions))
	for _, p := range gap.ArgmaxMismatches {
		flipped[p] = true
	}
	out := r
	out.Gap = &gap.SeqReport
	out.MinCosine, out.Worst = math.Inf(1), -1
	var sum float64
	for p, s := range r.Positions {
		if excluded[p] {
			continue
		}
		c := 1 - math.Max(0, gap.Positions[p].Cosine-s.Cosine)
		sum += c
		if c < out.MinCosine {
			out.MinCosine, out.Worst = c, p
		}
	}
	out.MeanCosine = sum / float64(r.Compared)
	out.ArgmaxMismatches = []int{}
	for _, p := range r.ArgmaxMismatches {
		if !flipped[p] {
			out.ArgmaxMismatches = append(out.ArgmaxMismatches, p)
		}
	}
	return out, nil
}

// GapNote describes the numerics' gap Beyond judged by (empty without one).
func (r ParityReport) GapNote(gotNumerics, wantNumerics string) string {
	if r.Gap == nil {
		return ""
	}
	return fmt.Sprintf("judged beyond the numerics' own gap: the reference in %s numerics against the reference in %s numerics measured min cosine %.9f (position %d), mean %.9f, %d argmax mismatches, which this comparison does not count",
		gotNumerics, wantNumerics, r.Gap.MinCosine, r.Gap.Worst, r.Gap.MeanCosine, len(r.Gap.ArgmaxMismatches))
}

// AtFloor judges r by what separates the engines beyond k times the model's
// own noise. floor compares the judge with its twin (engine/ref's
// NumericsGGMLJitter: the reference in the judge's numerics with every
// activation moved a few float32 ulps before it is rounded, as another
// correct engine's float32 arithmetic would move it) over the same
// positions. On a model that amplifies rounding (a quantization step
// crossed by an ulp reaches the logits) two correct engines are that far
// apart; on one that does not, floor's cosines are 1 to rounding and its
// logit differences ~0, and the report is unchanged. The sequence's
// distances count only beyond k times the floor's, aggregate for
// aggregate: min_cosine becomes 1 − max(0, (1 − min) − k·(1 − floor's
// min)), mean_cosine likewise with the means; and an argmax mismatch counts
// only where the judge's top-1 margin (want's rows) is at least k times
// the largest logit difference the floor measured, as well as r.Margin.
// The positions' Stats stay as measured; Floor and FloorK keep the floor.
// The floor is the reference's alone, so a broken engine cannot widen it.
func (r ParityReport) AtFloor(floor SeqReport, want [][]float32, k float64) (ParityReport, error) {
	if len(floor.Positions) != len(r.Positions) || len(want) != len(r.Positions) {
		return ParityReport{}, fmt.Errorf("%w: the noise floor has %d positions, the judge %d rows, the comparison %d", ErrLength, len(floor.Positions), len(want), len(r.Positions))
	}
	if math.IsNaN(k) || k < 0 {
		return ParityReport{}, fmt.Errorf("the noise floor's multiple %v: want a number ≥ 0", k)
	}
	out := r
	out.Floor, out.FloorK = &floor, k
	out.MinCosine = 1 - math.Max(0, (1-r.MinCosine)-k*(1-floor.MinCosine))
	out.MeanCosine = 1 - math.Max(0, (1-r.MeanCosine)-k*(1-floor.MeanCosine))
	margin := math.Max(r.Margin, k*floor.MaxAbs)
	out.ArgmaxMismatches = []int{}
	for _, p := range r.ArgmaxMismatches {
		if _, m, _ := TopMargin(want[p]); m >= margin {
			out.ArgmaxMismatches = append(out.ArgmaxMismatches, p)
		}
	}
	return out, nil
}

// FloorNote describes the noise floor AtFloor judged by (empty without
// one); numerics names the judge's.
func (r ParityReport) FloorNote(numerics string) string {
	if r.Floor == nil {
		return ""
	}
	f := r.Floor
	return fmt.Sprintf("judged beyond %g× the model's noise floor: the reference in %s numerics against its jittered twin (every activation moved a few float32 ulps, as another correct engine rounds) measured min cosine %.9f (position %d), mean %.9f, largest logit difference %.4g, %d argmax mismatches; an argmax mismatch counts where the judge's margin is at least %.4g",
		r.FloorK, numerics, f.MinCosine, f.Worst, f.MeanCosine, f.MaxAbs, len(f.ArgmaxMismatches), math.Max(r.Margin, r.FloorK*f.MaxAbs))
}
