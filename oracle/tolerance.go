package oracle

import (
	"errors"
	"fmt"
	"math"
)

// ErrOutOfTolerance is wrapped by every *MismatchError.
var ErrOutOfTolerance = errors.New("oracle: out of tolerance")

// Tolerance is a named tolerance from a contract: a value got passes against
// want when |got−want| ≤ Abs + Rel·|want|, or when the two float32 values are
// at most ULP units in the last place apart. The zero Tolerance demands
// bit-exact equality (and treats +0 and −0 as equal).
type Tolerance struct {
	Abs float64 `json:"abs,omitempty"`
	Rel float64 `json:"rel,omitempty"`
	ULP int64   `json:"ulp,omitempty"`
}

func (t Tolerance) String() string {
	return fmt.Sprintf("abs %g, rel %g, ulp %d", t.Abs, t.Rel, t.ULP)
}

// Within reports whether got is within t of want. A NaN or Inf is never
// within any tolerance (even of itself).
func (t Tolerance) Within(got, want float32) bool {
	g, w := float64(got), float64(want)
	if math.IsNaN(g) || math.IsNaN(w) || math.IsInf(g, 0) || math.IsInf(w, 0) {
		return false
	}
	if math.Abs(g-w) <= t.Abs+t.Rel*math.Abs(w) {
		return true
	}
	return t.ULP > 0 && ULPDistance(got, want) <= t.ULP
}

// ULPDistance returns how many representable float32 values lie between a
// and b (0 when equal; +0 and −0 are 0 apart). NaN or Inf gives math.MaxInt64.
func ULPDistance(a, b float32) int64 {
	fa, fb := float64(a), float64(b)
	if math.IsNaN(fa) || math.IsNaN(fb) || math.IsInf(fa, 0) || math.IsInf(fb, 0) {
		return math.MaxInt64
	}
	ord := func(x float32) int64 {
		u := int64(math.Float32bits(x))
		if u&(1<<31) != 0 {
			return -(u & 0x7fffffff)
		}
		return u
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}

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
