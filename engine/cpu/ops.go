package cpu

import (
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/graph"
)

// Element-wise and row-wise ops of graph.Backend.

func sameShape(op string, a, b *buf) {
	if a.rows != b.rows || a.cols != b.cols {
		panic(fmt.Sprintf("cpu: %s: %d×%d and %d×%d", op, a.rows, a.cols, b.rows, b.cols))
	}
}

func (be *backend) AddVec(dst graph.Buf, v graph.Weight) {
	d, w := asBuf(dst), asVector(v)
	if len(w) != d.cols {
		panic(fmt.Sprintf("cpu: AddVec of %d values to %d columns", len(w), d.cols))
	}
	for r := 0; r < d.rows; r++ {
		row := d.row(r)
		for i := range row {
			row[i] += w[i]
		}
	}
}

func (be *backend) Add(dst, x graph.Buf) {
	d, s := asBuf(dst), asBuf(x)
	sameShape("Add", d, s)
	be.forRows(d.rows, d.cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			dr, sr := d.row(r), s.row(r)
			for i := range dr {
				dr[i] += sr[i]
			}
		}
	})
}

func (be *backend) RMSNorm(dst, x graph.Buf, w graph.Weight, group int, eps float32) {
	d, s, wv := asBuf(dst), asBuf(x), asVector(w)
	sameShape("RMSNorm", d, s)
	if group <= 0 || d.cols%group != 0 || (wv != nil && len(wv) != group) {
		panic(fmt.Sprintf("cpu: RMSNorm: group %d of %d columns, %d weights", group, d.cols, len(wv)))
	}
	be.forRows(d.rows, d.cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			dr, sr := d.row(r), s.row(r)
			for g0 := 0; g0 < len(dr); g0 += group {
				rmsNorm(dr[g0:g0+group], sr[g0:g0+group], wv, eps)
			}
		}
	})
}

// rmsNorm is ggml's rms_norm then mul: the mean of squares in float64, the
// scale 1/sqrt(mean+eps) in float32, y = (x·scale)·w.
func rmsNorm(dst, x, w []float32, eps float32) {
	mean := float32(sumSq(x) / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	if w == nil {
		for i, v := range x {
			dst[i] = v * scale
		}
		return
	}
	w = w[:len(x)]
	for i, v := range x {
		dst[i] = (v * scale) * w[i]
	}
}

func (be *backend) SwiGLU(dst, gate, up graph.Buf) {
	d, g, u := asBuf(dst), asBuf(gate), asBuf(up)
	sameShape("SwiGLU", d, g)
	sameShape("SwiGLU", d, u)
	be.forRows(d.rows, d.cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			kern.SwiGLU(d.row(r), g.row(r), u.row(r))
		}
	})
}

func (be *backend) Softmax(x graph.Buf) {
	b := asBuf(x)
	for r := 0; r < b.rows; r++ {
		softmax(b.row(r), 1)
	}
}

// softmax is ggml's soft_max with a scale: x·scale, the max, e^(x − max)
// summed as ggml_vec_soft_max_f32 sums, then a float32 multiplication by
// 1/Σ.
func softmax(x []float32, scale float32) {
	if len(x) == 0 {
		return
	}
	mx := float32(math.Inf(-1))
	for i, v := range x {
		v *= scale
		x[i] = v
		mx = max(mx, v)
	}
	inv := float32(1 / kern.SoftMax(x, x, mx))
	for i := range x {
		x[i] *= inv
	}
}

func (be *backend) TopK(x graph.Buf, k int, ids []int32, vals []float32) {
	b := asBuf(x)
	if k < 1 || k > b.cols || len(ids) != b.rows*k || len(vals) != b.rows*k {
		panic(fmt.Sprintf("cpu: TopK %d of %d×%d into %d/%d", k, b.rows, b.cols, len(ids), len(vals)))
	}
	for r := 0; r < b.rows; r++ {
		graph.TopKRow(b.row(r), ids[r*k:(r+1)*k], vals[r*k:(r+1)*k])
	}
}

