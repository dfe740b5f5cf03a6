package ref

import (
	"math"
	"math/rand"
	"sync/atomic"
	"testing"
)

// TestDot64IsDot: linear's products over widened values (dot64) are dot's
// bit for bit, at every length (the four chains and the tail) and over
// values of every magnitude.
func TestDot64IsDot(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for n := range 70 {
		for range 20 {
			a, b := make([]float32, n), make([]float32, n)
			for i := range a {
				a[i] = float32(r.NormFloat64() * math.Exp(r.NormFloat64()*8))
				b[i] = float32(r.NormFloat64() * math.Exp(r.NormFloat64()*8))
			}
			want, got := dot(a, b), dot64(widen(a, nil), widen(b, make([]float64, n)))
			if math.Float64bits(want) != math.Float64bits(got) {
				t.Fatalf("n %d: dot64 %v, dot %v", n, got, want)
			}
		}
	}
}

// TestEachCallsEveryIndexOnce: each shares out every index in [0, n)
// exactly once, whatever n against the goroutines.
func TestEachCallsEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 3, 16, 100} {
		seen := make([]int32, n)
		(&Engine{threads: 4}).each(n, parallelMin, func() func(int) {
			return func(i int) { atomic.AddInt32(&seen[i], 1) }
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n %d: index %d called %d times", n, i, c)
			}
		}
	}
}
