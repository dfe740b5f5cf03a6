package graph

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/refuse"
)

// By is the name refusals from the graph carry.
const By = "engine/graph"

// Mixer is one layer's sequence mixer (between attn_norm and the first
// residual add), built once per model by the MixerFunc registered for the
// layer's Kind.
type Mixer interface {
	// NewState returns one session's state in this layer (its KV cache or
	// recurrent state) for up to maxCtx positions.
	NewState(maxCtx int) (MixerState, error)
}

// MixerState is one session's state in one layer.
type MixerState interface {
	// Forward reads the normalised inputs x (one row per token, positions
	// c.Pos…) and writes the block output, after its output projection, to
	// out, advancing the state.
	Forward(c *Ctx, x, out Buf) error
	// Reset returns the state to that of an empty sequence.
	Reset(b Backend)
	// Free releases the state's memory; it is not used afterwards.
	Free(b Backend)
}

// FFN is one layer's feed-forward block (after ffn_norm); it has no state.
type FFN interface {
	Forward(c *Ctx, x, out Buf) error
}

// MixerFunc builds the mixer of layer l of m.
type MixerFunc func(m *Model, l *model.Layer) (Mixer, error)

// FFNFunc builds the feed-forward block of layer l of m.
type FFNFunc func(m *Model, l *model.Layer) (FFN, error)

var (
	regMu  sync.RWMutex
	mixers = map[string]MixerFunc{}
	ffns   = map[string]FFNFunc{}
)

// RegisterMixer makes layers of kind (model.Layer.Kind) runnable on every
// backend. It panics on a duplicate (a programmer error).
func RegisterMixer(kind string, fn MixerFunc) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := mixers[kind]; dup {
		panic("graph: mixer " + kind + " registered twice")
	}
	mixers[kind] = fn
}

// RegisterFFN makes feed-forward blocks of kind (model.Layer.FFN) runnable.
func RegisterFFN(kind string, fn FFNFunc) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := ffns[kind]; dup {
		panic("graph: feed-forward " + kind + " registered twice")
	}
	ffns[kind] = fn
}

func kinds[F any](m map[string]F) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// Model is a model's forward pass bound to one backend.
type Model struct {
	Spec *model.Spec
	B    Backend
	Eps  float32 // RMS epsilon

	embd, output, outNorm Weight
	layers                []layer
	ubatch                int // the most tokens one pass takes (UBatch, or the backend's own)

	// mu serialises Evals: the sessions of a model share its work buffers
	// (and a backend runs one op at a time).
	mu     sync.Mutex
	arena  map[arenaKey]Buf
	closed bool
}

// ErrClosed is returned by Evals after the model was closed.
var ErrClosed = errors.New("graph: the model is closed")

// Close releases the model's work buffers; Evals of its sessions fail with
// ErrClosed afterwards. The caller closes the backend after it.
func (m *Model) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	for k, b := range m.arena {
		m.B.Release(b)
		delete(m.arena, k)
	}
}

type layer struct {
	attnNorm, ffnNorm Weight
	mixer             Mixer
	ffn               FFN
}

// Build prepares every tensor of spec on b and the blocks of every layer.
// A layer kind or feed-forward kind without a registered description, and
// a tensor the backend has no kernel for, are refused by name.
func Build(spec *model.Spec, b Backend) (*Model, error) {
	m := &Model{Spec: spec, B: b, Eps: float32(spec.RMSEps), arena: map[arenaKey]Buf{}, ubatch: ubatch(b)}
	var err error
	if m.embd, err = b.Matrix(spec.TokEmbd); err != nil {
		return nil, err
	}
	if m.output, err = b.Matrix(spec.Output); err != nil {
		return nil, err
	}
	if m.outNorm, err = b.Vector(spec.OutputNorm); err != nil {
		return nil, err
	}
	regMu.RLock()
	defer regMu.RUnlock()
	for i := range spec.Layers {
		l := &spec.Layers[i]
		var ly layer
		mf, ok := mixers[l.Kind]
		if !ok {
			return nil, refuse.New(By, "layer %d: kind %q has no graph description (known: %s)", i, l.Kind, kinds(mixers))
		}
		ff, ok := ffns[l.FFN]
		if !ok {
			return nil, refuse.New(By, "layer %d: feed-forward kind %q has no graph description (known: %s)", i, l.FFN, kinds(ffns))
		}
		if ly.attnNorm, err = b.Vector(l.AttnNorm); err != nil {
			return nil, err
		}
		if ly.ffnNorm, err = b.Vector(l.FFNNorm); err != nil {
			return nil, err
		}
		if ly.mixer, err = mf(m, l); err != nil {
			return nil, err
		}
		if ly.ffn, err = ff(m, l); err != nil {
			return nil, err
		}
		m.layers = append(m.layers, ly)
	}
	return m, nil
}

