package cli

import (
	"fmt"
	"os"
	"slices"

	"github.com/aprqa/apr/engine/model"
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
		return fmt.Errorf("%s: %s, not a regular file: a model is read from a regular file", path, fileKind(st.Mode()))
	}
	return nil
}

// fileKind names a non-regular file's type.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "an irregular file"
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
