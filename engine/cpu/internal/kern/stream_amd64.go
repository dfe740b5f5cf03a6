//go:build amd64 && !noasm

package kern

// streamSumAVX2 sums b (len a multiple of 128 bytes or not: the tail below
// 128 is summed in Go) as uint64 lanes with four independent accumulators.
//
//go:noescape
func streamSumAVX2(b []byte) uint64

func streamSum(b []byte) uint64 {
	if !cpuHas(ISAAVX2) {
		return streamSumGo(b)
	}
	n := len(b) &^ 127
	return streamSumAVX2(b[:n]) + streamSumGo(b[n:])
}
