package ref

import (
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"sync/atomic"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
)

// parallelMin is the work (multiply-adds) below which linear stays on one
// goroutine: spawning costs more than it saves.
const parallelMin = 1 << 16

// linear computes out[t][r] = Σ_c W[r][c]·x[t][c] (+ bias[r]) for every
// token t. W is a [cols, rows] tensor (ggml order); each row is dequantized
// once into a buffer of cols floats and dotted with every token, so memory
// stays at a few rows whatever the matrix size. Rows are shared out among
// e.threads goroutines in pieces; each output is computed by exactly one of
// them, in the same order, so the result does not depend on the thread
// count or on which goroutine takes which piece.
//
// It panics when the shapes disagree or a row fails to dequantize: New
// checked every tensor's type and shape, so either is a programmer error.
func (e *Engine) linear(w, bias *model.Tensor, x, out [][]float32) {
	cols, rows := w.Cols(), w.Rows()
	for t := range x {
		if len(x[t]) != cols || len(out[t]) != rows {
			panic(fmt.Sprintf("ref: linear %s: [%d,%d] with x %d, out %d", w.Name, cols, rows, len(x[t]), len(out[t])))
		}
	}
	var b []float32
	if bias != nil {
		b = e.vector(bias)
	}
	var corr [][]float64 // NumericsGGML, Q4_1/Q5_1: per token and block, s − Σ act
	if e.ggml {
		x, corr = e.roundActs(w, x)
	}
	// The products in float64 (dot64): x widened once here, each row once
	// below, where dot would widen both for every product. Exact either way
	// (a float32 is a float64 exactly), so the sums are dot's, bit for bit.
	x64 := make([][]float64, len(x))
	for t := range x {
		x64[t] = widen(x[t], nil)
	}
	// Rows in pieces of about an eighth of a goroutine's share, taken in
	// turn by the goroutines: one that the host's other work slows takes
	// fewer pieces instead of holding the others at the end. (apr run's F2
	// reference shares the cores with the load; on 16 cores fixed shares
	// kept qwen3.5-0.8b's forward pass at 53% of them.) Fewer rows than two
	// per goroutine stay in one piece.
	n := max(1, e.threads)
	per := max(1, rows/(8*n))
	if rows < 2*n {
		per = max(1, rows)
	}
	e.each((rows+per-1)/per, per*cols*len(x), func() func(int) {
		row := make([]float32, cols)
		row64 := make([]float64, cols)
		var mins []float32
		if corr != nil {
			mins = make([]float32, len(corr[0]))
		}
		return func(p int) {
			for r := p * per; r < min(p*per+per, rows); r++ {
				if err := quant.Dequantize(w.Type, w.Row(r), row); err != nil {
					panic(fmt.Sprintf("ref: %s row %d: %v", w.Name, r, err))
				}
				if mins != nil {
					if err := quant.BlockMins(w.Type, w.Row(r), mins); err != nil {
						panic(fmt.Sprintf("ref: %s row %d: %v", w.Name, r, err))
					}
				}
				widen(row, row64)
				for t := range x {
					s := dot64(row64, x64[t])
					if mins != nil {
						for k, m := range mins {
							s += float64(m) * corr[t][k]
						}
					}
					if b != nil {
						s += float64(b[r])
					}
					out[t][r] = float32(s)
				}
			}
		}
	})
}

// eachMin is parallelMin, each's threshold (a test lowers it to 0, so that
// a tiny model's rows and heads take the parallel path).
var eachMin = parallelMin

