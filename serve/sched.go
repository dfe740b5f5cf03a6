package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/tokenizer"
)

// FinishCancelled ends a sequence whose client went away (never sent: the
// client is gone) or that the server's shutdown cut off.
const FinishCancelled = "cancelled"

// job is one admitted request on its way through the scheduler.
type job struct {
	ctx    context.Context
	prompt []int32
	opts   generate.SeqOptions
	stop   []string
	// stopAfter: the sequence stops once its text holds this, kept (a
	// tool call's end, when one call is all the request allows).
	stopAfter string
	logprobs  bool
	top       int
	events    chan event // buffered for every event the job can produce
	enqueued  time.Time

	// echo (/v1/completions' echo): the prompt's text token by token (what
	// each adds; control tokens none), and with logprobs each prompt
	// token's entry (the first has no logprob), filled during the prompt's
	// pass through SeqOptions.PromptRows: read them after the job's first
	// event.
	echo      bool
	echoText  []string
	promptLps []tokenLogprob

	q       *generate.Seq
	slot    int
	pending string  // text held back: it may be the start of a stop string
	ids     []int32 // ids not yet sent
	lps     []tokenLogprob
	last    time.Time
	first   bool
}

// event is what the scheduler tells a request's handler: a delta (text, the
// ids it came from, their logprobs), and finally the finish reason and usage
// or an error.
type event struct {
	Text     string
	IDs      []int32
	Logprobs []tokenLogprob
	Finish   string // "" until the last event
	Usage    usage
	Err      error
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	Details          struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// tokenLogprob is one sampled token's log-probability under the model's
// distribution (softmax of the raw logits, before any sampling transform)
// and the most likely alternatives.
type tokenLogprob struct {
	None    bool // no logprob: the prompt's first token (echo)
	ID      int32
	TextLen int // bytes the token added to the text (0 for control tokens)
	Token   string
	Bytes   []byte
	Logprob float64
	Top     []altLogprob
}

type altLogprob struct {
	ID      int32
	Token   string
	Bytes   []byte
	Logprob float64
}

// sched interleaves the active sequences: each step advances every one of
// them by one forward pass (a decode token or a prefill chunk), one session
// after the other, in slot order.
type sched struct {
	m        *generate.Model
	met      *metrics
	chunk    int
	maxQueue int

	mu     sync.Mutex
	queue  []*job
	wake   chan struct{}
	slots  []*generate.Slot
	used   []time.Time // last use, for choosing the least recently used free slot
	active []*job      // by slot; nil when free
	closed bool
	done   chan struct{}

	maxBatch float64
}

func newSched(m *generate.Model, met *metrics, parallel, ctxLen, chunk, maxQueue int) *sched {
	s := &sched{m: m, met: met, chunk: chunk, maxQueue: maxQueue, wake: make(chan struct{}, 1), done: make(chan struct{}),
		active: make([]*job, parallel), used: make([]time.Time, parallel)}
	for range parallel {
		s.slots = append(s.slots, m.NewSlot(ctxLen))
	}
	go s.loop()
	return s
}

// submit queues j; its events arrive on j.events.
func (s *sched) submit(j *job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("serve: the server is shutting down")
	}
	// Queued jobs that a free slot will take at the loop's next admit do
	// not wait: counting them refused a burst's second request while the
	// first still sat in the queue beside a free slot (TestQueueFull saw 1
	// success of 24 about once in 30 runs).
	if waiting := len(s.queue) - (len(s.active) - s.running()); waiting >= s.maxQueue {
		return fmt.Errorf("%w: %d requests are waiting for a slot", errQueueFull, waiting)
	}
	j.enqueued = time.Now()
	j.events = make(chan event, j.opts.MaxTokens+2)
	s.queue = append(s.queue, j)
	s.met.queue.Set(float64(len(s.queue)))
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// close stops the loop after cancelling what is queued or running, and
// releases the slots' sessions.
func (s *sched) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.done
}

func (s *sched) loop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		if s.closed {
			for _, j := range s.queue {
				j.events <- event{Err: errShutdown}
			}
			s.queue = nil
			s.mu.Unlock()
			for i, j := range s.active {
				if j != nil {
					s.finish(i, j, event{Err: errShutdown})
				}
			}
			for _, sl := range s.slots {
				sl.Close()
			}
			return
		}
		s.admit()
		n := s.running()
		s.mu.Unlock()
		if n == 0 {
			<-s.wake
			continue
		}
		s.step()
	}
}

// errQueueFull refuses a request when MaxQueue requests already wait (beyond
// the free slots).
var errQueueFull = errors.New("serve: the queue is full")

var errShutdown = errors.New("serve: the server shut down before the request finished")

