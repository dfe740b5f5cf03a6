// Package generate is apr's one generation loop, shared by every backend:
// load a model, build the backend's engine, feed the prompt, sample tokens,
// and time each stage (load, h2d, prefill, decode) separately.
//
// # Conventions
//
// Stage times are wall-clock milliseconds of what happens inside each stage
// and nothing else, so load_ms + h2d_ms + prefill_ms + decode_ms is wall_ms
// up to the few statements between stages. load covers opening the file, its
// sha256, the model description, tokenizer, chat template and the engine's
// construction; h2d is the engine's Upload (0 for CPU engines); prefill covers
// rendering the template, tokenizing, evaluating the prompt and sampling the
// first token; decode covers evaluating each generated token and sampling
// the next. decode_tok_per_s counts only decode: (tokens_out − 1) evaluations
// over decode_ms.
package generate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/sample"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/regfile"
	"github.com/aprqa/apr/refuse"
)

// Stage names a timed stage of a run.
type Stage string

// The stages, in the order they run.
const (
	StageLoad    Stage = "load"
	StageH2D     Stage = "h2d"
	StagePrefill Stage = "prefill"
	StageDecode  Stage = "decode"
)

// Stages lists every stage in order.
func Stages() []Stage { return []Stage{StageLoad, StageH2D, StagePrefill, StageDecode} }

// ParseStage returns the stage named s.
func ParseStage(s string) (Stage, error) {
	for _, st := range Stages() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("generate: unknown stage %q (stages: load, h2d, prefill, decode)", s)
}

// Finish reasons.
const (
	FinishStop   = "stop"   // the model produced an end-of-generation token
	FinishLength = "length" // MaxTokens were produced
)

// Options describe one run.
type Options struct {
	Model     string // path of the GGUF file
	Backend   string // registered backend name ("ref", "cpu", …); required
	Prompt    string
	Raw       bool // true: no chat template; control tokens in the prompt are parsed
	MaxTokens int  // tokens to generate, ≥ 1
	IgnoreEOS bool // keep generating past end-of-generation tokens
	Sampling  sample.Params
	Threads   int // passed to the backend; 0: its choice

	// PlantDelay sleeps for the given time inside a stage: the timing
	// falsifier's hook, to prove each field measures its own stage.
	PlantDelay map[Stage]time.Duration

	// OnText, when set, receives the completion's bytes as they are
	// generated (complete UTF-8 characters; end-of-generation tokens are
	// not written).
	OnText func([]byte)

	Log *slog.Logger // nil: discard
}

// Result is what a run produced and how long each stage took. Its JSON form
// is apr run --json's output.
type Result struct {
	Model         string  `json:"model"`
	ModelSHA256   string  `json:"model_sha256"`
	Backend       string  `json:"backend"`
	PromptTokens  int     `json:"prompt_tokens"`
	TokensOut     int     `json:"tokens_out"`
	TokenIDs      []int32 `json:"token_ids"`
	Text          string  `json:"text"`
	LoadMS        float64 `json:"load_ms"`
	H2DMS         float64 `json:"h2d_ms"`
	PrefillMS     float64 `json:"prefill_ms"`
	DecodeMS      float64 `json:"decode_ms"`
	WallMS        float64 `json:"wall_ms"`
	DecodeTokPerS float64 `json:"decode_tok_per_s"`
	FinishReason  string  `json:"finish_reason"`
}

// ErrEmptyPrompt is returned when the prompt has no tokens to feed.
var ErrEmptyPrompt = errors.New("generate: the prompt is empty after tokenization")

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// stageTimer measures one stage and sleeps its planted delay inside it.
type stageTimer struct {
	plant map[Stage]time.Duration
	start time.Time
	stage Stage
}

func (o *Options) begin(s Stage) stageTimer {
	return stageTimer{plant: o.PlantDelay, start: time.Now(), stage: s}
}

// end sleeps the planted delay (still inside the stage) and returns the
// stage's duration in milliseconds.
func (t stageTimer) end() float64 {
	if d := t.plant[t.stage]; d > 0 {
		time.Sleep(d)
	}
	return ms(time.Since(t.start))
}

