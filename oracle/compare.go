package oracle

import (
	"fmt"
	"math"
)

// Stats is every metric of one comparison of got against want.
type Stats struct {
	Cosine      float64 `json:"cosine"`
	MaxAbs      float64 `json:"max_abs"`
	MaxAbsIndex int     `json:"max_abs_index"`
	RelErr      float64 `json:"rel_err"`
	NMSE        float64 `json:"nmse"`
	KL          float64 `json:"kl"`
	TopK        int     `json:"top_k"`
	TopKOverlap float64 `json:"top_k_overlap"`
	ArgmaxGot   int     `json:"argmax_got"`
	ArgmaxWant  int     `json:"argmax_want"`
	ArgmaxEqual bool    `json:"argmax_equal"`
}

// DefaultTopK is the k of Compare's top-k overlap when the caller gives 0.
const DefaultTopK = 5

// Compare computes every metric of got against want (logits: KL and top-k
// are over their softmaxes). k ≤ 0 means DefaultTopK. Any error of the
// metrics (non-finite, zero vector, length) is returned; no Stats is partly
// filled with NaN.
func Compare(got, want []float32, k int) (Stats, error) {
	if k <= 0 {
		k = DefaultTopK
	}
	var s Stats
	var err error
	if s.Cosine, err = Cosine(got, want); err != nil {
		return Stats{}, err
	}
	if s.MaxAbs, s.MaxAbsIndex, err = MaxAbs(got, want); err != nil {
		return Stats{}, err
	}
	if s.NMSE, err = NMSE(got, want); err != nil {
		return Stats{}, err
	}
	s.RelErr = math.Sqrt(s.NMSE)
	if s.KL, err = KL(got, want); err != nil {
		return Stats{}, err
	}
	s.TopK = min(k, len(want))
	if s.TopKOverlap, err = TopKOverlap(got, want, k); err != nil {
		return Stats{}, err
	}
	s.ArgmaxEqual, s.ArgmaxGot, s.ArgmaxWant, _ = ArgmaxEqual(got, want)
	return s, nil
}

// PositionError is a metric error at one position of a sequence.
type PositionError struct {
	Pos int
	Err error
}

func (e *PositionError) Error() string { return fmt.Sprintf("position %d: %v", e.Pos, e.Err) }
func (e *PositionError) Unwrap() error { return e.Err }

// SeqReport compares two logit sequences position by position.
type SeqReport struct {
	Positions []Stats `json:"positions"`
	// Worst is the position with the lowest cosine (the first among ties).
	Worst       int     `json:"worst"`
	MinCosine   float64 `json:"min_cosine"`
	MeanCosine  float64 `json:"mean_cosine"`
	MaxKL       float64 `json:"max_kl"`
	MaxAbs      float64 `json:"max_abs"`
	ArgmaxAgree int     `json:"argmax_agree"` // positions whose argmax agrees
	// FirstArgmaxMismatch is the first position whose argmax differs, -1 if none.
	FirstArgmaxMismatch int `json:"first_argmax_mismatch"`
}

// CompareSeq compares got[p] with want[p] for every position p. An error at
// any position (NaN, zero row, length) is returned as a *PositionError naming
// it: a sequence with one bad row has no report.
func CompareSeq(got, want [][]float32, k int) (SeqReport, error) {
	if len(got) != len(want) {
		return SeqReport{}, fmt.Errorf("%w: got has %d positions, want has %d", ErrLength, len(got), len(want))
	}
	if len(want) == 0 {
		return SeqReport{}, fmt.Errorf("%w: no positions to compare", ErrEmpty)
	}
	r := SeqReport{Positions: make([]Stats, len(want)), MinCosine: math.Inf(1), FirstArgmaxMismatch: -1}
	var sum float64
	for p := range want {
		s, err := Compare(got[p], want[p], k)
		if err != nil {
			return SeqReport{}, &PositionError{Pos: p, Err: err}
		}
		r.Positions[p] = s
		sum += s.Cosine
		if s.Cosine < r.MinCosine {
			r.MinCosine, r.Worst = s.Cosine, p
		}
		r.MaxKL = math.Max(r.MaxKL, s.KL)
		r.MaxAbs = math.Max(r.MaxAbs, s.MaxAbs)
		if s.ArgmaxEqual {
			r.ArgmaxAgree++
		} else if r.FirstArgmaxMismatch < 0 {
			r.FirstArgmaxMismatch = p
		}
	}
	r.MeanCosine = sum / float64(len(want))
	return r, nil
}
