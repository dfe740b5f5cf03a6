package ref

import (
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/model"
)

// The qwen35 layers: a Gated DeltaNet block on most layers, gated full
// attention on every full_attention_interval-th. See /work/notes/qwen35.md for
// the formulas and where they come from (llama.cpp src/models/qwen35.cpp).

// Trace op names particular to qwen35 (the shared ones live in engine/model).
const (
	OpQ35Gate     = "q_gate"       // full-attention output gate (before the sigmoid), from attn_q
	OpQ35AttnPre  = "attn_pregate" // attention output before the gate and projection
	OpQ35QKV      = "ssm_qkv"      // DeltaNet q|k|v projection before the convolution
	OpQ35Conv     = "ssm_conv"     // after the causal convolution and SiLU
	OpQ35Z        = "ssm_z"        // DeltaNet output gate input z
	OpQ35Beta     = "ssm_beta"     // sigmoid(beta) per value head
	OpQ35G        = "ssm_g"        // log decay per value head
	OpQ35Delta    = "ssm_delta"    // delta-rule output, all value heads, before the gated norm
	OpQ35GatedOut = "ssm_norm"     // after the gated RMSNorm, before ssm_out
)

// q35Mat is a dense weight matrix in ggml order: rows of length in, one per
// output (W[o*in+i]).
type q35Mat struct {
	in, out int
	w       []float32
}

// mulVec writes y = W·x.
func (m q35Mat) mulVec(y, x []float32) {
	if len(x) != m.in || len(y) != m.out {
		panic(fmt.Sprintf("ref: q35Mat.mulVec: %dx%d with x %d, y %d", m.out, m.in, len(x), len(y)))
	}
	for o := 0; o < m.out; o++ {
		row := m.w[o*m.in : (o+1)*m.in]
		var s float64
		for i, v := range row {
			s += float64(v) * float64(x[i])
		}
		y[o] = float32(s)
	}
}

// q35Dims are the shapes and constants the qwen35 layers need.
type q35Dims struct {
	nEmbd    int
	eps      float32
	nHead    int // full attention
	nHeadKV  int
	headDim  int
	nRot     int
	sections q35RopeSections
	ropeBase float64
	dConv    int // DeltaNet
	nKHeads  int
	nVHeads  int
	headK    int // = state_size
	headV    int // = inner_size / time_step_rank
}

func (d q35Dims) keyDim() int       { return d.nKHeads * d.headK }
func (d q35Dims) valueDim() int     { return d.nVHeads * d.headV }
func (d q35Dims) convChannels() int { return 2*d.keyDim() + d.valueDim() }

// q35DeltaNet holds one Gated DeltaNet layer's weights, dequantized.
type q35DeltaNet struct {
	qkv, gate, beta, alpha, out q35Mat
	conv                        []float32 // [channels][dConv]
	dtBias, a                   []float32 // [nVHeads]
	norm                        []float32 // [headV]
}

// q35DeltaState is one sequence's recurrent state in one DeltaNet layer.
type q35DeltaState struct {
	conv []float32 // [channels][dConv-1], oldest input first
	s    []float32 // [nVHeads][headV][headK]
}

func newQ35DeltaState(d q35Dims) *q35DeltaState {
	return &q35DeltaState{
		conv: make([]float32, d.convChannels()*(d.dConv-1)),
		s:    make([]float32, d.nVHeads*d.headV*d.headK),
	}
}

// forward runs the block for the token at pos on the normalised input h,
// advancing st, and writes the block output (after ssm_out) to dst.
func (l *q35DeltaNet) forward(d q35Dims, st *q35DeltaState, dst, h []float32, layer, pos int, tr model.Trace) {
	nCh := d.convChannels()
	qkv := make([]float32, nCh)
	l.qkv.mulVec(qkv, h)
	z := make([]float32, d.valueDim())
	l.gate.mulVec(z, h)
	beta := make([]float32, d.nVHeads)
	l.beta.mulVec(beta, h)
	g := make([]float32, d.nVHeads)
	l.alpha.mulVec(g, h)
	for j := range beta {
		beta[j] = float32(sigmoid64(float64(beta[j])))
		g[j] = float32(q35Softplus(float64(g[j])+float64(l.dtBias[j])) * float64(l.a[j]))
	}
	if tr != nil {
		tr(layer, OpQ35QKV, pos, qkv)
		tr(layer, OpQ35Z, pos, z)
		tr(layer, OpQ35Beta, pos, beta)
		tr(layer, OpQ35G, pos, g)
	}

	c := make([]float32, nCh)
	q35Conv(c, st.conv, qkv, l.conv, d.dConv)
	for i, v := range c {
		c[i] = float32(silu64(float64(v)))
	}
	if tr != nil {
		tr(layer, OpQ35Conv, pos, c)
	}
	kd := d.keyDim()
	q, k, v := c[:kd], c[kd:2*kd], c[2*kd:]
	for hh := 0; hh < d.nKHeads; hh++ {
		q35L2Norm(q[hh*d.headK:(hh+1)*d.headK], d.eps)
		q35L2Norm(k[hh*d.headK:(hh+1)*d.headK], d.eps)
	}

	o := make([]float32, d.valueDim())
	ss := d.headV * d.headK
	for j := 0; j < d.nVHeads; j++ {
		kh := j % d.nKHeads // tiled, as ggml_repeat and the fused op map heads
		q35DeltaStep(st.s[j*ss:(j+1)*ss], o[j*d.headV:(j+1)*d.headV],
			q[kh*d.headK:(kh+1)*d.headK], k[kh*d.headK:(kh+1)*d.headK], v[j*d.headV:(j+1)*d.headV],
			g[j], beta[j])
	}
	if tr != nil {
		tr(layer, OpQ35Delta, pos, o)
	}
	for j := 0; j < d.nVHeads; j++ {
		q35GatedNorm(o[j*d.headV:(j+1)*d.headV], l.norm, z[j*d.headV:(j+1)*d.headV], d.eps)
	}
	if tr != nil {
		tr(layer, OpQ35GatedOut, pos, o)
	}
	l.out.mulVec(dst, o)
	if tr != nil {
		tr(layer, model.OpSSMOut, pos, dst)
	}
}

