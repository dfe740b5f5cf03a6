// Package model turns a GGUF file into a model description every engine
// shares: the architecture's hyper-parameters read from its <arch>.* keys and
// the tensors bound to their roles. It also defines the Engine and Session
// interfaces that engines implement and the trace hook they report through.
// It holds no math: each engine computes on its own.
package model
