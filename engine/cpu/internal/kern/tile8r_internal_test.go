package kern

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/quant"
)

// q8Rows returns eight Q8_0 activation rows of n values from QuantizeQ8_0
// (quants −127..127), with some blocks all zero and some saturated.
func q8Rows(rng *rand.Rand, n int) (a []byte, stride int) {
	x := make([]float32, 8*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(50) == 0 {
			x[i] *= 1e3
		}
	}
	for i := 0; i < 32 && i < len(x); i++ {
		x[i] = 0 // row 0, block 0: d = 0
	}
	a = make([]byte, 8*n/32*q80Bytes)
	quantizeQ8_0Go(x, a)
	return a, n / 32 * q80Bytes
}

// TestRepackQ8AsmMatchesGo: the repacking in use (assembly on AVX2) lays out
// quants and corrections exactly as its Go twin, for each bias.
func TestRepackQ8AsmMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, nb := range []int{1, 3, 28} {
		a := make([]byte, 8*(nb*q80Bytes+1))
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		stride := nb*q80Bytes + rng.IntN(2) // rows need not be adjacent
		for _, bias := range []int{0, 8, 16} {
			got, want := make([]byte, nb*256), make([]byte, nb*256)
			var gc, wc []byte
			if bias != 0 {
				gc, wc = make([]byte, nb*256), make([]byte, nb*256)
			}
			repackQ8(nb, a, stride, got, gc, bias)
			repackQ8Go(nb, a, stride, want, wc, bias)
			if string(got) != string(want) || string(gc) != string(wc) {
				t.Fatalf("nb=%d bias=%d: repackQ8 differs from repackQ8Go", nb, bias)
			}
		}
	}
}

// TestRepackQ8Layout pins the Go twin's layout on a small case.
func TestRepackQ8Layout(t *testing.T) {
	a := make([]byte, 8*2*q80Bytes)
	for r := 0; r < 8; r++ {
		for b := 0; b < 2; b++ {
			for j := 0; j < 32; j++ {
				a[r*2*q80Bytes+b*q80Bytes+2+j] = byte(int8(j - 16 + r - b))
			}
		}
	}
	aq, corr := make([]byte, 512), make([]byte, 512)
	repackQ8Go(2, a, 2*q80Bytes, aq, corr, 16)
	for r := 0; r < 8; r++ {
		for b := 0; b < 2; b++ {
			for j := 0; j < 32; j++ {
				if got, want := int8(aq[256*b+32*r+j]), int8(j-16+r-b); got != want {
					t.Fatalf("aq block %d row %d quant %d = %d, want %d", b, r, j, got, want)
				}
			}
			for k := 0; k < 8; k++ {
				want := int32(0)
				for j := 4 * k; j < 4*k+4; j++ {
					want += int32(j - 16 + r - b)
				}
				o := 256*b + 32*r + 4*k
				if got := int32(le32(corr[o:])); got != 16*want {
					t.Fatalf("corr block %d row %d lane %d = %d, want %d", b, r, k, got, 16*want)
				}
			}
		}
	}
}

// TestTile8RRowsEqualDot: every registered tile8r kernel gives each of its
// eight rows bit for bit what the single-row kernel gives, for block counts
// below, at and above the four-block ring of scale products.
func TestTile8RRowsEqualDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	found := 0
	for _, e := range List() {
		if e.Key.Op != OpMatMul || !e.Runnable {
			continue
		}
		k, _ := Lookup(e.Key)
		if k.tile8r == nil {
			continue
		}
		found++
		info, _ := quant.Lookup(e.Key.Type)
		for _, nb := range []int{1, 2, 3, 4, 5, 8, 9, 28} {
			n := 32 * nb
			a, stride := q8Rows(rng, n)
			acts := &Acts{Type: quant.Q8_0, Rows: 8, Cols: n, Data: a}
			sc := actScales(acts, nil)
			aq := make([]byte, nb*256)
			var corr []byte
			if k.corrBias != 0 {
				corr = make([]byte, nb*256)
			}
			repackQ8Go(nb, a, stride, aq, corr, k.corrBias)
			for trial := 0; trial < 3; trial++ {
				w := make([]byte, nb*info.TypeSize)
				for i := range w {
					w[i] = byte(rng.Uint32())
				}
				for b := 0; b < nb; b++ {
					w[b*info.TypeSize] = byte(rng.Uint32())
					w[b*info.TypeSize+1] = byte(0x20 + rng.IntN(0x18)) // finite fp16 scale
				}
				out := make([]float32, 8*3)
				k.tile8r(n, w, aq, corr, sc, out, 3)
				for r := 0; r < 8; r++ {
					want := k.dot(n, w, a[r*stride:(r+1)*stride])
					if got := out[3*r]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s nb=%d row %d: tile8r = %g (%#08x), dot = %g (%#08x)", k.Contract, nb, r, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	}
	if _, err := Lookup(Key{OpMatMul, quant.Q8_0, Backend, ISAAVX2}); err == nil && found == 0 {
		t.Fatal("no tile8r kernel registered on an AVX2 machine")
	}
}

// TestMulRunsTile8R: Mul with m ≥ 8 goes through the tile8r kernel of a
// kernel that has one (and still equals the single-row results).
func TestMulRunsTile8R(t *testing.T) {
	for _, e := range List() {
		if e.Key.Op != OpMatMul || !e.Runnable {
			continue
		}
		k, _ := Lookup(e.Key)
		if k.tile8r == nil {
			continue
		}
		calls := 0
		saved := k.tile8r
		k.tile8r = func(n int, w, aq, corr []byte, sc []float32, out []float32, ostride int) {
			calls++
			saved(n, w, aq, corr, sc, out, ostride)
		}
		pool := NewPool(1)
		var s Scratch
		const rows, n, m = 5, 64, 17
		info, _ := quant.Lookup(e.Key.Type)
		w := Weights{Type: e.Key.Type, Rows: rows, Cols: n, Data: make([]byte, rows*n/32*info.TypeSize)}
		for i := range w.Data {
			w.Data[i] = byte(i * 7)
		}
		for i := 0; i < len(w.Data); i += info.TypeSize {
			w.Data[i], w.Data[i+1] = 0, 0x3c
		}
		x := make([]float32, m*n)
		for i := range x {
			x[i] = float32(i%13) - 6
		}
		dst := make([]float32, m*rows)
		err := k.Mul(pool, &s, dst, w, x, m)
		k.tile8r = saved
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := 2 * rows; calls != want {
			t.Errorf("%s: Mul(m=%d) made %d tile8r calls, want %d", k.Contract, m, calls, want)
		}
	}
}
