package graph

import (
	"errors"
	"fmt"
)

// MaxBatchRows is the most rows (tokens of all sessions together) one
// EvalBatch takes.
const MaxBatchRows = 4 * UBatch

// EvalBatch feeds parts[i] (a prompt chunk, or one decode token) to
// sessions[i], for several sessions of this model in one pass, and returns
// each session's logits row for the last token of its part. The rows of
// every part go through every matrix product together (each weight is
// read once for all of them: what makes serving several sequences cheaper
// than serving them one after another), and through attention (RoPE, KV
// cache, scores) each in its own sequence; a layer whose mixer has no
// batched form (Gated DeltaNet, gated attention) runs its mixer part by
// part. Each row equals the session's own Eval of its part bit for bit on a
// backend whose products treat rows independently (RowExact); the caller
// checks that. Tracing is not supported here.
//
// On failure every session of the batch is left unusable (its state may
// have advanced in some layers only).
func (m *Model) EvalBatch(sessions []*Session, parts [][]int32) ([][]float32, error) {
	n := len(sessions)
	switch {
	case n == 0:
		return nil, errors.New("graph: EvalBatch of no sessions")
	case len(parts) != n:
		return nil, fmt.Errorf("graph: EvalBatch of %d sessions with %d parts", n, len(parts))
	}
	rows := 0
	first := make([]int, n) // first row of each part
	var tokens []int32
	for i, p := range parts {
		first[i] = rows
		rows += len(p)
		tokens = append(tokens, p...)
	}
	if rows > MaxBatchRows {
		return nil, fmt.Errorf("graph: EvalBatch of %d rows (at most %d)", rows, MaxBatchRows)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*Session]bool{}
	for i, s := range sessions {
		if s.m != m {
			return nil, fmt.Errorf("graph: EvalBatch: session %d belongs to another model", i)
		}
		if seen[s] {
			return nil, fmt.Errorf("graph: EvalBatch: session %d appears twice", i)
		}
		seen[s] = true
		if s.ctx.trace != nil {
			return nil, fmt.Errorf("graph: EvalBatch: session %d is traced; trace its own Eval", i)
		}
		if err := s.checkLocked(parts[i]); err != nil {
			return nil, fmt.Errorf("graph: EvalBatch: session %d: %w", i, err)
		}
	}
	fail := func(err error) ([][]float32, error) {
		for _, s := range sessions {
			s.broken = err
		}
		return nil, err
	}
	sp, b := m.Spec, m.B
	c := &Ctx{B: b, Layer: -1, N: rows, arena: m.arena}
	x, h, out := c.Buf("x", sp.NEmbd), c.Buf("h", sp.NEmbd), c.Buf("out", sp.NEmbd)
	if err := b.GetRows(x, m.embd, tokens); err != nil {
		return fail(err)
	}
	bt := batchRows{sessions: sessions, parts: parts, first: first}
	for i, ly := range m.layers {
		c.Layer = i
		b.RMSNorm(h, x, ly.attnNorm, sp.NEmbd, m.Eps)
		if err := m.mixRows(c, i, bt, h, out); err != nil {
			return fail(fmt.Errorf("graph: layer %d: %w", i, err))
		}
		b.Add(x, out)
		b.RMSNorm(h, x, ly.ffnNorm, sp.NEmbd, m.Eps)
		if err := ly.ffn.Forward(c, h, out); err != nil {
			return fail(fmt.Errorf("graph: layer %d: %w", i, err))
		}
		b.Add(x, out)
	}
	// The last row of each part, normalised into consecutive rows, then one
	// product for all their logits.
	hl := c.BufRows("h.last", n, sp.NEmbd)
	for i := range parts {
		r := first[i] + len(parts[i]) - 1
		b.RMSNorm(b.View(hl, i, i+1, 0, sp.NEmbd), b.View(x, r, r+1, 0, sp.NEmbd), m.outNorm, sp.NEmbd, m.Eps)
	}
	logits := c.BufRows("logits.batch", n, sp.NVocab)
	if err := b.MatMul(logits, m.output, hl); err != nil {
		return fail(err)
	}
	out2 := make([][]float32, n)
	flat := make([]float32, n*sp.NVocab)
	for r := range out2 {
		out2[r] = flat[r*sp.NVocab : (r+1)*sp.NVocab : (r+1)*sp.NVocab]
		b.Read(logits, r, out2[r])
	}
	for i, s := range sessions {
		s.pos += len(parts[i])
	}
	return out2, nil
}

// batchRows says which rows of a batch belong to which session.
type batchRows struct {
	sessions []*Session
	parts    [][]int32
	first    []int
}

// mixRows runs layer i's mixer over the batch: batched when every state is
// plain attention, else part by part through each state's own Forward.
func (m *Model) mixRows(c *Ctx, i int, bt batchRows, h, out Buf) error {
	sts := make([]*attnState, len(bt.sessions))
	batched := true
	for r, s := range bt.sessions {
		st, ok := s.states[i].(*attnState)
		if !ok {
			batched = false
			break
		}
		sts[r] = st
	}
	if batched {
		return sts[0].at.forwardRows(c, sts, bt, h, out)
	}
	b := c.B
	for k, s := range bt.sessions {
		r0, r1 := bt.first[k], bt.first[k]+len(bt.parts[k])
		rc := &Ctx{B: b, Layer: i, Pos: s.pos, N: r1 - r0, arena: m.arena}
		if err := s.states[i].Forward(rc, b.View(h, r0, r1, 0, h.Cols()), b.View(out, r0, r1, 0, out.Cols())); err != nil {
			return err
		}
	}
	return nil
}

// RowExact is implemented by a Backend whose products give each row the
// bits it gets when multiplied alone (MatMul of n rows = n MatMuls of one):
// EvalBatch's rows then equal the sessions' own Evals. The cpu backend's
// kernels are (TestEvalPiecesEqualTokenByToken); the cuda backend's
// one-token and tiled products sum in different orders and are not.
type RowExact interface {
	RowExact() bool
}

// CanEvalBatch reports whether EvalBatch's rows equal the sessions' own
// Evals on this model's backend.
func (m *Model) CanEvalBatch() bool {
	r, ok := m.B.(RowExact)
	return ok && r.RowExact()
}
