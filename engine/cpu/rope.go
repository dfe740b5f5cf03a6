package cpu

import (
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/model"
)

// Rope rotates every head of every row of x in place, computing the angles
// as ggml-cpu's rope does: θ starts at the position and is multiplied by
// base^(−2/NRot) pair after pair in float32; cos and sin are float32.
func (be *backend) Rope(x graph.Buf, pos0 int, r *graph.Rope) {
	b := asBuf(x)
	if r.HeadDim <= 0 || b.cols%r.HeadDim != 0 || r.NRot > r.HeadDim || r.NRot%2 != 0 {
		panic(fmt.Sprintf("cpu: Rope of %d columns with head %d, %d rotated", b.cols, r.HeadDim, r.NRot))
	}
	if r.Mode == model.RopeNone || r.NRot == 0 {
		return
	}
	var ff []float32
	if r.Factors != nil {
		ff = asVector(r.Factors)
		if len(ff) < r.NRot/2 {
			panic("cpu: Rope: too few frequency factors")
		}
	}
	rp := newRopeParams(r)
	be.forRows(b.rows, b.cols, func(lo, hi int) {
		cs := make([]float32, r.NRot) // cos, sin per pair
		for row := lo; row < hi; row++ {
			rp.cache(float32(pos0+row), ff, cs)
			v := b.row(row)
			for h0 := 0; h0 < len(v); h0 += r.HeadDim {
				rotate(v[h0:h0+r.HeadDim], cs, r.Mode)
			}
		}
	})
}

type ropeParams struct {
	r          *graph.Rope
	thetaScale float32
	corr       [2]float32
}

func newRopeParams(r *graph.Rope) ropeParams {
	p := ropeParams{r: r}
	p.thetaScale = float32(math.Pow(float64(r.Base), float64(float32(-2)/float32(r.NRot))))
	if r.ExtFactor != 0 {
		// ggml_rope_yarn_corr_dims
		corrDim := func(nRot float32) float32 {
			return float32(r.NRot) * float32(math.Log(float64(float32(r.OrigCtx)/(nRot*2*math.Pi)))) / (2 * float32(math.Log(float64(r.Base))))
		}
		start := float32(math.Floor(float64(corrDim(r.BetaFast))))
		end := float32(math.Ceil(float64(corrDim(r.BetaSlow))))
		p.corr = [2]float32{max(0, start), min(float32(r.NRot-1), end)}
	}
	return p
}

// cache writes cos and sin of every pair for position p (ggml's
// rope_cache_init and, for IMROPE, mrope_cache_init with the position in
// the t, h and w components and 0 in e).
func (p ropeParams) cache(pos float32, ff, cs []float32) {
	r := p.r
	theta := pos
	total := r.Sections[0] + r.Sections[1] + r.Sections[2] + r.Sections[3]
	for i := 0; i < r.NRot/2; i++ {
		th := theta
		if r.Mode == model.RopeIMRope && total > 0 {
			sector := i % total
			s := r.Sections
			switch {
			case sector%3 == 1 && sector < 3*s[1], sector%3 == 2 && sector < 3*s[2], sector%3 == 0 && sector < 3*s[0]:
			default:
				th = 0 // the e component of a text token
			}
		}
		if ff != nil {
			th /= ff[i]
		}
		c, s := p.yarn(th, i)
		cs[2*i], cs[2*i+1] = c, s
		theta *= p.thetaScale
	}
}

// yarn is ggml's rope_yarn for pair i.
func (p ropeParams) yarn(thetaExtrap float32, i int) (cos, sin float32) {
	r := p.r
	thetaInterp := r.FreqScale * thetaExtrap
	theta := thetaInterp
	mscale := r.AttnFactor
	if r.ExtFactor != 0 {
		y := (float32(i) - p.corr[0]) / max(0.001, p.corr[1]-p.corr[0])
		ramp := (1 - min(1, max(0, y))) * r.ExtFactor
		theta = thetaInterp*(1-ramp) + thetaExtrap*ramp
		mscale *= 1 + 0.1*float32(math.Log(float64(1/r.FreqScale)))
	}
	s, c := math.Sincos(float64(theta))
	return float32(c) * mscale, float32(s) * mscale
}

// rotate turns the pairs of one head: (2i, 2i+1) in normal mode, (i,
// i+NRot/2) otherwise, by the angles in cs (cos, sin per pair).
func rotate(x, cs []float32, mode model.RopeType) {
	pairs := len(cs) / 2
	if mode == model.RopeNorm {
		for i := 0; i < pairs; i++ {
			c, s := cs[2*i], cs[2*i+1]
			x0, x1 := x[2*i], x[2*i+1]
			x[2*i] = x0*c - x1*s
			x[2*i+1] = x0*s + x1*c
		}
		return
	}
	for i := 0; i < pairs; i++ {
		c, s := cs[2*i], cs[2*i+1]
		x0, x1 := x[i], x[i+pairs]
		x[i] = x0*c - x1*s
		x[i+pairs] = x0*s + x1*c
	}
}
