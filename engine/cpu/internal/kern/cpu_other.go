//go:build !amd64

package kern

func cpuHas(isa ISA) bool { return isa == ISAGo }
