package qa

import (
	"context"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/falsify"
)

// WithRouter replaces how the parity gate traces the reference's router.
func WithRouter(o *Options, fn falsify.RouterFunc) { o.h().router = fn }

// WithLogits replaces how the gates evaluate logits (traced or not).
func WithLogits(o *Options, fn func(context.Context, generate.LogitsOptions) (generate.LogitsResult, error)) {
	o.h().logits = fn
}
