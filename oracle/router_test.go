package oracle_test

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/oracle"
)

// routerTrace is a trace of 2 layers × 4 positions of 4 experts (k = 2),
// with decided routers everywhere except where set overrides a vector.
func routerTrace(set map[[2]int][]float32) []oracle.Record {
	var recs []oracle.Record
	for layer := range 2 {
		for pos := range 4 {
			v := []float32{0.5, 0.3, 0.15, 0.05} // gap of the 2nd and 3rd: 0.15
			if o, ok := set[[2]int{layer, pos}]; ok {
				v = o
			}
			recs = append(recs, oracle.Record{Layer: layer, Op: model.OpRouter, Pos: pos, Values: v},
				oracle.Record{Layer: layer, Op: model.OpFFNOut, Pos: pos, Values: []float32{float32(math.NaN())}})
		}
	}
	return recs
}

func TestRouterNearTies(t *testing.T) {
	tests := []struct {
		name string
		set  map[[2]int][]float32
		k    int
		eps  float64
		want []oracle.NearTie
	}{
		{"none", nil, 2, 1e-3, nil},
		{"planted near-tie at layer 1, position 2", map[[2]int][]float32{
			{1, 2}: {0.4, 0.3, 0.2995, 0.0005}, // 2nd and 3rd 5e-4 apart
		}, 2, 1e-3, []oracle.NearTie{{Pos: 2, Layer: 1, Gap: 5e-4}}},
		{"the smallest gap over layers is reported", map[[2]int][]float32{
			{0, 1}: {0.4, 0.3, 0.2992, 0.0008},
			{1, 1}: {0.4, 0.3, 0.2996, 0.0004},
		}, 2, 1e-3, []oracle.NearTie{{Pos: 1, Layer: 1, Gap: 4e-4}}},
		{"a close 1st and 2nd is no near-tie when k is 2", map[[2]int][]float32{
			{0, 3}: {0.35, 0.3496, 0.2, 0.1004},
		}, 2, 1e-3, nil},
		{"the same vector is one when k is 1", map[[2]int][]float32{
			{0, 3}: {0.35, 0.3496, 0.2, 0.1004},
		}, 1, 1e-3, []oracle.NearTie{{Pos: 3, Layer: 0, Gap: 4e-4}}},
		{"order of the experts does not matter", map[[2]int][]float32{
			{0, 0}: {0.0005, 0.2995, 0.4, 0.3},
		}, 2, 1e-3, []oracle.NearTie{{Pos: 0, Layer: 0, Gap: 5e-4}}},
		{"an exact tie", map[[2]int][]float32{
			{1, 0}: {0.5, 0.2, 0.2, 0.1},
		}, 2, 1e-3, []oracle.NearTie{{Pos: 0, Layer: 1, Gap: 0}}},
		{"a gap equal to eps is not below it", map[[2]int][]float32{
			{0, 2}: {0.125, 0.5, 0.25, 0.125},
		}, 2, 0.125, nil},
		{"eps 0 finds nothing, not even an exact tie", map[[2]int][]float32{
			{1, 0}: {0.5, 0.2, 0.2, 0.1},
		}, 2, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := oracle.RouterNearTies(routerTrace(tt.set), 4, tt.k, tt.eps)
			if err != nil {
				t.Fatalf("RouterNearTies(k=%d, eps=%g): %v", tt.k, tt.eps, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-7)); diff != "" {
				t.Errorf("RouterNearTies(k=%d, eps=%g) mismatch (-want +got):\n%s", tt.k, tt.eps, diff)
			}
		})
	}
}

