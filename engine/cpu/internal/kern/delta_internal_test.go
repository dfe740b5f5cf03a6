package kern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDeltaRowMatchesGo: the selected DeltaRow (AVX2 where the machine has
// it) gives the Go twin's bits — the returned output and every updated
// state value — for lengths 0…40 and 128 (a qwen35 head), on random values
// of mixed magnitude, and writes nothing past the row (guards).
func TestDeltaRowMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	val := func() float32 {
		return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(5)-2)))
	}
	lengths := []int{128}
	for n := 0; n <= 40; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for rep := 0; rep < 20; rep++ {
			k, q := make([]float32, n), make([]float32, n)
			a := make([]float32, n+2)
			for i := range k {
				k[i], q[i] = val(), val()
			}
			for i := range a {
				a[i] = val()
			}
			const guard = 12345.678
			a[n], a[n+1] = guard, guard
			b := append([]float32(nil), a...)
			decay, v, beta := float32(rng.Float64()), val(), float32(rng.Float64())
			got := DeltaRow(a[:n], k, q, decay, v, beta)
			want := float32(0)
			if n > 0 {
				want = deltaRowGo(b[:n], k, q, decay, v, beta)
			}
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("n=%d rep %d: output %v, Go twin %v", n, rep, got, want)
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("n=%d rep %d: state[%d] = %v, Go twin %v (guards at %d, %d)", n, rep, i, a[i], b[i], n, n+1)
				}
			}
		}
	}
}
