package graph

import (
	"errors"
	"fmt"
)

// DecodeBatch feeds tokens[i] to sessions[i] — one token to each of several
// sessions of this model — in one pass, and returns each session's logits
// row for it. The rows go through every matrix product together (each
// weight is read once for all of them: what makes serving several
// sequences cheaper than serving them one after another), and through
// attention (RoPE, KV cache, scores) each in its own sequence; a layer
// whose mixer has no batched form (Gated DeltaNet, gated attention) runs
// its mixer row by row. Each row equals the session's own Eval of that
// token bit for bit on a backend whose products treat rows independently
// (RowExact); the caller checks that. Tracing is not supported here.
//
// On failure every session of the batch is left unusable (its state may
// have advanced in some layers only).
func (m *Model) DecodeBatch(sessions []*Session, tokens []int32) ([][]float32, error) {
	n := len(sessions)
	switch {
	case n == 0:
		return nil, errors.New("graph: DecodeBatch of no sessions")
	case len(tokens) != n:
		return nil, fmt.Errorf("graph: DecodeBatch of %d sessions with %d tokens", n, len(tokens))
	case n > UBatch:
		return nil, fmt.Errorf("graph: DecodeBatch of %d sessions (at most %d)", n, UBatch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*Session]bool{}
	for i, s := range sessions {
		if s.m != m {
			return nil, fmt.Errorf("graph: DecodeBatch: session %d belongs to another model", i)
		}
		if seen[s] {
			return nil, fmt.Errorf("graph: DecodeBatch: session %d appears twice", i)
		}
		seen[s] = true
		if s.ctx.trace != nil {
			return nil, fmt.Errorf("graph: DecodeBatch: session %d is traced; trace its own Eval", i)
		}
		if err := s.checkLocked(tokens[i : i+1]); err != nil {
			return nil, fmt.Errorf("graph: DecodeBatch: session %d: %w", i, err)
		}
	}
	fail := func(err error) ([][]float32, error) {
		for _, s := range sessions {
			s.broken = err
		}
		return nil, err
	}
	sp, b := m.Spec, m.B
	c := &Ctx{B: b, Layer: -1, N: n, arena: m.arena}
	x, h, out := c.Buf("x", sp.NEmbd), c.Buf("h", sp.NEmbd), c.Buf("out", sp.NEmbd)
	if err := b.GetRows(x, m.embd, tokens); err != nil {
		return fail(err)
	}
	for i, ly := range m.layers {
		c.Layer = i
		b.RMSNorm(h, x, ly.attnNorm, sp.NEmbd, m.Eps)
		if err := m.mixRows(c, i, sessions, h, out); err != nil {
			return fail(fmt.Errorf("graph: layer %d: %w", i, err))
		}
		b.Add(x, out)
		b.RMSNorm(h, x, ly.ffnNorm, sp.NEmbd, m.Eps)
		if err := ly.ffn.Forward(c, h, out); err != nil {
			return fail(fmt.Errorf("graph: layer %d: %w", i, err))
		}
		b.Add(x, out)
	}
	b.RMSNorm(h, x, m.outNorm, sp.NEmbd, m.Eps)
	logits := c.BufRows("logits.batch", n, sp.NVocab)
	if err := b.MatMul(logits, m.output, h); err != nil {
		return fail(err)
	}
	rows := make([][]float32, n)
	flat := make([]float32, n*sp.NVocab)
	for r := range rows {
		rows[r] = flat[r*sp.NVocab : (r+1)*sp.NVocab : (r+1)*sp.NVocab]
		b.Read(logits, r, rows[r])
	}
	for _, s := range sessions {
		s.pos++
	}
	return rows, nil
}

// mixRows runs layer i's mixer over the batch: batched when every state is
// plain attention, else row by row through each state's own Forward.
func (m *Model) mixRows(c *Ctx, i int, sessions []*Session, h, out Buf) error {
	sts := make([]*attnState, len(sessions))
	batched := true
	for r, s := range sessions {
		st, ok := s.states[i].(*attnState)
		if !ok {
			batched = false
			break
		}
		sts[r] = st
	}
	if batched {
		return sts[0].at.forwardRows(c, sts, h, out)
	}
	b := c.B
	for r, s := range sessions {
		rc := &Ctx{B: b, Layer: i, Pos: s.pos, N: 1, arena: m.arena}
		if err := s.states[i].Forward(rc, b.View(h, r, r+1, 0, h.Cols()), b.View(out, r, r+1, 0, out.Cols())); err != nil {
			return err
		}
	}
	return nil
}

// RowExact is implemented by a Backend whose products give each row the
// bits it gets when multiplied alone (MatMul of n rows = n MatMuls of one):
// DecodeBatch's rows then equal the sessions' own Evals. The cpu backend's
// kernels are (TestEvalPiecesEqualTokenByToken); the cuda backend's
// one-token and tiled products sum in different orders and are not.
type RowExact interface {
	RowExact() bool
}

// CanDecodeBatch reports whether DecodeBatch's rows equal the sessions'
// own Evals on this model's backend.
func (m *Model) CanDecodeBatch() bool {
	r, ok := m.B.(RowExact)
	return ok && r.RowExact()
}
