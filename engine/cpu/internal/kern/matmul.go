package kern

import (
	"fmt"

	"github.com/aprqa/apr/engine/quant"
)

// Weights is a 2-D weight tensor as ggml stores it: Rows rows of Cols values
// of Type, each row a contiguous run of blocks (ne0 = Cols, ne1 = Rows).
// Data is usually a zero-copy view of the mapped GGUF file.
type Weights struct {
	Type       quant.Type
	Rows, Cols int
	Data       []byte
}

// Scratch holds converted activations between calls so that steady-state
// calls do not allocate. A Scratch is used by one caller at a time.
type Scratch struct{ act []byte }

func (s *Scratch) grow(n int) []byte {
	if cap(s.act) < n {
		s.act = make([]byte, n)
	}
	return s.act[:n]
}

// Tiling of the matrix-matrix product: each task takes a chunk of weight rows
// and runs it over the activation rows in tiles, so a weight row is read
// from memory once per tile (and from cache for every activation row in it).
const (
	mmTileBytes = 96 << 10 // activation bytes per tile (fits a 512 KiB L2 with room)
	mmChunk     = 16       // weight rows per task
)

// RowBytes returns the bytes of one weight row of the kernel's type with
// cols values, or an error naming the problem.
func (k *Kernel) rowBytes(cols int) (w, a int, err error) {
	if cols <= 0 || cols%k.block != 0 || cols%k.actBlock != 0 {
		return 0, 0, fmt.Errorf("kern: %s: %d columns is not a positive multiple of the block size %d", k.Contract, cols, k.block)
	}
	return cols / k.block * k.wBytes, cols / k.actBlock * k.aBytes, nil
}

// Mul computes dst = x·Wᵀ: for each of the m activation rows x[i·Cols:(i+1)·Cols],
// dst[i·Rows + r] = Σ_c W[r,c]·x[i·Cols+c], with every row of x first
// converted to the kernel's activation format (ggml's vec_dot_type) and every
// dot product computed on the quantized blocks. The work is spread over the
// pool's threads. A matvec kernel takes m = 1 only.
func (k *Kernel) Mul(p *Pool, s *Scratch, dst []float32, w Weights, x []float32, m int) error {
	if w.Type != k.Key.Type {
		return fmt.Errorf("kern: %s: weights are %s", k.Contract, w.Type)
	}
	if k.Key.Op == OpMatVec && m != 1 {
		return fmt.Errorf("kern: %s: a matvec kernel takes one activation row, got %d", k.Contract, m)
	}
	if m < 1 || w.Rows < 1 {
		return fmt.Errorf("kern: %s: %d activation rows against %d weight rows", k.Contract, m, w.Rows)
	}
	wrb, arb, err := k.rowBytes(w.Cols)
	if err != nil {
		return err
	}
	if len(w.Data) != w.Rows*wrb {
		return fmt.Errorf("kern: %s: %d×%d weights need %d bytes, got %d", k.Contract, w.Rows, w.Cols, w.Rows*wrb, len(w.Data))
	}
	if len(x) != m*w.Cols {
		return fmt.Errorf("kern: %s: %d activation rows of %d need %d values, got %d", k.Contract, m, w.Cols, m*w.Cols, len(x))
	}
	if len(dst) != m*w.Rows {
		return fmt.Errorf("kern: %s: dst needs %d values, got %d", k.Contract, m*w.Rows, len(dst))
	}
	n := w.Cols
	act := s.grow(m * arb)
	if m == 1 {
		k.convert(x, act)
		grain := max(4, w.Rows/(8*p.Threads()))
		p.For(w.Rows, grain, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				dst[r] = k.dot(n, w.Data[r*wrb:(r+1)*wrb], act)
			}
		})
		return nil
	}
	p.For(m, max(1, m/(4*p.Threads())), func(lo, hi int) {
		k.convert(x[lo*n:hi*n], act[lo*arb:hi*arb])
	})
	tile := max(4, mmTileBytes/arb)
	rows := w.Rows
	p.For(rows, mmChunk, func(lo, hi int) {
		var out [4]float32
		for i0 := 0; i0 < m; i0 += tile {
			i1 := min(i0+tile, m)
			for r := lo; r < hi; r++ {
				wr := w.Data[r*wrb : (r+1)*wrb]
				i := i0
				if k.dot4 != nil {
					for ; i+4 <= i1; i += 4 {
						k.dot4(n, wr, act[i*arb:(i+4)*arb], arb, &out)
						dst[i*rows+r] = out[0]
						dst[(i+1)*rows+r] = out[1]
						dst[(i+2)*rows+r] = out[2]
						dst[(i+3)*rows+r] = out[3]
					}
				}
				for ; i < i1; i++ {
					dst[i*rows+r] = k.dot(n, wr, act[i*arb:(i+1)*arb])
				}
			}
		}
	})
	return nil
}
