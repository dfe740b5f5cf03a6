package oracle_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aprqa/apr/oracle"
)

// TestParity: the one parity judge counts an argmax mismatch only where the
// judge's top-1 margin reaches Margin, leaves near-ties and excused flips
// out of the aggregates (reported apart), and measures by the contracts'
// names.
func TestParity(t *testing.T) {
	want := [][]float32{{3, 0, 0}, {1, 0.9, 0}, {2, 0, 1}, {0, 3, 0}}
	got := [][]float32{{3, 0, 0}, {0.9, 1, 0}, {0, 2, 1}, {3, 0, 0}}
	tests := []struct {
		name       string
		p          oracle.Parity
		mismatches []int
		excluded   []int
	}{
		{"margin 0 counts every mismatch", oracle.Parity{}, []int{1, 2, 3}, []int{}},
		{"margin 0.5 leaves out the undecided position 1", oracle.Parity{Margin: 0.5}, []int{2, 3}, []int{}},
		{"a near-tie and a flip are excluded", oracle.Parity{Margin: 0.5, Ties: []oracle.NearTie{{Pos: 2, Layer: 0, Gap: 0.01}},
			Flips: []oracle.RoutingFlip{{Pos: 3, Layer: 1, Gap: 0.02, Diff: 0.01}}}, []int{}, []int{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := tt.p.Judge(got, want)
			if err != nil {
				t.Fatalf("Judge: %v", err)
			}
			if diff := cmp.Diff(tt.mismatches, rep.ArgmaxMismatches); diff != "" {
				t.Errorf("Judge() argmax mismatches (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.excluded, rep.Excluded); diff != "" {
				t.Errorf("Judge() excluded (-want +got):\n%s", diff)
			}
			m := map[string]float64{}
			for _, x := range rep.Metrics() {
				m[x.Name] = x.Value
			}
			for _, name := range []string{"min_cosine", "mean_cosine", "argmax_mismatches", "argmax_agree", "compared_positions", "excluded_positions", "worst_position", "max_kl"} {
				if _, ok := m[name]; !ok {
					t.Errorf("Metrics() has no %s", name)
				}
			}
			if m["argmax_mismatches"] != float64(len(tt.mismatches)) || m["compared_positions"] != float64(4-len(tt.excluded)) {
				t.Errorf("Metrics() argmax_mismatches %v compared %v, want %d and %d", m["argmax_mismatches"], m["compared_positions"], len(tt.mismatches), 4-len(tt.excluded))
			}
			if _, ok := m["excluded_min_cosine"]; ok != (len(tt.excluded) > 0) {
				t.Errorf("Metrics() excluded_min_cosine present = %v, want %v", ok, len(tt.excluded) > 0)
			}
			notes := strings.Join(append(append(rep.MismatchNotes("reference"), rep.TieNotes(0.05)...), rep.FlipNotes("router_noise", 0.02)...), "\n")
			if len(tt.p.Ties) > 0 && (!strings.Contains(notes, "position 2 excluded: router near-tie at layer 0") || !strings.Contains(notes, "position 3: routed to other experts")) {
				t.Errorf("notes do not report the excluded tie and flip:\n%s", notes)
			}
		})
	}
}

// TestParityBeyond: two engines in different numerics are judged by what
// separates them beyond the references' own gap. Where the engines are as
// far apart as the references (the numerics' rounding), the judged
// cosines are 1 and the argmax flips the references share do not count;
// a defect (a position further apart than the references) still shows,
// and a flip the references do not have still counts.
func TestParityBeyond(t *testing.T) {
	row := func(a, b, c float32) []float32 { return []float32{a, b, c} }
	// The references in the two numerics: position 1 flips (margin 1).
	refA := [][]float32{row(3, 0, 0), row(0, 1, 0), row(1, 1, 2)}
	refB := [][]float32{row(3, 0.3, 0), row(1, 0, 0), row(1, 1, 2)}
	gap, err := oracle.Parity{Margin: 0.5}.Judge(refA, refB)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1}, gap.ArgmaxMismatches); diff != "" {
		t.Fatalf("the references' flips (-want +got):\n%s", diff)
	}
	t.Run("as far apart as the numerics", func(t *testing.T) {
		rep, err := oracle.Parity{Margin: 0.5}.Judge(refA, refB) // the engines match their references exactly
		if err != nil {
			t.Fatal(err)
		}
		if rep.MinCosine > 0.99 || len(rep.ArgmaxMismatches) != 1 {
			t.Fatalf("raw comparison: min %v, mismatches %v; the fixture should differ", rep.MinCosine, rep.ArgmaxMismatches)
		}
		b, err := rep.Beyond(gap)
		if err != nil {
			t.Fatal(err)
		}
		if b.MinCosine != 1 || b.MeanCosine != 1 || len(b.ArgmaxMismatches) != 0 || b.Gap == nil {
			t.Errorf("Beyond: min %v mean %v mismatches %v gap %v; want 1, 1, none and the gap kept", b.MinCosine, b.MeanCosine, b.ArgmaxMismatches, b.Gap)
		}
		if note := b.GapNote("plain", "ggml"); !strings.Contains(note, "plain numerics against the reference in ggml") || !strings.Contains(note, "1 argmax mismatches") {
			t.Errorf("GapNote = %q", note)
		}
	})
	t.Run("planted: one position further apart", func(t *testing.T) {
		got := [][]float32{row(3, 0, 0), row(0, 1, 0), row(2, 1, 1)} // position 2 now flips too
		rep, err := oracle.Parity{Margin: 0.5}.Judge(got, refB)
		if err != nil {
			t.Fatal(err)
		}
		b, err := rep.Beyond(gap)
		if err != nil {
			t.Fatal(err)
		}
		if b.Worst != 2 || b.MinCosine >= 0.99 || b.MinCosine != 1-(gap.Positions[2].Cosine-rep.Positions[2].Cosine) {
			t.Errorf("Beyond: worst %d, min %v; want position 2 at 1 − (its gap − its cosine)", b.Worst, b.MinCosine)
		}
		if diff := cmp.Diff([]int{2}, b.ArgmaxMismatches); diff != "" {
			t.Errorf("Beyond mismatches (-want +got):\n%s", diff)
		}
	})
	if _, err := (oracle.ParityReport{SeqReport: oracle.SeqReport{Positions: make([]oracle.Stats, 2)}}).Beyond(gap); err == nil {
		t.Error("Beyond with a gap of another length: no error")
	}
}

