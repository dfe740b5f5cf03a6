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
	out := filepath.Join(t.TempDir(), "dot_t8rk_amd64.s")
	checkGenerated(t, "dot_t8rk_amd64.s", out, func(py string) *exec.Cmd {
		return exec.Command(py, filepath.Join("gen", "t8rk.py"), out)
	})
}

// TestR16Generated: gen/r16.py (which writes to stdout) reproduces the
// committed r16_amd64.s byte for byte.
func TestR16Generated(t *testing.T) { checkStdoutGenerated(t, "r16.py", "r16_amd64.s") }

// TestR16AVX2Generated: gen/r16avx2.py reproduces the committed
// r16avx2_amd64.s byte for byte.
func TestR16AVX2Generated(t *testing.T) { checkStdoutGenerated(t, "r16avx2.py", "r16avx2_amd64.s") }

// checkStdoutGenerated is checkGenerated for a generator gen/script that
// writes the file name to its stdout.
func checkStdoutGenerated(t *testing.T, script, name string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	checkGenerated(t, name, out, func(py string) *exec.Cmd {
		cmd := exec.Command(py, filepath.Join("gen", script))
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cmd.Stdout = f
		return cmd
	})
}

// checkGenerated runs the generator command gen makes (given python3's path)
// and fails at the first line where its output, the file out, differs from
// the committed file name.
func checkGenerated(t *testing.T, name, out string, gen func(py string) *exec.Cmd) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("SKIP (not checked): python3 is not on PATH, so %s cannot be proven to be its generator's output", name)
	}
	var stderr bytes.Buffer
	cmd := gen(py)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("generating %s: %v\n%s", name, err, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
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
			t.Fatalf("%s is not its generator's output (run go generate in engine/cpu/internal/kern); first difference at line %d:\n committed: %q\n generated: %q", name, i+1, w, g)
		}
	}
}

// TestR16FGenerated: gen/r16f.py reproduces the committed r16f_amd64.s byte
// for byte.
func TestR16FGenerated(t *testing.T) { checkStdoutGenerated(t, "r16f.py", "r16f_amd64.s") }
