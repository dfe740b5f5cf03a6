package golden_test

import (
	"testing"

	"github.com/aprqa/apr/engine/backends"
)

// TestMain registers the engines as backends by name, as the program does.
func TestMain(m *testing.M) { backends.Main(m) }
