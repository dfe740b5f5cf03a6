package graph

import (
	"fmt"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/refuse"
)

// The qwen35 (Qwen3.5) mixers: Gated DeltaNet on most layers, gated full
// attention on every full_attention_interval-th, as llama.cpp's
// src/models/qwen35.cpp builds them. Their FFN is the dense SwiGLU and
// post_attention_norm is bound as the layer's FFNNorm, so the layer loop is
// the common one.

func init() {
	RegisterMixer(model.LayerGatedDeltaNet, newQ35DeltaNet)
	RegisterMixer(model.LayerGatedAttention, newQ35Attention)
}

func q35Of(m *Model) (*model.Qwen35, error) {
	q, ok := m.Spec.Ext.(*model.Qwen35)
	if !ok || q == nil {
		return nil, refuse.New(By, "qwen35 layers need the qwen35 hyper-parameters; the spec of %s carries %T", m.Spec.Arch, m.Spec.Ext)
	}
	return q, nil
}

// q35DeltaNet is one Gated DeltaNet layer.
type q35DeltaNet struct {
	q                       *model.Qwen35
	qkv, gate, beta, alpha  Weight
	out                     Weight
	conv, dt, a, norm       Weight
	nCh, kd, vd, nV, hk, hv int
	eps                     float32
}

