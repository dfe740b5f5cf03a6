package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/quant"
)

// The KV cache is F32 (as the fixtures' llama.cpp runs used), kept per kv
// head in tiles of kvTile positions: a tile holds the keys one row per position ([kvTile][HK]) and the values
// transposed ([HV][kvTile]). Scores of a block of queries against a tile
// are one product (the tile's keys as the F32 "weights"), and so are
// probabilities × values (the tile's transposed values as the weights).
// Both go through the kernel registry's F32 kernels, as ggml's mul_mat does
// on an F32 cache.
const (
	kvTile = 64
	// attnRows is about the number of query rows (tokens × heads of one
	// group) one attention task multiplies at once.
	attnRows = 64
)

// attnTokens is the number of tokens of one attention task: about
// attnRows query rows, a multiple of 8 rows where a whole number of tokens
// makes one (so the F32 kernels run eight rows at a time).
func attnTokens(group int) int {
	blk := max(1, attnRows/group)
	per8 := 8 / gcd(group, 8) // tokens per multiple of 8 rows
	if blk >= per8 {
		blk -= blk % per8
	}
	return blk
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// kvCache is one layer's cache, reserved for maxCtx positions outside the
// Go heap (pages become resident as positions are written) and released by
// FreeKV or, failing that, when the cache is no longer referenced.
type kvCache struct {
	a      graph.Attn
	maxCtx int
	tiles  int       // maxCtx rounded up to whole tiles, in tiles
	n      int       // positions stored
	k      []float32 // [NKV][tiles·kvTile][HK]
	v      []float32 // [NKV][tiles][HV][kvTile]
	mem    *mapping
}

// mapping is off-heap memory released once.
type mapping struct {
	once sync.Once
	free func()
}

func (m *mapping) release() { m.once.Do(m.free) }

func (be *backend) NewKV(maxCtx int, a graph.Attn) (graph.KV, error) {
	if maxCtx <= 0 || a.NHead <= 0 || a.NKV <= 0 || a.NHead%a.NKV != 0 || a.HK <= 0 || a.HV <= 0 {
		return nil, fmt.Errorf("cpu: KV cache for %d positions, %d heads over %d kv heads of %d/%d", maxCtx, a.NHead, a.NKV, a.HK, a.HV)
	}
	tiles := (maxCtx + kvTile - 1) / kvTile
	nk, nv := a.NKV*tiles*kvTile*a.HK, a.NKV*tiles*a.HV*kvTile
	d, free, err := mapF32(nk + nv)
	if err != nil {
		return nil, err
	}
	c := &kvCache{a: a, maxCtx: maxCtx, tiles: tiles, k: d[:nk:nk], v: d[nk:], mem: &mapping{free: free}}
	runtime.AddCleanup(c, (*mapping).release, c.mem)
	return c, nil
}

func asKV(kv graph.KV) *kvCache {
	c, ok := kv.(*kvCache)
	if !ok {
		panic(fmt.Sprintf("cpu: %T is not a KV cache of this backend", kv))
	}
	if c.k == nil {
		panic("cpu: use of a freed KV cache")
	}
	return c
}

func (be *backend) ClearKV(kv graph.KV) { asKV(kv).n = 0 }

func (be *backend) FreeKV(kv graph.KV) {
	c := asKV(kv)
	c.k, c.v = nil, nil
	c.mem.release()
}

// kTile and vTile return tile ti of kv head g.
func (c *kvCache) kTile(g, ti int) []float32 {
	o := (g*c.tiles + ti) * kvTile * c.a.HK
	return c.k[o : o+kvTile*c.a.HK]
}

func (c *kvCache) vTile(g, ti int) []float32 {
	o := (g*c.tiles + ti) * c.a.HV * kvTile
	return c.v[o : o+c.a.HV*kvTile]
}

func (be *backend) Store(kv graph.KV, k, v graph.Buf, pos0 int) error {
	c, kb, vb := asKV(kv), asBuf(k), asBuf(v)
	defer runtime.KeepAlive(c) // its memory is off the heap
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
		ti, tj := p/kvTile, p%kvTile
		for g := 0; g < a.NKV; g++ {
			copy(c.kTile(g, ti)[tj*a.HK:(tj+1)*a.HK], kr[g*a.HK:(g+1)*a.HK])
			vt := c.vTile(g, ti)
			for d, x := range vr[g*a.HV : (g+1)*a.HV] {
				vt[d*kvTile+tj] = x
			}
		}
	}
	c.n += kb.rows
	return nil
}

