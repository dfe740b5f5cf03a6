package oracle

import (
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/model"
)

// Record is one intermediate result an engine reported through model.Trace.
type Record struct {
	Layer  int       `json:"layer"`
	Op     string    `json:"op"`
	Pos    int       `json:"pos"`
	Values []float32 `json:"-"`
}

// Recording collects an engine's trace. Its zero value is ready to use; it
// is not safe for concurrent use (engines call a trace from one goroutine).
type Recording struct {
	Records []Record
	// Ops, when non-nil, keeps only these op names (a trace of every op of a
	// large model is large).
	Ops map[string]bool
}

// Trace returns a model.Trace that appends a copy of each result.
func (r *Recording) Trace() model.Trace {
	return func(layer int, op string, pos int, values []float32) {
		if r.Ops != nil && !r.Ops[op] {
			return
		}
		r.Records = append(r.Records, Record{Layer: layer, Op: op, Pos: pos, Values: append([]float32(nil), values...)})
	}
}

// Divergence is the first place two traces disagree beyond a threshold.
type Divergence struct {
	Layer  int     `json:"layer"`
	Op     string  `json:"op"`
	Pos    int     `json:"pos"`
	Cosine float64 `json:"cosine"`  // 0 when Reason is not a metric
	MaxAbs float64 `json:"max_abs"` // 0 when Reason is not a metric
	// NMSE is Σ(b−a)²/Σa² of the record (test-backend-ops' measure); 0 when
	// Reason is not a metric.
	NMSE   float64 `json:"nmse"`
	Reason string  `json:"reason"`
}

func (d *Divergence) String() string {
	return fmt.Sprintf("layer %d op %s pos %d: %s", d.Layer, d.Op, d.Pos, d.Reason)
}

// DivergenceTol says when two records diverge: cosine below MinCosine or
// max-abs above MaxAbs (0 disables that bound). NaN, Inf, a length mismatch
// or a zero vector against a non-zero one always diverge.
type DivergenceTol struct {
	MinCosine float64
	MaxAbs    float64
}

// TraceDiff is the result of comparing two traces.
type TraceDiff struct {
	First     *Divergence `json:"first"`     // nil when none diverged
	Compared  int         `json:"compared"`  // records present in both
	OnlyInA   int         `json:"only_in_a"` // ops one engine reports and the other does not
	OnlyInB   int         `json:"only_in_b"`
	Divergent int         `json:"divergent"` // records beyond the tolerance
}

type traceKey struct {
	layer int
	op    string
	pos   int
}

type stageKey struct {
	layer int
	op    string
}

// FirstDivergence compares trace a (the reference) with trace b record by
// record, matching (layer, op, pos), and returns the first divergent one.
// "First" follows the computation: stages (layer, op) in the order a first
// reported them, and within a stage the lowest position — so an engine that
// batches positions and one that runs them one by one bisect the same way.
// Records only one side reports are counted, not compared.
func FirstDivergence(a, b []Record, tol DivergenceTol) TraceDiff {
	bi := make(map[traceKey]*Record, len(b))
	for i := range b {
		r := &b[i]
		bi[traceKey{r.Layer, r.Op, r.Pos}] = r
	}
	stageOrder := map[stageKey]int{}
	for _, r := range a {
		k := stageKey{r.Layer, r.Op}
		if _, ok := stageOrder[k]; !ok {
			stageOrder[k] = len(stageOrder)
		}
	}
	var d TraceDiff
	seen := make(map[traceKey]bool, len(a))
	bestStage, bestPos := math.MaxInt, math.MaxInt
	for i := range a {
		ra := &a[i]
		k := traceKey{ra.Layer, ra.Op, ra.Pos}
		seen[k] = true
		rb, ok := bi[k]
		if !ok {
			d.OnlyInA++
			continue
		}
		d.Compared++
		div := diverges(ra, rb, tol)
		if div == nil {
			continue
		}
		d.Divergent++
		st := stageOrder[stageKey{ra.Layer, ra.Op}]
		if st < bestStage || (st == bestStage && ra.Pos < bestPos) {
			bestStage, bestPos, d.First = st, ra.Pos, div
		}
	}
	for k := range bi {
		if !seen[k] {
			d.OnlyInB++
		}
	}
	return d
}

func diverges(a, b *Record, tol DivergenceTol) *Divergence {
	d := &Divergence{Layer: a.Layer, Op: a.Op, Pos: a.Pos}
	if len(a.Values) == 0 && len(b.Values) == 0 {
		return nil
	}
	c, err := Cosine(b.Values, a.Values)
	if err != nil {
		if zv, ok := err.(*ZeroVectorError); ok && zv.Vector == "want" {
			// The reference is zero: b must be zero too.
			if ma, _, err2 := MaxAbs(b.Values, a.Values); err2 == nil && ma == 0 {
				return nil
			}
		}
		d.Reason = err.Error()
		return d
	}
	ma, _, _ := MaxAbs(b.Values, a.Values)
	nmse, _ := NMSE(b.Values, a.Values)
	d.Cosine, d.MaxAbs, d.NMSE = c, ma, nmse
	switch {
	case c < tol.MinCosine:
		d.Reason = fmt.Sprintf("cosine %.9f < %.9f (NMSE %.3g)", c, tol.MinCosine, nmse)
	case tol.MaxAbs > 0 && ma > tol.MaxAbs:
		d.Reason = fmt.Sprintf("max-abs %g > %g (NMSE %.3g)", ma, tol.MaxAbs, nmse)
	default:
		return nil
	}
	return d
}