// each calls fn(i) for every i in [0, n), on up to e.threads goroutines
// when the n calls' work (about work multiply-adds each) is worth it; each
// goroutine takes its fn (and the buffers fn owns) from newFn once. The
// calls must touch disjoint memory: each is computed exactly as on one
// goroutine, so the result does not depend on the thread count.
func (e *Engine) each(n, work int, newFn func() func(i int)) {
	g := min(e.threads, n)
	if g <= 1 || n*work < eachMin {
		fn := newFn()
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn := newFn()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// roundActs returns x as a product with w's kernel sees it in ggml-cpu
// (NumericsGGML): each row rounded to the weight type's activation format,
// and, for weights whose kernels take each block's min times the
// activation block's stored sum (Q4_1, Q5_1), per row and block that sum
// minus the sum of the rounded values (quant.MinSumCorrections; nil
// otherwise). x itself is left alone (the caller may still read it).
func (e *Engine) roundActs(w *model.Tensor, x [][]float32) ([][]float32, [][]float64) {
	out := make([][]float32, len(x))
	var corr [][]float64
	var scratch []byte
	var h0 uint64
	if e.jitter {
		f := fnv.New64a()
		f.Write([]byte(w.Name))
		h0 = f.Sum64()
	}
	for t := range x {
		out[t] = make([]float32, len(x[t]))
		xt := x[t]
		if e.jitter {
			xt = jitter(xt, h0^uint64(t)*0x9e3779b97f4a7c15)
		}
		var err error
		if scratch, err = quant.RoundActivations(w.Type, xt, out[t], scratch); err != nil {
			panic(fmt.Sprintf("ref: %s: numerics %s: %v", w.Name, e.Numerics(), err))
		}
		c, err := quant.MinSumCorrections(w.Type, xt)
		if err != nil {
			panic(fmt.Sprintf("ref: %s: numerics %s: %v", w.Name, NumericsGGML, err))
		}
		if c != nil {
			corr = append(corr, c)
		}
	}
	return out, corr
}

// jitterULP is how far NumericsGGMLJitter moves each activation, in
// float32 ulps: 4 ulps is 2.4e-7 to 4.8e-7 of the value, the size of the
// cpu engine's distance from the reference before any activation's
// rounding flips (apr diff on apr synth's qwen3.5-0.8b Q8_0: layer 0's
// ssm_norm at 1 − cos 8.6e-14, ~4e-7 relative). On that model 1, 4 and 16
// ulps put the twin at min cosine 0.99689, 0.99490 and 0.98843 from the
// reference; the cpu engine is at 0.99402.
const jitterULP = 4

// jitter returns a copy of x with every finite nonzero value moved
// jitterULP float32 ulps away from or toward zero, by bit i%64 of a
// splitmix64 stream from seed (NumericsGGMLJitter).
func jitter(x []float32, seed uint64) []float32 {
	out := make([]float32, len(x))
	var bits uint64
	for i, v := range x {
		if i%64 == 0 {
			seed += 0x9e3779b97f4a7c15
			z := seed
			z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			bits = z ^ z>>31
		}
		out[i] = v
		a := math.Float32bits(v) &^ (1 << 31)
		if a == 0 || a >= 0x7f800000-jitterULP || a <= jitterULP {
			continue // zero, Inf, NaN, or too close to them to move
		}
		if bits>>(i%64)&1 == 1 {
			out[i] = math.Float32frombits(math.Float32bits(v) + jitterULP)
		} else {
			out[i] = math.Float32frombits(math.Float32bits(v) - jitterULP)
		}
	}
	return out
}

// matVec is linear for one vector: y = W·x (+ bias).
func (e *Engine) matVec(w, bias *model.Tensor, x, y []float32) {
	e.linear(w, bias, [][]float32{x}, [][]float32{y})
}

// vector returns a 1-D tensor (norm weights, biases) as float32s. These are
// small (one row), so they are dequantized once and kept.
func (e *Engine) vector(t *model.Tensor) []float32 {
	e.vecMu.Lock()
	defer e.vecMu.Unlock()
	if v, ok := e.vecs[t.Name]; ok {
		return v
	}
	v := make([]float32, t.Cols()*t.Rows())
	if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
		panic(fmt.Sprintf("ref: %s: %v", t.Name, err))
	}
	e.vecs[t.Name] = v
	return v
}

// row dequantizes row i of t into dst (len t.Cols()).
func (e *Engine) row(t *model.Tensor, i int, dst []float32) {
	if err := quant.Dequantize(t.Type, t.Row(i), dst); err != nil {
		panic(fmt.Sprintf("ref: %s row %d: %v", t.Name, i, err))
	}
}

// dequantAll dequantizes the whole of a small tensor into dst.
func dequantAll(t *model.Tensor, dst []float32) error {
	if err := quant.Dequantize(t.Type, t.Data, dst); err != nil {
		return fmt.Errorf("ref: %s: %w", t.Name, err)
	}
	return nil
}
