//go:build amd64

package kern

import "golang.org/x/sys/cpu"

func cpuHas(isa ISA) bool {
	x := &cpu.X86
	switch isa {
	case ISAGo:
		return true
	case ISAAVX2, ISAAVX2R16:
		return x.HasAVX2 && x.HasFMA && x.HasF16C
	case ISAAVX512, ISAAVX512R16:
		return cpuHas(ISAAVX2) && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL
	case ISAAVX512BF16:
		return cpuHas(ISAAVX512) && x.HasAVX512BF16
	case ISAAVX512VNNI, ISAAVX512VNNI16:
		return cpuHas(ISAAVX512) && x.HasAVX512VNNI
	}
	return false
}
