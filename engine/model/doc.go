// Package model turns a GGUF file into a model description every engine
// shares: the architecture's hyper-parameters read from its <arch>.* keys and
// the tensors bound to their roles. It also defines the Engine and Session
// interfaces that engines implement, the trace hook they report through, and
// the registry through which backends are found by name. It holds no math:
// each engine computes on its own.
//
// # Conventions
//
// Load(f) refuses (refuse.Error, By "model"), by name, an unknown
// architecture, a required key that is absent or of the wrong type, an absurd
// value, a tensor whose shape contradicts the header, a missing tensor and a
// tensor no role claims. Keys llama.cpp treats as optional take llama.cpp's
// default and are listed in Spec.Defaults; nothing is guessed from a file
// name. Architectures register with RegisterArch; backends with
// RegisterBackend and are opened with OpenBackend. Tensor views point into
// the mapped file and are never copied.
package model
