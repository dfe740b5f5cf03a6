package cpu

import (
	"fmt"
	"sync"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/quant"
)

// The KV cache is F32 (as the fixtures' llama.cpp runs used). Keys are kept
// per kv head, one row of HK values per position, so that the scores of a
// block of queries against positions 0..L are one matrix product (the cache
// as the F32 "weights"). Values are kept transposed in tiles of vTile
// positions, [kv head][tile][HV][vTile], so that probabilities × values is
// a product per tile. Both products go through the kernel registry's F32
// kernels, as ggml's mul_mat does on an F32 cache.
const (
	vTile = 64
	// attnRows is the number of query rows (tokens × heads of one group)
	// one attention task multiplies at once.
	attnRows = 64
)

type kvCache struct {
	a      graph.Attn
	maxCtx int
	tiles  int
	n      int       // positions stored
	k      []float32 // [NKV][maxCtx][HK]
	v      []float32 // [NKV][tiles][HV][vTile]
}

func (be *backend) NewKV(maxCtx int, a graph.Attn) (graph.KV, error) {
	if maxCtx <= 0 || a.NHead <= 0 || a.NKV <= 0 || a.NHead%a.NKV != 0 || a.HK <= 0 || a.HV <= 0 {
		return nil, fmt.Errorf("cpu: KV cache for %d positions, %d heads over %d kv heads of %d/%d", maxCtx, a.NHead, a.NKV, a.HK, a.HV)
	}
	tiles := (maxCtx + vTile - 1) / vTile
	return &kvCache{a: a, maxCtx: maxCtx, tiles: tiles,
		k: make([]float32, a.NKV*maxCtx*a.HK),
		v: make([]float32, a.NKV*tiles*a.HV*vTile)}, nil
}

func asKV(kv graph.KV) *kvCache {
	c, ok := kv.(*kvCache)
	if !ok {
		panic(fmt.Sprintf("cpu: %T is not a KV cache of this backend", kv))
	}
	return c
}

func (be *backend) Store(kv graph.KV, k, v graph.Buf, pos0 int) error {
	c, kb, vb := asKV(kv), asBuf(k), asBuf(v)
	a := c.a
	if kb.cols != a.NKV*a.HK || vb.cols != a.NKV*a.HV || kb.rows != vb.rows {
		panic(fmt.Sprintf("cpu: Store of %d×%d keys and %d×%d values", kb.rows, kb.cols, vb.rows, vb.cols))
	}
	if pos0 != c.n {
		return fmt.Errorf("cpu: KV store at position %d but the cache holds %d", pos0, c.n)
	}
	if pos0+kb.rows > c.maxCtx {
		return fmt.Errorf("cpu: %d positions exceed the KV cache of %d", pos0+kb.rows, c.maxCtx)
	}
	for r := 0; r < kb.rows; r++ {
		p := pos0 + r
		kr, vr := kb.row(r), vb.row(r)
		ti, tj := p/vTile, p%vTile
		for g := 0; g < a.NKV; g++ {
			copy(c.k[(g*c.maxCtx+p)*a.HK:(g*c.maxCtx+p+1)*a.HK], kr[g*a.HK:(g+1)*a.HK])
			base := (g*c.tiles + ti) * a.HV * vTile
			for d, x := range vr[g*a.HV : (g+1)*a.HV] {
				c.v[base+d*vTile+tj] = x
			}
		}
	}
	c.n += kb.rows
	return nil
}

