package kern_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestT8RKGenerated: running gen/t8rk.py (as go generate does) reproduces the
// committed dot_t8rk_amd64.s byte for byte, so the file is never edited by
// hand apart from its generator. Without python3 the check cannot run: it is
// skipped by name, never passed.
func TestT8RKGenerated(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP (not checked): python3 is not on PATH, so gen/t8rk.py cannot be run to prove dot_t8rk_amd64.s is its output")
	}
	out := filepath.Join(t.TempDir(), "dot_t8rk_amd64.s")
	cmd := exec.Command(py, filepath.Join("gen", "t8rk.py"), out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 gen/t8rk.py: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("dot_t8rk_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w []byte
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if !bytes.Equal(g, w) {
				t.Fatalf("dot_t8rk_amd64.s is not gen/t8rk.py's output (run go generate in engine/cpu/internal/kern); first difference at line %d:\n committed: %q\n generated: %q", i+1, w, g)
			}
		}
	}
}
