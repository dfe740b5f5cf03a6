package cli

// The engines the CLI can run. Each registers itself as a backend by name
// (model.RegisterBackend); a name that is not registered is refused.
import (
	_ "github.com/aprqa/apr/engine/cpu"
	_ "github.com/aprqa/apr/engine/ref"
)
