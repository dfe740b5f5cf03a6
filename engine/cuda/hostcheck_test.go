package cuda

import (
	"bytes"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestDecodersOnHost compiles the device decoders (kernels/quant.cuh) for
// the CPU with the host C++ compiler (kernels/hostcheck.cpp) and holds every
// format's deq to ggml's own to_float on the fixture blocks, bit for bit: the
// formulas the GPU runs are checked on machines without one.
func TestDecodersOnHost(t *testing.T) {
	cxx, err := exec.LookPath("c++")
	if err != nil {
		t.Skipf("SKIP (not a pass): no host C++ compiler (c++) to build kernels/hostcheck.cpp: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "hostcheck")
	if out, err := exec.Command(cxx, "-O1", "-std=c++17", "-o", bin, "kernels/hostcheck.cpp").CombinedOutput(); err != nil {
		t.Fatalf("building kernels/hostcheck.cpp: %v\n%s", err, out)
	}
	checked := 0
	for _, fx := range dequantFixtures(t) {
		t.Run(fx.typ.String(), func(t *testing.T) {
			rows, cols := fx.q.Rows(), fx.q.Cols()
			cmd := exec.Command(bin, itoa(int(fx.typ)), itoa(rows), itoa(cols))
			cmd.Stdin = bytes.NewReader(fx.q.Data)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("hostcheck %s: %v", fx.typ, err)
			}
			got, want := f32s(out), f32s(fx.deq.Data)
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			bad := 0
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					if bad < 3 {
						t.Errorf("value %d (row %d, col %d): device decoder %g, ggml %g", i, i/cols, i%cols, got[i], want[i])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ from ggml's to_float", bad, len(got))
			}
			checked++
		})
	}
	t.Logf("%d formats' device decoders equal ggml's to_float bit for bit", checked)
}

func itoa(i int) string { return strconv.Itoa(i) }