// q35Attn holds one gated full-attention layer's weights, dequantized.
type q35Attn struct {
	q, k, v, o   q35Mat // q yields [nHead][query headDim | gate headDim]
	qNorm, kNorm []float32
}

// q35KV is one sequence's cache in one full-attention layer: per position,
// the roped keys and the values of every kv head.
type q35KV struct {
	k, v [][]float32
}

// forward runs the block for the token at pos on the normalised input h,
// appending its key and value to kv, and writes the output (after
// attn_output) to dst.
func (l *q35Attn) forward(d q35Dims, kv *q35KV, dst, h []float32, layer, pos int, tr model.Trace) {
	hd := d.headDim
	qg := make([]float32, 2*hd*d.nHead)
	l.q.mulVec(qg, h)
	q := make([]float32, hd*d.nHead)
	gate := make([]float32, hd*d.nHead)
	for j := 0; j < d.nHead; j++ {
		copy(q[j*hd:(j+1)*hd], qg[2*j*hd:(2*j+1)*hd])
		copy(gate[j*hd:(j+1)*hd], qg[(2*j+1)*hd:(2*j+2)*hd])
		q35RMSNorm(q[j*hd:(j+1)*hd], q[j*hd:(j+1)*hd], l.qNorm, d.eps)
	}
	k := make([]float32, hd*d.nHeadKV)
	l.k.mulVec(k, h)
	v := make([]float32, hd*d.nHeadKV)
	l.v.mulVec(v, h)
	for j := 0; j < d.nHeadKV; j++ {
		q35RMSNorm(k[j*hd:(j+1)*hd], k[j*hd:(j+1)*hd], l.kNorm, d.eps)
	}
	if tr != nil {
		tr(layer, model.OpQ, pos, q)
		tr(layer, model.OpK, pos, k)
		tr(layer, model.OpV, pos, v)
		tr(layer, OpQ35Gate, pos, gate)
	}
	p := [4]int{pos, pos, pos, 0} // text: t, h, w = position, e = 0
	for j := 0; j < d.nHead; j++ {
		q35Rope(q[j*hd:(j+1)*hd], p, d.nRot, d.sections, d.ropeBase)
	}
	for j := 0; j < d.nHeadKV; j++ {
		q35Rope(k[j*hd:(j+1)*hd], p, d.nRot, d.sections, d.ropeBase)
	}
	if tr != nil {
		tr(layer, model.OpQRope, pos, q)
		tr(layer, model.OpKRope, pos, k)
	}
	kv.k = append(kv.k, k)
	kv.v = append(kv.v, v)

	n := len(kv.k)
	o := make([]float32, hd*d.nHead)
	scores := make([]float64, n)
	scale := 1 / math.Sqrt(float64(hd))
	group := d.nHead / d.nHeadKV
	for j := 0; j < d.nHead; j++ {
		g := j / group // grouped: consecutive query heads share a kv head
		qj := q[j*hd : (j+1)*hd]
		maxS := math.Inf(-1)
		for t := 0; t < n; t++ {
			kt := kv.k[t][g*hd : (g+1)*hd]
			var s float64
			for i := range qj {
				s += float64(qj[i]) * float64(kt[i])
			}
			scores[t] = s * scale
			maxS = math.Max(maxS, scores[t])
		}
		var sum float64
		for t := range scores {
			scores[t] = math.Exp(scores[t] - maxS)
			sum += scores[t]
		}
		oj := o[j*hd : (j+1)*hd]
		for i := range oj {
			var acc float64
			for t := 0; t < n; t++ {
				acc += scores[t] * float64(kv.v[t][g*hd+i])
			}
			oj[i] = float32(acc / sum)
		}
	}
	if tr != nil {
		tr(layer, OpQ35AttnPre, pos, o)
	}
	for i := range o {
		o[i] = float32(float64(o[i]) * sigmoid64(float64(gate[i])))
	}
	l.o.mulVec(dst, o)
	if tr != nil {
		tr(layer, model.OpAttnOut, pos, dst)
	}
}