// loaded is what the load stage produces.
type loaded struct {
	f     *gguf.File
	spec  *model.Spec
	tok   *tokenizer.Tokenizer
	tmpl  *chat.Template
	eng   model.Engine
	sha   string
	close func()
}

// Run generates a completion of o.Prompt with o.Backend and times it.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Backend == "" {
		return Result{}, errors.New("generate: no backend named")
	}
	if o.MaxTokens < 1 {
		return Result{}, fmt.Errorf("generate: MaxTokens %d must be at least 1", o.MaxTokens)
	}
	for st, d := range o.PlantDelay {
		if _, err := ParseStage(string(st)); err != nil || d < 0 {
			return Result{}, fmt.Errorf("generate: bad planted delay %s=%v", st, d)
		}
	}
	smp, err := sample.New(o.Sampling)
	if err != nil {
		return Result{}, err
	}
	res := Result{Model: o.Model, Backend: o.Backend, TokenIDs: []int32{}}
	wall := time.Now()

	st := o.begin(StageLoad)
	m, err := load(ctx, &o)
	res.LoadMS = st.end()
	if err != nil {
		return res, err
	}
	defer m.close()
	res.ModelSHA256 = m.sha

	st = o.begin(StageH2D)
	up, uploads := m.eng.(model.Uploader)
	if uploads {
		err = up.Upload()
	}
	res.H2DMS = st.end()
	if !uploads && o.PlantDelay[StageH2D] == 0 {
		// A CPU engine copies nothing to a device: its h2d is 0, not the
		// microsecond it took to find that out.
		res.H2DMS = 0
	}
	if err != nil {
		return res, fmt.Errorf("generate: %s: upload: %w", o.Backend, err)
	}

	st = o.begin(StagePrefill)
	prompt, sess, logits, err := prefill(ctx, &o, m)
	var tok int32
	if err == nil {
		tok, err = smp.Sample(logits, prompt)
	}
	res.PrefillMS = st.end()
	if err != nil {
		return res, err
	}
	res.PromptTokens = len(prompt)

	st = o.begin(StageDecode)
	history := append([]int32(nil), prompt...)
	dec := tokenizer.NewStreamDecoder(m.tok)
	var text []byte
	emit := func(id int32) error {
		if m.tok.IsEOG(id) {
			return nil
		}
		b, err := dec.Write(id)
		if err != nil {
			return err
		}
		text = append(text, b...)
		if o.OnText != nil && len(b) > 0 {
			o.OnText(b)
		}
		return nil
	}
	res.FinishReason = FinishLength
	for {
		res.TokenIDs = append(res.TokenIDs, tok)
		history = append(history, tok)
		if err = emit(tok); err != nil {
			break
		}
		if m.tok.IsEOG(tok) && !o.IgnoreEOS {
			res.FinishReason = FinishStop
			break
		}
		if len(res.TokenIDs) == o.MaxTokens {
			break
		}
		if err = ctx.Err(); err != nil {
			break
		}
		var rows [][]float32
		if rows, err = sess.Eval([]int32{tok}, false); err != nil {
			break
		}
		if tok, err = smp.Sample(rows[0], history); err != nil {
			break
		}
	}
	if err == nil {
		tail := dec.Flush()
		text = append(text, tail...)
		if o.OnText != nil && len(tail) > 0 {
			o.OnText(tail)
		}
	}
	res.DecodeMS = st.end()
	res.WallMS = ms(time.Since(wall))
	if err != nil {
		return res, err
	}
	res.TokensOut = len(res.TokenIDs)
	res.Text = string(text)
	if n := res.TokensOut - 1; n > 0 && res.DecodeMS > 0 {
		res.DecodeTokPerS = float64(n) / (res.DecodeMS / 1e3)
	}
	o.Log.Info("generated", "backend", o.Backend, "prompt_tokens", res.PromptTokens, "tokens_out", res.TokensOut,
		"prefill_ms", res.PrefillMS, "decode_ms", res.DecodeMS, "finish", res.FinishReason)
	return res, nil
}