func TestRouterNearTiesRefusesBadTraces(t *testing.T) {
	full := routerTrace(nil)
	drop := func(layer, pos int) []oracle.Record {
		var out []oracle.Record
		for _, r := range full {
			if r.Op == model.OpRouter && r.Layer == layer && r.Pos == pos {
				continue
			}
			out = append(out, r)
		}
		return out
	}
	with := func(r oracle.Record) []oracle.Record { return append(append([]oracle.Record(nil), full...), r) }
	tests := []struct {
		name      string
		recs      []oracle.Record
		positions int
		k         int
		eps       float64
		err       error
	}{
		{"a layer missing a position", drop(1, 3), 4, 2, 1e-3, oracle.ErrTrace},
		{"a position reported twice", with(oracle.Record{Layer: 0, Op: model.OpRouter, Pos: 1, Values: []float32{0.5, 0.3, 0.15, 0.05}}), 4, 2, 1e-3, oracle.ErrTrace},
		{"a position outside the sequence", with(oracle.Record{Layer: 0, Op: model.OpRouter, Pos: 4, Values: []float32{0.5, 0.3, 0.15, 0.05}}), 4, 2, 1e-3, oracle.ErrTrace},
		{"vectors of two lengths", with(oracle.Record{Layer: 2, Op: model.OpRouter, Pos: 0, Values: []float32{0.5, 0.5}}), 4, 2, 1e-3, oracle.ErrTrace},
		{"no more experts than used", full, 4, 4, 1e-3, oracle.ErrTrace},
		{"no router records", []oracle.Record{{Layer: 0, Op: model.OpFFNOut, Pos: 0, Values: []float32{1}}}, 1, 2, 1e-3, oracle.ErrTrace},
		{"a NaN probability", with(oracle.Record{Layer: 2, Op: model.OpRouter, Pos: 0, Values: []float32{0.5, float32(math.NaN()), 0.15, 0.05}}), 4, 2, 1e-3, oracle.ErrNonFinite},
		{"k of 0", full, 4, 0, 1e-3, oracle.ErrTrace},
		{"no positions", full, 0, 2, 1e-3, oracle.ErrEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := oracle.RouterNearTies(tt.recs, tt.positions, tt.k, tt.eps)
			if !errors.Is(err, tt.err) {
				t.Errorf("RouterNearTies(%d records, positions %d, k %d) = %v, %v; want an error wrapping %v", len(tt.recs), tt.positions, tt.k, got, err, tt.err)
			}
		})
	}
	for _, eps := range []float64{-1e-3, math.NaN()} {
		if _, err := oracle.RouterNearTies(full, 4, 2, eps); err == nil {
			t.Errorf("RouterNearTies(eps %v) gave no error", eps)
		}
	}
}

