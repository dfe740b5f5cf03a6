package oracle

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
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
	// One check of the pair (lengths, finite values) for every metric.
	if err := pair(got, want); err != nil {
		return Stats{}, err
	}
	var s Stats
	var err error
	if s.Cosine, err = cosine(got, want); err != nil {
		return Stats{}, err
	}
	s.MaxAbs, s.MaxAbsIndex = maxAbs(got, want)
	if s.NMSE, err = nmse(got, want); err != nil {
		return Stats{}, err
	}
	s.RelErr = math.Sqrt(s.NMSE)
	s.KL = kl(got, want)
	s.TopK = min(k, len(want))
	if s.TopKOverlap, err = topKOverlap(got, want, k); err != nil {
		return Stats{}, err
	}
	s.ArgmaxGot, s.ArgmaxWant = argmax(got), argmax(want)
	s.ArgmaxEqual = s.ArgmaxGot == s.ArgmaxWant
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
//
// Positions holds every position's Stats, excluded ones included; the
// aggregates (Worst, MinCosine, MeanCosine, MaxKL, MaxAbs, ArgmaxAgree,
// FirstArgmaxMismatch, ArgmaxMismatches) are over the Compared positions
// only, those not in Excluded.
type SeqReport struct {
	Positions []Stats `json:"positions"`
	// Excluded are the positions SeqOptions.Exclude left out of the
	// aggregates, in increasing order (each once); their Stats are still in
	// Positions, so a caller can report what they measured.
	Excluded []int `json:"excluded"`
	// Compared is the number of positions the aggregates cover.
	Compared int `json:"compared"`
	// Worst is the position with the lowest cosine (the first among ties).
	Worst       int     `json:"worst"`
	MinCosine   float64 `json:"min_cosine"`
	MeanCosine  float64 `json:"mean_cosine"`
	MaxKL       float64 `json:"max_kl"`
	MaxAbs      float64 `json:"max_abs"`
	ArgmaxAgree int     `json:"argmax_agree"` // positions whose argmax agrees
	// FirstArgmaxMismatch is the first position whose argmax differs, -1 if none.
	FirstArgmaxMismatch int `json:"first_argmax_mismatch"`
	// ArgmaxMismatches are the positions whose argmax differs while want's
	// top-1 minus top-2 is at least SeqOptions.ArgmaxMargin (where want is
	// decided), in increasing order.
	ArgmaxMismatches []int `json:"argmax_mismatches"`
}

// SeqOptions refine CompareSeqWith.
type SeqOptions struct {
	// TopK is Compare's k (≤ 0: DefaultTopK).
	TopK int
	// Exclude lists positions to leave out of the aggregates (e.g. a
	// router's near-ties, RouterNearTies). They are still compared — a NaN
	// or a zero row there is still an error — and are reported in
	// SeqReport.Excluded. A position outside the sequence is an error, and
	// so is excluding every position: nothing would be left to judge.
	Exclude []int
	// ArgmaxMargin: an argmax mismatch counts in ArgmaxMismatches only where
	// want's top-1 minus top-2 logit is at least this (0: every mismatch).
	ArgmaxMargin float64
}

// CompareSeq compares got[p] with want[p] for every position p. An error at
// any position (NaN, zero row, length) is returned as a *PositionError naming
// it: a sequence with one bad row has no report.
func CompareSeq(got, want [][]float32, k int) (SeqReport, error) {
	return CompareSeqWith(got, want, SeqOptions{TopK: k})
}

// compareEach writes Compare(got[p], want[p], k) to out[p] for every
// position, the positions spread over GOMAXPROCS goroutines: each is
// independent (F2 judged qwen2.5's 8 × 151,936 logits in ~95 ms one after
// another on a 2-core box, most of a cached F2's time). The error is the
// lowest failing position's, as a serial loop would return it.
func compareEach(got, want [][]float32, k int, out []Stats) error {
	errs := make([]error, len(want))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(want)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := int(next.Add(1) - 1); p < len(want); p = int(next.Add(1) - 1) {
				out[p], errs[p] = Compare(got[p], want[p], k)
			}
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			return &PositionError{Pos: p, Err: err}
		}
	}
	return nil
}

// CompareSeqWith is CompareSeq with exclusions and an argmax margin.
func CompareSeqWith(got, want [][]float32, o SeqOptions) (SeqReport, error) {
	if len(got) != len(want) {
		return SeqReport{}, fmt.Errorf("%w: got has %d positions, want has %d", ErrLength, len(got), len(want))
	}
	if len(want) == 0 {
		return SeqReport{}, fmt.Errorf("%w: no positions to compare", ErrEmpty)
	}
	excluded := make([]bool, len(want))
	r := SeqReport{Positions: make([]Stats, len(want)), Excluded: []int{}, ArgmaxMismatches: []int{},
		MinCosine: math.Inf(1), FirstArgmaxMismatch: -1, Worst: -1}
	for _, p := range o.Exclude {
		if p < 0 || p >= len(want) {
			return SeqReport{}, fmt.Errorf("%w: excluded position %d is outside the %d positions", ErrLength, p, len(want))
		}
		excluded[p] = true
	}
	if err := compareEach(got, want, o.TopK, r.Positions); err != nil {
		return SeqReport{}, err
	}
	var sum float64
	for p := range want {
		s := r.Positions[p]
		if excluded[p] {
			r.Excluded = append(r.Excluded, p)
			continue
		}
		r.Compared++
		sum += s.Cosine
		if s.Cosine < r.MinCosine {
			r.MinCosine, r.Worst = s.Cosine, p
		}
		r.MaxKL = math.Max(r.MaxKL, s.KL)
		r.MaxAbs = math.Max(r.MaxAbs, s.MaxAbs)
		if s.ArgmaxEqual {
			r.ArgmaxAgree++
			continue
		}
		if r.FirstArgmaxMismatch < 0 {
			r.FirstArgmaxMismatch = p
		}
		if _, margin, _ := TopMargin(want[p]); margin >= o.ArgmaxMargin {
			r.ArgmaxMismatches = append(r.ArgmaxMismatches, p)
		}
	}
	if r.Compared == 0 {
		return SeqReport{}, fmt.Errorf("%w: all %d positions are excluded, none is left to compare", ErrEmpty, len(want))
	}
	r.MeanCosine = sum / float64(r.Compared)
	return r, nil
}
