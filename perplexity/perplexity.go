package perplexity

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/kldfile"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/refuse"
)

// By names this package in refusals.
const By = "perplexity"

// DefaultNCtx is llama-perplexity's default context (-c 512).
const DefaultNCtx = 512

// Options say which model runs where.
type Options struct {
	Model   string
	Backend string
	Threads int
	// NCtx is the chunk length (llama.cpp's -c); 0 means DefaultNCtx. KLD
	// takes it from the base file.
	NCtx int
	// Chunks limits the run to the first Chunks chunks (llama.cpp's
	// --chunks); 0 means all.
	Chunks int
	// OnChunk, when set, is called after each chunk (1-based) with the
	// perplexity over every scored token so far.
	OnChunk func(chunk int, ppl float64)
	Log     *slog.Logger
}

// loaded is a model opened once for a run.
type loaded struct {
	f    *gguf.File
	spec *model.Spec
	tok  *tokenizer.Tokenizer
	eng  model.Engine
}

func (m *loaded) close() {
	if m.eng != nil {
		m.eng.Close()
	}
	m.f.Close()
}

func open(o *Options) (*loaded, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Backend == "" {
		return nil, fmt.Errorf("perplexity: no backend named")
	}
	f, err := gguf.Open(o.Model)
	if err != nil {
		return nil, err
	}
	m := &loaded{f: f}
	fail := func(err error) (*loaded, error) { m.close(); return nil, err }
	if m.spec, err = model.Load(f); err != nil {
		return fail(err)
	}
	if m.tok, err = tokenizer.New(f); err != nil {
		return fail(err)
	}
	if m.tok.NVocab() != m.spec.NVocab {
		return fail(refuse.New(By, "tokenizer has %d tokens, the model's logits %d", m.tok.NVocab(), m.spec.NVocab))
	}
	if m.tok.AddEOS() {
		// llama.cpp asserts !add_eos: an EOS after every text would be scored.
		return fail(refuse.New(By, "the model adds an EOS to every text (tokenizer.ggml.add_eos_token); llama.cpp's perplexity refuses such a vocabulary"))
	}
	if m.eng, err = model.OpenBackend(o.Backend, f, m.spec, model.OpenOptions{Log: o.Log, Threads: o.Threads}); err != nil {
		return fail(err)
	}
	if up, ok := m.eng.(model.Uploader); ok {
		if err := up.Upload(); err != nil {
			return fail(fmt.Errorf("perplexity: %s: upload: %w", o.Backend, err))
		}
	}
	return m, nil
}

// bos returns whether chunks start with BOS, and its id.
func (m *loaded) bos() (bool, int32) {
	if !m.tok.AddBOS() {
		return false, 0
	}
	id, ok := m.tok.BOS()
	return ok, id
}

func (m *loaded) warnCtx(o *Options, nCtx int) {
	if nCtx > m.spec.NCtxTrain {
		o.Log.Warn("the model was trained on a shorter context", "n_ctx_train", m.spec.NCtxTrain, "n_ctx", nCtx)
	}
}

// Result is a perplexity run. Its JSON form is apr perplexity --json's.
type Result struct {
	Model   string `json:"model"`
	Backend string `json:"backend"`
	NCtx    int    `json:"n_ctx"`
	NVocab  int    `json:"n_vocab"`
	// Tokens is the text's length in tokens (BOS included when the model
	// adds one); NChunk·NCtx of them are evaluated.
	Tokens int `json:"tokens"`
	NChunk int `json:"n_chunk"`
	Scored int `json:"scored"` // tokens scored: NChunk·(NCtx−1−NCtx/2)
	// ChunkPPL is the perplexity over every scored token up to each chunk
	// (llama.cpp's "[1]x,[2]y,…").
	ChunkPPL []float64 `json:"chunk_ppl"`
	PPL      float64   `json:"ppl"`
	PPLUnc   float64   `json:"ppl_unc"`
	// BaseFile is where the log-probabilities were written
	// (--kl-divergence-base), if anywhere.
	BaseFile string `json:"kl_divergence_base,omitempty"`
}

