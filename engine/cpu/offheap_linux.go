//go:build linux

package cpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapF32 returns n zeroed float32 values outside the Go heap: an anonymous
// private mapping, whose pages become resident only when first written (a
// KV cache reserved for its whole context costs memory as positions
// arrive) and which the garbage collector neither scans nor counts towards
// its heap goal. free releases it; the values must not be used afterwards.
func mapF32(n int) (v []float32, free func(), err error) {
	if n == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(-1, 0, 4*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, nil, fmt.Errorf("cpu: mapping %d bytes: %w", 4*n, err)
	}
	v = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
	return v, func() { syscall.Munmap(b) }, nil
}

// mapBytes is mapF32 for n bytes, asking for huge pages when huge.
func mapBytes(n int, huge bool) (b []byte, free func(), err error) {
	if n == 0 {
		return nil, func() {}, nil
	}
	b, err = syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, nil, fmt.Errorf("cpu: mapping %d bytes: %w", n, err)
	}
	// Huge pages where the kernel gives them: a few hundred page faults
	// instead of one per 4 KiB while the copy is written, and fewer TLB
	// misses while it streams. Without them (an error) the mapping works
	// the same. Where the kernel compacts memory for them at the fault
	// (transparent_hugepage/defrag "madvise", this machine's), the stall
	// varies from run to run (see packedFloat).
	if huge {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
	return b, func() { syscall.Munmap(b) }, nil
}

// sharedRange remembers the shared mapping dropShared last found, so that
// the matrices of one file read /proc/self/maps once, not once each. A
// backend holds one: the file's mapping outlives it.
type sharedRange struct {
	mu     sync.Mutex
	lo, hi uintptr
}

// dropShared takes the whole pages inside b out of this process's
// resident set (MADV_DONTNEED) when b lies in one shared mapping (a file
// mapped by gguf.Open): their contents stay in the file and the page cache,
// and are read again if touched. Any other memory is left alone: on a
// private mapping MADV_DONTNEED would discard the contents. Errors (no
// /proc) leave the pages resident.
func (s *sharedRange) dropShared(b []byte) {
	const page = 4096
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p + page - 1) &^ (page - 1)
	hi := (p + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return
	}
	s.mu.Lock()
	known := s.lo <= lo && hi <= s.hi
	if !known {
		start, end, ok := sharedMapping(lo)
		if !ok || hi > end {
			s.mu.Unlock()
			return
		}
		s.lo, s.hi = start, end
	}
	s.mu.Unlock()
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), lo-p)), hi-lo), unix.MADV_DONTNEED)
}

// sharedMapping returns the mapping of this process holding address lo,
// by /proc/self/maps, when its permissions say shared ("r--s").
func sharedMapping(lo uintptr) (start, end uintptr, ok bool) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || len(f[1]) < 4 {
			continue
		}
		a, b, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		s, err1 := strconv.ParseUint(a, 16, 64)
		e, err2 := strconv.ParseUint(b, 16, 64)
		if err1 != nil || err2 != nil || uint64(lo) < s || uint64(lo) >= e {
			continue
		}
		return uintptr(s), uintptr(e), f[1][3] == 's'
	}
	return 0, 0, false
}
