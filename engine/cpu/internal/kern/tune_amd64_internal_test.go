//go:build amd64 && !noasm

package kern

// Tuning harnesses for the kernels, skipped unless their environment
// variable is set: TestTuneDecode (XCOLD=1), TestTuneHot (XHOT=1) and
// TestTunePrefill (XMUL=1). They time alternatives interleaved and keep the
// best of several repetitions, which is what stays comparable on a shared
// machine; their figures went into the kernel engineer's reports.

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/quant"
)

// xrand returns n values of type t as random blocks with moderate fp16
// scales (1.0) where the type has them.
func xrand(t quant.Type, n int) []byte {
	info, _ := quant.Lookup(t)
	b := make([]byte, n/info.BlockSize*info.TypeSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
	var halves []int
	switch t {
	case quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL:
		halves = []int{0}
	case quant.Q4_K, quant.Q5_K:
		halves = []int{0, 2}
	case quant.Q6_K:
		halves = []int{208}
	case quant.Q2_K:
		halves = []int{80, 82}
	case quant.Q3_K:
		halves = []int{108}
	case quant.IQ4_XS:
		halves = []int{0}
	case quant.Q4_1, quant.Q5_1:
		halves = []int{0, 2}
	case quant.Q8_K:
		for i := 0; i < len(b); i += info.TypeSize {
			b[i], b[i+1], b[i+2], b[i+3] = 0, 0, 0x80, 0x3f
		}
	case quant.F16:
		for i := 0; i < len(b); i += 2 {
			b[i+1] = 0x38 | b[i+1]&0x83
		}
	}
	for i := 0; i < len(b); i += info.TypeSize {
		for _, h := range halves {
			b[i+h], b[i+h+1] = 0x00, 0x3c
		}
	}
	return b
}

// xact is the activation format ggml pairs with weight type t.
func xact(t quant.Type) quant.Type {
	switch t {
	case quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q2_K, quant.Q3_K, quant.IQ4_XS:
		return quant.Q8_K
	case quant.F16, quant.BF16, quant.F32:
		return t
	case quant.Q4_1, quant.Q5_1:
		return quant.Q8_1
	}
	return quant.Q8_0
}

// TestTuneDecode: min-of-reps GB/s of the stream read and of the four-row
// matvec kernels of every runnable assembly ISA over 256 MiB of weights, for
// each prefetch lead in XLEAD (rows, comma-separated), interleaved. Run with
// XCOLD=1; XT=types (comma-separated) limits the types, XDOT=1 adds the
// single-row kernels (what decode ran before the four-row kernels).
func TestTuneDecode(t *testing.T) {
	if os.Getenv("XCOLD") == "" {
		t.Skip()
	}
	buf := make([]byte, 256<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	type fn struct {
		name  string
		bytes int
		run   func()
	}
	var fns []fn
	fns = append(fns, fn{"stream", len(buf), func() { StreamSum(buf) }})
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.F16, quant.Q2_K, quant.Q3_K, quant.IQ4_XS, quant.Q4_1, quant.Q5_1, quant.BF16, quant.F32} {
		if os.Getenv("XT") != "" && !strings.Contains(","+os.Getenv("XT")+",", ","+typ.String()+",") {
			continue
		}
		for _, n := range []int{896, 4864} {
			info, _ := quant.Lookup(typ)
			if n%info.BlockSize != 0 {
				n = 4096
			}
			rb := n / info.BlockSize * info.TypeSize
			rows := (256 << 20) / rb &^ 3
			w := xrand(typ, rows*n)
			a := xrand(xact(typ), n)
			out := make([]float32, rows)
			for _, e := range List() {
				if e.Key.Op != OpMatVec || e.Key.Type != typ || !e.Runnable || e.Key.ISA == ISAGo {
					continue
				}
				k, _ := Lookup(e.Key)
				n := n
				if os.Getenv("XDOT") != "" {
					fns = append(fns, fn{fmt.Sprintf("%s/%d/%s/dot", typ, n, e.Key.ISA), len(w), func() {
						for r := 0; r < rows; r++ {
							out[r] = k.dot(n, w[r*rb:(r+1)*rb], a)
						}
					}})
				}
				if k.rows4 == nil {
					continue
				}
				fns = append(fns, fn{fmt.Sprintf("%s/%d/%s/r4", typ, n, e.Key.ISA), len(w), func() {
					for r := 0; r < rows; r += 4 {
						k.rows4(n, w[r*rb:(r+4)*rb], rb, a, out[r:])
					}
				}})
			}
		}
	}
	leads := []int{r4Lead}
	if l := os.Getenv("XLEAD"); l != "" {
		leads = nil
		for _, f := range strings.Split(l, ",") {
			v, _ := strconv.Atoi(f)
			leads = append(leads, v)
		}
	}
	defer func(v int) { r4Lead = v }(r4Lead)
	best := make([][]time.Duration, len(leads))
	for li := range leads {
		best[li] = make([]time.Duration, len(fns))
	}
	for rep := 0; rep < 5; rep++ {
		for li, lead := range leads {
			r4Lead = lead
			for i, f := range fns {
				t0 := time.Now()
				f.run()
				d := time.Since(t0)
				if rep == 0 || d < best[li][i] {
					best[li][i] = d
				}
			}
		}
	}
	for i, f := range fns {
		line := fmt.Sprintf("%-26s", f.name)
		for li, lead := range leads {
			gb := float64(f.bytes) / best[li][i].Seconds() / 1e9
			sgb := float64(fns[0].bytes) / best[li][0].Seconds() / 1e9
			line += fmt.Sprintf("  lead %2d: %6.2f GB/s %4.0f%%", lead, gb, 100*gb/sgb)
		}
		t.Log(line)
	}
}

// TestTuneHot: min-of-reps GB/s of every runnable assembly matvec kernel
// (single-row and four-row) with its operands in L1/L2: the compute rate.
// XHOT=1.
func TestTuneHot(t *testing.T) {
	if os.Getenv("XHOT") == "" {
		t.Skip()
	}
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.F16, quant.Q2_K, quant.Q3_K, quant.IQ4_XS} {
		const n = 1024
		w := xrand(typ, 4*n)
		a := xrand(xact(typ), n)
		rb := len(w) / 4
		out := make([]float32, 4)
		measure := func(f func()) float64 {
			best := time.Duration(1 << 62)
			for rep := 0; rep < 200; rep++ {
				t0 := time.Now()
				for i := 0; i < 50; i++ {
					f()
				}
				best = min(best, time.Since(t0))
			}
			return float64(len(w)) * 50 / float64(best.Nanoseconds())
		}
		for _, e := range List() {
			if e.Key.Op != OpMatVec || e.Key.Type != typ || !e.Runnable || e.Key.ISA == ISAGo {
				continue
			}
			k, _ := Lookup(e.Key)
			d := measure(func() {
				for r := 0; r < 4; r++ {
					out[r] = k.dot(n, w[r*rb:(r+1)*rb], a)
				}
			})
			line := fmt.Sprintf("%-7s %-10s dot %6.1f GB/s", typ, e.Key.ISA, d)
			if k.rows4 != nil {
				line += fmt.Sprintf("  r4 %6.1f GB/s", measure(func() { k.rows4(n, w, rb, a, out) }))
			}
			t.Log(line)
		}
	}
}

