package ref

import (
	"math"
	"math/rand"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
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

// TestEachIsSerial: work that each shares out among goroutines (a
// product's rows, the Gated DeltaNet heads) gives the logits of one
// goroutine bit for bit, and each calls every index exactly once.
func TestEachIsSerial(t *testing.T) {
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
	path := filepath.Join(testutil.Fixtures(t), "models", "synth", "qwen35-tiny-Q8_0.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	toks := []int32{1, 40, 300, 7, 99, 250, 13, 77}
	eval := func(threads int) [][]float32 {
		e, err := New(f, spec, Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.NewSession(len(toks))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.Eval(toks, true)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	one := eval(1)
	defer func(m int) { eachMin = m }(eachMin)
	eachMin = 0
	four := eval(4)
	for p := range one {
		for i := range one[p] {
			if math.Float32bits(one[p][i]) != math.Float32bits(four[p][i]) {
				t.Fatalf("position %d logit %d: 4 goroutines %v, 1 goroutine %v", p, i, four[p][i], one[p][i])
			}
		}
	}
}
