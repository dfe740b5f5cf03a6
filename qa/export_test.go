package qa

import (
	"context"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/falsify"
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
	o.h().sloppyParity = true
}

// TokenizerGate runs the tokenizer gate on a vocabulary-only file.
func TokenizerGate(f *gguf.File, fz schema.Falsifier) (Gate, error) {
	tok, err := tokenizer.New(f)
	if err != nil {
		return Gate{}, err
	}
	o := falsify.TokenizerRoundTrip(fz, tok, 1)
	return Gate{Name: GateTokenizer, Verdict: o.Verdict, Status: string(o.Verdict), Reason: o.Reason, Values: o.Values}, nil
}

// RefNumerics is falsify's refNumerics, for the tests.
var RefNumerics = falsify.RefNumerics
