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
