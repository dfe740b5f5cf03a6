package synth_test

import (
	"os"
	"testing"

	"github.com/aprqa/apr/engine/backends"
)

// TestMain registers the engines as backends by name (engine/backends), as
// the program does, before the tests open them.
func TestMain(m *testing.M) {
	backends.Register()
	os.Exit(m.Run())
}
