package qa

import "github.com/aprqa/apr/falsify"

// WithRouter replaces how the parity gate traces the reference's router.
func WithRouter(o *Options, fn falsify.RouterFunc) { o.h().router = fn }