// Perplexity scores text. With base set, it also writes the log-probability
// file llama.cpp's --kl-divergence-base writes (and, as llama.cpp does then,
// takes each token's negative log-likelihood from the same float32
// computation that the file stores).
func Perplexity(ctx context.Context, o Options, text string, base io.Writer) (Result, error) {
	if o.NCtx == 0 {
		o.NCtx = DefaultNCtx
	}
	if o.NCtx < 3 {
		return Result{}, fmt.Errorf("perplexity: -c %d leaves no token to score (want at least 3)", o.NCtx)
	}
	m, err := open(&o)
	if err != nil {
		return Result{}, err
	}
	defer m.close()
	// llama.cpp: common_tokenize(ctx, text, add_special = true, parse_special = false).
	tokens, err := m.tok.Encode(text, tokenizer.Options{AddSpecial: true})
	if err != nil {
		return Result{}, err
	}
	res := Result{Model: o.Model, Backend: o.Backend, NCtx: o.NCtx, NVocab: m.eng.NVocab(), Tokens: len(tokens)}
	if len(tokens) < 2*o.NCtx {
		return res, fmt.Errorf("perplexity: the text tokenizes to %d tokens; a context of %d needs at least %d", len(tokens), o.NCtx, 2*o.NCtx)
	}
	res.NChunk = len(tokens) / o.NCtx
	if o.Chunks > 0 {
		res.NChunk = min(res.NChunk, o.Chunks)
	}
	m.warnCtx(&o, o.NCtx)
	var w *kldfile.Writer
	if base != nil {
		if w, err = kldfile.NewWriter(base, kldfile.Header{NCtx: o.NCtx, NVocab: res.NVocab, NChunk: res.NChunk}, tokens[:res.NChunk*o.NCtx]); err != nil {
			return res, err
		}
	}
	addBOS, bos := m.bos()
	first := generate.ChunkFirst(o.NCtx)
	var acc oracle.Perplexity
	err = generate.EvalChunks(ctx, m.eng, tokens, o.NCtx, res.NChunk, addBOS, bos, func(c int, rows [][]float32) error {
		for j, row := range rows {
			next := tokens[c*o.NCtx+first+j+1]
			var nll float64
			var err error
			if w != nil {
				if err = oracle.Finite("logits", row); err == nil {
					nll, err = w.Write(row, next)
				}
			} else {
				nll, err = oracle.NLL(row, next)
			}
			if err != nil {
				return fmt.Errorf("perplexity: chunk %d, position %d: %w", c+1, first+j, err)
			}
			acc.Add(nll)
		}
		res.ChunkPPL = append(res.ChunkPPL, acc.Value())
		if o.OnChunk != nil {
			o.OnChunk(c+1, acc.Value())
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if w != nil {
		if err := w.Close(); err != nil {
			return res, err
		}
	}
	res.Scored = acc.Count()
	var ok bool
	res.PPL, res.PPLUnc, ok = acc.Estimate()
	if !ok {
		return res, refuse.New(By, "the %d scored tokens' log-likelihoods have no spread (llama.cpp: unexpected negative standard deviation); no uncertainty to report", res.Scored)
	}
	return res, nil
}

// KLDResult is a KL-divergence run against a base file. Its JSON form is apr
// kld --json's.
type KLDResult struct {
	Model   string `json:"model"`
	Backend string `json:"backend"`
	Base    string `json:"base"`
	NCtx    int    `json:"n_ctx"`
	NVocab  int    `json:"n_vocab"`
	NChunk  int    `json:"n_chunk"`
	// Chunks is llama.cpp's row after each chunk: the statistics of every
	// position so far.
	Chunks []oracle.KLDRunning `json:"chunks"`
	// Summary is the final statistics; nil below oracle.KLDMinCount scored
	// positions (llama.cpp prints none then).
	Summary *oracle.KLDSummary `json:"summary"`
	Count   int                `json:"count"`
}

// KLD evaluates the model over base's tokens, chunk by chunk as base was
// made, and compares its logits with base's log-probabilities.
func KLD(ctx context.Context, o Options, base *kldfile.File) (KLDResult, error) {
	m, err := open(&o)
	if err != nil {
		return KLDResult{}, err
	}
	defer m.close()
	res := KLDResult{Model: o.Model, Backend: o.Backend, Base: base.Name, NCtx: base.NCtx, NVocab: base.NVocab, NChunk: base.NChunk}
	if base.NVocab != m.eng.NVocab() {
		return res, fmt.Errorf("perplexity: %s holds log-probabilities over %d tokens; %s has a vocabulary of %d", base.Name, base.NVocab, o.Model, m.eng.NVocab())
	}
	if o.Chunks > 0 {
		res.NChunk = min(res.NChunk, o.Chunks)
	}
	m.warnCtx(&o, base.NCtx)
	addBOS, bos := m.bos()
	first := base.First()
	var acc oracle.KLD
	err = generate.EvalChunks(ctx, m.eng, base.Tokens, base.NCtx, res.NChunk, addBOS, bos, func(c int, rows [][]float32) error {
		for j, row := range rows {
			rec, err := base.Record(c, j)
			if err != nil {
				return err
			}
			if _, _, err := acc.Add(row, rec, base.Tokens[c*base.NCtx+first+j+1]); err != nil {
				return fmt.Errorf("perplexity: chunk %d, position %d: %w", c+1, first+j, err)
			}
		}
		r := acc.Running()
		res.Chunks = append(res.Chunks, r)
		if o.OnChunk != nil {
			o.OnChunk(c+1, r.PPL.Value)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Count = acc.Count()
	if s, ok := acc.Summary(); ok {
		res.Summary = &s
	}
	return res, nil
}
