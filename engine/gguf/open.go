package gguf

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/aprqa/apr/internal/regfile"
)

// Open maps the file read-only and parses its header. Only the pages that
// hold the header are read; tensor data is touched when Data's slices are.
// The caller must Close the File.
func Open(path string) (*File, error) {
	// regfile.Open never blocks: apr inspect on a FIFO hung forever when
	// the type was checked only after a blocking open.
	fd, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if size == 0 {
		return nil, &FormatError{File: path, Offset: 0, Field: "magic", Err: ErrTruncated, Detail: "file is empty"}
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("gguf: %s: %d bytes do not fit the address space", path, size)
	}
	b, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: mmap: %w", path, err)
	}
	f, err := Parse(path, b)
	if err != nil {
		_ = unix.Munmap(b)
		return nil, err
	}
	f.closer = func() error { return unix.Munmap(b) }
	dropHeader(b, f.DataOffset)
	return f, nil
}

// dropHeader takes the whole pages of the header (metadata and tensor
// infos, before the data section at off) out of the resident set: Parse
// copied everything it keeps, so they would only stay as a second copy (a
// 248k-token vocabulary and its merges: ~8 MiB). The mapping is shared and
// read-only, so a later read of them faults the file's bytes back in.
// Errors leave the pages resident.
func dropHeader(b []byte, off int64) {
	n := off &^ int64(unix.Getpagesize()-1)
	if n <= 0 || n > int64(len(b)) {
		return
	}
	_ = unix.Madvise(b[:n], unix.MADV_DONTNEED)
}