// Matrix prepares t with the model's backend, refusing a missing tensor by
// role name.
func (m *Model) Matrix(l *model.Layer, role string, t *model.Tensor) (Weight, error) {
	if t == nil {
		return nil, refuse.New(By, "layer %d: tensor %q is not bound", l.Index, role)
	}
	return m.B.Matrix(t)
}

// Vector is Matrix for element-wise tensors.
func (m *Model) Vector(l *model.Layer, role string, t *model.Tensor) (Weight, error) {
	if t == nil {
		return nil, refuse.New(By, "layer %d: tensor %q is not bound", l.Index, role)
	}
	return m.B.Vector(t)
}

// OptMatrix is Matrix for an optional tensor: nil stays nil.
func (m *Model) OptMatrix(t *model.Tensor) (Weight, error) {
	if t == nil {
		return nil, nil
	}
	return m.B.Matrix(t)
}

// OptVector is Vector for an optional tensor: nil stays nil.
func (m *Model) OptVector(t *model.Tensor) (Weight, error) {
	if t == nil {
		return nil, nil
	}
	return m.B.Vector(t)
}

// Ctx is what a block sees during one Eval: the backend, the position of
// its first row, the trace and the session's reusable buffers.
type Ctx struct {
	B     Backend
	Layer int // -1 outside the layers
	Pos   int // position of row 0
	N     int // rows (tokens) in this Eval
	// OutFrom is the first row of a mixer's output that is read afterwards:
	// in the last layer of an Eval that returns the last row's logits only,
	// N−1 (the other rows feed nothing but their own, unused, logits), else
	// 0. A mixer may leave rows [0, OutFrom) of out unwritten; its state
	// (KV cache, recurrence) still takes every row.
	OutFrom int

	trace model.Trace
	arena map[arenaKey]Buf
	tmp   []float32
}

type arenaKey struct {
	name       string
	rows, cols int
}

// Buf returns the work buffer called name with N rows and cols columns,
// shared by every session of the model (Evals run one at a time). Its
// contents are whatever an earlier use left: ops overwrite their dst fully.
// Blocks name their buffers ("attn.q"); one name is one buffer, so two live
// buffers need two names.
func (c *Ctx) Buf(name string, cols int) Buf { return c.BufRows(name, c.N, cols) }

// BufRows is Buf with an explicit row count (MoE slots: N·k rows).
func (c *Ctx) BufRows(name string, rows, cols int) Buf {
	// Keep one allocation per (name, cols) with the largest row count seen
	// and hand out a view of it.
	key := arenaKey{name: name, cols: cols}
	old, ok := c.arena[key]
	if ok && old.Rows() >= rows {
		if old.Rows() == rows {
			return old
		}
		return c.B.View(old, 0, rows, 0, cols)
	}
	if ok {
		// Within one Eval a name is always asked for with the same rows, so
		// nothing still holds the smaller buffer.
		c.B.Release(old)
	}
	b := c.B.Work(rows, cols)
	c.arena[key] = b
	return b
}

// Tracing reports whether a trace hook is installed.
func (c *Ctx) Tracing() bool { return c.trace != nil }

// Emit reports every row of b as op (row r at position Pos+r) to the trace
// hook, if one is installed.
func (c *Ctx) Emit(op string, b Buf) { c.EmitAt(op, c.Pos, b) }

// EmitAt is Emit with row 0 at position pos.
func (c *Ctx) EmitAt(op string, pos int, b Buf) {
	if c.trace == nil {
		return
	}
	if cap(c.tmp) < b.Cols() {
		c.tmp = make([]float32, b.Cols())
	}
	row := c.tmp[:b.Cols()]
	for r := 0; r < b.Rows(); r++ {
		c.B.Read(b, r, row)
		c.trace(c.Layer, op, pos+r, row)
	}
}

// Session is one sequence on a Model: a state per layer and the next
// position. Sessions of one model may be used from several goroutines;
// their Evals run one at a time.
type Session struct {
	m      *Model
	maxCtx int
	pos    int
	states []MixerState
	ctx    Ctx
	broken error
	closed bool
}

var _ model.Session = (*Session)(nil)

// NewSession starts an empty sequence with room for maxCtx positions.
func (m *Model) NewSession(maxCtx int) (*Session, error) {
	if maxCtx <= 0 {
		return nil, fmt.Errorf("graph: context size %d must be positive", maxCtx)
	}
	s := &Session{m: m, maxCtx: maxCtx, ctx: Ctx{B: m.B, arena: m.arena}}
	for i, ly := range m.layers {
		st, err := ly.mixer.NewState(maxCtx)
		if err != nil {
			return nil, fmt.Errorf("graph: layer %d: %w", i, err)
		}
		s.states = append(s.states, st)
	}
	return s, nil
}