func newQ35DeltaNet(m *Model, l *model.Layer) (Mixer, error) {
	q, err := q35Of(m)
	if err != nil {
		return nil, err
	}
	if q.HeadVDim != q.StateSize || q.NKHeads <= 0 || q.NVHeads%q.NKHeads != 0 || q.ConvKernel < 1 {
		return nil, refuse.New(By, "layer %d: value head %d ≠ key head %d, %d value heads not a multiple of %d key heads, or conv kernel %d",
			l.Index, q.HeadVDim, q.StateSize, q.NVHeads, q.NKHeads, q.ConvKernel)
	}
	d := &q35DeltaNet{q: q, nCh: q.ConvChannels(), kd: q.KeyDim(), vd: q.InnerSize, nV: q.NVHeads,
		hk: q.StateSize, hv: q.HeadVDim, eps: m.Eps}
	mats := []struct {
		w    *Weight
		role string
	}{{&d.qkv, model.RoleSSMQKV}, {&d.gate, model.RoleSSMGate}, {&d.beta, model.RoleSSMBeta},
		{&d.alpha, model.RoleSSMAlpha}, {&d.out, model.RoleSSMOut}}
	for _, p := range mats {
		if *p.w, err = m.Matrix(l, p.role, l.Ext[p.role]); err != nil {
			return nil, err
		}
	}
	vecs := []struct {
		w    *Weight
		role string
	}{{&d.conv, model.RoleSSMConv}, {&d.dt, model.RoleSSMDt}, {&d.a, model.RoleSSMA}, {&d.norm, model.RoleSSMNorm}}
	for _, p := range vecs {
		if *p.w, err = m.Vector(l, p.role, l.Ext[p.role]); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *q35DeltaNet) NewState(int) (MixerState, error) {
	return &q35DeltaState{d: d}, nil
}

// q35DeltaState is one session's recurrent state in one DeltaNet layer:
// the last K−1 convolution inputs and the delta-rule state of every value
// head. Buffers are allocated on first use.
type q35DeltaState struct {
	d     *q35DeltaNet
	pos   int
	conv  Buf // (K−1) × channels
	state Buf // nV × (hv·hk)
}

func (st *q35DeltaState) Reset(b Backend) {
	if st.state != nil {
		b.Zero(st.conv)
		b.Zero(st.state)
	}
	st.pos = 0
}

func (st *q35DeltaState) Free(b Backend) {
	freeState(b, st.conv)
	freeState(b, st.state)
	st.conv, st.state = nil, nil
}

func (st *q35DeltaState) Forward(c *Ctx, x, out Buf) error {
	d, b := st.d, c.B
	if c.Pos != st.pos {
		return fmt.Errorf("Gated DeltaNet at position %d but its state has seen %d", c.Pos, st.pos)
	}
	if st.state == nil {
		st.conv = allocState(b, max(d.q.ConvKernel-1, 1), d.nCh)
		st.state = allocState(b, d.nV, d.hv*d.hk)
	}
	qkv, z := c.Buf("dn.qkv", d.nCh), c.Buf("dn.z", d.vd)
	beta, g := c.Buf("dn.beta", d.nV), c.Buf("dn.g", d.nV)
	if err := b.MatMuls(x, []Buf{qkv, z, beta, g}, []Weight{d.qkv, d.gate, d.beta, d.alpha}); err != nil {
		return err
	}
	b.Sigmoid(beta)
	b.SoftplusMul(g, d.dt, d.a)
	c.Emit(model.OpQ35QKV, qkv)
	c.Emit(model.OpQ35Z, z)
	c.Emit(model.OpQ35Beta, beta)
	c.Emit(model.OpQ35G, g)

	conv := c.Buf("dn.conv", d.nCh)
	state := st.conv
	if d.q.ConvKernel == 1 {
		state = b.View(st.conv, 0, 0, 0, d.nCh)
	}
	b.Conv(conv, qkv, state, d.conv)
	b.SiLU(conv)
	c.Emit(model.OpQ35Conv, conv)
	qs := b.View(conv, 0, c.N, 0, d.kd)
	ks := b.View(conv, 0, c.N, d.kd, 2*d.kd)
	vs := b.View(conv, 0, c.N, 2*d.kd, d.nCh)
	// q and k are adjacent heads of hk values: one L2Norm over both (one
	// launch, not two, on a device; the same groups and arithmetic).
	b.L2Norm(b.View(conv, 0, c.N, 0, 2*d.kd), d.hk, d.eps)
	o := c.Buf("dn.o", d.vd)
	b.DeltaRule(o, qs, ks, vs, g, beta, st.state, d.hk)
	c.Emit(model.OpQ35Delta, o)
	b.GatedNorm(o, z, d.norm, d.hv, d.eps)
	c.Emit(model.OpQ35GatedOut, o)
	if err := b.MatMul(out, d.out, o); err != nil {
		return err
	}
	c.Emit(model.OpSSMOut, out)
	st.pos += c.N
	return nil
}

// q35Attention is one gated full-attention layer: attn_q yields, per head,
// hd query values then hd gate values; q/k RMSNorm per head; IMROPE; GQA
// attention; the output multiplied by sigmoid(gate) before attn_output.
type q35Attention struct {
	m                  *Model
	a                  Attn
	rope               *Rope
	wq, wk, wv, wo     Weight
	qNorm, kNorm       Weight
	hd, nH, nKV, nEmbd int
}

func newQ35Attention(m *Model, l *model.Layer) (Mixer, error) {
	q, err := q35Of(m)
	if err != nil {
		return nil, err
	}
	s := m.Spec
	if s.RopeScaling.Type != "none" {
		return nil, refuse.New(By, "qwen35: RoPE scaling %q is not implemented by the graph", s.RopeScaling.Type)
	}
	if s.HeadDimK != s.HeadDimV {
		return nil, refuse.New(By, "qwen35: key head %d ≠ value head %d", s.HeadDimK, s.HeadDimV)
	}
	if l.NHeadKV <= 0 || l.NHead%l.NHeadKV != 0 {
		return nil, refuse.New(By, "layer %d: %d heads is not a multiple of %d kv heads", l.Index, l.NHead, l.NHeadKV)
	}
	at := &q35Attention{m: m, hd: s.HeadDimK, nH: l.NHead, nKV: l.NHeadKV, nEmbd: s.NEmbd,
		a: Attn{NHead: l.NHead, NKV: l.NHeadKV, HK: s.HeadDimK, HV: s.HeadDimV, Scale: float32(s.AttnScale)}}
	if at.rope, err = RopeOf(m, model.RopeIMRope); err != nil {
		return nil, err
	}
	at.rope.Sections = q.RopeSections
	for _, p := range []struct {
		w    *Weight
		role string
		t    *model.Tensor
	}{{&at.wq, "attn_q", l.Wq}, {&at.wk, "attn_k", l.Wk}, {&at.wv, "attn_v", l.Wv}, {&at.wo, "attn_output", l.Wo}} {
		if *p.w, err = m.Matrix(l, p.role, p.t); err != nil {
			return nil, err
		}
	}
	if at.qNorm, err = m.Vector(l, "attn_q_norm", l.QNorm); err != nil {
		return nil, err
	}
	if at.kNorm, err = m.Vector(l, "attn_k_norm", l.KNorm); err != nil {
		return nil, err
	}
	return at, nil
}

func (at *q35Attention) NewState(maxCtx int) (MixerState, error) {
	kv, err := at.m.B.NewKV(maxCtx, at.a)
	if err != nil {
		return nil, err
	}
	return &q35AttnState{at: at, kv: kv, maxCtx: maxCtx}, nil
}

type q35AttnState struct {
	at     *q35Attention
	kv     KV
	maxCtx int
	pos    int
}

func (st *q35AttnState) Reset(b Backend) { b.ClearKV(st.kv); st.pos = 0 }
func (st *q35AttnState) Free(b Backend)  { b.FreeKV(st.kv); st.kv = nil }

func (st *q35AttnState) Forward(c *Ctx, x, out Buf) error {
	at, b := st.at, c.B
	if c.Pos != st.pos {
		return fmt.Errorf("attention at position %d but the cache holds %d", c.Pos, st.pos)
	}
	if c.Pos+c.N > st.maxCtx {
		return fmt.Errorf("%d positions exceed the context of %d", c.Pos+c.N, st.maxCtx)
	}
	nq, nkv := at.hd*at.nH, at.hd*at.nKV
	qg, k, v := c.Buf("ga.qg", 2*nq), c.Buf("ga.k", nkv), c.Buf("ga.v", nkv)
	if err := b.MatMuls(x, []Buf{qg, k, v}, []Weight{at.wq, at.wk, at.wv}); err != nil {
		return err
	}
	q, gate := c.Buf("ga.q", nq), c.Buf("ga.gate", nq)
	b.Deinterleave(qg, at.hd, q, gate)
	eps := at.m.Eps
	b.RMSNorm(q, q, at.qNorm, at.hd, eps)
	b.RMSNorm(k, k, at.kNorm, at.hd, eps)
	c.Emit(model.OpQ, q)
	c.Emit(model.OpK, k)
	c.Emit(model.OpV, v)
	c.Emit(model.OpQ35Gate, gate)
	b.Rope(q, c.Pos, at.rope)
	b.Rope(k, c.Pos, at.rope)
	c.Emit(model.OpQRope, q)
	c.Emit(model.OpKRope, k)
	if err := b.Store(st.kv, k, v, c.Pos); err != nil {
		return err
	}
	o := c.Buf("ga.o", nq)
	if f := c.OutFrom; f > 0 {
		// Only rows f… of the output are read: attend with their queries.
		o, q, gate, out = b.View(o, f, c.N, 0, nq), b.View(q, f, c.N, 0, nq), b.View(gate, f, c.N, 0, nq), b.View(out, f, c.N, 0, out.Cols())
	}
	if err := b.Attend(o, q, st.kv, c.Pos+c.OutFrom); err != nil {
		return err
	}
	c.EmitAt(model.OpQ35AttnPre, c.Pos+c.OutFrom, o)
	b.MulSigmoid(o, gate)
	if err := b.MatMul(out, at.wo, o); err != nil {
		return err
	}
	c.EmitAt(model.OpAttnOut, c.Pos+c.OutFrom, out)
	st.pos += c.N
	return nil
}
