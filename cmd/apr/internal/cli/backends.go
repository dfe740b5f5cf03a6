package cli

// The engines the CLI can run. Each registers itself as a backend by name
// (model.RegisterBackend); a name that is not registered is refused, and a
// registered backend that cannot run here (cuda without a driver or
// device) refuses with the reason when opened.
import (
	_ "github.com/aprqa/apr/engine/cpu"
	_ "github.com/aprqa/apr/engine/cuda"
	_ "github.com/aprqa/apr/engine/ref"
)