// Pos is the number of tokens fed so far.
func (s *Session) Pos() int { return s.pos }

// Reset empties the sequence (KV caches, recurrent states, position), keeping
// its memory: the next Eval starts at position 0, as llama.cpp's memory
// clear does between llama-bench repetitions.
func (s *Session) Reset() error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.closed {
		return errors.New("graph: Reset of a closed session")
	}
	for _, st := range s.states {
		st.Reset(s.m.B)
	}
	s.pos, s.broken = 0, nil
	return nil
}

// Close releases the session's caches now rather than when it is no
// longer referenced; the session cannot be used afterwards.
func (s *Session) Close() error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, st := range s.states {
		st.Free(s.m.B)
	}
	s.states = nil
	return nil
}

// SetTrace installs (or, with nil, removes) the trace hook.
func (s *Session) SetTrace(t model.Trace) { s.ctx.trace = t }

// UBatch is the most tokens one pass through the layers takes (llama.cpp's
// n_ubatch): a longer Eval goes through in pieces of UBatch tokens, each a
// batch. It bounds the compute buffers by a piece's activations instead of
// the prompt's and changes no result: pieces give the rows one batch gives,
// bit for bit (TestEvalPiecesEqualTokenByToken in engine/cpu). Measured
// with apr bench pp512 on 2 threads (one run each, noisy): synth
// qwen3.5-0.8b Q8_0 peak RSS 903.8 MiB in one batch, 873.3 in pieces of
// 256, 859.7 in pieces of 128, at 42.8 / 49.9 / 50.7 tok/s; qwen2.5-0.5b
// Q4_K 374.5 / 368.9 / 366.6 MiB at 143 / 150 / 155 tok/s; Q8_0 pieces of
// 64 were slower (120 against 140–145). The FFN goes in FFNRows chunks too.
// A backend with an UBatch() int method sets its own (the CUDA engine's
// products fill the device only with more tokens at once).
const UBatch = 128

// ubatch is the most tokens one pass takes on b: UBatch, or the backend's
// own when it has an UBatch() int method.
func ubatch(b Backend) int {
	if u, ok := b.(interface{ UBatch() int }); ok && u.UBatch() > 0 {
		return u.UBatch()
	}
	return UBatch
}

// Eval feeds tokens at positions Pos(), Pos()+1, … as batches of at most
// UBatch tokens (every matrix product takes a whole batch at once) and
// returns one logits row per token when all is true, else only the last
// token's row. The rows are the caller's.
func (s *Session) Eval(tokens []int32, all bool) ([][]float32, error) {
	return s.eval(tokens, all, nil)
}

// EvalLast is Eval(tokens, false) with the last token's logits written to
// dst (NVocab values) instead of a row the session allocates
// (model.LastEvaluator): a decode step's caller that reads the row and
// drops it keeps one buffer instead of a vocabulary-sized allocation, and
// its zeroing and collection, per step.
func (s *Session) EvalLast(tokens []int32, dst []float32) error {
	if len(dst) != s.m.Spec.NVocab {
		return fmt.Errorf("graph: EvalLast: dst has %d values, the vocabulary %d", len(dst), s.m.Spec.NVocab)
	}
	_, err := s.eval(tokens, false, dst)
	return err
}