// TestTunePrefill: min-of-reps GFLOP/s of Mul at m=512 on the qwen2.5-0.5b
// shapes for every runnable assembly ISA, and for AVX2 without its
// eight-activation-row kernel (the four-row path the previous kernels ran),
// interleaved. XMUL=1, XT=types, XTHREADS=1,2, XREPS=repetitions (4),
// XSHAPES=rows×cols,... (896x896,4864x896,896x4864).
func TestTunePrefill(t *testing.T) {
	if os.Getenv("XMUL") == "" {
		t.Skip()
	}
	const m = 512
	types := []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.F16}
	threadsList := []int{1, 2}
	if v := os.Getenv("XTHREADS"); v != "" {
		threadsList = nil
		for _, f := range strings.Split(v, ",") {
			n, _ := strconv.Atoi(f)
			threadsList = append(threadsList, n)
		}
	}
	for _, typ := range types {
		if os.Getenv("XT") != "" && !strings.Contains(","+os.Getenv("XT")+",", ","+typ.String()+",") {
			continue
		}
		var ks []*Kernel
		for _, e := range List() {
			if e.Key.Op == OpMatMul && e.Key.Type == typ && e.Runnable && e.Key.ISA != ISAGo {
				k, _ := Lookup(e.Key)
				ks = append(ks, k)
			}
		}
		shapes := [][2]int{{896, 896}, {4864, 896}, {896, 4864}}
		if os.Getenv("XSHAPES") != "" {
			shapes = nil
			for _, f := range strings.Split(os.Getenv("XSHAPES"), ",") {
				var r, c int
				fmt.Sscanf(f, "%dx%d", &r, &c)
				shapes = append(shapes, [2]int{r, c})
			}
		}
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			if cols%ks[0].block != 0 {
				continue
			}
			w := Weights{Type: typ, Rows: rows, Cols: cols, Data: xrand(typ, rows*cols)}
			x := make([]float32, m*cols)
			rng := rand.New(rand.NewPCG(3, 3))
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, m*rows)
			for _, threads := range threadsList {
				pool := NewPool(threads)
				var s Scratch
				type variant struct {
					name string
					k    *Kernel
					t8   tileFunc
					t8r  tileRFunc
				}
				var vs []variant
				for _, k := range ks {
					if k.Key.ISA == ISAAVX2 {
						vs = append(vs, variant{"avx2-4row", k, nil, nil})
						if k.tile8r != nil && k.tile8 != nil {
							vs = append(vs, variant{"avx2-t8", k, k.tile8, nil})
						}
					}
					vs = append(vs, variant{string(k.Key.ISA), k, k.tile8, k.tile8r})
				}
				best := make([]time.Duration, len(vs))
				reps := 4
				if v, err := strconv.Atoi(os.Getenv("XREPS")); err == nil {
					reps = v
				}
				for rep := 0; rep < reps; rep++ {
					for i, v := range vs {
						saved, savedr := v.k.tile8, v.k.tile8r
						v.k.tile8, v.k.tile8r = v.t8, v.t8r
						t0 := time.Now()
						if err := v.k.Mul(pool, &s, dst, w, x, m); err != nil {
							t.Fatal(err)
						}
						d := time.Since(t0)
						v.k.tile8, v.k.tile8r = saved, savedr
						if rep == 0 || d < best[i] {
							best[i] = d
						}
					}
				}
				pool.Close()
				line := fmt.Sprintf("%-6s %4dx%-4d threads=%d:", typ, rows, cols, threads)
				for i, v := range vs {
					line += fmt.Sprintf("  %s %6.1f", v.name, 2*float64(m*rows*cols)/best[i].Seconds()/1e9)
				}
				t.Log(line + " GFLOP/s")
			}
		}
	}
}

