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
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/sample"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/refuse"
)

// Stage names a timed stage of a run.
type Stage string

// The stages, in the order they run.
const (
	StageLoad    Stage = "load"
	StageH2D     Stage = "h2d"
	StageF2      Stage = "f2"
	StagePrefill Stage = "prefill"
	StageDecode  Stage = "decode"
)

// Stages lists every stage in order.
func Stages() []Stage { return []Stage{StageLoad, StageH2D, StageF2, StagePrefill, StageDecode} }

// ParseStage returns the stage named s.
func ParseStage(s string) (Stage, error) {
	for _, st := range Stages() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("generate: unknown stage %q (stages: load, h2d, f2, prefill, decode)", s)
}

// Finish reasons.
const (
	FinishStop   = "stop"   // the model produced an end-of-generation token
	FinishLength = "length" // MaxTokens were produced
)

// Options describe one run.
type Options struct {
	Model string // path of the GGUF file
	// Loaded, when set, is Model already opened (engine/loaded): the run
	// uses it instead of opening and hashing the path again.
	Loaded    *loaded.Model
	Backend   string // registered backend name ("ref", "cpu", …); required
	Prompt    string
	Raw       bool // true: no chat template; control tokens in the prompt are parsed
	MaxTokens int  // tokens to generate, ≥ 1
	IgnoreEOS bool // keep generating past end-of-generation tokens
	Sampling  sample.Params
	Threads   int // passed to the backend; 0: its choice
	// Numerics asks the reference for a declared numerics mode
	// (model.OpenOptions.Numerics); "": its default.
	Numerics string

	// PlantDelay sleeps for the given time inside a stage: the timing
	// falsifier's hook, to prove each field measures its own stage.
	PlantDelay map[Stage]time.Duration

	// Validate, when set, runs between h2d and prefill on the run's own
	// engine with the prompt's tokens: F2, the check that a device engine
	// agrees with the reference before it generates. Its time is the f2
	// stage (the prompt's rendering and tokenization stay in prefill); its
	// verdict is Result.F2Verdict; an error stops the run before the prompt
	// is evaluated.
	Validate func(ctx context.Context, eng model.Engine, modelSHA256 string, tokens []int32) (verdict string, err error)

	// Prepare, when set, is called once the prompt's tokens are known —
	// the file's header, tokenizer and template read, before the backend
	// is set up and uploads its weights — so that work Validate needs and
	// no engine does (F2's reference answer) runs beside the load and h2d
	// stages. sha waits for the file's sha256 (hashed beside the load). It
	// must not block; ctx ends when Run returns. Tokenizing there moves
	// no time between stages: it is taken out of load and counted in
	// prefill, as without Prepare.
	Prepare func(ctx context.Context, sha func() (string, error), tokens []int32)

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
	LoadMS        float64 `json:"load_ms"`    // the file's header, tokenizer, the backend's set-up, and the wait for its sha256 (after the upload)
	H2DMS         float64 `json:"h2d_ms"`     // the weights' upload to the device (0 for a host engine)
	F2MS          float64 `json:"f2_ms"`      // F2 before GPU generation (0 when none runs)
	F2Verdict     string  `json:"f2_verdict"` // pass; "not_required" for engines F2 does not gate; "off" (--no-f2)
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
	plant  map[Stage]time.Duration
	start  time.Time
	stage  Stage
	region *trace.Region // the stage in an execution trace (APR_TRACE)
}

func (o *Options) begin(s Stage) stageTimer {
	return stageTimer{plant: o.PlantDelay, start: time.Now(), stage: s, region: trace.StartRegion(context.Background(), "stage "+string(s))}
}

// pause ends a stage's piece without its planted delay (a later piece of
// the same stage sleeps it) and returns the piece's duration in
// milliseconds.
func (t stageTimer) pause() float64 {
	t.region.End()
	return ms(time.Since(t.start))
}

