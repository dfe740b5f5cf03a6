package quant

import (
	"encoding/binary"
	"testing"
)

// TestPackedGridTables guards the transcription of ggml's packed grid tables:
// each has ggml's length, is strictly increasing (ggml lists them sorted), and
// uses only the codes its format allows (2-bit grids never use code 3; 3-bit
// grids fit in 12 bits).
func TestPackedGridTables(t *testing.T) {
	tests := []struct {
		name   string
		table  []uint16
		n      int
		bits   int
		maxMax uint16 // largest allowed value
	}{
		{"kgrid_2bit_256", kgrid2bit256[:], 256, 2, 0xaaaa},
		{"kgrid_2bit_512", kgrid2bit512[:], 512, 2, 0xaaaa},
		{"kgrid_2bit_1024", kgrid2bit1024[:], 1024, 2, 0xaaaa},
		{"kgrid_1bit_2048", kgrid1bit2048[:], 2048, 2, 0xaaaa},
		{"kgrid_256 (iq3)", kgrid3bit256[:], 256, 3, 0xfff},
		{"kgrid_512 (iq3)", kgrid3bit512[:], 512, 3, 0xfff},
	}
	for _, tc := range tests {
		if len(tc.table) != tc.n {
			t.Errorf("%s: %d entries, want %d", tc.name, len(tc.table), tc.n)
		}
		for i, v := range tc.table {
			if i > 0 && v <= tc.table[i-1] {
				t.Errorf("%s[%d] = %d is not above entry %d = %d", tc.name, i, v, i-1, tc.table[i-1])
			}
			if v > tc.maxMax {
				t.Errorf("%s[%d] = %d exceeds %d", tc.name, i, v, tc.maxMax)
			}
			if tc.bits == 2 {
				for k := 0; k < 8; k++ {
					if (v>>(2*k))&3 == 3 {
						t.Errorf("%s[%d] = %d uses code 3 at coordinate %d", tc.name, i, v, k)
					}
				}
			}
		}
	}
}

// TestExpandedGridsMatchGGMLCommon compares entries of the expanded grids with
// the uint64/uint32 values printed in ggml-common.h.
func TestExpandedGridsMatchGGMLCommon(t *testing.T) {
	u64 := func(g [8]uint8) uint64 { return binary.LittleEndian.Uint64(g[:]) }
	iq2xxs := map[int]uint64{
		0: 0x0808080808080808, 1: 0x080808080808082b, 2: 0x0808080808081919, 7: 0x08080808082b0808,
		16: 0x08080808192b1908, 17: 0x080808082b080808, 252: 0x2b2b082b08080808, 253: 0x2b2b190808192b08,
		254: 0x2b2b2b0819190808, 255: 0x2b2b2b1908081908,
	}
	for i, want := range iq2xxs {
		if got := u64(iq2xxsGrid[i]); got != want {
			t.Errorf("iq2xxs_grid[%d] = %#016x, want %#016x", i, got, want)
		}
	}
	iq2xs := map[int]uint64{
		0: 0x0808080808080808, 1: 0x080808080808082b, 3: 0x0808080808082b08, 7: 0x080808080819192b,
		8: 0x0808080808192b19, 12: 0x08080808082b2b08,
	}
	for i, want := range iq2xs {
		if got := u64(iq2xsGrid[i]); got != want {
			t.Errorf("iq2xs_grid[%d] = %#016x, want %#016x", i, got, want)
		}
	}
	// ksigns_iq2xs from ggml-common.h, first and last rows.
	ks := map[int]uint8{0: 0, 1: 129, 2: 130, 3: 3, 4: 132, 7: 135, 15: 15, 112: 240, 127: 255, 126: 126, 125: 125, 124: 252}
	for i, want := range ks {
		if got := ksignsIQ2XS[i]; got != want {
			t.Errorf("ksigns_iq2xs[%d] = %d, want %d", i, got, want)
		}
	}
	if iq1sGrid[0] != [8]int8{-1, -1, -1, -1, -1, -1, -1, -1} || iq1sGrid[1] != [8]int8{1, -1, -1, -1, -1, -1, -1, -1} {
		t.Errorf("iq1s_grid[0..1] = %v %v", iq1sGrid[0], iq1sGrid[1])
	}
	if iq3xxsGrid[0] != [4]uint8{4, 4, 4, 4} || iq3sGrid[0] != [4]uint8{1, 1, 1, 1} {
		t.Errorf("iq3xxs_grid[0] = %v, iq3s_grid[0] = %v", iq3xxsGrid[0], iq3sGrid[0])
	}
}
