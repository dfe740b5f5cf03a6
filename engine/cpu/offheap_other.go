//go:build !linux

package cpu

// mapF32 returns n zeroed float32 values; off Linux they are an ordinary
// Go allocation and free does nothing.
func mapF32(n int) (v []float32, free func(), err error) {
	return make([]float32, n), func() {}, nil
}

// mapBytes is mapF32 for n bytes.
func mapBytes(n int, huge bool) (b []byte, free func(), err error) {
	return make([]byte, n), func() {}, nil
}

// sharedRange is Linux's memory of the file's mapping (nothing here).
type sharedRange struct{}

// dropShared does nothing off Linux.
func (*sharedRange) dropShared(b []byte) {}
