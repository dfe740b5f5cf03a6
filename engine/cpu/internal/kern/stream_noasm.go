//go:build !amd64 || noasm

package kern

func streamSum(b []byte) uint64 { return streamSumGo(b) }
