package qa

import (
	"context"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/schema"
)

func (o *Options) h() *hooks {
	if o.hooks == nil {
		o.hooks = &hooks{}
	}
	return o.hooks
}

// WithRun replaces how generations are run.
func WithRun(o *Options, fn func(context.Context, generate.Options) (generate.Result, error)) {
	o.h().run = fn
}

// WithGolden replaces the golden lookup.
func WithGolden(o *Options, fn func(sha string) (*golden.File, bool, error)) { o.h().golden = fn }

// WithSloppyParity plants a parity gate that does not fail closed: when its
// reference fails it compares the backend with itself, and passes.
func WithSloppyParity(o *Options) {
	o.h().parity = func(ctx context.Context, m *modelRun, fz schema.Falsifier, backend string, ref logitsFunc) outcome {
		sloppy := func(ctx context.Context, b string, toks []int32) (generate.LogitsResult, error) {
			r, err := ref(ctx, b, toks)
			if err != nil || usable(r, len(toks)) != nil {
				return m.logits(ctx, backend, toks) // the planted defect: fall back silently
			}
			return r, nil
		}
		return parity(ctx, m, fz, backend, sloppy)
	}
}

// TokenizerGate runs the tokenizer gate on a vocabulary-only file.
func TokenizerGate(f *gguf.File, fz schema.Falsifier) (Gate, error) {
	tok, err := tokenizer.New(f)
	if err != nil {
		return Gate{}, err
	}
	m := &modelRun{f: f, tok: tok}
	o := m.tokenizerGate(fz)
	return Gate{Name: GateTokenizer, Verdict: o.verdict, Status: string(o.verdict), Reason: o.reason, Values: o.values}, nil
}