func (be *backend) WeightedSum(dst, y graph.Buf, w []float32, k int) {
	d, yb := asBuf(dst), asBuf(y)
	if k < 1 || yb.rows != d.rows*k || yb.cols != d.cols || len(w) != yb.rows {
		panic(fmt.Sprintf("cpu: WeightedSum %d×%d from %d×%d, k %d, %d weights", d.rows, d.cols, yb.rows, yb.cols, k, len(w)))
	}
	for t := 0; t < d.rows; t++ {
		dr := d.row(t)
		y0, w0 := yb.row(t*k), w[t*k]
		for i := range dr {
			dr[i] = y0[i] * w0
		}
		for j := 1; j < k; j++ {
			yj, wj := yb.row(t*k+j), w[t*k+j]
			for i := range dr {
				dr[i] += yj[i] * wj
			}
		}
	}
}

func (be *backend) Deinterleave(src graph.Buf, width int, dst ...graph.Buf) {
	s := asBuf(src)
	ds := make([]*buf, len(dst))
	for i, g := range dst {
		ds[i] = asBuf(g)
		if ds[i].rows != s.rows || ds[i].cols*len(dst) != s.cols || ds[i].cols%width != 0 {
			panic(fmt.Sprintf("cpu: Deinterleave %d×%d into %d buffers of %d×%d", s.rows, s.cols, len(dst), ds[i].rows, ds[i].cols))
		}
	}
	for r := 0; r < s.rows; r++ {
		sr := s.row(r)
		for run := 0; run*width < s.cols; run++ {
			d := ds[run%len(ds)]
			off := (run / len(ds)) * width
			copy(d.row(r)[off:off+width], sr[run*width:(run+1)*width])
		}
	}
}

func (be *backend) Sigmoid(x graph.Buf) {
	b := asBuf(x)
	for r := 0; r < b.rows; r++ {
		row := b.row(r)
		for i, v := range row {
			row[i] = sigmoid(v)
		}
	}
}

func (be *backend) SiLU(x graph.Buf) {
	b := asBuf(x)
	be.forRows(b.rows, b.cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := b.row(r)
			kern.SiLU(row, row)
		}
	})
}

func (be *backend) MulSigmoid(x, gate graph.Buf) {
	b, g := asBuf(x), asBuf(gate)
	sameShape("MulSigmoid", b, g)
	for r := 0; r < b.rows; r++ {
		row, gr := b.row(r), g.row(r)
		for i := range row {
			row[i] *= sigmoid(gr[i])
		}
	}
}

func (be *backend) SoftplusMul(g graph.Buf, bias, a graph.Weight) {
	b, bv, av := asBuf(g), asVector(bias), asVector(a)
	if len(bv) != b.cols || len(av) != b.cols {
		panic(fmt.Sprintf("cpu: SoftplusMul of %d columns with %d biases and %d factors", b.cols, len(bv), len(av)))
	}
	for r := 0; r < b.rows; r++ {
		row := b.row(r)
		for i, v := range row {
			row[i] = softplus(v+bv[i]) * av[i]
		}
	}
}

func (be *backend) L2Norm(x graph.Buf, group int, eps float32) {
	b := asBuf(x)
	if group <= 0 || b.cols%group != 0 {
		panic(fmt.Sprintf("cpu: L2Norm: group %d of %d columns", group, b.cols))
	}
	for r := 0; r < b.rows; r++ {
		row := b.row(r)
		for g0 := 0; g0 < len(row); g0 += group {
			seg := row[g0 : g0+group]
			scale := 1 / max(float32(math.Sqrt(float64(float32(sumSq(seg))))), eps) // sqrtf of the float sum
			for i := range seg {
				seg[i] *= scale
			}
		}
	}
}

func (be *backend) GatedNorm(o, z graph.Buf, w graph.Weight, group int, eps float32) {
	ob, zb, wv := asBuf(o), asBuf(z), asVector(w)
	sameShape("GatedNorm", ob, zb)
	if group <= 0 || ob.cols%group != 0 || len(wv) != group {
		panic(fmt.Sprintf("cpu: GatedNorm: group %d of %d columns, %d weights", group, ob.cols, len(wv)))
	}
	// ggml applies silu to the whole z row (ggml_vec_silu_f32), then the
	// per-head norm and the product.
	sz := make([]float32, ob.cols)
	for r := 0; r < ob.rows; r++ {
		or := ob.row(r)
		kern.SiLU(sz, zb.row(r))
		for g0 := 0; g0 < len(or); g0 += group {
			seg := or[g0 : g0+group]
			rmsNorm(seg, seg, wv, eps)
			for i, s := range sz[g0 : g0+group] {
				seg[i] *= s
			}
		}
	}
}
