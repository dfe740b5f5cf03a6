package kern

// StreamSum returns the wrapping sum of b read as little-endian uint64
// words (len(b) must be a multiple of 64): a streaming read used to measure
// the memory bandwidth that decode is reported against. On amd64 it is
// AVX2 loads (four 32-byte loads per iteration); elsewhere plain Go.
func StreamSum(b []byte) uint64 {
	if len(b)%64 != 0 {
		panic("kern: StreamSum: length is not a multiple of 64")
	}
	return streamSum(b)
}

func streamSumGo(b []byte) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+32 <= len(b); i += 32 {
		s0 += le64(b[i:])
		s1 += le64(b[i+8:])
		s2 += le64(b[i+16:])
		s3 += le64(b[i+24:])
	}
	return s0 + s1 + s2 + s3
}

func le64(b []byte) uint64 { _ = b[7]; return uint64(le32(b)) | uint64(le32(b[4:]))<<32 }
