package ref

import (
	"fmt"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/refuse"
)

// The qwen35 (Qwen3.5) sequence mixers: a Gated DeltaNet block on most
// layers and gated full attention on every full_attention_interval-th, as
// llama.cpp's src/models/qwen35.cpp computes them. The formulas, with where
// each comes from, are in qwen35_math.go; the FFN and the norms around the
// mixers are the engine's common ones (qwen35's post_attention_norm is bound
// as the layer's FFNNorm).

func init() {
	RegisterMixer(model.LayerGatedDeltaNet, newQ35DeltaNet)
	RegisterMixer(model.LayerGatedAttention, newQ35Attention)
}

func q35Ext(e *Engine) (*model.Qwen35, error) {
	q, ok := e.spec.Ext.(*model.Qwen35)
	if !ok {
		return nil, refuse.New(By, "qwen35 layers need the qwen35 hyper-parameters; the spec of %s carries %T", e.spec.Arch, e.spec.Ext)
	}
	return q, nil
}

// q35DeltaNet is one Gated DeltaNet layer: its projections stay in the file
// (read through Engine.linear); the small tensors are dequantized here.
type q35DeltaNet struct {
	e    *Engine
	l    *model.Layer
	q    *model.Qwen35
	eps  float64
	conv []float32 // [channels][kernel]
	dt   []float32 // [n_v_heads]
	a    []float32 // [n_v_heads]
	norm []float32 // [head_v_dim]
}

func newQ35DeltaNet(e *Engine, l *model.Layer) (Mixer, error) {
	q, err := q35Ext(e)
	if err != nil {
		return nil, err
	}
	for _, role := range []string{model.RoleSSMQKV, model.RoleSSMGate, model.RoleSSMConv, model.RoleSSMDt, model.RoleSSMA,
		model.RoleSSMBeta, model.RoleSSMAlpha, model.RoleSSMNorm, model.RoleSSMOut} {
		if l.Ext[role] == nil {
			return nil, refuse.New(By, "layer %d: Gated DeltaNet tensor %q is not bound", l.Index, role)
		}
	}
	if q.HeadVDim != q.StateSize || q.NVHeads%q.NKHeads != 0 {
		return nil, refuse.New(By, "layer %d: value head %d ≠ key head %d or %d value heads not a multiple of %d key heads",
			l.Index, q.HeadVDim, q.StateSize, q.NVHeads, q.NKHeads)
	}
	return &q35DeltaNet{e: e, l: l, q: q, eps: e.spec.RMSEps,
		conv: e.vector(l.Ext[model.RoleSSMConv]), dt: e.vector(l.Ext[model.RoleSSMDt]),
		a: e.vector(l.Ext[model.RoleSSMA]), norm: e.vector(l.Ext[model.RoleSSMNorm])}, nil
}

// q35DeltaState is one session's recurrent state in one DeltaNet layer.
type q35DeltaState struct {
	m    *q35DeltaNet
	pos  int       // positions fed so far
	conv []float32 // [channels][kernel-1]: the last inputs, oldest first
	s    []float32 // [n_v_heads][head_v_dim][head_k_dim]
}

func (m *q35DeltaNet) NewState(int) MixerState {
	q := m.q
	return &q35DeltaState{m: m,
		conv: make([]float32, q.ConvChannels()*(q.ConvKernel-1)),
		s:    make([]float32, q.NVHeads*q.HeadVDim*q.StateSize)}
}

