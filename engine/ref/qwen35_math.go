package ref

import "math"

// The qwen35 (Qwen3.5) building blocks, written plainly from the formulas of
// llama.cpp's qwen35 graph and the ggml CPU ops it uses. Vectors are float32
// as stored; sums are accumulated in float64.

// q35Conv is the short causal depthwise convolution of a Gated DeltaNet
// layer, one token at a time. state holds, per channel, the K-1 previous
// inputs oldest first (state[ch*(K-1)+j]); w holds the kernel per channel
// (w[ch*K+i], ggml shape [K, channels]). For every channel
//
//	out[ch] = Σ_{i<K-1} w[ch*K+i]·state[ch*(K-1)+i] + w[ch*K+K-1]·x[ch]
//
// after which x is appended to the state and its oldest input dropped. The
// result is before the SiLU. It panics when the lengths disagree (programmer
// error).
func q35Conv(out, state, x, w []float32, kernel int) {
	ch := len(x)
	if kernel < 1 || len(out) != ch || len(w) != ch*kernel || len(state) != ch*(kernel-1) {
		panic("ref: q35Conv: length mismatch")
	}
	k1 := kernel - 1
	for c := 0; c < ch; c++ {
		st := state[c*k1 : (c+1)*k1]
		wc := w[c*kernel : (c+1)*kernel]
		var s float64
		for i := 0; i < k1; i++ {
			s += float64(wc[i]) * float64(st[i])
		}
		s += float64(wc[k1]) * float64(x[c])
		out[c] = float32(s)
		if k1 > 0 {
			copy(st, st[1:])
			st[k1-1] = x[c]
		}
	}
}

// q35L2Norm scales x in place to unit Euclidean length: x / max(‖x‖, eps),
// as ggml_l2_norm does.
func q35L2Norm(x []float32, eps float64) {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	n := math.Sqrt(s)
	if n < eps {
		n = eps
	}
	scale := 1 / n
	for i, v := range x {
		x[i] = float32(float64(v) * scale)
	}
}

// q35GatedNorm is the Gated DeltaNet output norm: o = rmsnorm(o)⊙w⊙silu(z),
// applied in place over one value head.
func q35GatedNorm(o, w, z []float32, eps float64) {
	if len(z) != len(o) || len(w) != len(o) {
		panic("ref: q35GatedNorm: length mismatch")
	}
	rmsNorm(o, o, w, eps)
	for i := range o {
		o[i] = float32(float64(o[i]) * silu(float64(z[i])))
	}
}

// q35DeltaStep advances one head of the gated delta rule by one token and
// writes its output. S is the head's state, dv rows of dk (S[r*dk+c], row r a
// value dimension, column c a key dimension); q and k are the l2-normalised
// query and key (dk), v the value (dv), g the log decay (≤ 0) and beta the
// write strength in (0,1):
//
//	S    ← exp(g)·S
//	d_r  = beta·(v_r − S[r]·k)
//	S[r] ← S[r] + d_r·k
//	out_r = (S[r]·q) / sqrt(dk)
func q35DeltaStep(S, out, q, k, v []float32, g, beta float32) {
	dk, dv := len(k), len(v)
	if len(q) != dk || len(out) != dv || len(S) != dk*dv {
		panic("ref: q35DeltaStep: length mismatch")
	}
	decay := math.Exp(float64(g))
	scale := 1 / math.Sqrt(float64(dk))
	b := float64(beta)
	for r := 0; r < dv; r++ {
		row := S[r*dk : (r+1)*dk]
		var sk float64
		for c := range row {
			row[c] = float32(float64(row[c]) * decay)
			sk += float64(row[c]) * float64(k[c])
		}
		d := b * (float64(v[r]) - sk)
		var sq float64
		for c := range row {
			row[c] = float32(float64(row[c]) + d*float64(k[c]))
			sq += float64(row[c]) * float64(q[c])
		}
		out[r] = float32(sq * scale)
	}
}

// q35Softplus is ggml's softplus: x above 20 passes through, else log(1+eˣ).
func q35Softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

func q35Sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// q35RopeSections are the four IMROPE sections (t, h, w, e) in rotary pairs.
type q35RopeSections [4]int

// q35Component says which position component (0 t, 1 h, 2 w, 3 e) drives
// rotary pair i under interleaved multi-section rope (ggml's IMROPE): the
// sections are dealt out t, h, w in turn, and whatever lies beyond goes to e.
func (s q35RopeSections) q35Component(i int) int {
	total := s[0] + s[1] + s[2] + s[3]
	if total <= 0 {
		return 0
	}
	sector := i % total
	switch {
	case sector%3 == 1 && sector < 3*s[1]:
		return 1
	case sector%3 == 2 && sector < 3*s[2]:
		return 2
	case sector%3 == 0 && sector < 3*s[0]:
		return 0
	}
	return 3
}

// q35Angles fills cos and sin (nRot/2 each) for a token whose position
// components are pos (t, h, w, e; text tokens use (p, p, p, 0)) under
// interleaved multi-section rope: pair i turns by
// θ = pos[c(i)]·base^(−2i/nRot), c from q35Component.
func q35Angles(pos [4]int, nRot int, sec q35RopeSections, base float64, cos, sin []float64) {
	for i := 0; i < nRot/2; i++ {
		theta := float64(pos[sec.q35Component(i)]) * math.Pow(base, -2*float64(i)/float64(nRot))
		sin[i], cos[i] = math.Sincos(theta)
	}
}

// q35Rotate turns the pairs (x_i, x_{i+n/2}) of one head (NEOX pairing, as
// ggml's multi-section rope does) by the angles from q35Angles, n = 2·len(cos).
// Values at and beyond n are left alone.
func q35Rotate(x []float32, cos, sin []float64) {
	half := len(cos)
	if 2*half > len(x) || len(sin) != half {
		panic("ref: q35Rotate: bad rotary dims")
	}
	for i := 0; i < half; i++ {
		x0, x1 := float64(x[i]), float64(x[i+half])
		x[i] = float32(x0*cos[i] - x1*sin[i])
		x[i+half] = float32(x0*sin[i] + x1*cos[i])
	}
}
