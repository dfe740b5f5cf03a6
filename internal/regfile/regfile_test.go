package regfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aprqa/apr/internal/regfile"
)

func TestOpenRefusesWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := regfile.Open(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, regfile.ErrNotRegular) {
			t.Errorf("Open(FIFO) = %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open(FIFO) blocked")
	}
	if _, err := regfile.Open(dir); !errors.Is(err, regfile.ErrNotRegular) {
		t.Errorf("Open(directory) = %v, want ErrNotRegular", err)
	}
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, n, err := regfile.SHA256(p)
	if err != nil || n != 3 || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("SHA256(abc) = %s, %d, %v", sum, n, err)
	}
}