func (st *q35DeltaState) Forward(tr tracer, x, out [][]float32, pos int) error {
	m := st.m
	e, l, q := m.e, m.l, m.q
	if pos != st.pos {
		return fmt.Errorf("ref: layer %d: Gated DeltaNet at position %d but its state has seen %d", l.Index, pos, st.pos)
	}
	n := len(x)
	nCh, kd, vd := q.ConvChannels(), q.KeyDim(), q.InnerSize
	hk, hv := q.StateSize, q.HeadVDim
	qkv, z := matrix2(n, nCh), matrix2(n, vd)
	beta, g := matrix2(n, q.NVHeads), matrix2(n, q.NVHeads)
	e.linear(l.Ext[model.RoleSSMQKV], nil, x, qkv)
	e.linear(l.Ext[model.RoleSSMGate], nil, x, z)
	e.linear(l.Ext[model.RoleSSMBeta], nil, x, beta)
	e.linear(l.Ext[model.RoleSSMAlpha], nil, x, g)

	o := matrix2(n, vd)
	c := make([]float32, nCh)
	for t := 0; t < n; t++ {
		p := pos + t
		for j := range beta[t] {
			beta[t][j] = float32(q35Sigmoid(float64(beta[t][j])))
			g[t][j] = float32(q35Softplus(float64(g[t][j])+float64(m.dt[j])) * float64(m.a[j]))
		}
		tr.emit(model.OpQ35QKV, p, qkv[t])
		tr.emit(model.OpQ35Z, p, z[t])
		tr.emit(model.OpQ35Beta, p, beta[t])
		tr.emit(model.OpQ35G, p, g[t])

		q35Conv(c, st.conv, qkv[t], m.conv, q.ConvKernel)
		for i, v := range c {
			c[i] = float32(silu(float64(v)))
		}
		tr.emit(model.OpQ35Conv, p, c)
		qs, ks, vs := c[:kd], c[kd:2*kd], c[2*kd:]
		for h := 0; h < q.NKHeads; h++ {
			q35L2Norm(qs[h*hk:(h+1)*hk], m.eps)
			q35L2Norm(ks[h*hk:(h+1)*hk], m.eps)
		}
		ss := hv * hk
		step := func(j int) { // each head's state and output its own
			kh := j % q.NKHeads // tiled, as ggml_repeat and the fused op map heads
			q35DeltaStep(st.s[j*ss:(j+1)*ss], o[t][j*hv:(j+1)*hv],
				qs[kh*hk:(kh+1)*hk], ks[kh*hk:(kh+1)*hk], vs[j*hv:(j+1)*hv], g[t][j], beta[t][j])
		}
		e.each(q.NVHeads, ss*4, func() func(int) { return step })
		tr.emit(model.OpQ35Delta, p, o[t])
		for j := 0; j < q.NVHeads; j++ {
			q35GatedNorm(o[t][j*hv:(j+1)*hv], m.norm, z[t][j*hv:(j+1)*hv], m.eps)
		}
		tr.emit(model.OpQ35GatedOut, p, o[t])
	}
	st.pos += n
	e.linear(l.Ext[model.RoleSSMOut], nil, o, out)
	for t := range out {
		tr.emit(model.OpSSMOut, pos+t, out[t])
	}
	return nil
}

// q35Attention is one gated full-attention layer.
type q35Attention struct {
	e            *Engine
	l            *model.Layer
	q            *model.Qwen35
	hd           int
	scale        float64
	qNorm, kNorm []float32
}

func newQ35Attention(e *Engine, l *model.Layer) (Mixer, error) {
	q, err := q35Ext(e)
	if err != nil {
		return nil, err
	}
	s := e.spec
	if s.RopeScaling.Type != "none" {
		return nil, refuse.New(By, "qwen35: RoPE scaling %q is not implemented by the reference", s.RopeScaling.Type)
	}
	if s.HeadDimK != s.HeadDimV {
		return nil, refuse.New(By, "qwen35: key head %d ≠ value head %d", s.HeadDimK, s.HeadDimV)
	}
	if l.Wq == nil || l.Wk == nil || l.Wv == nil || l.Wo == nil || l.QNorm == nil || l.KNorm == nil {
		return nil, refuse.New(By, "layer %d: gated attention needs attn_q, attn_k, attn_v, attn_output and the q/k norms", l.Index)
	}
	return &q35Attention{e: e, l: l, q: q, hd: s.HeadDimK, scale: s.AttnScale,
		qNorm: e.vector(l.QNorm), kNorm: e.vector(l.KNorm)}, nil
}

// q35KV is one session's cache in one gated-attention layer: per position,
// the roped keys and the values of every kv head.
type q35KV struct {
	a      *q35Attention
	maxCtx int
	k, v   [][]float32
}

func (a *q35Attention) NewState(maxCtx int) MixerState { return &q35KV{a: a, maxCtx: maxCtx} }

