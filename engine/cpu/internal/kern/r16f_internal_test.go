package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/quant"
)

// r16fChain is what every packed float kernel's output must be, written out
// from ggml's layout: one float32 fma chain over the values in order.
func r16fChain(t quant.Type, n int, w, a []byte) float32 {
	sz := floatSize(t)
	var acc float32
	for k := 0; k < n; k++ {
		acc = fma32(floatAt(t, w[k*sz:]), floatAt(t, a[k*sz:]), acc)
	}
	return acc
}

// r16fPairChain is what every BF16 pair kernel's output must be, written
// out from ggml's layout.
func r16fPairChain(n int, w, a []byte) float32 {
	var acc float32
	for j := 0; j < n/2; j++ {
		acc = ftz32(fma32(bf16DAZ(w[4*j+2:]), bf16DAZ(a[4*j+2:]), acc))
		acc = ftz32(fma32(bf16DAZ(w[4*j:]), bf16DAZ(a[4*j:]), acc))
	}
	if n%2 == 1 {
		acc = ftz32(fma32(bf16DAZ(w[2*n-2:]), bf16DAZ(a[2*n-2:]), acc))
	}
	return acc
}

// TestR16FPairsEqualChain: the BF16 pair kernels (VDPBF16PS where this CPU
// has AVX512-BF16, and the Go twin) give each output r16fPairChain bit for
// bit, for every activation-row count, with subnormal and huge values among
// the inputs, and write nothing past their rows.
func TestR16FPairsEqualChain(t *testing.T) {
	rng := rand.New(rand.NewPCG(79, 80))
	ks := map[string][]r16fFunc{"go": make([]r16fFunc, r16fActs)}
	for i := range ks["go"] {
		ks["go"][i] = r16fPairTwin(i + 1)
	}
	for _, e := range List() {
		if k, _ := Lookup(e.Key); e.Runnable && k != nil && k.r16fPairs && e.Key.Op == OpMatMul {
			ks[e.Contract] = k.r16f
		}
	}
	t.Logf("pair kernels checked: %d (go and %v)", len(ks), func() (n []string) {
		for name := range ks {
			n = append(n, name)
		}
		return
	}())
	for _, n := range []int{2, 6, 70} {
		var wd []byte
		for r := 0; r < 2*r16Rows; r++ {
			row := floatRow(rng, quant.BF16, n)
			if r == 3 {
				binary.LittleEndian.PutUint16(row, 0x0001) // a subnormal
			}
			wd = append(wd, row...)
		}
		w := make([]byte, 2*n*r16Rows*2)
		packBF16PairR16(2*r16Rows, n, wd, w, 0, 2)
		w0, w1 := w[:n*r16Rows*2], w[n*r16Rows*2:]
		astride := 2*n + 6
		a := make([]byte, r16fActs*astride)
		for tk := 0; tk < r16fActs; tk++ {
			copy(a[tk*astride:], floatRow(rng, quant.BF16, n))
		}
		binary.LittleEndian.PutUint16(a[2:], 0x8003) // a negative subnormal
		for name, fs := range ks {
			for nt := 1; nt <= r16fActs; nt++ {
				const ostride = 40
				out := make([]float32, r16fActs*ostride)
				for i := range out {
					out[i] = 777
				}
				fs[nt-1](n/2, w0, w1, a, astride, out, ostride)
				for tk := 0; tk < r16fActs; tk++ {
					for r := 0; r < ostride; r++ {
						got := out[tk*ostride+r]
						if tk >= nt || r >= 2*r16Rows {
							if got != 777 {
								t.Fatalf("%s n=%d nt=%d: wrote out[%d, %d]", name, n, nt, tk, r)
							}
							continue
						}
						want := r16fPairChain(n, wd[r*n*2:(r+1)*n*2], a[tk*astride:])
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%s n=%d nt=%d: out[%d, %d] = %g (%#x), want %g (%#x: the pair chain)", name, n, nt, tk, r, got, math.Float32bits(got), want, math.Float32bits(want))
						}
					}
				}
			}
		}
	}
}

// r16fKernels returns the packed float kernels of type t this machine runs
// (matmul keys; not the BF16 pair kernels), and the Go twins under "go".
func r16fKernels(t quant.Type) map[string][]r16fFunc {
	ks := map[string][]r16fFunc{"go": r16fTwins(t)}
	for _, e := range List() {
		if k, _ := Lookup(e.Key); e.Runnable && k != nil && k.r16f != nil && !k.r16fPairs && e.Key.Type == t && e.Key.Op == OpMatMul {
			ks[e.Contract] = k.r16f
		}
	}
	return ks
}

