package graph

import (
	"fmt"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/refuse"
)

func init() {
	RegisterMixer(model.LayerAttention, newAttention)
}

// attention is softmax self-attention as llama.cpp's llama, qwen2, qwen3
// and qwen3moe graphs build it: q/k/v projections (fused or separate, with
// optional biases), optional per-head q/k RMSNorm, RoPE, GQA over the KV
// cache, the output projection with an optional bias.
type attention struct {
	m                  *Model
	l                  *model.Layer
	a                  Attn
	rope               *Rope
	wqkv, wq, wk, wv   Weight
	bqkv, bq, bk, bv   Weight
	wo, bo             Weight
	qNorm, kNorm       Weight
	nq, nk, nv, nEmbed int
}

func newAttention(m *Model, l *model.Layer) (Mixer, error) {
	s := m.Spec
	at := &attention{m: m, l: l, nEmbed: s.NEmbd,
		a: Attn{NHead: l.NHead, NKV: l.NHeadKV, HK: s.HeadDimK, HV: s.HeadDimV, Scale: float32(s.AttnScale)}}
	if l.NHeadKV <= 0 || l.NHead%l.NHeadKV != 0 {
		return nil, refuse.New(By, "layer %d: %d heads is not a multiple of %d kv heads", l.Index, l.NHead, l.NHeadKV)
	}
	at.nq, at.nk, at.nv = l.NHead*s.HeadDimK, l.NHeadKV*s.HeadDimK, l.NHeadKV*s.HeadDimV
	var err error
	if at.rope, err = RopeOf(m, s.RopeType); err != nil {
		return nil, err
	}
	if l.Wqkv != nil {
		if at.wqkv, err = m.B.Matrix(l.Wqkv); err != nil {
			return nil, err
		}
		if at.bqkv, err = m.OptVector(l.Bqkv); err != nil {
			return nil, err
		}
	} else {
		if at.wq, err = m.Matrix(l, "attn_q", l.Wq); err != nil {
			return nil, err
		}
		if at.wk, err = m.Matrix(l, "attn_k", l.Wk); err != nil {
			return nil, err
		}
		if at.wv, err = m.Matrix(l, "attn_v", l.Wv); err != nil {
			return nil, err
		}
		for _, p := range []struct {
			w *Weight
			t *model.Tensor
		}{{&at.bq, l.Bq}, {&at.bk, l.Bk}, {&at.bv, l.Bv}} {
			if *p.w, err = m.OptVector(p.t); err != nil {
				return nil, err
			}
		}
	}
	if at.wo, err = m.Matrix(l, "attn_output", l.Wo); err != nil {
		return nil, err
	}
	if at.bo, err = m.OptVector(l.Bo); err != nil {
		return nil, err
	}
	if (l.QNorm == nil) != (l.KNorm == nil) {
		return nil, refuse.New(By, "layer %d: only one of the q/k norms is bound", l.Index)
	}
	if at.qNorm, err = m.OptVector(l.QNorm); err != nil {
		return nil, err
	}
	if at.kNorm, err = m.OptVector(l.KNorm); err != nil {
		return nil, err
	}
	return at, nil
}

// RopeOf builds the RoPE of m's spec for the given mode (the spec's own for
// plain attention; qwen35's gated attention passes RopeIMRope). Modes other
// than none, norm, neox and imrope are refused by name.
func RopeOf(m *Model, mode model.RopeType) (*Rope, error) {
	s := m.Spec
	switch mode {
	case model.RopeNone, model.RopeNorm, model.RopeNeox, model.RopeIMRope:
	default:
		return nil, refuse.New(By, "RoPE mode %s is not implemented by the graph", mode)
	}
	sc := s.RopeScaling
	r := &Rope{Mode: mode, NRot: s.RopeDim, HeadDim: s.HeadDimK, Base: float32(s.RopeBase),
		FreqScale: float32(sc.FreqScale), ExtFactor: float32(sc.ExtFactor), AttnFactor: float32(sc.AttnFactor),
		BetaFast: float32(sc.BetaFast), BetaSlow: float32(sc.BetaSlow), OrigCtx: sc.OrigCtx}
	if r.FreqScale == 0 {
		r.FreqScale = 1
	}
	if r.AttnFactor == 0 {
		r.AttnFactor = 1
	}
	if r.OrigCtx == 0 {
		r.OrigCtx = s.NCtxTrain
	}
	if s.RopeFreqs != nil && mode != model.RopeNone {
		var err error
		if r.Factors, err = m.B.Vector(s.RopeFreqs); err != nil {
			return nil, err
		}
	}
	if r.NRot%2 != 0 || r.NRot > r.HeadDim {
		return nil, refuse.New(By, "RoPE dimension %d is odd or wider than the head (%d)", r.NRot, r.HeadDim)
	}
	return r, nil
}

func (at *attention) NewState(maxCtx int) (MixerState, error) {
	kv, err := at.m.B.NewKV(maxCtx, at.a)
	if err != nil {
		return nil, err
	}
	return &attnState{at: at, kv: kv, maxCtx: maxCtx}, nil
}

type attnState struct {
	at     *attention
	kv     KV
	maxCtx int
	pos    int
}

