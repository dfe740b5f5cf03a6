package oracle_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