func TestCompareSeqWithExclusion(t *testing.T) {
	want := [][]float32{{1, 2, 3, 4}, {4, 3, 2, 1}, {1, 3, 2, 0}, {2, 2, 5, 1}}
	got := [][]float32{{1, 2, 3, 4.1}, {4, 3, 2, 1}, {0, 2, 3, 1}, {2, 2, 5, 1}} // position 2 swapped its top two
	tests := []struct {
		name         string
		exclude      []int
		wantExcluded []int
		worst        int
		compared     int
		argmaxAgree  int
	}{
		{"nothing excluded", nil, []int{}, 2, 4, 3},
		{"the planted position excluded", []int{2}, []int{2}, 0, 3, 3},
		{"duplicates and order do not matter", []int{2, 1, 2}, []int{1, 2}, 0, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := oracle.CompareSeqWith(got, want, oracle.SeqOptions{TopK: 2, Exclude: tt.exclude})
			if err != nil {
				t.Fatalf("CompareSeqWith(exclude %v): %v", tt.exclude, err)
			}
			if diff := cmp.Diff([]any{tt.wantExcluded, tt.worst, tt.compared, tt.argmaxAgree},
				[]any{r.Excluded, r.Worst, r.Compared, r.ArgmaxAgree}); diff != "" {
				t.Errorf("CompareSeqWith(exclude %v) excluded, worst, compared, argmax agree mismatch (-want +got):\n%s", tt.exclude, diff)
			}
			var sum float64
			minCos := math.Inf(1)
			ex := map[int]bool{}
			for _, p := range tt.exclude {
				ex[p] = true
			}
			for p, s := range r.Positions {
				if ex[p] {
					continue
				}
				sum += s.Cosine
				minCos = math.Min(minCos, s.Cosine)
			}
			if r.MinCosine != minCos || math.Abs(r.MeanCosine-sum/float64(tt.compared)) > 1e-15 {
				t.Errorf("CompareSeqWith(exclude %v) min %v mean %v, want %v and %v over the compared positions", tt.exclude, r.MinCosine, r.MeanCosine, minCos, sum/float64(tt.compared))
			}
			if len(r.Positions) != len(want) || r.Positions[2].Cosine >= 0.9 {
				t.Errorf("CompareSeqWith(exclude %v): the excluded position's stats must stay in Positions (got %d, cosine at 2 %v)", tt.exclude, len(r.Positions), r.Positions[2].Cosine)
			}
		})
	}

	// Errors: an excluded position is still checked; nothing left; out of range.
	bad := [][]float32{{1, 2, 3, 4}, {4, 3, 2, 1}, {0, float32(math.NaN()), 3, 1}, {2, 2, 5, 1}}
	var pe *oracle.PositionError
	if _, err := oracle.CompareSeqWith(bad, want, oracle.SeqOptions{Exclude: []int{2}}); !errors.As(err, &pe) || pe.Pos != 2 || !errors.Is(err, oracle.ErrNonFinite) {
		t.Errorf("CompareSeqWith with a NaN at an excluded position: error %v, want a PositionError at 2 wrapping ErrNonFinite", err)
	}
	if _, err := oracle.CompareSeqWith(got, want, oracle.SeqOptions{Exclude: []int{0, 1, 2, 3}}); !errors.Is(err, oracle.ErrEmpty) {
		t.Errorf("CompareSeqWith excluding every position: error %v, want ErrEmpty", err)
	}
	for _, p := range []int{-1, 4} {
		if _, err := oracle.CompareSeqWith(got, want, oracle.SeqOptions{Exclude: []int{p}}); !errors.Is(err, oracle.ErrLength) {
			t.Errorf("CompareSeqWith excluding position %d of 4: error %v, want ErrLength", p, err)
		}
	}
}

func TestCompareSeqWithArgmaxMargin(t *testing.T) {
	want := [][]float32{{3, 1, 0}, {2, 1.9, 0}, {0, 5, 1}}
	got := [][]float32{{1, 3, 0}, {1.9, 2, 0}, {0, 5, 1}} // positions 0 (margin 2) and 1 (margin 0.1) differ
	tests := []struct {
		name    string
		margin  float64
		exclude []int
		want    []int
	}{
		{"every mismatch", 0, nil, []int{0, 1}},
		{"only where the reference is decided", 0.2, nil, []int{0}},
		{"excluded positions are not counted", 0, []int{0}, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := oracle.CompareSeqWith(got, want, oracle.SeqOptions{ArgmaxMargin: tt.margin, Exclude: tt.exclude})
			if err != nil {
				t.Fatalf("CompareSeqWith(margin %g): %v", tt.margin, err)
			}
			if diff := cmp.Diff(tt.want, r.ArgmaxMismatches); diff != "" {
				t.Errorf("CompareSeqWith(margin %g, exclude %v) argmax mismatches (-want +got):\n%s", tt.margin, tt.exclude, diff)
			}
		})
	}
}

func TestTopMargin(t *testing.T) {
	tests := []struct {
		name   string
		x      []float32
		best   int
		margin float64
	}{
		{"decided", []float32{0, 3, 1}, 1, 2},
		{"tie", []float32{2, 0, 2}, 0, 0},
		{"one value", []float32{7}, 0, math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, m, err := oracle.TopMargin(tt.x)
			if err != nil || b != tt.best || m != tt.margin {
				t.Errorf("TopMargin(%v) = %d, %v, %v; want %d, %v", tt.x, b, m, err, tt.best, tt.margin)
			}
		})
	}
	if _, _, err := oracle.TopMargin([]float32{1, float32(math.Inf(1))}); !errors.Is(err, oracle.ErrNonFinite) {
		t.Errorf("TopMargin with +Inf: error %v, want ErrNonFinite", err)
	}
}
