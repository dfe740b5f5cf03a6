//go:build amd64 && !noasm

package kern

//go:noescape
func siluGroupsAVX2(dst, x []float32)

//go:noescape
func swigluGroupsAVX2(dst, g, u []float32)

//go:noescape
func expSumGroupsAVX2(dst, x []float32, mx float32, valid int, sum float64) float64

func init() {
	if cpuHas(ISAAVX2) {
		siluGroups = siluGroupsAVX2
		swigluGroups = swigluGroupsAVX2
		expSumGroups = expSumGroupsAVX2
	}
}
