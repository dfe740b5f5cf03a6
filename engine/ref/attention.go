package ref

import (
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/model"
)

func init() {
	RegisterMixer(model.LayerAttention, newAttention)
}

// attention is softmax self-attention with GQA, optional q/k/v/o biases,
// optional per-head q/k RMSNorm (qwen3) and RoPE, as llama.cpp's llama,
// qwen2, qwen3 and qwen3moe graphs compute it.
type attention struct {
	e     *Engine
	l     *model.Layer
	rope  *rope
	nHead int
	nKV   int
	hk    int // key/query head size
	hv    int // value head size
	scale float64
}

func newAttention(e *Engine, l *model.Layer) (Mixer, error) {
	s := e.spec
	r, err := newRope(s)
	if err != nil {
		return nil, err
	}
	return &attention{e: e, l: l, rope: r, nHead: l.NHead, nKV: l.NHeadKV,
		hk: s.HeadDimK, hv: s.HeadDimV, scale: s.AttnScale}, nil
}

// kvCache holds one layer's roped keys and values, one row per position,
// grown as positions are fed (so memory follows the positions used).
type kvCache struct {
	a      *attention
	maxCtx int
	k, v   [][]float32
}

func (a *attention) NewState(maxCtx int) MixerState { return &kvCache{a: a, maxCtx: maxCtx} }

func (c *kvCache) Forward(tr tracer, x, out [][]float32, pos int) error {
	a, e, l := c.a, c.a.e, c.a.l
	n := len(x)
	if pos != len(c.k) {
		return fmt.Errorf("ref: layer %d: attention at position %d but the cache holds %d", l.Index, pos, len(c.k))
	}
	if pos+n > c.maxCtx {
		return fmt.Errorf("ref: layer %d: %d positions exceed the context of %d", l.Index, pos+n, c.maxCtx)
	}
	nq, nk, nv := a.nHead*a.hk, a.nKV*a.hk, a.nKV*a.hv
	q, k, v := matrix2(n, nq), matrix2(n, nk), matrix2(n, nv)
	if l.Wqkv != nil {
		qkv := matrix2(n, nq+nk+nv)
		e.linear(l.Wqkv, l.Bqkv, x, qkv)
		for t := range qkv {
			copy(q[t], qkv[t][:nq])
			copy(k[t], qkv[t][nq:nq+nk])
			copy(v[t], qkv[t][nq+nk:])
		}
	} else {
		e.linear(l.Wq, l.Bq, x, q)
		e.linear(l.Wk, l.Bk, x, k)
		e.linear(l.Wv, l.Bv, x, v)
	}
	if l.QNorm != nil {
		qw, kw := e.vector(l.QNorm), e.vector(l.KNorm)
		eps := e.spec.RMSEps
		for t := range q {
			for h := 0; h < a.nHead; h++ {
				seg := q[t][h*a.hk : (h+1)*a.hk]
				rmsNorm(seg, seg, qw, eps)
			}
			for h := 0; h < a.nKV; h++ {
				seg := k[t][h*a.hk : (h+1)*a.hk]
				rmsNorm(seg, seg, kw, eps)
			}
		}
	}
	cos, sin := make([]float64, a.rope.dim/2), make([]float64, a.rope.dim/2)
	for t := range q {
		tr.emit(model.OpQ, pos+t, q[t])
		tr.emit(model.OpK, pos+t, k[t])
		tr.emit(model.OpV, pos+t, v[t])
		a.rope.angles(pos+t, cos, sin)
		for h := 0; h < a.nHead; h++ {
			a.rope.rotate(q[t][h*a.hk:(h+1)*a.hk], cos, sin)
		}
		for h := 0; h < a.nKV; h++ {
			a.rope.rotate(k[t][h*a.hk:(h+1)*a.hk], cos, sin)
		}
		tr.emit(model.OpQRope, pos+t, q[t])
		tr.emit(model.OpKRope, pos+t, k[t])
		c.k = append(c.k, k[t])
		c.v = append(c.v, v[t])
	}

	group := a.nHead / a.nKV
	o := matrix2(n, a.nHead*a.hv)
	scores := make([]float64, pos+n)
	acc := make([]float64, a.hv)
	for t := range q {
		p := pos + t // attends to positions 0..p
		for h := 0; h < a.nHead; h++ {
			g := h / group // ggml's broadcast: q head h reads kv head h/(nHead/nKV)
			qh := q[t][h*a.hk : (h+1)*a.hk]
			sc := scores[:p+1]
			for j := range sc {
				sc[j] = dot(qh, c.k[j][g*a.hk:(g+1)*a.hk]) * a.scale
			}
			softmaxInPlace(sc)
			clear(acc)
			for j, w := range sc {
				vj := c.v[j][g*a.hv : (g+1)*a.hv]
				for d := range acc {
					acc[d] += w * float64(vj[d])
				}
			}
			oh := o[t][h*a.hv : (h+1)*a.hv]
			for d := range oh {
				oh[d] = float32(acc[d])
			}
		}
	}
	e.linear(l.Wo, l.Bo, o, out)
	for t := range out {
		tr.emit(model.OpAttnOut, pos+t, out[t])
	}
	return nil
}

