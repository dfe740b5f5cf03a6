package cpu

import (
	"fmt"
	"math"
	"runtime"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/graph"
)

// The Gated DeltaNet ops (qwen35): the short causal convolution with its
// state and the gated delta rule. Both are recurrences over tokens, so they
// run token by token inside, and in parallel over independent channels or
// heads.

func (be *backend) Conv(out, x, state graph.Buf, w graph.Weight) {
	ob, xb, sb := asBuf(out), asBuf(x), asBuf(state)
	defer runtime.KeepAlive(sb) // a state's memory may be off the heap
	wv := asVector(w)
	sh := w.Tensor().Shape
	if len(sh) != 2 {
		panic(fmt.Sprintf("cpu: Conv kernel of shape %v", sh))
	}
	K, ch := int(sh[0]), int(sh[1])
	sameShape("Conv", ob, xb)
	if xb.cols != ch || sb.cols != ch || sb.rows != K-1 {
		panic(fmt.Sprintf("cpu: Conv of %d channels with kernel [%d, %d] and state %d×%d", xb.cols, K, ch, sb.rows, sb.cols))
	}
	n := xb.rows
	be.forRows(ch, n*K, func(lo, hi int) {
		win := make([]float32, K) // the channel's last K inputs, oldest first
		for c := lo; c < hi; c++ {
			wc := wv[c*K : (c+1)*K]
			for i := 0; i < K-1; i++ {
				win[i] = sb.row(i)[c]
			}
			for t := 0; t < n; t++ {
				win[K-1] = xb.row(t)[c]
				var s float32
				for i, wi := range wc {
					s += win[i] * wi
				}
				ob.row(t)[c] = s
				copy(win, win[1:])
			}
			for i := 0; i < K-1; i++ {
				sb.row(i)[c] = win[i]
			}
		}
	})
}

func (be *backend) DeltaRule(out, q, k, v, g, beta, state graph.Buf, hk int) {
	ob, qb, kb, vb := asBuf(out), asBuf(q), asBuf(k), asBuf(v)
	gb, bb, sb := asBuf(g), asBuf(beta), asBuf(state)
	defer runtime.KeepAlive(sb) // a state's memory may be off the heap
	n := qb.rows
	nK, nV, hv := graph.DeltaRuleShapes("cpu", ob, qb, kb, vb, gb, bb, sb, hk)
	scale := float32(1 / math.Sqrt(float64(hk)))
	be.forRows(nV, n*hv*hk*4, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			kh := j % nK // tiled, as ggml_repeat maps value heads to key heads
			S := sb.row(j)
			for t := 0; t < n; t++ {
				deltaStep(S, ob.row(t)[j*hv:(j+1)*hv], qb.row(t)[kh*hk:(kh+1)*hk], kb.row(t)[kh*hk:(kh+1)*hk],
					vb.row(t)[j*hv:(j+1)*hv], gb.row(t)[j], bb.row(t)[j], scale)
			}
		}
	})
}

// deltaStep advances one head's state S (hv rows of hk) by one token and
// writes its output: S ← e^g·S; d_r = beta·(v_r − S_r·k); S_r += d_r·k;
// out_r = scale·S_r·q.
func deltaStep(S, out, q, k, v []float32, g, beta, scale float32) {
	hk := len(k)
	decay := libmExpf(g)
	for r := range out {
		out[r] = kern.DeltaRow(S[r*hk:(r+1)*hk:(r+1)*hk], k, q, decay, v[r], beta) * scale
	}
}