// TestAtFloor: a report judged at a noise floor counts only the distance
// beyond k times the floor's (aggregate for aggregate) and only the argmax
// mismatches where the judge's margin reaches k times the floor's largest
// logit difference; a floor of 1s and 0 differences, or k = 0, leaves it as
// it was; bad lengths and a negative k are errors.
func TestAtFloor(t *testing.T) {
	// the judge's rows: top-1 margins 0.5, 2 and 1.0
	want := [][]float32{{1.5, 1, 0}, {3, 1, 0}, {0, 2, 1}}
	r := oracle.ParityReport{Margin: 0.2, SeqReport: oracle.SeqReport{
		Positions: make([]oracle.Stats, 3), Compared: 3, MinCosine: 0.99, MeanCosine: 0.995, Worst: 1,
		ArgmaxMismatches: []int{0, 2}}}
	floor := oracle.SeqReport{Positions: make([]oracle.Stats, 3), MinCosine: 0.996, MeanCosine: 0.998, MaxAbs: 0.3,
		ArgmaxMismatches: []int{}}
	got, err := r.AtFloor(floor, want, 2)
	if err != nil {
		t.Fatal(err)
	}
	// 1 − max(0, 0.01 − 2·0.004), 1 − max(0, 0.005 − 2·0.002); margin 0.6
	if diff := cmp.Diff([]float64{0.998, 0.999}, []float64{got.MinCosine, got.MeanCosine}, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("cosines at the floor (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2}, got.ArgmaxMismatches); diff != "" {
		t.Errorf("argmax mismatches at the floor (-want +got):\n%s", diff)
	}
	if got.Floor == nil || got.FloorK != 2 || got.Worst != 1 {
		t.Errorf("Floor %v, FloorK %v, Worst %d: want the floor, 2 and the measured worst 1", got.Floor, got.FloorK, got.Worst)
	}
	if !strings.Contains(got.FloorNote("ggml"), "min cosine 0.996") {
		t.Errorf("FloorNote = %q, want the floor's min cosine", got.FloorNote("ggml"))
	}
	// a floor well beyond the distance: everything is within the noise
	if got, _ := r.AtFloor(oracle.SeqReport{Positions: make([]oracle.Stats, 3), MinCosine: 0.9, MeanCosine: 0.9, MaxAbs: 5}, want, 2); got.MinCosine != 1 || got.MeanCosine != 1 || len(got.ArgmaxMismatches) != 0 {
		t.Errorf("within a wide floor: min %v, mean %v, mismatches %v; want 1, 1, none", got.MinCosine, got.MeanCosine, got.ArgmaxMismatches)
	}
	// no noise, or k = 0: unchanged
	quiet := oracle.SeqReport{Positions: make([]oracle.Stats, 3), MinCosine: 1, MeanCosine: 1}
	for _, c := range []struct {
		floor oracle.SeqReport
		k     float64
	}{{quiet, 2}, {floor, 0}} {
		got, err := r.AtFloor(c.floor, want, c.k)
		if err != nil {
			t.Fatal(err)
		}
		if got.MinCosine != r.MinCosine || got.MeanCosine != r.MeanCosine || !cmp.Equal(got.ArgmaxMismatches, r.ArgmaxMismatches) {
			t.Errorf("k %v, floor min %v: %v %v %v, want the report unchanged", c.k, c.floor.MinCosine, got.MinCosine, got.MeanCosine, got.ArgmaxMismatches)
		}
	}
	if _, err := r.AtFloor(oracle.SeqReport{Positions: make([]oracle.Stats, 2)}, want, 2); !errors.Is(err, oracle.ErrLength) {
		t.Errorf("a floor of 2 positions: %v, want ErrLength", err)
	}
	if _, err := r.AtFloor(floor, want, -1); err == nil {
		t.Error("k = -1: no error")
	}
	if got := r.FloorNote("ggml"); got != "" {
		t.Errorf("FloorNote without a floor = %q, want empty", got)
	}
}
