package kern_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/quant"
)

// Shapes of qwen2.5-0.5b (rows × cols, cols = ne0 = input width): attention
// q/o (896×896), FFN gate/up (4864×896), FFN down (896×4864) and the tied
// output projection (151936×896). Shapes whose width is not a multiple of a
// type's block (896 for the 256-wide k-quants) do not exist in real files
// (llama.cpp falls back to another type) and are not run.
var benchShapes = []struct{ rows, cols int }{{896, 896}, {4864, 896}, {896, 4864}, {151936, 896}}

// benchTypes: what real models use first, then the rest.
var benchTypes = []quant.Type{
	quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.Q5_K, quant.Q4_0, quant.Q5_0, quant.F16,
	quant.BF16, quant.F32, quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4,
	quant.Q4_1, quant.Q5_1, quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS,
	quant.IQ3_S, quant.IQ1_S, quant.IQ1_M, quant.TQ1_0, quant.TQ2_0, quant.NVFP4,
	quant.Q1_0, quant.Q2_0,
}

// benchWeights returns random weights of type t and shape rows×cols, or
// false when cols is not a multiple of t's kernels' row unit.
func benchWeights(t quant.Type, k *kern.Kernel, rows, cols int) (kern.Weights, bool) {
	if cols%rowUnit(k) != 0 {
		return kern.Weights{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(t), uint64(rows*cols)))
	// Random blocks for one row, then every row a shifted copy of a pool of
	// 64 distinct rows: generation stays fast and the bytes still stream.
	var pool [][]byte
	for i := 0; i < min(64, rows); i++ {
		pool = append(pool, randomWeights(rng, t, cols))
	}
	rb := len(pool[0])
	data := make([]byte, rows*rb)
	for r := 0; r < rows; r++ {
		copy(data[r*rb:], pool[r%len(pool)])
	}
	return kern.Weights{Type: t, Rows: rows, Cols: cols, Data: data}, true
}

// benchKernels returns, for op and type t, the kernel of every runnable
// assembly instruction set (the one Select picks last), or the Go kernel
// when there is none: decode and prefill are reported per instruction set.
func benchKernels(b *testing.B, op kern.Op, t quant.Type) []*kern.Kernel {
	var ks []*kern.Kernel
	for _, e := range kern.List() {
		if e.Key.Op == op && e.Key.Type == t && e.Runnable && e.Key.ISA != kern.ISAGo {
			k, err := kern.Lookup(e.Key)
			if err != nil {
				b.Fatal(err)
			}
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		k, err := kern.Select(op, t)
		if err != nil {
			b.Fatal(err)
		}
		ks = append(ks, k)
	}
	return ks
}

// lazy builds a benchmark's operands on first use, so that sub-benchmarks
// left out by -bench cost nothing.
type lazy[T any] struct {
	done bool
	v    T
}

func (l *lazy[T]) get(f func() T) T {
	if !l.done {
		l.v, l.done = f(), true
	}
	return l.v
}

func BenchmarkMatVec(b *testing.B) {
	for _, t := range benchTypes {
		ks := benchKernels(b, kern.OpMatVec, t)
		for _, sh := range benchShapes {
			if sh.cols%rowUnit(ks[0]) != 0 {
				continue
			}
			type operands struct {
				w      kern.Weights
				copies []kern.Weights
				x      []float32
			}
			var ops lazy[operands]
			prep := func() operands {
				w, _ := benchWeights(t, ks[0], sh.rows, sh.cols)
				// Decode reads every weight once per token from memory, so
				// the benchmark cycles through copies of the matrix as large
				// together as BenchmarkStreamRead's buffer (512 MiB; the
				// device machine's last-level cache is 300 MiB).
				copies := []kern.Weights{w}
				for total := len(w.Data); total < 512<<20; total += len(w.Data) {
					c := w
					c.Data = append([]byte(nil), w.Data...)
					copies = append(copies, c)
				}
				return operands{w, copies, randomActs(rand.New(rand.NewPCG(1, 1)), sh.cols)}
			}
			for _, k := range ks {
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%s/%dx%d/%s/threads=%d", t, sh.rows, sh.cols, k.Key.ISA, threads), func(b *testing.B) {
						o := ops.get(prep)
						pool := kern.NewPool(threads)
						defer pool.Close()
						var s kern.Scratch
						dst := make([]float32, sh.rows)
						pc := o.copies
						if k.Packs() {
							pc = nil
							for _, c := range o.copies {
								pc = append(pc, packed(b, k, c))
							}
						}
						b.SetBytes(int64(len(o.w.Data)))
						b.ReportAllocs()
						c0 := cpuTime()
						i := 0
						for b.Loop() {
							if err := k.Mul(pool, &s, dst, pc[i%len(pc)], o.x, 1); err != nil {
								b.Fatal(err)
							}
							i++
						}
						reportCPU(b, c0, float64(len(o.w.Data)))
					})
				}
			}
			if sh.rows <= 4864 {
				b.Run(fmt.Sprintf("%s/%dx%d/naive/threads=1", t, sh.rows, sh.cols), func(b *testing.B) {
					o := ops.get(prep)
					w, x := o.w, o.x
					dst := make([]float32, sh.rows)
					b.SetBytes(int64(len(w.Data)))
					row := make([]float32, sh.cols)
					rb := len(w.Data) / w.Rows
					for b.Loop() {
						for r := 0; r < w.Rows; r++ {
							if err := quant.Dequantize(t, w.Data[r*rb:(r+1)*rb], row); err != nil {
								b.Fatal(err)
							}
							var s float32
							for c, v := range row {
								s += v * x[c]
							}
							dst[r] = s
						}
					}
				})
			}
		}
	}
}

