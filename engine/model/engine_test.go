package model

import (
	"testing"
	"unsafe"
)

// plainSession is a Session that allocates no rows.
type plainSession struct{}

func (plainSession) Eval([]int32, bool) ([][]float32, error) { return nil, nil }
func (plainSession) Pos() int                                { return 0 }
func (plainSession) SetTrace(Trace)                          {}

// rowSession is a RowAllocator that hands out one row.
type rowSession struct {
	plainSession
	row []float32
}

func (s *rowSession) LogitsRow(n int) ([]float32, error) {
	if len(s.row) != n {
		s.row = make([]float32, n)
	}
	return s.row, nil
}

// TestLogitsRow: a session that allocates rows gives its own; any other
// gets a new row of n values each time.
func TestLogitsRow(t *testing.T) {
	a, err := LogitsRow(plainSession{}, 7)
	if err != nil || len(a) != 7 {
		t.Fatalf("plain session: row of %d values (%v), want 7", len(a), err)
	}
	b, _ := LogitsRow(plainSession{}, 7)
	if unsafe.SliceData(a) == unsafe.SliceData(b) {
		t.Fatal("plain session: two calls shared a row")
	}
	s := &rowSession{}
	c, err := LogitsRow(s, 5)
	if err != nil || len(c) != 5 || unsafe.SliceData(c) != unsafe.SliceData(s.row) {
		t.Fatalf("row allocator: got %d values at %p (%v), want its own row of 5 at %p", len(c), unsafe.SliceData(c), err, unsafe.SliceData(s.row))
	}
}