// end sleeps the planted delay (still inside the stage) and returns the
// stage's duration in milliseconds.
func (t stageTimer) end() float64 {
	if d := t.plant[t.stage]; d > 0 {
		time.Sleep(d)
	}
	t.region.End()
	return ms(time.Since(t.start))
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
	if err := o.Sampling.Validate(); err != nil {
		return Result{}, err
	}
	res := Result{Model: o.Model, Backend: o.Backend, TokenIDs: []int32{}}
	wall := time.Now()
	// failed returns res with its wall time so far: a run that stops (a
	// refused load, F2's fail) still reports how long it ran.
	failed := func(err error) (Result, error) {
		res.WallMS = ms(time.Since(wall))
		return res, err
	}

	// The file's sha256 is waited for after the upload, which does not need
	// it (the wait still counts in load_ms).
	lo := LoadOptions{Model: o.Model, Loaded: o.Loaded, Backend: o.Backend, Threads: o.Threads, Numerics: o.Numerics, NoTemplate: o.Raw, Log: o.Log, deferSHA: true}
	var early []int32   // the prompt's tokens, when Prepare took them during the load
	var earlyMS float64 // the time that took, counted in prefill
	if o.Prepare != nil {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		lo.opened = func(m *Model, sha func() (string, error)) {
			if !o.Raw && m.Tmpl == nil {
				return // the load fails on the template below, as without Prepare
			}
			t := time.Now()
			p, err := promptTokens(ctx, &o, m)
			earlyMS = ms(time.Since(t))
			if err == nil {
				early = p
				o.Prepare(pctx, sha, p)
			}
		}
	}
	st := o.begin(StageLoad)
	m, err := Load(ctx, lo)
	if err == nil && !o.Raw && m.Tmpl == nil {
		m.Close()
		err = m.TmplErr
	}
	if err != nil {
		res.LoadMS = st.end() - earlyMS
		res.PrefillMS = earlyMS // the prompt's tokenizing, done during the load
		return failed(err)
	}
	defer m.Close()
	// The load is timed in two pieces around the upload: the load proper,
	// then the wait for the file's sha256 (hashed beside both), where a
	// planted load delay sleeps: after the hash is done, so that no work
	// running beside it absorbs the delay.
	res.LoadMS = st.pause() - earlyMS

	st = o.begin(StageH2D)
	uploads, err := m.Upload()
	res.H2DMS = st.end()
	if !uploads && o.PlantDelay[StageH2D] == 0 {
		// A CPU engine copies nothing to a device: its h2d is 0, not the
		// microsecond it took to find that out.
		res.H2DMS = 0
	}
	if err != nil {
		return failed(err)
	}
	st = o.begin(StageLoad)
	err = m.waitSHA(ctx)
	res.LoadMS += st.end()
	if err != nil {
		return failed(err)
	}
	res.ModelSHA256 = m.SHA256

	// Prefill is timed in two pieces around F2: rendering and tokenizing the
	// prompt, then evaluating it (a planted prefill delay sleeps once, in the
	// second).
	t0 := time.Now()
	prompt, err := early, error(nil)
	if prompt == nil {
		prompt, err = promptTokens(ctx, &o, m)
	}
	prefillMS := earlyMS + ms(time.Since(t0))
	if err != nil {
		res.PrefillMS = prefillMS
		return failed(err)
	}
	st = o.begin(StageF2)
	res.F2Verdict = F2NotRequired
	if o.Validate != nil {
		res.F2Verdict, err = o.Validate(ctx, m.Eng, m.SHA256, prompt)
	}
	res.F2MS = st.end()
	if (res.F2Verdict == F2NotRequired || res.F2Verdict == F2Off) && o.PlantDelay[StageF2] == 0 {
		res.F2MS = 0 // nothing was validated: 0, not the time it took to find that out
	}
	if err != nil {
		return failed(err)
	}
	st = o.begin(StagePrefill)
	q, err := prefill(&o, m, prompt)
	res.PrefillMS = prefillMS + st.end()
	if err != nil {
		return failed(err)
	}
	res.PromptTokens = q.PromptTokens()

	st = o.begin(StageDecode)
	var text []byte
	for {
		_, b, _ := q.Last()
		text = append(text, b...)
		if o.OnText != nil && len(b) > 0 {
			o.OnText(b)
		}
		if q.Done() {
			break
		}
		if err = ctx.Err(); err != nil {
			break
		}
		if _, err = q.Advance(0); err != nil {
			break
		}
	}
	res.TokenIDs = append(res.TokenIDs, q.Tokens()...)
	res.FinishReason = q.Finish()
	if res.FinishReason == "" {
		res.FinishReason = FinishLength
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

// PromptTokens turns the prompt into token ids the way Run does: with
// raw, the prompt as it is (BOS per the model's add_bos, control tokens
// parsed, as llama.cpp's tokenizer with add_special and parse_special);
// otherwise the model's chat template with one user message and the
// generation prompt, then MessagesTokens' tokenization.
func PromptTokens(ctx context.Context, tok *tokenizer.Tokenizer, tmpl *chat.Template, prompt string, raw bool) ([]int32, error) {
	if raw {
		return tok.Encode(prompt, tokenizer.Options{AddSpecial: true, ParseSpecial: true})
	}
	return MessagesTokens(ctx, tok, tmpl, chat.Input{Messages: []map[string]any{{"role": "user", "content": prompt}}})
}

// MessagesTokens renders in (its messages, tools and kwargs) with the chat
// template and the generation prompt and tokenizes the text with control
// tokens parsed, leaving out the BOS when the rendered text already starts
// with it.
func MessagesTokens(ctx context.Context, tok *tokenizer.Tokenizer, tmpl *chat.Template, in chat.Input) ([]int32, error) {
	if tmpl == nil {
		return nil, ErrNoTemplate
	}
	in.AddGenerationPrompt = true
	text, err := tmpl.Render(ctx, in)
	if err != nil {
		return nil, err
	}
	opt := tokenizer.Options{AddSpecial: true, ParseSpecial: true}
	if bos, ok := tok.BOS(); ok {
		if s, err := tok.Text(bos); err == nil && s != "" && strings.HasPrefix(text, s) {
			opt.SkipBOS = true
		}
	}
	return tok.Encode(text, opt)
}

// F2NotRequired is Result.F2Verdict when no F2 ran (an engine F2 does not
// gate: ref, cpu).
const F2NotRequired = "not_required"

// F2Off is Result.F2Verdict when F2 would gate the engine but the user
// turned it off (apr run --no-f2): the output was not validated.
const F2Off = "off"

// promptTokens renders and tokenizes the prompt and checks that it and the
// completion fit the context.
func promptTokens(ctx context.Context, o *Options, m *Model) ([]int32, error) {
	prompt, err := PromptTokens(ctx, m.Tok, m.Tmpl, o.Prompt, o.Raw)
	if err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, ErrEmptyPrompt
	}
	if need := len(prompt) + o.MaxTokens; need > m.Spec.NCtxTrain {
		return nil, refuse.New("generate", "prompt (%d tokens) + %d new tokens exceed the model's context_length %d", len(prompt), o.MaxTokens, m.Spec.NCtxTrain)
	}
	return prompt, nil
}

// prefill evaluates the prompt in a new slot and samples the first token.
func prefill(o *Options, m *Model, prompt []int32) (*Seq, error) {
	q, _, err := m.NewSlot(len(prompt)+o.MaxTokens).Start(prompt, SeqOptions{MaxTokens: o.MaxTokens, IgnoreEOS: o.IgnoreEOS, Sampling: o.Sampling})
	if err != nil {
		return nil, err
	}
	if _, err := q.Advance(0); err != nil {
		return nil, err
	}
	return q, nil
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