// TestPackFloatR16RoundTrip: UnpackRow of every row of a packed float
// matrix gives back the row (rows not a multiple of sixteen: the last group
// padded with zeros).
func TestPackFloatR16RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, ft := range floatTypes {
		k := Kernel{Key: Key{Op: OpMatMul, Type: ft.t, Backend: Backend, ISA: ISAGo}, Contract: "test", block: 1, wBytes: ft.size, actBlock: 1, aBytes: ft.size}
		k.pack = packFloatR16(ft.t)
		k.r16 = r16Format{block: r16Rows * ft.size, quants: r16Rows * ft.size, unit: 1}
		const rows, cols = 21, 37
		var wd []byte
		for r := 0; r < rows; r++ {
			wd = append(wd, floatRow(rng, ft.t, cols)...)
		}
		w, err := k.PackWeights(Weights{Type: ft.t, Rows: rows, Cols: cols, Data: wd})
		if err != nil {
			t.Fatal(err)
		}
		for i := rows % r16Rows; i < r16Rows; i++ {
			for v := 0; v < cols; v++ {
				if floatAt(ft.t, w.Packed[cols*r16Rows*ft.size+(v*r16Rows+i)*ft.size:]) != 0 {
					t.Fatalf("%s: padding row %d value %d is not zero", ft.t, i, v)
				}
			}
		}
		row := make([]byte, cols*ft.size)
		for r := 0; r < rows; r++ {
			if err := k.UnpackRow(w, r, row); err != nil {
				t.Fatal(err)
			}
			if string(row) != string(wd[r*cols*ft.size:(r+1)*cols*ft.size]) {
				t.Fatalf("%s: UnpackRow(%d) differs from the row", ft.t, r)
			}
		}
	}
}

// TestR16FEqualsChain: every registered packed float kernel (and its Go
// twin) gives each output the plain chain r16fChain, bit for bit, for
// every activation-row count, lengths with and without the unrolled
// loop's tail, and writes nothing past its rows (guards at the stride).
func TestR16FEqualsChain(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	for _, ft := range floatTypes {
		for _, n := range []int{1, 6, 67} {
			var wd []byte
			for r := 0; r < 2*r16Rows; r++ {
				wd = append(wd, floatRow(rng, ft.t, n)...)
			}
			w := make([]byte, 2*n*r16Rows*ft.size)
			packFloatR16(ft.t)(2*r16Rows, n, wd, w, 0, 2)
			w0, w1 := w[:n*r16Rows*ft.size], w[n*r16Rows*ft.size:]
			astride := 4*n + 12 // not the row length
			a := make([]byte, r16fActs*astride)
			arows := make([][]byte, r16fActs)
			for tk := range arows {
				arows[tk] = floatRow(rng, ft.t, n)
				for k := 0; k < n; k++ {
					putF32(a[tk*astride+4*k:], floatAt(ft.t, arows[tk][k*ft.size:]))
				}
			}
			for name, fs := range r16fKernels(ft.t) {
				for nt := 1; nt <= len(fs); nt++ {
					const ostride = 40
					out := make([]float32, r16fActs*ostride)
					for i := range out {
						out[i] = 777
					}
					fs[nt-1](n, w0, w1, a, astride, out, ostride)
					for tk := 0; tk < r16fActs; tk++ {
						for r := 0; r < ostride; r++ {
							got := out[tk*ostride+r]
							if tk >= nt || r >= 2*r16Rows {
								if got != 777 {
									t.Fatalf("%s %s n=%d nt=%d: wrote out[%d, %d]", name, ft.t, n, nt, tk, r)
								}
								continue
							}
							want := r16fChain(ft.t, n, wd[r*n*ft.size:(r+1)*n*ft.size], arows[tk])
							if math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("%s %s n=%d nt=%d: out[%d, %d] = %g, want %g (the chain)", name, ft.t, n, nt, tk, r, got, want)
							}
						}
					}
				}
			}
		}
	}
}

func putF32(b []byte, f float32) {
	b[0], b[1], b[2], b[3] = byte(math.Float32bits(f)), byte(math.Float32bits(f)>>8), byte(math.Float32bits(f)>>16), byte(math.Float32bits(f)>>24)
}