// rope rotates the first dim values of a head by position, as ggml's
// rope_ext does for the normal (adjacent pairs) and NEOX (halves) modes,
// with optional frequency factors and linear or YaRN scaling. Angles are
// computed in float64 from the closed form base^(-2i/dim).
type rope struct {
	mode    model.RopeType
	dim     int
	invFreq []float64 // per pair i: base^(-2i/dim) / freq_factor[i]
	sc      model.RopeScaling
	corr    [2]float64 // YaRN correction dims
	mscale  float64
	useYaRN bool
}

func newRope(s *model.Spec) (*rope, error) {
	switch s.RopeType {
	case model.RopeNorm, model.RopeNeox, model.RopeNone:
	default:
		return nil, fmt.Errorf("ref: RoPE mode %s is not implemented by the attention layer", s.RopeType)
	}
	r := &rope{mode: s.RopeType, dim: s.RopeDim, sc: s.RopeScaling, mscale: s.RopeScaling.AttnFactor}
	half := s.RopeDim / 2
	r.invFreq = make([]float64, half)
	var ff []float32
	if s.RopeFreqs != nil {
		tmp := make([]float32, s.RopeFreqs.Cols())
		if err := dequantAll(s.RopeFreqs, tmp); err != nil {
			return nil, err
		}
		ff = tmp
	}
	for i := range r.invFreq {
		r.invFreq[i] = math.Pow(s.RopeBase, -2*float64(i)/float64(s.RopeDim))
		if ff != nil {
			r.invFreq[i] /= float64(ff[i])
		}
	}
	if r.sc.ExtFactor != 0 {
		r.useYaRN = true
		// ggml_rope_yarn_corr_dims
		corrDim := func(nRot float64) float64 {
			return float64(s.RopeDim) * math.Log(float64(r.sc.OrigCtx)/(nRot*2*math.Pi)) / (2 * math.Log(s.RopeBase))
		}
		r.corr[0] = max(0, math.Floor(corrDim(r.sc.BetaFast)))
		r.corr[1] = min(float64(s.RopeDim-1), math.Ceil(corrDim(r.sc.BetaSlow)))
		r.mscale *= 1 + 0.1*math.Log(1/r.sc.FreqScale)
	}
	if r.sc.FreqScale == 0 {
		r.sc.FreqScale = 1
	}
	return r, nil
}

// angles fills cos and sin (RopeDim/2 each) for position p, scaled by the
// attention factor as ggml does.
func (r *rope) angles(p int, cos, sin []float64) {
	for i := range r.dim / 2 {
		extrap := float64(p) * r.invFreq[i]
		theta := r.sc.FreqScale * extrap
		if r.useYaRN {
			// ggml rope_yarn_ramp, with i0/2 = i
			y := (float64(i) - r.corr[0]) / max(0.001, r.corr[1]-r.corr[0])
			ramp := (1 - min(1, max(0, y))) * r.sc.ExtFactor
			theta = theta*(1-ramp) + extrap*ramp
		}
		cos[i] = math.Cos(theta) * r.mscale
		sin[i] = math.Sin(theta) * r.mscale
	}
}

// rotate applies the angles from angles to x (one head) in place; values past
// RopeDim are left as they are.
func (r *rope) rotate(x []float32, cos, sin []float64) {
	if r.mode == model.RopeNone {
		return
	}
	half := r.dim / 2
	for i := 0; i < half; i++ {
		var a, b int
		if r.mode == model.RopeNeox {
			a, b = i, i+half
		} else {
			a, b = 2*i, 2*i+1
		}
		x0, x1 := float64(x[a]), float64(x[b])
		x[a] = float32(x0*cos[i] - x1*sin[i])
		x[b] = float32(x0*sin[i] + x1*cos[i])
	}
}
