// Package goldentest is the golden-file helper for tests, in the manner of
// go/printer's tests: compare output with a committed golden file, or with
// -update rewrite the golden file from the output. It never overwrites an
// input, and it writes atomically.
//
// Only tests import it: it defines the -update flag of the test binary.
package goldentest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output instead of comparing")

// Updating reports whether the test binary runs with -update.
func Updating() bool { return *update }

// Check compares got with the golden file at path. With -update it first
// writes got to path (atomically, only when the bytes differ) and then reads
// the file back and compares, so a regeneration that is not reproducible
// shows up as a failure. It refuses to write path when path is one of
// inputs (the files the output was made from) or read-only, so a golden can
// never replace its own input.
func Check(tb testing.TB, path string, got []byte, inputs ...string) {
	tb.Helper()
	if *update {
		if err := write(path, got, inputs); err != nil {
			tb.Fatalf("goldentest: %v", err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("goldentest: %v (run the test with -update to create it, then review the file)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs from the output (-golden +got):\n%s\nrun with -update to accept the new output, and review the diff", path, Diff(want, got))
	}
}

// write writes got to path unless path is an input; unchanged bytes are not
// rewritten.
func write(path string, got []byte, inputs []string) error {
	abs, err := canonical(path)
	if err != nil {
		return err
	}
	for _, in := range inputs {
		ia, err := canonical(in)
		if err != nil {
			return err
		}
		if ia == abs {
			return fmt.Errorf("refusing to update %s: it is an input of the output it would hold", path)
		}
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, got) {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o200 == 0 {
		return fmt.Errorf("refusing to update %s: the file is read-only", path)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(got); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// canonical returns the absolute path with symbolic links resolved as far
// as the path exists.
func canonical(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	dir, base := filepath.Split(abs)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(r, base), nil
	}
	return abs, nil
}

// Diff returns a line diff of want and got: the first differing line with
// three lines of context on each side, "-" for want and "+" for got.
func Diff(want, got []byte) string {
	wl := strings.Split(string(want), "\n")
	gl := strings.Split(string(got), "\n")
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	// Common suffix, not reaching into the common prefix.
	wj, gj := len(wl), len(gl)
	for wj > i && gj > i && wl[wj-1] == gl[gj-1] {
		wj--
		gj--
	}
	var b strings.Builder
	from := max(0, i-3)
	fmt.Fprintf(&b, "@@ line %d @@\n", i+1)
	for k := from; k < i; k++ {
		fmt.Fprintf(&b, "  %s\n", wl[k])
	}
	const maxLines = 40
	for k := i; k < wj && k < i+maxLines; k++ {
		fmt.Fprintf(&b, "- %s\n", wl[k])
	}
	for k := i; k < gj && k < i+maxLines; k++ {
		fmt.Fprintf(&b, "+ %s\n", gl[k])
	}
	for k := wj; k < len(wl) && k < wj+3; k++ {
		fmt.Fprintf(&b, "  %s\n", wl[k])
	}
	return b.String()
}
