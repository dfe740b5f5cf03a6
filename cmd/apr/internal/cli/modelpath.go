package cli

import (
	"fmt"
	"os"
	"slices"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/regfile"
	"github.com/aprqa/apr/ladder"
)

// checkModelPath refuses, before anything opens it, a model path that is not
// a regular file (or a link to one): opening a FIFO for reading blocks until
// a writer comes, and a directory or device is no model. The error names
// the path and what it is.
func checkModelPath(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %s, not a regular file: a model is read from a regular file", path, regfile.Kind(st.Mode()))
	}
	return nil
}

// knownBackends are the backend names apr knows: those this binary links
// and those the ladder's universe names (cuda is refused by name where it
// is not linked). Any other name is a typo: bad usage.
func knownBackends() []string {
	out := slices.Clone(model.Backends())
	for _, b := range ladder.DefaultBackends {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// openModelCheck checks that path is a regular file that the GGUF reader
// opens (header, metadata and tensor table), then closes it: for a verb that
// hands the path to others, a broken file is refused up front with the
// reader's error (file, offset, problem).
func openModelCheck(path string) error {
	if err := checkModelPath(path); err != nil {
		return err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}
