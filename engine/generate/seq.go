package generate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime/trace"
	"slices"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/sample"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/refuse"
)

// Model is a model loaded once for many generations (apr run loads one per
// run; apr serve and apr chat keep one resident): the mapped file, its
// sha256, spec, tokenizer, chat template and one backend's engine.
type Model struct {
	Path    string
	Backend string
	SHA256  string
	File    *gguf.File
	Spec    *model.Spec
	Tok     *tokenizer.Tokenizer
	// Tmpl is the model's chat template; nil when TmplErr says why not
	// (a file without one, or LoadOptions.NoTemplate).
	Tmpl    *chat.Template
	TmplErr error
	Eng     model.Engine
	close   func()
	sha     func() (string, int64, error) // the file's sha256, while SHA256 is still ""
	masks   jsonMasks                     // SeqOptions.JSON: the allowed tokens of recent recognizer states
}

// LoadOptions describe what Load opens.
type LoadOptions struct {
	Model      string // path of the GGUF file
	Backend    string // registered backend name; required
	Threads    int    // passed to the backend; 0: its choice
	Numerics   string // the reference's numerics (model.OpenOptions.Numerics); "": its default
	NoTemplate bool   // do not read the chat template (raw prompts only)
	Log        *slog.Logger
	// Loaded, when set, is Model already opened (engine/loaded): its file,
	// sha256, spec and tokenizer are used, and Close leaves it open.
	Loaded *loaded.Model
	// opened, when set, is called after the header, tokenizer and
	// template are read and before the backend is set up (Run's Prepare);
	// sha waits for the file's sha256.
	opened func(m *Model, sha func() (string, error))
	// deferSHA, when set, returns without waiting for the file's sha256:
	// Model.SHA256 is then set by waitSHA (Run waits for it after the
	// upload, which does not need it).
	deferSHA bool
}

// ErrNoTemplate is wrapped by TmplErr when the template was not asked for.
var ErrNoTemplate = errors.New("generate: the chat template was not loaded")

