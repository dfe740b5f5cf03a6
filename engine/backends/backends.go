// Package backends is where the engines become backends of engine/model's
// registry, by name: the program (cmd/apr) and the tests that open engines
// by name call Register once; no engine registers itself from an init().
package backends

import (
	"os"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/engine/ref"
)

// Register registers every engine this build links: "cpu", "ref" and
// "cuda" (which refuses, with the reason, on a machine without a driver or
// device). Calling it again does nothing.
func Register() {
	cpu.Register()
	ref.Register()
	cuda.Register()
}

// Main registers the engines and runs a package's tests (m is the
// *testing.M of its TestMain), exiting with their status: the one
// TestMain body of every package whose tests open engines by name.
func Main(m interface{ Run() int }) {
	Register()
	os.Exit(m.Run())
}

// Device reports whether the backend name copies the model's weights to a
// device (its engines are model.Uploaders, and F2 gates their generation):
// "cuda".
func Device(name string) bool { return name == cuda.Name }

// Warm starts the named device backend's set-up in the background (the
// CUDA driver's: cuda.Warm), for a command about to load a model on it;
// for other names it does nothing.
func Warm(name string) {
	if name == cuda.Name {
		cuda.Warm()
	}
}
