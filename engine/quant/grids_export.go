package quant

// IQGridSet holds the expanded i-quant lattice grids and the IQ2 sign table,
// for kernels that compute on quantized blocks directly instead of
// dequantizing (engine/cpu/internal/kern), so that the grids have one source.
//
// This file was added by the CPU-kernel engineer as an additive accessor; the
// tables themselves are grids.go's.
type IQGridSet struct {
	IQ2XXS [256][8]uint8
	IQ2XS  [512][8]uint8
	IQ2S   [1024][8]uint8
	IQ1S   [2048][8]int8
	IQ3XXS [256][4]uint8
	IQ3S   [512][4]uint8
	KSigns [128]uint8 // ksigns_iq2xs: 7 sign bits and their parity in bit 7
}

// IQGrids returns a fresh copy of the grids; callers may keep and reshape it.
func IQGrids() *IQGridSet {
	return &IQGridSet{
		IQ2XXS: iq2xxsGrid, IQ2XS: iq2xsGrid, IQ2S: iq2sGrid, IQ1S: iq1sGrid,
		IQ3XXS: iq3xxsGrid, IQ3S: iq3sGrid, KSigns: ksignsIQ2XS,
	}
}
