//go:build linux

package cpu

import (
	"fmt"
	"syscall"
	"unsafe"
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
