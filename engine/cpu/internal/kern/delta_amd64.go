//go:build amd64 && !noasm

package kern

// deltaRowAVX2 is deltaRowGo on len(row)−len(row)%8 values in AVX2 (VMULPS
// and VADDPS, never FMA), with the tail and the reductions in the same
// order; n8 = len(row)&^7 values go through the vector loops.
//
//go:noescape
func deltaRowAVX2(row, k, q []float32, decay, v, beta float32) float32

func init() {
	if cpuHas(ISAAVX2) {
		deltaRow = deltaRowAVX2
	}
}
