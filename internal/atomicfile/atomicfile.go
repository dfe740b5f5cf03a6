// Package atomicfile writes a file so that a reader, or a run killed half-way,
// sees either the old file or the whole new one: into a temporary file in the
// same directory, renamed over the path. It writes only over regular files
// (or new paths): renaming a file over a device node, a FIFO, a socket or a
// directory would replace the node instead of writing to it, so those are
// refused by name. A symlink to a regular file is followed: the file it
// points at is replaced and the link is kept. New files get mode 0644 less
// the umask (the usual mode of a created file, not CreateTemp's 0600); a
// replaced file keeps its mode.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/aprqa/apr/internal/regfile"
)

// ErrNotRegular is returned for a path that exists and is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Write writes path through fn. With durable, the data is fsynced before the
// rename and the directory after it, so a machine crash cannot leave a torn
// file either.
func Write(path string, durable bool, fn func(f *os.File) error) (err error) {
	target, mode, err := Target(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(target)
	var tmp *os.File
	for range 100 {
		name := filepath.Join(dir, "."+filepath.Base(target)+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		// O_EXCL with 0644: the kernel applies the umask, as for any
		// created file.
		tmp, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if err := fn(tmp); err != nil {
		return err
	}
	if mode != 0 {
		if err := tmp.Chmod(mode); err != nil {
			return err
		}
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, target); err != nil {
		return err
	}
	ok = true
	if durable {
		if d, err := os.Open(dir); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}

// WriteFile writes data to path atomically (durable).
func WriteFile(path string, data []byte) error {
	return Write(path, true, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// Target returns the file an atomic write of path replaces: path itself, or
// the regular file a symlink at path resolves to; and the mode to keep (0
// for a new file). A path that exists and is not a regular file is refused
// with an error naming what it is.
func Target(path string) (string, fs.FileMode, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, lerr := os.Lstat(path); lerr == nil {
			return "", 0, fmt.Errorf("%s: a dangling symbolic link: will not write through it", path)
		}
		if dst, err := os.Stat(filepath.Dir(path)); err != nil {
			return "", 0, fmt.Errorf("%s: the directory %s: %w", path, filepath.Dir(path), unwrap(err))
		} else if !dst.IsDir() {
			return "", 0, fmt.Errorf("%s: %s is not a directory", path, filepath.Dir(path))
		}
		return path, 0, nil
	case err != nil:
		return "", 0, err
	case !st.Mode().IsRegular():
		return "", 0, fmt.Errorf("%s: %w (%s): apr writes only new files or over regular files", path, ErrNotRegular, regfile.Kind(st.Mode()))
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", 0, err
	}
	return target, st.Mode().Perm(), nil
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