func (st *attnState) Reset(b Backend) { b.ClearKV(st.kv); st.pos = 0 }
func (st *attnState) Free(b Backend)  { b.FreeKV(st.kv); st.kv = nil }

func (st *attnState) Forward(c *Ctx, x, out Buf) error {
	at, b := st.at, c.B
	if c.Pos != st.pos {
		return fmt.Errorf("attention at position %d but the cache holds %d", c.Pos, st.pos)
	}
	if c.Pos+c.N > st.maxCtx {
		return fmt.Errorf("%d positions exceed the context of %d", c.Pos+c.N, st.maxCtx)
	}
	q, k, v, err := at.project(c, x)
	if err != nil {
		return err
	}
	if at.rope.Mode != model.RopeNone {
		b.Rope(q, c.Pos, at.rope)
		b.Rope(k, c.Pos, at.rope)
	}
	c.Emit(model.OpQRope, q)
	c.Emit(model.OpKRope, k)
	if err := b.Store(st.kv, k, v, c.Pos); err != nil {
		return err
	}
	o := c.Buf("attn.o", at.a.NHead*at.a.HV)
	if f := c.OutFrom; f > 0 {
		// Only rows f… of the output are read: attend with their queries.
		o, q, out = b.View(o, f, c.N, 0, o.Cols()), b.View(q, f, c.N, 0, q.Cols()), b.View(out, f, c.N, 0, out.Cols())
	}
	if err := b.Attend(o, q, st.kv, c.Pos+c.OutFrom); err != nil {
		return err
	}
	if err := at.output(c, o, out); err != nil {
		return err
	}
	c.EmitAt(model.OpAttnOut, c.Pos+c.OutFrom, out)
	st.pos += c.N
	return nil
}

// project computes the queries, keys and values of the rows of x (the
// projections, their biases, the per-head q/k norms).
func (at *attention) project(c *Ctx, x Buf) (q, k, v Buf, err error) {
	b := c.B
	if at.wqkv != nil {
		qkv := c.Buf("attn.qkv", at.nq+at.nk+at.nv)
		if err := b.MatMul(qkv, at.wqkv, x); err != nil {
			return nil, nil, nil, err
		}
		if at.bqkv != nil {
			b.AddVec(qkv, at.bqkv)
		}
		q = b.View(qkv, 0, c.N, 0, at.nq)
		k = b.View(qkv, 0, c.N, at.nq, at.nq+at.nk)
		v = b.View(qkv, 0, c.N, at.nq+at.nk, at.nq+at.nk+at.nv)
	} else {
		q, k, v = c.Buf("attn.q", at.nq), c.Buf("attn.k", at.nk), c.Buf("attn.v", at.nv)
		if err := b.MatMuls(x, []Buf{q, k, v}, []Weight{at.wq, at.wk, at.wv}); err != nil {
			return nil, nil, nil, err
		}
		for _, p := range []struct {
			dst Buf
			b   Weight
		}{{q, at.bq}, {k, at.bk}, {v, at.bv}} {
			if p.b != nil {
				b.AddVec(p.dst, p.b)
			}
		}
	}
	eps := at.m.Eps
	if at.qNorm != nil {
		b.RMSNorm(q, q, at.qNorm, at.a.HK, eps)
		b.RMSNorm(k, k, at.kNorm, at.a.HK, eps)
	}
	c.Emit(model.OpQ, q)
	c.Emit(model.OpK, k)
	c.Emit(model.OpV, v)
	return q, k, v, nil
}

// output is the output projection of the attention rows o into out.
func (at *attention) output(c *Ctx, o, out Buf) error {
	b := c.B
	if err := b.MatMul(out, at.wo, o); err != nil {
		return err
	}
	if at.bo != nil {
		b.AddVec(out, at.bo)
	}
	return nil
}

// forwardRows is Forward for a batch of several sessions' rows (bt): the
// projections take every row at once; RoPE, the cache and attention go part
// by part, each in its own sequence at its own position.
func (at *attention) forwardRows(c *Ctx, sts []*attnState, bt batchRows, x, out Buf) error {
	b := c.B
	for k, st := range sts {
		if n := len(bt.parts[k]); st.pos+n > st.maxCtx {
			return fmt.Errorf("%d positions exceed the context of %d", st.pos+n, st.maxCtx)
		}
	}
	q, k, v, err := at.project(c, x)
	if err != nil {
		return err
	}
	o := c.Buf("attn.o", at.a.NHead*at.a.HV)
	for p, st := range sts {
		r0, r1 := bt.first[p], bt.first[p]+len(bt.parts[p])
		qr, kr, vr := b.View(q, r0, r1, 0, q.Cols()), b.View(k, r0, r1, 0, k.Cols()), b.View(v, r0, r1, 0, v.Cols())
		if at.rope.Mode != model.RopeNone {
			b.Rope(qr, st.pos, at.rope)
			b.Rope(kr, st.pos, at.rope)
		}
		if err := b.Store(st.kv, kr, vr, st.pos); err != nil {
			return err
		}
		if err := b.Attend(b.View(o, r0, r1, 0, o.Cols()), qr, st.kv, st.pos); err != nil {
			return err
		}
		st.pos += r1 - r0
	}
	return at.output(c, o, out)
}