func (be *backend) Attend(out, q graph.Buf, kv graph.KV, pos0 int) error {
	c, qb, ob := asKV(kv), asBuf(q), asBuf(out)
	defer runtime.KeepAlive(c) // its memory is off the heap
	a := c.a
	n := qb.rows
	if qb.cols != a.NHead*a.HK || ob.cols != a.NHead*a.HV || ob.rows != n {
		panic(fmt.Sprintf("cpu: Attend %d×%d from %d×%d queries", ob.rows, ob.cols, qb.rows, qb.cols))
	}
	if pos0+n > c.n {
		return fmt.Errorf("cpu: attention up to position %d but the cache holds %d", pos0+n, c.n)
	}
	group := a.NHead / a.NKV
	blk := attnTokens(group)
	nb := (n + blk - 1) / blk
	var (
		errMu sync.Mutex
		first error
	)
	task := func(t int) {
		w := <-be.workers
		defer func() { be.workers <- w }()
		// The last blocks see the most positions: hand them out first, so
		// that the threads finish together.
		g, bi := t%a.NKV, nb-1-t/a.NKV
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
	// Multiply-adds (scores and values over the positions seen): below
	// ~64Ki (~10 µs) a helper's hand-off costs more than it saves.
	work := n * a.NHead * (pos0 + (n+1)/2) * (a.HK + a.HV)
	if be.threads == 1 || tasks == 1 || work < 1<<16 {
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
// of kv head g over positions 0..pos0+t1−1: per tile, scores = K_tile·q;
// a causal softmax over each query's positions; per tile, out += Vᵀ_tile·p.
// The scores are kept tile by tile ([tile][m][kvTile]) so that each tile's
// probabilities are the next product's activations as they lie.
func (be *backend) attendBlock(w *worker, c *kvCache, qb, ob *buf, g, t0, t1, pos0 int) error {
	a := c.a
	group := a.NHead / a.NKV
	m := (t1 - t0) * group
	L := pos0 + t1
	nT := (L + kvTile - 1) / kvTile
	qs := w.grow(0, m*a.HK)
	for t := t0; t < t1; t++ {
		qr := qb.row(t)
		for hh := 0; hh < group; hh++ {
			h := g*group + hh
			copy(qs[((t-t0)*group+hh)*a.HK:], qr[h*a.HK:(h+1)*a.HK])
		}
	}
	kk := be.f32(m)
	// F32 activations are the values' own bytes: the queries and each
	// tile's probabilities go to the kernels as they lie, unconverted.
	w.acts = kern.Acts{Type: quant.F32, Rows: m, Cols: a.HK, Data: bytesOf(qs)}
	sc := w.grow(1, nT*m*kvTile)
	for ti := 0; ti < nT; ti++ {
		keys := kern.Weights{Type: quant.F32, Rows: kvTile, Cols: a.HK, Data: bytesOf(c.kTile(g, ti))}
		if err := kk.MulActs(w.pool, &w.scratch, sc[ti*m*kvTile:(ti+1)*m*kvTile], keys, &w.acts); err != nil {
			return fmt.Errorf("cpu: attention scores: %w", err)
		}
	}
	for i := 0; i < m; i++ {
		causalSoftmax(sc, nT, m, i, pos0+t0+i/group+1, a.Scale)
	}
	acc := w.grow(2, m*a.HV)
	part := w.grow(3, m*a.HV)
	for ti := 0; ti < nT; ti++ {
		vals := kern.Weights{Type: quant.F32, Rows: a.HV, Cols: kvTile, Data: bytesOf(c.vTile(g, ti))}
		dst := part
		if ti == 0 {
			dst = acc
		}
		w.acts = kern.Acts{Type: quant.F32, Rows: m, Cols: kvTile, Data: bytesOf(sc[ti*m*kvTile : (ti+1)*m*kvTile])}
		if err := kk.MulActs(w.pool, &w.scratch, dst, vals, &w.acts); err != nil {
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

// causalSoftmax turns row i of the tiled scores ([nT][m][kvTile]) into
// probabilities over its first valid positions, as ggml's soft_max with a
// causal mask does on the cache's row: x·scale, e^(x − max) summed by groups
// of 8 in position order (ggml_vec_soft_max_f32), the masked positions 0,
// then a float32 multiplication by 1/Σ.
func causalSoftmax(sc []float32, nT, m, i, valid int, scale float32) {
	seg := func(ti int) []float32 { return sc[(ti*m+i)*kvTile : (ti*m+i+1)*kvTile] }
	mx := float32(math.Inf(-1))
	for ti := 0; ti < nT; ti++ {
		mx = max(mx, scaleMax(seg(ti)[:max(0, min(kvTile, valid-ti*kvTile))], scale))
	}
	var sum float64
	for ti := 0; ti < nT; ti++ {
		s := seg(ti)
		sum = kern.ExpSum(s, s, mx, valid-ti*kvTile, sum)
	}
	inv := float32(1 / sum)
	for ti := 0; ti < nT; ti++ {
		s := seg(ti)[:max(0, min(kvTile, valid-ti*kvTile))]
		for j := range s {
			s[j] *= inv
		}
	}
}

func (be *backend) f32(m int) *kern.Kernel {
	if m == 1 {
		return be.f32mv
	}
	return be.f32mm
}

// scaleMax multiplies x by scale in place and returns the largest value
// (−∞ for none), with four running maxima: the maximum is the same in any
// order.
func scaleMax(x []float32, scale float32) float32 {
	inf := float32(math.Inf(-1))
	m0, m1, m2, m3 := inf, inf, inf, inf
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		a, b, c, d := v[0]*scale, v[1]*scale, v[2]*scale, v[3]*scale
		v[0], v[1], v[2], v[3] = a, b, c, d
		m0, m1, m2, m3 = max(m0, a), max(m1, b), max(m2, c), max(m3, d)
	}
	for ; i < len(x); i++ {
		x[i] *= scale
		m0 = max(m0, x[i])
	}
	return max(max(m0, m1), max(m2, m3))
}