// Load opens o.Model and builds o.Backend's engine over it (an unregistered
// backend is refused by name by model.OpenBackend). A model whose file has
// no usable chat template still loads: Tmpl is nil and TmplErr says why.
// Upload is left to the caller (Run times it as its own stage).
func Load(ctx context.Context, o LoadOptions) (*Model, error) {
	if o.Backend == "" {
		return nil, errors.New("generate: no backend named")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	h, closeFile := o.Loaded, func() {}
	var err error
	if h == nil {
		r := trace.StartRegion(ctx, "load open")
		h, err = loaded.Open(o.Model)
		r.End()
		if err != nil {
			return nil, err
		}
		closeFile = func() { h.Close() }
	}
	// The file's sha256 (the receipts' and F2's key) is read beside the rest
	// of the load — the header, the tokenizer, the backend's set-up (a
	// device context, packed weights) — and waited for at its end, all
	// inside the load stage.
	go h.SHA256()
	f := h.File
	m := &Model{Path: h.Path, Backend: o.Backend, File: f, close: closeFile}
	fail := func(err error) (*Model, error) { m.Close(); return nil, err }
	r := trace.StartRegion(ctx, "load spec and tokenizer")
	if m.Spec, err = h.Spec(); err == nil {
		m.Tok, err = h.Tokenizer()
	}
	r.End()
	if err != nil {
		return fail(err)
	}
	if m.Tok.NVocab() != m.Spec.NVocab {
		return fail(refuse.New("generate", "tokenizer has %d tokens, the model's logits %d", m.Tok.NVocab(), m.Spec.NVocab))
	}
	if o.NoTemplate {
		m.TmplErr = ErrNoTemplate
	} else if m.Tmpl, err = chat.FromGGUF(f); err != nil {
		m.Tmpl, m.TmplErr = nil, err
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if o.opened != nil {
		o.opened(m, func() (string, error) { s, _, err := h.SHA256(); return s, err })
	}
	r = trace.StartRegion(ctx, "load backend "+o.Backend)
	eng, err := model.OpenBackend(o.Backend, f, m.Spec, model.OpenOptions{Log: o.Log, Threads: o.Threads, Numerics: o.Numerics})
	r.End()
	if err != nil {
		return fail(err)
	}
	m.Eng = eng
	m.close = func() { eng.Close(); closeFile() }
	m.sha = h.SHA256
	if o.deferSHA {
		return m, nil
	}
	if err := m.waitSHA(ctx); err != nil {
		return fail(err)
	}
	return m, nil
}

// waitSHA waits for the file's sha256 (hashed beside the load) and sets
// SHA256.
func (m *Model) waitSHA(ctx context.Context) error {
	if m.sha == nil {
		return nil
	}
	defer trace.StartRegion(ctx, "load sha256 wait").End()
	sum, _, err := m.sha()
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	m.SHA256, m.sha = sum, nil
	return nil
}

// Upload copies the weights to the device for engines that have one. It
// reports whether the engine uploads at all.
func (m *Model) Upload() (bool, error) {
	up, ok := m.Eng.(model.Uploader)
	if !ok {
		return false, nil
	}
	if err := up.Upload(); err != nil {
		return true, fmt.Errorf("generate: %s: upload: %w", m.Backend, err)
	}
	return true, nil
}

// Close releases the engine and the file.
func (m *Model) Close() {
	if m.close != nil {
		m.close()
		m.close = nil
	}
}

// Template returns the chat template or the reason there is none.
func (m *Model) Template() (*chat.Template, error) {
	if m.Tmpl == nil {
		if m.TmplErr == nil {
			return nil, ErrNoTemplate
		}
		return nil, m.TmplErr
	}
	return m.Tmpl, nil
}

// Slot is one sequence's place on a model: a session (its KV cache) and the
// tokens that were fed into it. A generation started on a slot whose fed
// tokens are a strict prefix of the new prompt feeds only the rest (the next
// turn of a chat); otherwise the slot starts over. A slot runs one
// generation at a time and is not safe for concurrent use.
type Slot struct {
	m      *Model
	maxCtx int
	sess   model.Session
	fed    []int32
	busy   bool
}

// NewSlot returns an empty slot with room for maxCtx positions; its session
// is made by the first Start.
func (m *Model) NewSlot(maxCtx int) *Slot { return &Slot{m: m, maxCtx: maxCtx} }

// MaxCtx is the slot's context size.
func (s *Slot) MaxCtx() int { return s.maxCtx }

// Fed returns the tokens in the slot's session (do not modify).
func (s *Slot) Fed() []int32 { return s.fed }

// Reusable returns how many of prompt's tokens Start would take from the
// cache: len(Fed()) when Fed() is a strict prefix of prompt, else 0.
func (s *Slot) Reusable(prompt []int32) int {
	if s.sess == nil || len(s.fed) == 0 || len(s.fed) >= len(prompt) || !slices.Equal(s.fed, prompt[:len(s.fed)]) {
		return 0
	}
	return len(s.fed)
}

// resetter is implemented by sessions that can be emptied in place
// (graph.Session); others are replaced by a new session.
type resetter interface{ Reset() error }

// Close releases the slot's session.
func (s *Slot) Close() {
	if c, ok := s.sess.(io.Closer); ok {
		c.Close()
	}
	s.sess, s.fed = nil, nil
}

// SeqOptions describe one generation.
type SeqOptions struct {
	MaxTokens int // tokens to generate, ≥ 1 (≥ 0 with PromptRows: 0 only scores the prompt)
	IgnoreEOS bool
	Sampling  sample.Params
	// SkipControl leaves control tokens (<|im_start|>, …) out of the text,
	// as an API server must; end-of-generation tokens are always left out.
	SkipControl bool
	// PromptRows, when set, receives the logits row of every prompt
	// position as the prompt is evaluated (pos from 0; the row predicts
	// token pos+1 and is valid during the call only), in order, for
	// scoring the prompt (apr serve's echo with logprobs). The slot's
	// cache is then not reused, so that every position has its row, and
	// the prompt is fed promptRowsChunk tokens a pass at most.
	PromptRows func(pos int, row []float32)
	// JSON constrains the completion to one JSON object (OpenAI's
	// response_format json_object): at every step the tokens whose text
	// would not continue a prefix of one are masked out before sampling
	// (end-of-generation only once the object is closed, and nothing else
	// then), so the sampler draws among the rest as it would among all.
	// The logprobs stay the model's.
	JSON bool
	// JSONAfter (with JSON): the completion is one of these texts, then
	// the object (a forced tool call whose function the model chooses:
	// each tool's name and what follows it up to the arguments).
	JSONAfter []string
}

// promptRowsChunk bounds a pass that keeps every row (PromptRows): rows of
// a 152k vocabulary take 0.6 MB each.
const promptRowsChunk = 64

// Start begins a generation of prompt on the slot and returns it with the
// number of prompt tokens taken from the slot's cache. Nothing is evaluated
// yet: Advance does the forward passes.
func (s *Slot) Start(prompt []int32, o SeqOptions) (*Seq, int, error) {
	if s.busy {
		return nil, 0, errors.New("generate: the slot is running another generation")
	}
	if len(prompt) == 0 {
		return nil, 0, ErrEmptyPrompt
	}
	if o.MaxTokens < 1 && !(o.MaxTokens == 0 && o.PromptRows != nil) {
		return nil, 0, fmt.Errorf("generate: MaxTokens %d must be at least 1 (0 only when scoring the prompt)", o.MaxTokens)
	}
	if need := len(prompt) + o.MaxTokens - 1; need > s.maxCtx {
		return nil, 0, fmt.Errorf("generate: prompt (%d tokens) + %d new tokens exceed the context of %d", len(prompt), o.MaxTokens, s.maxCtx)
	}
	if len(o.JSONAfter) > 0 && !o.JSON {
		return nil, 0, errors.New("generate: JSONAfter without JSON")
	}
	for _, l := range o.JSONAfter {
		if l == "" || strings.Contains(l, "\x00") {
			return nil, 0, fmt.Errorf("generate: JSONAfter choice %q is empty or holds a NUL", l)
		}
	}
	smp, err := sample.New(o.Sampling)
	if err != nil {
		return nil, 0, err
	}
	if err := o.Sampling.CheckVocab(s.m.Spec.NVocab); err != nil {
		return nil, 0, err
	}
	cached := s.Reusable(prompt)
	if o.PromptRows != nil {
		cached = 0 // every position's row is wanted: nothing comes from the cache
	}
	if cached == 0 && s.sess != nil && len(s.fed) > 0 {
		r, ok := s.sess.(resetter)
		if ok && r.Reset() == nil {
			s.fed = s.fed[:0]
		} else {
			s.Close()
		}
	}
	if s.sess == nil {
		if s.sess, err = s.m.Eng.NewSession(s.maxCtx); err != nil {
			return nil, 0, err
		}
		s.fed = nil
	}
	s.busy = true
	q := &Seq{slot: s, smp: smp, o: o, prompt: len(prompt), cached: cached,
		history: append(make([]int32, 0, len(prompt)+o.MaxTokens), prompt...),
		dec:     tokenizer.NewStreamDecoder(s.m.Tok), json: newJSONPrefix(o.JSONAfter)}
	return q, cached, nil
}

// Seq is one generation in progress: apr's one sampling loop, driven one
// forward pass at a time by Advance so that a scheduler can interleave
// several sequences (apr serve) and Run can drive one to the end.
type Seq struct {
	slot    *Slot
	smp     *sample.Sampler
	o       SeqOptions
	prompt  int     // prompt tokens
	cached  int     // of which taken from the slot's cache
	history []int32 // prompt, then every sampled token
	ids     []int32 // sampled tokens
	dec     *tokenizer.StreamDecoder
	text    []byte     // the last token's text
	row     []float32  // the logits the last token was sampled from
	buf     []float32  // the row of a pass of its own (model.EvalLast), reused
	json    jsonPrefix // SeqOptions.JSON: the completion's text so far
	masked  []float32  // SeqOptions.JSON: the row with the tokens that break it at -Inf
	finish  string
	err     error
}

// PromptTokens is the prompt's length; Cached how many of them came from
// the slot's cache.
func (q *Seq) PromptTokens() int { return q.prompt }

// Cached is how many prompt tokens came from the slot's cache.
func (q *Seq) Cached() int { return q.cached }

// Prefilling reports whether prompt tokens are still to be fed.
func (q *Seq) Prefilling() bool { return len(q.slot.fed) < q.prompt }

// Pending is the number of prompt tokens still to be fed.
func (q *Seq) Pending() int { return max(0, q.prompt-len(q.slot.fed)) }

// Done reports whether the generation has ended (Finish says why).
func (q *Seq) Done() bool { return q.finish != "" || q.err != nil }

// Finish is FinishStop, FinishLength, or what Stop was given; "" while running.
func (q *Seq) Finish() string { return q.finish }

// Tokens are the sampled ids so far (do not modify).
func (q *Seq) Tokens() []int32 { return q.ids }

// Last returns the last sampled id, its text (complete UTF-8 characters;
// the decoder's held-back bytes are added once the generation is done) and
// the logits row it was sampled from. The slices are valid until the next
// Advance.
func (q *Seq) Last() (int32, []byte, []float32) {
	if len(q.ids) == 0 {
		return -1, nil, nil
	}
	return q.ids[len(q.ids)-1], q.text, q.row
}

// Stop ends the generation with reason (a stop string, a cancellation) and
// frees the slot; the slot keeps the tokens already fed.
func (q *Seq) Stop(reason string) {
	if q.finish == "" {
		q.finish = reason
	}
	q.slot.busy = false
}

// Advance does one forward pass: while the prompt is being fed, a chunk of
// at most chunk of its tokens (0: all the rest), else the last sampled
// token. After the pass that completes the prompt, and after every decode
// pass, it samples a token and reports true. An error ends the sequence
// (and the slot's session starts over next time).
func (q *Seq) Advance(chunk int) (bool, error) {
	if q.err != nil {
		return false, q.err
	}
	if q.Done() {
		return false, errors.New("generate: Advance of a finished sequence")
	}
	return q.pass(q.next(chunk))
}

// pass feeds feed (the sequence's next tokens) in one Eval and samples
// when the prompt is complete.
func (q *Seq) pass(feed []int32) (bool, error) {
	s := q.slot
	if len(q.buf) != s.m.Spec.NVocab {
		buf, err := model.LogitsRow(s.sess, s.m.Spec.NVocab)
		if err != nil {
			return false, q.fail(err)
		}
		q.buf = buf
	}
	if q.o.PromptRows != nil && q.Prefilling() {
		rows, err := s.sess.Eval(feed, true)
		if err == nil && len(rows) != len(feed) {
			err = fmt.Errorf("generate: Eval returned %d rows for %d tokens", len(rows), len(feed))
		}
		if err != nil {
			return false, q.fail(err)
		}
		for k, row := range rows {
			q.o.PromptRows(len(s.fed)+k, row)
		}
		copy(q.buf, rows[len(rows)-1])
	} else if err := model.EvalLast(s.sess, feed, q.buf); err != nil {
		return false, q.fail(err)
	}
	s.fed = append(s.fed, feed...)
	if q.Prefilling() {
		return false, nil
	}
	if q.o.MaxTokens == 0 { // the prompt scored, nothing to generate
		q.finish = FinishLength
		q.slot.busy = false
		return false, nil
	}
	return true, q.sample(q.buf)
}

// AdvanceBatch is a server's step over seqs. When their engine is a
// model.BatchDecoder they share one pass (passes of at most MaxBatchRows
// tokens; its rows equal each session's own Eval, so every sequence samples
// what it would alone): every decoding sequence feeds its last sampled
// token, and the sequences still feeding their prompt share a budget of
// chunk prompt tokens (0: no limit; never more than fits one pass beside
// the decoding rows), in order — the first ones take what
// they need, the later ones may wait for the next step, so that a burst of
// new prompts does not stall the streams already decoding. Without a
// BatchDecoder each sequence does Advance(chunk), one after another.
// sampled[i] and errs[i] are what Advance would return for seqs[i] (false
// and nil for a sequence that waited); a failed pass fails every sequence
// in it. The sequences of a pass sample concurrently.
func AdvanceBatch(seqs []*Seq, chunk int) (sampled []bool, errs []error) {
	sampled, errs = make([]bool, len(seqs)), make([]error, len(seqs))
	type item struct {
		i    int
		feed []int32
	}
	var batch []item
	var bd model.BatchDecoder
	rows, budget := 0, chunk
	if chunk > 0 {
		// The decode tokens and the prompt chunks of one step fit one pass
		// when they can: the budget leaves room for every decoding row.
		for _, q := range seqs {
			b, ok := q.slot.m.Eng.(model.BatchDecoder)
			if !ok {
				continue
			}
			if budget > b.MaxBatchRows() {
				budget = b.MaxBatchRows()
			}
			if q.err == nil && !q.Done() && q.slot.sess != nil && !q.Prefilling() {
				budget--
			}
		}
		budget = max(budget, 1)
	}
	run := func() {
		if len(batch) == 1 {
			it := batch[0]
			sampled[it.i], errs[it.i] = seqs[it.i].pass(it.feed)
		} else if len(batch) > 1 {
			sessions, parts := make([]model.Session, len(batch)), make([][]int32, len(batch))
			for k, it := range batch {
				sessions[k], parts[k] = seqs[it.i].slot.sess, it.feed
			}
			out, err := bd.EvalBatch(sessions, parts)
			// The sequences sample concurrently: each has its own sampler,
			// history and decoder (the tokenizer is only read), and a
			// vocabulary-wide pass per sequence is otherwise a serial stretch
			// of every step while the engine's threads wait.
			var wg sync.WaitGroup
			for k, it := range batch {
				q := seqs[it.i]
				if err != nil {
					errs[it.i] = q.fail(err)
					continue
				}
				q.slot.fed = append(q.slot.fed, it.feed...)
				if !q.Prefilling() {
					wg.Add(1)
					go func() {
						defer wg.Done()
						sampled[it.i], errs[it.i] = true, q.sample(out[k])
					}()
				}
			}
			wg.Wait()
		}
		batch, rows = batch[:0], 0
	}
	for i, q := range seqs {
		b, ok := q.slot.m.Eng.(model.BatchDecoder)
		scoring := q.o.PromptRows != nil && q.Prefilling() // keeps every row: a pass of its own
		if !ok || q.err != nil || q.Done() || q.slot.sess == nil || (bd != nil && b != bd) || scoring {
			sampled[i], errs[i] = q.Advance(chunk)
			continue
		}
		feed := q.next(0)
		if q.Prefilling() && chunk > 0 {
			if budget <= 0 {
				continue // waits for the next step
			}
			feed = feed[:min(len(feed), budget)]
			budget -= len(feed)
		}
		if len(feed) > b.MaxBatchRows() { // a whole long prompt: Eval takes it in pieces
			sampled[i], errs[i] = q.Advance(chunk)
			continue
		}
		if rows+len(feed) > b.MaxBatchRows() {
			run()
		}
		bd = b
		batch = append(batch, item{i, feed})
		rows += len(feed)
	}
	run()
	return sampled, errs
}

// maskJSON returns row with every token that cannot continue the JSON
// object so far at -Inf (SeqOptions.JSON): the tokens the recognizer's
// state allows (Model.jsonAllowed) keep their logits.
func (q *Seq) maskJSON(row []float32) []float32 {
	if cap(q.masked) < len(row) {
		q.masked = make([]float32, len(row))
	}
	m := q.masked[:len(row)]
	allowed := q.slot.m.jsonAllowed(q.json)
	ninf := float32(math.Inf(-1))
	for w := 0; w*64 < len(row); w++ {
		lo, hi := w*64, min(w*64+64, len(row))
		var bits uint64
		if w < len(allowed) {
			bits = allowed[w]
		}
		switch bits {
		case 0:
			for i := lo; i < hi; i++ {
				m[i] = ninf
			}
		case ^uint64(0):
			copy(m[lo:hi], row[lo:hi])
		default:
			for i := lo; i < hi; i++ {
				m[i] = ninf
				if bits&(1<<(i-lo)) != 0 {
					m[i] = row[i]
				}
			}
		}
	}
	return m
}

// next is the tokens of the sequence's next pass: a prompt chunk of at
// most chunk tokens (0: all the rest), or the last sampled token.
func (q *Seq) next(chunk int) []int32 {
	s := q.slot
	if n := q.Pending(); n > 0 {
		if q.o.PromptRows != nil && (chunk <= 0 || chunk > promptRowsChunk) {
			chunk = promptRowsChunk
		}
		if chunk > 0 && chunk < n {
			n = chunk
		}
		return q.history[len(s.fed) : len(s.fed)+n]
	}
	return q.history[len(q.history)-1:]
}

// Abort ends the sequence with err after a failure outside Advance's own
// error path (a caller that recovered an engine panic): the slot's session
// is dropped, since its state is unknown, and the slot is free again.
func (q *Seq) Abort(err error) error { return q.fail(err) }

func (q *Seq) fail(err error) error {
	q.err = err
	q.slot.Close()
	q.slot.busy = false
	return err
}

func (q *Seq) sample(row []float32) error {
	draw := row
	if q.o.JSON {
		draw = q.maskJSON(row)
	}
	id, err := q.smp.Sample(draw, q.history)
	if err != nil {
		return q.fail(err)
	}
	if q.o.JSON {
		if p, err := q.slot.m.Tok.Piece(id); err == nil && !q.slot.m.Tok.IsControl(id) {
			q.json.FeedString(p)
		}
	}
	q.row = row
	q.ids = append(q.ids, id)
	q.history = append(q.history, id)
	tok := q.slot.m.Tok
	q.text = q.text[:0]
	if !tok.IsEOG(id) && !(q.o.SkipControl && tok.IsControl(id)) {
		b, err := q.dec.Write(id)
		if err != nil {
			return q.fail(err)
		}
		q.text = append(q.text, b...)
	}
	switch {
	case tok.IsEOG(id) && !q.o.IgnoreEOS:
		q.finish = FinishStop
	case len(q.ids) == q.o.MaxTokens:
		q.finish = FinishLength
	}
	if q.finish != "" {
		q.text = append(q.text, q.dec.Flush()...)
		q.slot.busy = false
	}
	return nil
}