// admit gives free slots to queued jobs, first come first served; each job
// takes the free slot with the longest reusable prefix, else the least
// recently used one. s.mu is held.
func (s *sched) admit() {
	for len(s.queue) > 0 {
		free := -1
		best := -1
		j := s.queue[0]
		if j.ctx.Err() != nil { // gone before it started
			s.queue = s.queue[1:]
			s.met.cancelled.Inc()
			j.events <- event{Err: j.ctx.Err(), Finish: FinishCancelled}
			continue
		}
		for i, a := range s.active {
			if a != nil {
				continue
			}
			r := s.slots[i].Reusable(j.prompt)
			if free < 0 || r > best || (r == best && s.used[i].Before(s.used[free])) {
				free, best = i, r
			}
		}
		if free < 0 {
			break
		}
		s.queue = s.queue[1:]
		q, cached, err := s.slots[free].Start(j.prompt, j.opts)
		if err != nil {
			j.events <- event{Err: err}
			continue
		}
		j.q, j.slot, j.first = q, free, true
		s.active[free] = j
		s.met.promptTok.Add(float64(len(j.prompt)))
		s.met.cachedTok.Add(float64(cached))
	}
	s.met.queue.Set(float64(len(s.queue)))
	s.met.active.Set(float64(s.running()))
}

// running counts the slots with a job; s.mu is held.
func (s *sched) running() int {
	n := 0
	for _, a := range s.active {
		if a != nil {
			n++
		}
	}
	return n
}

// step advances every active sequence by one forward pass — a prompt chunk
// or a decode token — sharing passes when the engine can
// (generate.AdvanceBatch; every stream still gets the logits of its solo
// run). A sequence whose client has gone is stopped before its pass.
func (s *sched) step() {
	var live []int
	for i, j := range s.active {
		if j == nil {
			continue
		}
		if err := j.ctx.Err(); err != nil {
			j.q.Stop(FinishCancelled)
			s.met.cancelled.Inc()
			s.finish(i, j, event{Err: err, Finish: FinishCancelled})
			continue
		}
		live = append(live, i)
	}
	n := len(live)
	if n > 0 {
		seqs := make([]*generate.Seq, n)
		for k, i := range live {
			seqs[k] = s.active[i].q
		}
		sampled, errs := advanceBatch(seqs, s.chunk)
		for k, i := range live {
			j := s.active[i]
			if errs[k] != nil {
				s.finish(i, j, event{Err: errs[k]})
				continue
			}
			if sampled[k] {
				s.token(i, j)
			} else if j.q.Done() { // a scored prompt (max_tokens 0): nothing was sampled
				s.finish(i, j, event{Finish: j.q.Finish()})
			}
		}
	}
	if n > 0 {
		s.met.steps.Inc()
		s.met.batch.Observe(float64(n))
		s.mu.Lock()
		if float64(n) > s.maxBatch {
			s.maxBatch = float64(n)
			s.met.batchMax.Set(s.maxBatch)
		}
		s.mu.Unlock()
	}
}

// advanceBatch is generate.AdvanceBatch with an engine panic turned into
// the error of every sequence of the pass (they shared it); the server and
// the sequences outside it go on.
func advanceBatch(seqs []*generate.Seq, chunk int) (sampled []bool, errs []error) {
	defer func() {
		if p := recover(); p != nil {
			sampled, errs = make([]bool, len(seqs)), make([]error, len(seqs))
			for k, q := range seqs {
				errs[k] = q.Abort(fmt.Errorf("serve: the engine panicked: %v", p))
			}
		}
	}()
	return generate.AdvanceBatch(seqs, chunk)
}

// token handles a freshly sampled token: latency metrics, logprobs, the
// stop strings, and the delta for the client.
func (s *sched) token(i int, j *job) {
	now := time.Now()
	if j.first {
		s.met.ttft.Observe(now.Sub(j.enqueued).Seconds())
		j.first = false
	} else {
		s.met.tokenLatency.Observe(now.Sub(j.last).Seconds())
	}
	j.last = now
	s.met.completion.Inc()
	id, text, row := j.q.Last()
	j.ids = append(j.ids, id)
	if j.logprobs {
		lp := logprobOf(s.m.Tok, row, id, j.top)
		lp.TextLen = len(text)
		j.lps = append(j.lps, lp)
	}
	j.pending += string(text)
	if end, ok := j.stopAt(); ok {
		j.pending = j.pending[:end]
		j.q.Stop(generate.FinishStop)
		s.finish(i, j, event{Finish: generate.FinishStop})
		return
	}
	if j.q.Done() {
		s.finish(i, j, event{Finish: j.q.Finish()})
		return
	}
	keep := j.held()
	ev := event{Text: j.pending[:len(j.pending)-keep], IDs: j.ids, Logprobs: j.lps}
	j.pending = j.pending[len(j.pending)-keep:]
	j.ids, j.lps = nil, nil
	j.events <- ev
}

// finish sends the job's last event (with what text is still held back) and
// frees its slot.
func (s *sched) finish(i int, j *job, ev event) {
	if ev.Err == nil {
		ev.Text, ev.IDs, ev.Logprobs = j.pending, j.ids, j.lps
		ev.Usage.PromptTokens = len(j.prompt)
		ev.Usage.CompletionTokens = len(j.q.Tokens())
		ev.Usage.TotalTokens = ev.Usage.PromptTokens + ev.Usage.CompletionTokens
		ev.Usage.Details.CachedTokens = j.q.Cached()
	} else if j.q != nil {
		j.q.Stop(FinishCancelled)
	}
	j.events <- ev
	s.mu.Lock()
	s.active[i] = nil
	s.used[i] = time.Now()
	s.mu.Unlock()
}

