package oracle

import (
	"errors"
	"fmt"
	"math"

	"github.com/aprqa/apr/schema"
)

// ErrOutOfTolerance is wrapped by every *MismatchError.
var ErrOutOfTolerance = errors.New("oracle: out of tolerance")

// Tolerance is apr's one tolerance type, a contract's (schema.Tolerance):
// |got−want| ≤ Abs + Rel·|want|, or at most ULP float32 units apart; zero
// is bit-exact. schema/tolerance.go says how every caller reads it.
type Tolerance = schema.Tolerance

// ULPDistance returns how many representable float32 values lie between a
// and b (schema.ULPDistance).
func ULPDistance(a, b float32) int64 { return schema.ULPDistance(a, b) }

// MismatchError reports the values outside a tolerance: how many, and the
// worst one (largest |got−want|).
type MismatchError struct {
	Tol       Tolerance
	Count     int // values outside the tolerance
	Index     int // the worst one
	Got, Want float32
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("oracle: %d values outside tolerance (%v); worst at [%d]: got %v, want %v (|diff| %g, %d ulp)",
		e.Count, e.Tol, e.Index, e.Got, e.Want, math.Abs(float64(e.Got)-float64(e.Want)), ULPDistance(e.Got, e.Want))
}

// Unwrap returns ErrOutOfTolerance.
func (e *MismatchError) Unwrap() error { return ErrOutOfTolerance }

// CheckClose returns nil when every got[i] is within t of want[i]; otherwise
// a *NonFiniteError (NaN/Inf anywhere), a length error, or a *MismatchError.
func CheckClose(got, want []float32, t Tolerance) error {
	if len(got) != len(want) {
		return fmt.Errorf("%w: got has %d values, want has %d", ErrLength, len(got), len(want))
	}
	if err := Finite("got", got); err != nil {
		return err
	}
	if err := Finite("want", want); err != nil {
		return err
	}
	var m *MismatchError
	worst := -1.0
	for i := range got {
		if t.Within(got[i], want[i]) {
			continue
		}
		if m == nil {
			m = &MismatchError{Tol: t}
		}
		m.Count++
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > worst {
			worst, m.Index, m.Got, m.Want = d, i, got[i], want[i]
		}
	}
	if m != nil {
		return m
	}
	return nil
}