// TestMulWithGoR16F runs Mul's packed float path with the Go twins (so that
// it is tested in -tags noasm builds too), and with the registered kernels
// where this machine runs them: every output is the chain of its row pair,
// bit for bit, for one activation row (decode) and many (prefill, pieces of
// unequal size), weight rows that pad the last group and leave one group
// alone, several threads; and within the contract's bound of the float64 dot
// product. A matmul row equals the matvec of its activation row.
func TestMulWithGoR16F(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	for _, ft := range floatTypes {
		base, err := Lookup(Key{Op: OpMatMul, Type: ft.t, Backend: Backend, ISA: ISAGo})
		if err != nil {
			t.Fatal(err)
		}
		twin := *base
		twin.pack, twin.r16f, twin.expand = packFloatR16(ft.t), r16fTwins(ft.t), ft.expand
		twin.r16 = r16Format{block: r16Rows * ft.size, quants: r16Rows * ft.size, unit: 1}
		kernels := map[string]*Kernel{"go": &twin}
		if ft.t == quant.BF16 {
			pairs := twin
			pairs.pack, pairs.r16fPairs = packBF16PairR16, true
			pairs.r16 = r16Format{block: 64, quants: 64, unit: 2}
			pairs.r16f = make([]r16fFunc, r16fActs)
			for i := range pairs.r16f {
				pairs.r16f[i] = r16fPairTwin(i + 1)
			}
			kernels["go-pairs"] = &pairs
		}
		for _, op := range []Op{OpMatMul, OpMatVec} {
			for _, isa := range []ISA{ISAAVX512R16, ISAAVX512BF16, ISAAVX2R16} {
				if k, err := Lookup(Key{Op: op, Type: ft.t, Backend: Backend, ISA: isa}); err == nil {
					kernels[k.Contract] = k
				}
			}
		}
		for name, k := range kernels {
			for _, threads := range []int{1, 2} {
				pool := NewPool(threads)
				for _, c := range []struct{ n, rows, m int }{{37, 9, 1}, {37, 9, 13}, {8, 16, 1}, {520, 53, 31}, {24, 48, 15}, {1100, 40, 9}} {
					if k.Key.Op == OpMatVec && c.m != 1 {
						continue
					}
					t.Run(fmt.Sprintf("%s/%s/threads=%d/n=%d/rows=%d/m=%d", name, ft.t, threads, c.n, c.rows, c.m), func(t *testing.T) {
						wd := make([]byte, 0, c.rows*c.n*ft.size)
						for r := 0; r < c.rows; r++ {
							wd = append(wd, floatRow(rng, ft.t, c.n)...)
						}
						w, err := k.PackWeights(Weights{Type: ft.t, Rows: c.rows, Cols: c.n, Data: wd})
						if err != nil {
							t.Fatal(err)
						}
						var s Scratch
						x, dst := mulRandom(t, k, pool, &s, w, rng, c.m)
						arb := c.n * ft.size
						a := make([]byte, c.m*arb)
						k.convert(x, a)
						wrb := c.n * ft.size
						for i := 0; i < c.m; i++ {
							for r := 0; r < c.rows; r++ {
								wr, ar := wd[r*wrb:(r+1)*wrb], a[i*arb:(i+1)*arb]
								want := r16fChain(ft.t, c.n, wr, ar)
								if k.r16fPairs {
									want = r16fPairChain(c.n, wr, ar)
								}
								got := dst[i*c.rows+r]
								if math.Float32bits(got) != math.Float32bits(want) {
									t.Fatalf("dst[%d, %d] = %g, want %g", i, r, got, want)
								}
								// The contract: |got − Σ w·a| ≤ (n + 8)·2⁻²³·Σ|w·a|.
								var ref, mag float64
								for l := 0; l < c.n; l++ {
									p := float64(floatAt(ft.t, wr[l*ft.size:])) * float64(floatAt(ft.t, ar[l*ft.size:]))
									ref += p
									mag += math.Abs(p)
								}
								if d := math.Abs(float64(got) - ref); d > float64(c.n+8)*0x1p-23*mag {
									t.Fatalf("dst[%d, %d] = %g, Σ w·a = %g: off by %g, beyond the contract's %g", i, r, got, ref, d, float64(c.n+8)*0x1p-23*mag)
								}
							}
						}
					})
				}
				pool.Close()
			}
		}
	}
}

// BenchmarkR16FHot runs the prefill kernels on their most activation rows
// (14 on AVX-512, 6 on AVX2) and two
// groups of 512 values (in L1 and L2): the kernels' own speed, F16 and BF16
// widened on the way beside F32, and the BF16 pair kernel.
func BenchmarkR16FHot(b *testing.B) {
	rng := rand.New(rand.NewPCG(77, 78))
	const n = 512
	out := make([]float32, r16fActs*2*r16Rows)
	run := func(name string, fs []r16fFunc, steps int, w, a []byte, astride int) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				fs[len(fs)-1](steps, w[:len(w)/2], w[len(w)/2:], a, astride, out, 2*r16Rows)
			}
			b.ReportMetric(2*2*r16Rows*float64(len(fs))*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
	a := floatRow(rng, quant.F32, r16fActs*n)
	for _, t := range []quant.Type{quant.F16, quant.F32, quant.BF16} {
		w := floatRow(rng, t, 2*r16Rows*n)
		for name, fs := range r16fKernels(t) {
			if name != "go" {
				run(name, fs, n, w, a, 4*n)
			}
		}
	}
	for _, e := range List() {
		if k, _ := Lookup(e.Key); e.Runnable && k != nil && k.r16fPairs && e.Key.Op == OpMatMul {
			run(e.Contract, k.r16f, n/2, floatRow(rng, quant.BF16, 2*r16Rows*n), floatRow(rng, quant.BF16, r16fActs*n), 2*n)
		}
	}
}

// BenchmarkPackFloatR16 packs a 4864×896 F16 matrix on one thread.
func BenchmarkPackFloatR16(b *testing.B) {
	const rows, cols = 4864, 896
	src := make([]byte, rows*cols*2)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, len(src))
	pack := packFloatR16(quant.F16)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		pack(rows, cols, src, dst, 0, rows/r16Rows)
	}
}