func (be *backend) Attend(out, q graph.Buf, kv graph.KV, pos0 int) error {
	c, qb, ob := asKV(kv), asBuf(q), asBuf(out)
	a := c.a
	n := qb.rows
	if qb.cols != a.NHead*a.HK || ob.cols != a.NHead*a.HV || ob.rows != n {
		panic(fmt.Sprintf("cpu: Attend %d×%d from %d×%d queries", ob.rows, ob.cols, qb.rows, qb.cols))
	}
	if pos0+n > c.n {
		return fmt.Errorf("cpu: attention up to position %d but the cache holds %d", pos0+n, c.n)
	}
	group := a.NHead / a.NKV
	blk := max(1, attnRows/group) // tokens per task
	nb := (n + blk - 1) / blk
	var (
		errMu sync.Mutex
		first error
	)
	task := func(t int) {
		w := <-be.workers
		defer func() { be.workers <- w }()
		g, bi := t%a.NKV, t/a.NKV
		t0 := bi * blk
		if err := be.attendBlock(w, c, qb, ob, g, t0, min(n, t0+blk), pos0); err != nil {
			errMu.Lock()
			if first == nil {
				first = err
			}
			errMu.Unlock()
		}
	}
	tasks := a.NKV * nb
	if be.threads == 1 || tasks == 1 {
		for t := 0; t < tasks; t++ {
			task(t)
		}
	} else {
		be.pool.For(tasks, 1, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				task(t)
			}
		})
	}
	return first
}

// attendBlock computes the attention of tokens [t0, t1) for the query heads
// of kv head g: scores = K·q for positions 0..pos0+t1−1, causal softmax,
// then out = Σ_tiles Vᵀ_tile · p_tile.
func (be *backend) attendBlock(w *worker, c *kvCache, qb, ob *buf, g, t0, t1, pos0 int) error {
	a := c.a
	group := a.NHead / a.NKV
	m := (t1 - t0) * group
	L := pos0 + t1
	qs := w.grow(0, m*a.HK)
	for t := t0; t < t1; t++ {
		qr := qb.row(t)
		for hh := 0; hh < group; hh++ {
			h := g*group + hh
			copy(qs[((t-t0)*group+hh)*a.HK:], qr[h*a.HK:(h+1)*a.HK])
		}
	}
	sc := w.grow(1, m*L)
	keys := kern.Weights{Type: quant.F32, Rows: L, Cols: a.HK, Data: bytesOf(c.k[g*c.maxCtx*a.HK : (g*c.maxCtx+L)*a.HK])}
	if err := be.f32(m).Mul(w.pool, &w.scratch, sc, keys, qs, m); err != nil {
		return fmt.Errorf("cpu: attention scores: %w", err)
	}
	for i := 0; i < m; i++ {
		valid := pos0 + t0 + i/group + 1
		row := sc[i*L : (i+1)*L]
		softmax(row[:valid], a.Scale)
		clear(row[valid:])
	}
	acc := w.grow(2, m*a.HV)
	part := w.grow(3, m*a.HV)
	x2 := w.grow(4, m*vTile)
	for ti := 0; ti*vTile < L; ti++ {
		c0, c1 := ti*vTile, min(L, (ti+1)*vTile)
		for i := 0; i < m; i++ {
			dst := x2[i*vTile : (i+1)*vTile]
			copy(dst, sc[i*L+c0:i*L+c1])
			clear(dst[c1-c0:])
		}
		base := (g*c.tiles + ti) * a.HV * vTile
		vals := kern.Weights{Type: quant.F32, Rows: a.HV, Cols: vTile, Data: bytesOf(c.v[base : base+a.HV*vTile])}
		dst := part
		if ti == 0 {
			dst = acc
		}
		if err := be.f32(m).Mul(w.pool, &w.scratch, dst, vals, x2, m); err != nil {
			return fmt.Errorf("cpu: attention values: %w", err)
		}
		if ti > 0 {
			for i, v := range part {
				acc[i] += v
			}
		}
	}
	for t := t0; t < t1; t++ {
		or := ob.row(t)
		for hh := 0; hh < group; hh++ {
			h := g*group + hh
			copy(or[h*a.HV:(h+1)*a.HV], acc[((t-t0)*group+hh)*a.HV:])
		}
	}
	return nil
}

func (be *backend) f32(m int) *kern.Kernel {
	if m == 1 {
		return be.f32mv
	}
	return be.f32mm
}
