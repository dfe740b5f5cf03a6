package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aprqa/apr/internal/atomicfile"
)

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()

	p := filepath.Join(dir, "new")
	if err := atomicfile.WriteFile(p, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
		t.Errorf("WriteFile(new) mode %v, want 0644 (umask 022)", st.Mode().Perm())
	}

	// A replaced file keeps its mode; a link to it is kept and followed.
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("new", link); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(link, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "b" {
		t.Errorf("write through a link: target holds %q, want %q", b, "b")
	}
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("write through a link replaced the link")
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("replaced file mode %v, want its old 0600", st.Mode().Perm())
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{fifo, dir, "/dev/null"} {
		err := atomicfile.WriteFile(bad, []byte("x"))
		if !errors.Is(err, atomicfile.ErrNotRegular) {
			t.Errorf("WriteFile(%s) = %v, want ErrNotRegular", bad, err)
		}
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("/dev/null is no longer a character device: %v %v", st, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "nodir", "x"), nil); err == nil {
		t.Errorf("WriteFile into a missing directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "new" && e.Name() != "link" && e.Name() != "fifo" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
