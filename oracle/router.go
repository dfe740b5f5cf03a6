package oracle

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/aprqa/apr/engine/model"
)

// ErrTrace: a trace that is incomplete or malformed for the question asked
// (a position or layer missing, vectors of different lengths, a record
// twice). A verdict drawn from it would rest on what was not reported.
var ErrTrace = errors.New("oracle: incomplete or malformed trace")

// NearTie is a position at which a mixture-of-experts router is within eps
// of choosing other experts: at some layer its k-th and (k+1)-th largest
// probabilities differ by less than eps. Noise of the size activation
// quantization brings can swap the expert there, and with it the
// position's output, so a logits comparison leaves such positions out of
// its minimum and mean — and reports them.
type NearTie struct {
	Pos   int     `json:"pos"`
	Layer int     `json:"layer"` // the layer of the smallest gap (the lowest among equal gaps)
	Gap   float64 `json:"gap"`   // the smallest k-th minus (k+1)-th probability over the layers
}

// RouterNearTies returns the near-ties of one sequence's router trace, in
// increasing position order. recs are a trace's records; those of op
// model.OpRouter (router probabilities, one vector of n_expert values per
// layer and position) are read and the others ignored. positions is the
// sequence length and k the number of experts each token uses. A position
// is a near-tie when at any layer the k-th and (k+1)-th largest
// probabilities differ by less than eps (strictly).
//
// The trace must be complete: at least one layer, every reported layer
// with every position 0…positions−1 exactly once, every vector of one
// length greater than k. Anything else — or a NaN or Inf, k < 1, a negative
// or NaN eps, positions < 1 — is an error (ErrTrace, ErrNonFinite, ErrEmpty),
// never an empty answer: a near-tie that was not reported cannot be
// excluded, and a position that was not looked at cannot be vouched for.
func RouterNearTies(recs []Record, positions, k int, eps float64) ([]NearTie, error) {
	if positions < 1 {
		return nil, fmt.Errorf("%w: router near-ties of %d positions", ErrEmpty, positions)
	}
	if k < 1 {
		return nil, fmt.Errorf("%w: %d experts used per token, want at least 1", ErrTrace, k)
	}
	if math.IsNaN(eps) || eps < 0 {
		return nil, fmt.Errorf("oracle: near-tie eps %v, want a number ≥ 0", eps)
	}
	width := -1
	seen := map[int][]bool{} // layer → positions reported
	worst := make([]NearTie, positions)
	for p := range worst {
		worst[p] = NearTie{Pos: p, Layer: -1, Gap: math.Inf(1)}
	}
	sorted := []float64{}
	for i := range recs {
		r := &recs[i]
		if r.Op != model.OpRouter {
			continue
		}
		if r.Pos < 0 || r.Pos >= positions {
			return nil, fmt.Errorf("%w: router record at layer %d has position %d, outside [0, %d)", ErrTrace, r.Layer, r.Pos, positions)
		}
		if width < 0 {
			width = len(r.Values)
			if width <= k {
				return nil, fmt.Errorf("%w: router vectors have %d experts, need more than the %d used", ErrTrace, width, k)
			}
		}
		if len(r.Values) != width {
			return nil, fmt.Errorf("%w: router record at layer %d position %d has %d values, others %d", ErrTrace, r.Layer, r.Pos, len(r.Values), width)
		}
		if err := Finite(fmt.Sprintf("router probabilities (layer %d, position %d)", r.Layer, r.Pos), r.Values); err != nil {
			return nil, err
		}
		s := seen[r.Layer]
		if s == nil {
			s = make([]bool, positions)
			seen[r.Layer] = s
		}
		if s[r.Pos] {
			return nil, fmt.Errorf("%w: router probabilities of layer %d position %d reported twice", ErrTrace, r.Layer, r.Pos)
		}
		s[r.Pos] = true
		sorted = sorted[:0]
		for _, v := range r.Values {
			sorted = append(sorted, float64(v))
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(sorted)))
		gap := sorted[k-1] - sorted[k]
		w := &worst[r.Pos]
		if gap < w.Gap || (gap == w.Gap && r.Layer < w.Layer) {
			w.Gap, w.Layer = gap, r.Layer
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%w: no router probabilities (op %s) in %d records", ErrTrace, model.OpRouter, len(recs))
	}
	layers := make([]int, 0, len(seen))
	for l := range seen {
		layers = append(layers, l)
	}
	slices.Sort(layers)
	for _, l := range layers {
		if p := slices.Index(seen[l], false); p >= 0 {
			return nil, fmt.Errorf("%w: layer %d reports router probabilities for some positions but not position %d", ErrTrace, l, p)
		}
	}
	var out []NearTie
	for _, w := range worst {
		if w.Gap < eps {
			out = append(out, w)
		}
	}
	return out, nil
}