// BenchmarkMatMul is prefill: 512 activation rows against each shape.
// rows/s is activation rows (tokens) per second through this one matrix.
func BenchmarkMatMul(b *testing.B) {
	const m = 512
	for _, t := range benchTypes {
		ks := benchKernels(b, kern.OpMatMul, t)
		for _, sh := range benchShapes {
			if sh.cols%rowUnit(ks[0]) != 0 {
				continue
			}
			type operands struct {
				w kern.Weights
				x []float32
			}
			var ops lazy[operands]
			prep := func() operands {
				w, _ := benchWeights(t, ks[0], sh.rows, sh.cols)
				return operands{w, randomActs(rand.New(rand.NewPCG(2, 2)), m*sh.cols)}
			}
			for _, k := range ks {
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%s/%dx%d/m=%d/%s/threads=%d", t, sh.rows, sh.cols, m, k.Key.ISA, threads), func(b *testing.B) {
						o := ops.get(prep)
						pool := kern.NewPool(threads)
						defer pool.Close()
						var s kern.Scratch
						dst := make([]float32, m*sh.rows)
						w := packed(b, k, o.w)
						b.SetBytes(int64(len(o.w.Data)))
						b.ReportAllocs()
						c0 := cpuTime()
						for b.Loop() {
							if err := k.Mul(pool, &s, dst, w, o.x, m); err != nil {
								b.Fatal(err)
							}
						}
						reportCPU(b, c0, float64(len(o.w.Data)))
						flop := 2 * float64(m) * float64(sh.rows) * float64(sh.cols) * float64(b.N)
						b.ReportMetric(float64(m)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
						b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
						if cpu := (cpuTime() - c0).Seconds(); cpu > 0 {
							b.ReportMetric(flop/cpu/1e9, "GFLOP/cpu-s")
						}
					})
				}
			}
		}
	}
}

// BenchmarkStreamRead sums a 512 MiB buffer (far beyond the caches): the
// memory bandwidth decode is reported against.
func BenchmarkStreamRead(b *testing.B) {
	buf := make([]byte, 512<<20)
	for i := 0; i < len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], uint64(i))
	}
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			chunk := len(buf) / threads
			var sink uint64
			var mu sync.Mutex
			c0 := cpuTime()
			for b.Loop() {
				var wg sync.WaitGroup
				for i := 0; i < threads; i++ {
					wg.Add(1)
					go func(p []byte) {
						defer wg.Done()
						s := kern.StreamSum(p)
						mu.Lock()
						sink += s
						mu.Unlock()
					}(buf[i*chunk : (i+1)*chunk])
				}
				wg.Wait()
			}
			reportCPU(b, c0, float64(len(buf)))
			_ = sink
		})
	}
}

// reportCPU adds GB per CPU-second (bytes·N over the process CPU time since
// c0) and the CPU seconds per op: on a shared machine these say what the
// kernel does when it runs; wall-clock ns/op and MB/s say what it got.
func reportCPU(b *testing.B, c0 time.Duration, bytes float64) {
	cpu := (cpuTime() - c0).Seconds()
	if cpu <= 0 {
		return
	}
	b.ReportMetric(bytes*float64(b.N)/cpu/1e9, "GB/cpu-s")
	b.ReportMetric(cpu/float64(b.N)*1e3, "cpu-ms/op")
}