func load(ctx context.Context, o *Options) (*loaded, error) {
	sha, err := fileSHA256(o.Model)
	if err != nil {
		return nil, err
	}
	f, err := gguf.Open(o.Model)
	if err != nil {
		return nil, err
	}
	m := &loaded{f: f, sha: sha, close: func() { f.Close() }}
	fail := func(err error) (*loaded, error) { m.close(); return nil, err }
	if m.spec, err = model.Load(f); err != nil {
		return fail(err)
	}
	if m.tok, err = tokenizer.New(f); err != nil {
		return fail(err)
	}
	if m.tok.NVocab() != m.spec.NVocab {
		return fail(refuse.New("generate", "tokenizer has %d tokens, the model's logits %d", m.tok.NVocab(), m.spec.NVocab))
	}
	if !o.Raw {
		if m.tmpl, err = chat.FromGGUF(f); err != nil {
			return fail(err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	eng, err := model.OpenBackend(o.Backend, f, m.spec, model.OpenOptions{Log: o.Log, Threads: o.Threads})
	if err != nil {
		return fail(err)
	}
	m.eng = eng
	m.close = func() { eng.Close(); f.Close() }
	return m, nil
}

// PromptTokens turns the prompt into token ids the way Run does: with
// raw, the prompt as it is (BOS per the model's add_bos, control tokens
// parsed, as llama.cpp's tokenizer with add_special and parse_special);
// otherwise the model's chat template with one user message and the
// generation prompt, then the same tokenization, leaving out the BOS when
// the rendered text already starts with it.
func PromptTokens(ctx context.Context, tok *tokenizer.Tokenizer, tmpl *chat.Template, prompt string, raw bool) ([]int32, error) {
	text := prompt
	opt := tokenizer.Options{AddSpecial: true, ParseSpecial: true}
	if !raw {
		var err error
		text, err = tmpl.Render(ctx, chat.Input{
			Messages:            []map[string]any{{"role": "user", "content": prompt}},
			AddGenerationPrompt: true,
		})
		if err != nil {
			return nil, err
		}
		if bos, ok := tok.BOS(); ok {
			if s, err := tok.Text(bos); err == nil && s != "" && strings.HasPrefix(text, s) {
				opt.SkipBOS = true
			}
		}
	}
	return tok.Encode(text, opt)
}

func prefill(ctx context.Context, o *Options, m *loaded) ([]int32, model.Session, []float32, error) {
	prompt, err := PromptTokens(ctx, m.tok, m.tmpl, o.Prompt, o.Raw)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(prompt) == 0 {
		return nil, nil, nil, ErrEmptyPrompt
	}
	need := len(prompt) + o.MaxTokens
	if need > m.spec.NCtxTrain {
		return nil, nil, nil, refuse.New("generate", "prompt (%d tokens) + %d new tokens exceed the model's context_length %d", len(prompt), o.MaxTokens, m.spec.NCtxTrain)
	}
	sess, err := m.eng.NewSession(need)
	if err != nil {
		return nil, nil, nil, err
	}
	rows, err := sess.Eval(prompt, false)
	if err != nil {
		return nil, nil, nil, err
	}
	return prompt, sess, rows[0], nil
}

func fileSHA256(path string) (string, error) {
	sum, _, err := regfile.SHA256(path)
	if err != nil {
		return "", fmt.Errorf("generate: %w", err)
	}
	return sum, nil
}

// ParsePlantDelays parses "STAGE=MS" specifications (--plant-delay).
func ParsePlantDelays(specs []string) (map[Stage]time.Duration, error) {
	out := map[Stage]time.Duration{}
	for _, s := range specs {
		name, val, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("generate: plant delay %q is not STAGE=MS", s)
		}
		st, err := ParseStage(name)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || !(n >= 0 && n <= 3.6e6) {
			return nil, fmt.Errorf("generate: plant delay %q: %q is not a number of milliseconds in [0, 3600000]", s, val)
		}
		out[st] += time.Duration(n * float64(time.Millisecond))
	}
	return out, nil
}