// eval is Eval; with into, the last row goes there (EvalLast).
func (s *Session) eval(tokens []int32, all bool, into []float32) ([][]float32, error) {
	n, ub := len(tokens), s.m.ubatch
	if n <= ub {
		return s.evalBatch(tokens, outputs(all), into)
	}
	// Refuse what a piece would refuse before any piece runs, so that a bad
	// Eval leaves the session as it was.
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	var rows [][]float32
	for lo := 0; lo < n; lo += ub {
		hi := min(lo+ub, n)
		out := outNone
		switch {
		case all:
			out = outAll
		case hi == n:
			out = outLast
		}
		r, err := s.evalBatch(tokens[lo:hi], out, into)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// Which logits a batch returns.
const (
	outNone = iota // none: a piece before the last of an Eval without all
	outLast        // the last token's
	outAll         // every token's
)

func outputs(all bool) int {
	if all {
		return outAll
	}
	return outLast
}

// check is evalBatch's refusals of tokens, without evaluating them.
func (s *Session) check(tokens []int32) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	return s.checkLocked(tokens)
}

// checkLocked refuses an Eval of tokens that cannot run: a closed model or
// session, one broken by an earlier failure, no tokens, too many for the
// context, an id outside the vocabulary. m.mu is held.
func (s *Session) checkLocked(tokens []int32) error {
	m, sp := s.m, s.m.Spec
	switch {
	case m.closed:
		return ErrClosed
	case s.closed:
		return errors.New("graph: Eval of a closed session")
	case s.broken != nil:
		return fmt.Errorf("graph: session unusable after an earlier failure: %w", s.broken)
	case len(tokens) == 0:
		return fmt.Errorf("graph: Eval of no tokens")
	case s.pos+len(tokens) > s.maxCtx:
		return fmt.Errorf("graph: %d positions exceed the session's context of %d", s.pos+len(tokens), s.maxCtx)
	}
	for i, id := range tokens {
		if id < 0 || int(id) >= sp.NVocab {
			return fmt.Errorf("graph: token %d at index %d is outside the vocabulary [0, %d)", id, i, sp.NVocab)
		}
	}
	return nil
}

// evalBatch evaluates tokens as one batch and returns the logits rows out
// asks for.
func (s *Session) evalBatch(tokens []int32, outMode int, into []float32) ([][]float32, error) {
	all := outMode == outAll
	m, sp := s.m, s.m.Spec
	b := m.B
	n := len(tokens)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := s.checkLocked(tokens); err != nil {
		return nil, err
	}
	c := &s.ctx
	c.Pos, c.N, c.Layer = s.pos, n, -1
	fail := func(err error) ([][]float32, error) {
		s.broken = err
		return nil, err
	}

	x := c.Buf("x", sp.NEmbd)
	h := c.Buf("h", sp.NEmbd)
	out := c.Buf("out", sp.NEmbd)
	if err := b.GetRows(x, m.embd, tokens); err != nil {
		return fail(err)
	}
	c.Emit(model.OpEmbed, x)
	// As llama.cpp's graphs do (inp_out_ids), the last layer carries on
	// past its mixer with the rows whose logits are returned only; each
	// row is computed exactly as in a full evaluation. A trace sees every
	// row.
	skip := 0 // leading rows dropped
	for i, ly := range m.layers {
		c.Layer = i
		b.RMSNorm(h, x, ly.attnNorm, sp.NEmbd, m.Eps)
		c.Emit(model.OpAttnNorm, h)
		if i == len(m.layers)-1 && !all && n > 1 && !c.Tracing() {
			c.OutFrom = n - 1
		}
		err := s.states[i].Forward(c, h, out)
		if skip = c.OutFrom; skip > 0 {
			x, h, out = b.View(x, skip, n, 0, sp.NEmbd), b.View(h, skip, n, 0, sp.NEmbd), b.View(out, skip, n, 0, sp.NEmbd)
			c.Pos, c.N, c.OutFrom = c.Pos+skip, n-skip, 0
		}
		if err != nil {
			return fail(fmt.Errorf("graph: layer %d: %w", i, err))
		}
		b.Add(x, out)
		c.Emit(model.OpFFNInp, x)
		b.RMSNorm(h, x, ly.ffnNorm, sp.NEmbd, m.Eps)
		c.Emit(model.OpFFNNorm, h)
		if err := ly.ffn.Forward(c, h, out); err != nil {
			return fail(fmt.Errorf("graph: layer %d: %w", i, err))
		}
		c.Emit(model.OpFFNOut, out)
		b.Add(x, out)
		c.Emit(model.OpLayerOut, x)
	}
	c.Layer, c.Pos, c.N = -1, s.pos, n
	if outMode == outNone {
		s.pos += n
		return nil, nil
	}
	first := 0
	if !all {
		first = n - 1
	}
	xs := b.View(x, first-skip, n-skip, 0, sp.NEmbd)
	hs := b.View(h, first-skip, n-skip, 0, sp.NEmbd)
	b.RMSNorm(hs, xs, m.outNorm, sp.NEmbd, m.Eps)
	c.EmitAt(model.OpResultNorm, s.pos+first, hs)
	// One row is kept for the next Eval; many (all logits) are not, so that
	// the session does not hold a prompt's worth of vocabulary rows.
	var logits Buf
	if n-first == 1 {
		logits = c.BufRows("logits", 1, sp.NVocab)
	} else {
		logits = b.Alloc(n-first, sp.NVocab)
	}
	if err := b.MatMul(logits, m.output, hs); err != nil {
		return fail(err)
	}
	c.EmitAt(model.OpLogits, s.pos+first, logits)
	if into != nil && n-first == 1 {
		b.Read(logits, 0, into)
		s.pos += n
		return nil, nil
	}
	rows := make([][]float32, n-first)
	flat := make([]float32, len(rows)*sp.NVocab)
	for r := range rows {
		rows[r] = flat[r*sp.NVocab : (r+1)*sp.NVocab : (r+1)*sp.NVocab]
		b.Read(logits, r, rows[r])
	}
	s.pos += n
	return rows, nil
}
