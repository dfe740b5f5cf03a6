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

// TestRepackQ8KLayout pins the Q8_K group layout on a small case.
func TestRepackQ8KLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	a := make([]byte, 8*2*q8KBytes)
	for i := range a {
		a[i] = byte(rng.Uint32())
	}
	aq := make([]byte, 2*q8KGroupBytes)
	repackQ8KGroup(2, a, 2*q8KBytes, aq)
	for r := 0; r < 8; r++ {
		for b := 0; b < 2; b++ {
			blk := a[(2*r+b)*q8KBytes:]
			o := b * q8KGroupBytes
			if string(aq[o+256*r:o+256*r+256]) != string(blk[4:260]) {
				t.Fatalf("block %d row %d: quants not at %d", b, r, o+256*r)
			}
			for i := 0; i < 8; i++ {
				want := int16(le16(blk[260+4*i:])) + int16(le16(blk[262+4*i:]))
				if got := int16(le16(aq[o+2048+32*(r/2)+16*(r%2)+2*i:])); got != want {
					t.Fatalf("block %d row %d: pair sum %d = %d, want %d", b, r, i, got, want)
				}
			}
			for l := 0; l < 4; l++ {
				if got := le32(aq[o+2176+32*(r/2)+16*(r%2)+4*l:]); got != le32(blk) {
					t.Fatalf("block %d row %d: scale copy %d = %#x, want %#x", b, r, l, got, le32(blk))
				}
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

// q8KRows returns eight Q8_K activation rows of n values from QuantizeQ8_K.
func q8KRows(rng *rand.Rand, n int) (a []byte, stride int) {
	x := make([]float32, 8*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(50) == 0 {
			x[i] *= 1e3
		}
	}
	for i := 0; i < 256 && i < len(x); i++ {
		x[i] = 0 // row 0, block 0: d = 0
	}
	a = make([]byte, 8*n/256*q8KBytes)
	quantizeQ8_KGo(x, a)
	return a, n / 256 * q8KBytes
}

// tileWeights returns random weight blocks of type t with finite fp16
// scales (every 2-byte field the type's scales live in).
func tileWeights(rng *rand.Rand, t quant.Type, nb int) []byte {
	info, _ := quant.Lookup(t)
	w := make([]byte, nb*info.TypeSize)
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	offs := map[quant.Type][]int{quant.Q4_K: {0, 2}, quant.Q5_K: {0, 2}, quant.Q6_K: {208}}[t]
	if offs == nil {
		offs = []int{0}
	}
	for b := 0; b < nb; b++ {
		for _, o := range offs {
			w[b*info.TypeSize+o] = byte(rng.Uint32())
			w[b*info.TypeSize+o+1] = byte(0x20 + rng.IntN(0x18)) // finite fp16
		}
	}
	return w
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
		for _, nb := range []int{1, 2, 3, 4, 5, 8, 9, 28} {
			n := k.actBlock * nb
			var a, aq, corr []byte
			var stride int
			var sc []float32
			if k.Act == quant.Q8_K {
				if nb > 5 {
					continue
				}
				a, stride = q8KRows(rng, n)
				aq = make([]byte, nb*q8KGroupBytes)
				repackQ8KGroup(nb, a, stride, aq)
			} else {
				a, stride = q8Rows(rng, n)
				sc = actScales(&Acts{Type: quant.Q8_0, Rows: 8, Cols: n, Data: a}, nil)
				aq = make([]byte, nb*256)
				if k.corrBias != 0 {
					corr = make([]byte, nb*256)
				}
				repackQ8Go(nb, a, stride, aq, corr, k.corrBias)
			}
			for trial := 0; trial < 3; trial++ {
				w := tileWeights(rng, e.Key.Type, n/k.block)
				out := make([]float32, 8*3)
				k.tile8r(n, w, len(w), 1, aq, corr, sc, make([]float32, tileAccFloats), tileFirst|tileLast, out, 3)
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
		k.tile8r = func(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int) {
			calls += rows
			saved(n, w, wstride, rows, aq, corr, sc, acc, flags, out, ostride)
		}
		pool := NewPool(1)
		var s Scratch
		const rows, m = 5, 17
		n := 2 * k.actBlock
		w := Weights{Type: e.Key.Type, Rows: rows, Cols: n, Data: tileWeights(rand.New(rand.NewPCG(1, 2)), e.Key.Type, rows*n/k.block)}
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
			t.Errorf("%s: Mul(m=%d) ran %d weight rows through tile8r, want %d", k.Contract, m, calls, want)
		}
	}
}

// TestTile8RPiecesEqualWhole: a row passed to a tile8r kernel in pieces
// (the accumulators carried in acc) gives bit for bit the one-call result,
// for pieces of one block, uneven pieces and a stale acc on the first.
func TestTile8RPiecesEqualWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	for _, e := range List() {
		if e.Key.Op != OpMatMul || !e.Runnable {
			continue
		}
		k, _ := Lookup(e.Key)
		if k.tile8r == nil {
			continue
		}
		nb := 7
		n := k.actBlock * nb
		bb := repackedBlockBytes(k.Act)
		var a, aq, corr []byte
		var stride int
		var sc []float32
		if k.Act == quant.Q8_K {
			a, stride = q8KRows(rng, n)
			aq = make([]byte, nb*bb)
			repackQ8KGroup(nb, a, stride, aq)
		} else {
			a, stride = q8Rows(rng, n)
			sc = actScales(&Acts{Type: quant.Q8_0, Rows: 8, Cols: n, Data: a}, nil)
			aq = make([]byte, nb*bb)
			if k.corrBias != 0 {
				corr = make([]byte, nb*bb)
			}
			repackQ8Go(nb, a, stride, aq, corr, k.corrBias)
		}
		const rows = 3
		w := tileWeights(rng, e.Key.Type, rows*nb)
		wrb := nb * k.wBytes
		want := make([]float32, 8*rows)
		for j := 0; j < rows; j++ {
			k.tile8r(n, w[j*wrb:(j+1)*wrb], wrb, 1, aq, corr, sc, make([]float32, tileAccFloats), tileFirst|tileLast, want[j:], rows)
		}
		for _, cuts := range [][]int{{1, 2, 3, 4, 5, 6}, {3}, {1, 6}, {2, 4}, {}} {
			acc := make([]float32, rows*tileAccFloats)
			for i := range acc {
				acc[i] = 1e9 // stale: must be ignored by the first piece
			}
			got := make([]float32, 8*rows)
			for i := range got {
				got[i] = -7 // must be written only by the last piece
			}
			bounds := append(append([]int{0}, cuts...), nb)
			for p := 0; p+1 < len(bounds); p++ {
				b0, b1 := bounds[p], bounds[p+1]
				flags := 0
				if b0 == 0 {
					flags |= tileFirst
				}
				if b1 == nb {
					flags |= tileLast
				}
				var cp []byte
				if corr != nil {
					cp = corr[b0*bb : b1*bb]
				}
				var sp []float32
				if sc != nil {
					sp = sc[8*b0 : 8*b1]
				}
				if flags&tileLast == 0 {
					for _, v := range got {
						if v != -7 {
							t.Fatalf("%s: out written before the last piece", k.Contract)
						}
					}
				}
				k.tile8r((b1-b0)*k.actBlock, w[b0*k.wBytes:(rows-1)*wrb+b1*k.wBytes], wrb, rows, aq[b0*bb:b1*bb], cp, sp, acc, flags, got, rows)
			}
			for r := range want {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					t.Fatalf("%s pieces %v row %d: %g, one call %g", k.Contract, cuts, r, got[r], want[r])
				}
			}
		}
	}
}

// TestMulLongRowsEqualMatVec: with rows long enough for the tile8r kernels
// to take them in pieces (4864 values: qwen2.5-0.5b's FFN width), Mul with
// m = 17 still gives every row bit for bit the matvec result, on one and
// two threads.
func TestMulLongRowsEqualMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	for _, threads := range []int{1, 2} {
		pool := NewPool(threads)
		for _, e := range List() {
			if e.Key.Op != OpMatMul || !e.Runnable {
				continue
			}
			k, _ := Lookup(e.Key)
			if k.tile8r == nil {
				continue
			}
			mvKey := e.Key
			mvKey.Op = OpMatVec
			mv, _ := Lookup(mvKey)
			const n, rows, m = 4864, 21, 17
			if nb := n / k.actBlock; nb*repackedBlockBytes(k.Act) <= mmPieceBytes {
				t.Fatalf("%s: %d values fit one piece; the test needs several", k.Contract, n)
			}
			w := Weights{Type: e.Key.Type, Rows: rows, Cols: n, Data: tileWeights(rng, e.Key.Type, rows*n/k.block)}
			x := make([]float32, m*n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			var s Scratch
			got := make([]float32, m*rows)
			if err := k.Mul(pool, &s, got, w, x, m); err != nil {
				t.Fatal(err)
			}
			one := make([]float32, rows)
			for i := 0; i < m; i++ {
				if err := mv.Mul(pool, &s, one, w, x[i*n:(i+1)*n], 1); err != nil {
					t.Fatal(err)
				}
				for r := 0; r < rows; r++ {
					if g, w := got[i*rows+r], one[r]; math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("threads=%d: %s.Mul(m=%d) row %d col %d = %g, matvec %g", threads, k.Contract, m, i, r, g, w)
					}
				}
			}
		}
		pool.Close()
	}
}
