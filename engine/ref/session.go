package ref

import (
	"fmt"

	"github.com/aprqa/apr/engine/model"
)

// Session is one sequence: a state per layer and the next position.
type Session struct {
	e      *Engine
	maxCtx int
	pos    int
	states []MixerState
	trace  model.Trace
	broken error // set when an Eval failed part-way: the caches are inconsistent
}

var _ model.Session = (*Session)(nil)

// Pos is the number of tokens fed so far.
func (s *Session) Pos() int { return s.pos }

// SetTrace installs (or, with nil, removes) the trace hook.
func (s *Session) SetTrace(t model.Trace) { s.trace = t }

// Eval feeds tokens at positions Pos(), Pos()+1, … and returns one logits
// row per token when all is true, else only the last token's row.
func (s *Session) Eval(tokens []int32, all bool) ([][]float32, error) {
	e, sp := s.e, s.e.spec
	n := len(tokens)
	if s.broken != nil {
		return nil, fmt.Errorf("ref: session unusable after an earlier failure: %w", s.broken)
	}
	if n == 0 {
		return nil, fmt.Errorf("ref: Eval of no tokens")
	}
	if s.pos+n > s.maxCtx {
		return nil, fmt.Errorf("ref: %d positions exceed the session's context of %d", s.pos+n, s.maxCtx)
	}
	for i, id := range tokens {
		if id < 0 || int(id) >= sp.NVocab {
			return nil, fmt.Errorf("ref: token %d at index %d is outside the vocabulary [0, %d)", id, i, sp.NVocab)
		}
	}
	top := tracer{fn: s.trace, layer: -1}
	x := matrix2(n, sp.NEmbd)
	for t, id := range tokens {
		e.row(sp.TokEmbd, int(id), x[t])
		top.emit(model.OpEmbed, s.pos+t, x[t])
	}
	h, out := matrix2(n, sp.NEmbd), matrix2(n, sp.NEmbd)
	for i := range sp.Layers {
		l := &sp.Layers[i]
		tr := tracer{fn: s.trace, layer: i}
		w := e.vector(l.AttnNorm)
		for t := range x {
			rmsNorm(h[t], x[t], w, sp.RMSEps)
			tr.emit(model.OpAttnNorm, s.pos+t, h[t])
		}
		if err := s.states[i].Forward(tr, h, out, s.pos); err != nil {
			s.broken = err
			return nil, err
		}
		w = e.vector(l.FFNNorm)
		for t := range x {
			addTo(x[t], out[t])
			tr.emit(model.OpFFNInp, s.pos+t, x[t])
			rmsNorm(h[t], x[t], w, sp.RMSEps)
			tr.emit(model.OpFFNNorm, s.pos+t, h[t])
		}
		if err := e.ffns[i].Forward(tr, h, out, s.pos); err != nil {
			s.broken = err
			return nil, err
		}
		for t := range x {
			tr.emit(model.OpFFNOut, s.pos+t, out[t])
			addTo(x[t], out[t])
			tr.emit(model.OpLayerOut, s.pos+t, x[t])
		}
	}
	first := 0
	if !all {
		first = n - 1
	}
	hs := h[first:]
	w := e.vector(sp.OutputNorm)
	for t := range hs {
		rmsNorm(hs[t], x[first+t], w, sp.RMSEps)
		top.emit(model.OpResultNorm, s.pos+first+t, hs[t])
	}
	logits := matrix2(len(hs), sp.NVocab)
	e.linear(sp.Output, nil, hs, logits)
	for t := range logits {
		top.emit(model.OpLogits, s.pos+first+t, logits[t])
	}
	s.pos += n
	return logits, nil
}