// TiePositions returns the positions of ties, for SeqOptions.Exclude.
func TiePositions(ties []NearTie) []int {
	out := make([]int, len(ties))
	for i, t := range ties {
		out[i] = t.Pos
	}
	return out
}

// RoutingFlip is a position where an engine under test routes a token to
// other experts than the judge: the lowest layer where the top-k sets
// differ, the judge's k-th minus (k+1)-th probability there (Gap) and the
// largest difference between the two engines' probabilities at that layer
// and position (Diff).
type RoutingFlip struct {
	Pos, Layer int
	Gap, Diff  float64
}

// Excused reports whether noise explains the flip: the engines' router
// probabilities differ by at most noise there, and the judge's gap is
// within twice that difference (each of the two experts may move by Diff).
func (f RoutingFlip) Excused(noise float64) bool {
	return f.Diff <= noise && f.Gap <= 2*f.Diff
}

func (f RoutingFlip) String() string {
	return fmt.Sprintf("position %d: routed to other experts than the reference at layer %d (reference k-th minus (k+1)-th probability %.3g, the engines' probabilities differ by up to %.3g there)",
		f.Pos, f.Layer, f.Gap, f.Diff)
}

// RoutingFlips compares an engine's router records (got) with the judge's
// over the same positions, k experts used per token, and returns the
// positions whose top-k expert sets differ, in position order, each at its
// lowest such layer. Records missing on either side, of different widths,
// or with NaN probabilities are an error (ErrTrace): a flip that was
// not looked for cannot be ruled out.
func RoutingFlips(judge, got []Record, positions, k int) ([]RoutingFlip, error) {
	type key struct{ layer, pos int }
	index := func(recs []Record, who string) (map[key][]float32, error) {
		m := map[key][]float32{}
		for _, r := range recs {
			if r.Op != model.OpRouter {
				continue
			}
			if r.Pos < 0 || r.Pos >= positions {
				return nil, fmt.Errorf("%w: %s router record at layer %d has position %d, outside [0, %d)", ErrTrace, who, r.Layer, r.Pos, positions)
			}
			m[key{r.Layer, r.Pos}] = r.Values
		}
		return m, nil
	}
	jm, err := index(judge, "reference")
	if err != nil {
		return nil, err
	}
	gm, err := index(got, "engine")
	if err != nil {
		return nil, err
	}
	if len(jm) != len(gm) {
		return nil, fmt.Errorf("%w: the reference traced %d router vectors, the engine %d", ErrTrace, len(jm), len(gm))
	}
	lowest := map[int]RoutingFlip{}
	for kk, jv := range jm {
		gv, ok := gm[kk]
		if !ok {
			return nil, fmt.Errorf("%w: the engine traced no router at layer %d position %d", ErrTrace, kk.layer, kk.pos)
		}
		if len(gv) != len(jv) || len(jv) <= k || k < 1 {
			return nil, fmt.Errorf("%w: router vectors of %d and %d experts at layer %d position %d, %d used", ErrTrace, len(jv), len(gv), kk.layer, kk.pos, k)
		}
		js, gap := topSet(jv, k)
		gs, _ := topSet(gv, k)
		if math.IsNaN(gap) {
			return nil, fmt.Errorf("%w: NaN router probability at layer %d position %d", ErrNonFinite, kk.layer, kk.pos)
		}
		if js == gs {
			continue
		}
		diff := 0.0
		for i := range jv {
			d := math.Abs(float64(jv[i]) - float64(gv[i]))
			if math.IsNaN(d) {
				return nil, fmt.Errorf("%w: NaN router probability at layer %d position %d", ErrNonFinite, kk.layer, kk.pos)
			}
			diff = max(diff, d)
		}
		if f, ok := lowest[kk.pos]; !ok || kk.layer < f.Layer {
			lowest[kk.pos] = RoutingFlip{Pos: kk.pos, Layer: kk.layer, Gap: gap, Diff: diff}
		}
	}
	out := make([]RoutingFlip, 0, len(lowest))
	for p := 0; p < positions; p++ {
		if f, ok := lowest[p]; ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// topSet is the set of the k largest entries (TopK, as text) and
// the k-th minus (k+1)-th value.
func topSet(v []float32, k int) (string, float64) {
	top := TopK(v, k+1)
	set := append([]int(nil), top[:k]...)
	sort.Ints(set)
	return fmt.Sprint(set), float64(v[top[k-1]]) - float64(v[top[k]])
}