func (c *q35KV) Forward(tr tracer, x, out [][]float32, pos int) error {
	a := c.a
	e, l, sp := a.e, a.l, a.e.spec
	n, hd := len(x), a.hd
	nH, nKV := l.NHead, l.NHeadKV
	if pos != len(c.k) {
		return fmt.Errorf("ref: layer %d: attention at position %d but the cache holds %d", l.Index, pos, len(c.k))
	}
	if pos+n > c.maxCtx {
		return fmt.Errorf("ref: layer %d: %d positions exceed the context of %d", l.Index, pos+n, c.maxCtx)
	}
	qg := matrix2(n, 2*hd*nH)
	k, v := matrix2(n, hd*nKV), matrix2(n, hd*nKV)
	e.linear(l.Wq, nil, x, qg)
	e.linear(l.Wk, nil, x, k)
	e.linear(l.Wv, nil, x, v)
	q, gate := matrix2(n, hd*nH), matrix2(n, hd*nH)
	half := sp.RopeDim / 2
	cos, sin := make([]float64, half), make([]float64, half)
	sec := q35RopeSections(a.q.RopeSections)
	for t := 0; t < n; t++ {
		p := pos + t
		for h := 0; h < nH; h++ {
			// attn_q yields, per head, hd query values then hd gate values.
			copy(q[t][h*hd:(h+1)*hd], qg[t][2*h*hd:(2*h+1)*hd])
			copy(gate[t][h*hd:(h+1)*hd], qg[t][(2*h+1)*hd:(2*h+2)*hd])
			rmsNorm(q[t][h*hd:(h+1)*hd], q[t][h*hd:(h+1)*hd], a.qNorm, sp.RMSEps)
		}
		for h := 0; h < nKV; h++ {
			rmsNorm(k[t][h*hd:(h+1)*hd], k[t][h*hd:(h+1)*hd], a.kNorm, sp.RMSEps)
		}
		tr.emit(model.OpQ, p, q[t])
		tr.emit(model.OpK, p, k[t])
		tr.emit(model.OpV, p, v[t])
		tr.emit(model.OpQ35Gate, p, gate[t])
		// Text tokens: the t, h and w components are the position, e is 0.
		q35Angles([4]int{p, p, p, 0}, sp.RopeDim, sec, sp.RopeBase, cos, sin)
		for h := 0; h < nH; h++ {
			q35Rotate(q[t][h*hd:(h+1)*hd], cos, sin)
		}
		for h := 0; h < nKV; h++ {
			q35Rotate(k[t][h*hd:(h+1)*hd], cos, sin)
		}
		tr.emit(model.OpQRope, p, q[t])
		tr.emit(model.OpKRope, p, k[t])
		c.k = append(c.k, k[t])
		c.v = append(c.v, v[t])
	}

	group := nH / nKV
	o := matrix2(n, hd*nH)
	scores := make([]float64, pos+n)
	acc := make([]float64, hd)
	for t := 0; t < n; t++ {
		p := pos + t // attends to positions 0..p
		for h := 0; h < nH; h++ {
			g := h / group // grouped: query head h reads kv head h/(nH/nKV)
			sc := scores[:p+1]
			for j := range sc {
				sc[j] = dot(q[t][h*hd:(h+1)*hd], c.k[j][g*hd:(g+1)*hd]) * a.scale
			}
			softmaxInPlace(sc)
			clear(acc)
			for j, w := range sc {
				vj := c.v[j][g*hd : (g+1)*hd]
				for d := range acc {
					acc[d] += w * float64(vj[d])
				}
			}
			oh := o[t][h*hd : (h+1)*hd]
			for d := range oh {
				oh[d] = float32(acc[d])
			}
		}
		tr.emit(model.OpQ35AttnPre, p, o[t])
		for i := range o[t] {
			o[t][i] = float32(float64(o[t][i]) * q35Sigmoid(float64(gate[t][i])))
		}
	}
	e.linear(l.Wo, nil, o, out)
	for t := range out {
		tr.emit(model.OpAttnOut, pos+t, out[t])
	}
	return nil
}