// TestTuneTileHot: min-of-reps GFLOP/s of the eight-activation-row kernels
// with operands in L1 (16 weight rows of 896 values, eight activation rows):
// the compute rate of the prefill inner kernel alone. XTILE=1, XT=types.
func TestTuneTileHot(t *testing.T) {
	if os.Getenv("XTILE") == "" {
		t.Skip()
	}
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		if os.Getenv("XT") != "" && !strings.Contains(","+os.Getenv("XT")+",", ","+typ.String()+",") {
			continue
		}
		n := 896
		if v, err := strconv.Atoi(os.Getenv("XN")); err == nil {
			n = v
		}
		if info, _ := quant.Lookup(typ); n%info.BlockSize != 0 {
			n = 1024
		}
		const wr = 16
		w := xrand(typ, wr*n)
		rb := len(w) / wr
		act := xact(typ)
		a := xrand(act, 8*n)
		arb := len(a) / 8
		out := make([]float32, 8*wr)
		for _, e := range List() {
			if e.Key.Op != OpMatMul || e.Key.Type != typ || !e.Runnable || e.Key.ISA == ISAGo {
				continue
			}
			k, _ := Lookup(e.Key)
			aa := Acts{Type: act, Rows: 8, Cols: n, Data: a}
			sc := actScales(&aa, nil)
			measure := func(f func()) float64 {
				best := time.Duration(1 << 62)
				for rep := 0; rep < 100; rep++ {
					t0 := time.Now()
					for i := 0; i < 20; i++ {
						f()
					}
					best = min(best, time.Since(t0))
				}
				return 2 * float64(8*wr*n) * 20 / float64(best.Nanoseconds())
			}
			line := fmt.Sprintf("%-7s %-10s", typ, e.Key.ISA)
			if k.tile8 != nil {
				line += fmt.Sprintf(" tile8 %6.1f", measure(func() {
					for r := 0; r < wr; r++ {
						k.tile8(n, w[r*rb:(r+1)*rb], a, arb, sc, out[r:], wr)
					}
				}))
			}
			if k.tile8r != nil {
				var s Scratch
				s.bind()
				st := &s.st
				st.a, st.jobs = &aa, []Job{{K: k}}
				p := NewPool(1)
				st.prepare(p, &s)
				p.Close()
				corr := map[int][]byte{8: st.corr8, 16: st.corr16}[k.corrBias]
				acc := make([]float32, wr*tileAccFloats)
				line += fmt.Sprintf(" tile8r %6.1f", measure(func() {
					k.tile8r(n, w, rb, wr, st.aq, corr, st.asc, acc, tileFirst|tileLast, out, wr)
				}))
			}
			if k.dot4 != nil {
				line += fmt.Sprintf(" dot4 %6.1f", measure(func() {
					for r := 0; r < wr; r++ {
						k.dot4(n, w[r*rb:(r+1)*rb], a, arb, out[r:], wr)
						k.dot4(n, w[r*rb:(r+1)*rb], a[4*arb:], arb, out[4*wr+r:], wr)
					}
				}))
			}
			t.Log(line + " GFLOP/s")
		}
	}
}