// stopAt reports whether the text held (j.pending) ends the sequence, and
// where that text ends: before the earliest stop string, or after
// stopAfter, whichever comes first.
func (j *job) stopAt() (int, bool) {
	end, ok := len(j.pending), false
	if at := firstStop(j.pending, j.stop); at >= 0 {
		end, ok = at, true
	}
	if j.stopAfter != "" {
		if at := strings.Index(j.pending, j.stopAfter); at >= 0 && at+len(j.stopAfter) <= end {
			end, ok = at+len(j.stopAfter), true
		}
	}
	return end, ok
}

// held is how many bytes at the end of the text held may begin a stop
// string or stopAfter: they wait for the next token's text.
func (j *job) held() int {
	keep := holdback(j.pending, j.stop)
	if j.stopAfter != "" {
		keep = max(keep, partialSuffix(j.pending, j.stopAfter))
	}
	return keep
}

// firstStop returns where the earliest stop string starts in text, or -1.
func firstStop(text string, stops []string) int {
	at := -1
	for _, st := range stops {
		if k := strings.Index(text, st); k >= 0 && (at < 0 || k < at) {
			at = k
		}
	}
	return at
}

// holdback returns how many bytes at the end of text could begin a stop
// string, and so must not be sent yet.
func holdback(text string, stops []string) int {
	keep := 0
	for _, st := range stops {
		keep = max(keep, partialSuffix(text, st))
	}
	return keep
}

// echoPrompt prepares j for echo: the prompt's text token by token and,
// when logprobs were asked, the entries of its tokens, scored as the
// prompt is evaluated (the row at position p predicts token p+1).
func (j *job) echoPrompt(tok *tokenizer.Tokenizer) {
	j.echo = true
	dec := tokenizer.NewStreamDecoder(tok)
	j.echoText = make([]string, len(j.prompt))
	var plain []int32 // the prompt's ids that add text
	for i, id := range j.prompt {
		if tok.IsControl(id) || tok.IsEOG(id) {
			continue
		}
		plain = append(plain, id)
		b, _ := dec.Write(id) // an id the tokenizer cannot decode adds nothing
		j.echoText[i] = string(b)
	}
	if n := len(j.prompt); n > 0 {
		j.echoText[n-1] += string(dec.Flush())
	}
	// A SentencePiece vocabulary's first word carries the space prefix the
	// tokenizer added: the text echoed is the prompt's, as Decode gives it
	// (Decode(Encode(text)) == text), so that one space goes.
	if d, err := tok.Decode(plain); err == nil && " "+string(d) == j.echoed() {
		for i, t := range j.echoText {
			if t != "" {
				j.echoText[i] = t[1:]
				break
			}
		}
	}
	if !j.logprobs {
		return
	}
	first, _ := tok.Piece(j.prompt[0])
	j.promptLps = []tokenLogprob{{None: true, ID: j.prompt[0], Token: first, Bytes: []byte(first), TextLen: len(j.echoText[0])}}
	j.opts.PromptRows = func(pos int, row []float32) {
		if pos+1 < len(j.prompt) {
			lp := logprobOf(tok, row, j.prompt[pos+1], j.top)
			lp.TextLen = len(j.echoText[pos+1])
			j.promptLps = append(j.promptLps, lp)
		}
	}
}

// echoed is the prompt's text as echo returns it.
func (j *job) echoed() string { return strings.Join(j.echoText, "") }

// logprobOf computes log softmax(row)[id] and the top alternatives (ties by
// id ascending), in float64.
func logprobOf(tok *tokenizer.Tokenizer, row []float32, id int32, top int) tokenLogprob {
	mx := math.Inf(-1)
	for _, v := range row {
		if float64(v) > mx {
			mx = float64(v)
		}
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	piece := func(id int32) string { p, _ := tok.Piece(id); return p }
	lp := tokenLogprob{ID: id, Token: piece(id), Logprob: float64(row[id]) - lse}
	lp.Bytes = []byte(lp.Token)
	if top > 0 {
		// The top alternatives by a bounded insertion (O(vocab · top)),
		// larger logit first, ties by id ascending.
		best := make([]int32, 0, top+1)
		for i, v := range row {
			if len(best) == top && v <= row[best[top-1]] {
				continue
			}
			k := len(best)
			for k > 0 && v > row[best[k-1]] {
				k--
			}
			best = append(best, 0)
			copy(best[k+1:], best[k:])
			best[k] = int32(i)
			if len(best) > top {
				best = best[:top]
			}
		}
		for _, k := range best {
			p := piece(k)
			lp.Top = append(lp.Top, altLogprob{ID: k, Token: p, Bytes: []byte(p), Logprob: float64(row[k]) - lse})
		}
	}
	return lp
}

// maxBatchSize is the most sequences one step advanced so far.
func (s *sched) maxBatchSize() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxBatch
}
