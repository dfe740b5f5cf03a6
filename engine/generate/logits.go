package generate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/engine/model"
)

// LogitsOptions describe one logits run: tokens fed in one Eval from
// position 0.
type LogitsOptions struct {
	Model string
	// Loaded, when set, is Model already opened (engine/loaded): its file
	// and spec are used instead of opening the path again.
	Loaded  *loaded.Model
	Backend string
	Tokens  []int32
	Threads int
	Log     *slog.Logger
	// Numerics asks the reference for a declared numerics mode
	// (model.OpenOptions.Numerics); "": its default.
	Numerics string
	// Trace, if set, observes the engine's intermediate results (the
	// reference's op names: model.Op*) during the evaluation.
	Trace model.Trace
}

// LogitsResult is every position's full logits row. Its JSON form is apr
// logits --json's output.
type LogitsResult struct {
	NVocab int         `json:"n_vocab"`
	Tokens []int32     `json:"tokens"`
	Logits [][]float32 `json:"logits"`
}

// Logits evaluates o.Tokens with o.Backend and returns the logits at every
// position.
func Logits(ctx context.Context, o LogitsOptions) (LogitsResult, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Backend == "" {
		return LogitsResult{}, fmt.Errorf("generate: no backend named")
	}
	if len(o.Tokens) == 0 {
		return LogitsResult{}, fmt.Errorf("generate: no tokens to evaluate")
	}
	h := o.Loaded
	if h == nil {
		var err error
		if h, err = loaded.Open(o.Model); err != nil {
			return LogitsResult{}, err
		}
		defer h.Close()
	}
	f := h.File
	spec, err := h.Spec()
	if err != nil {
		return LogitsResult{}, err
	}
	for i, id := range o.Tokens {
		if id < 0 || int(id) >= spec.NVocab {
			return LogitsResult{}, fmt.Errorf("generate: token %d at index %d is outside the vocabulary [0, %d)", id, i, spec.NVocab)
		}
	}
	eng, err := model.OpenBackend(o.Backend, f, spec, model.OpenOptions{Log: o.Log, Threads: o.Threads, Numerics: o.Numerics})
	if err != nil {
		return LogitsResult{}, err
	}
	defer eng.Close()
	if up, ok := eng.(model.Uploader); ok {
		if err := up.Upload(); err != nil {
			return LogitsResult{}, fmt.Errorf("generate: %s: upload: %w", o.Backend, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return LogitsResult{}, err
	}
	sess, err := eng.NewSession(len(o.Tokens))
	if err != nil {
		return LogitsResult{}, err
	}
	if o.Trace != nil {
		sess.SetTrace(o.Trace)
	}
	rows, err := sess.Eval(o.Tokens, true)
	if err != nil {
		return LogitsResult{}, err
	}
	return LogitsResult{NVocab: eng.NVocab(), Tokens: o.Tokens, Logits: rows}, nil
}
