package cuda_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cuda/internal/cu"
)

// envEmuProbe makes TestEmuProbe plant a bad access (see emuProbes); only
// TestEmulated sets it, on the emulator.
const envEmuProbe = "APR_CUDA_EMU_PROBE"

// emuProbes are the emulator's own checks: a kernel that writes one value
// past the end of a buffer, or into a freed one, is stopped and named (the
// guard pages that caught issue 11's store into a KV cache at address 0);
// with APR_CUDA_EMU_FAULT=sticky the fault is the GPU's sticky
// CUDA_ERROR_ILLEGAL_ADDRESS at the next call instead.
var emuProbes = []struct {
	probe, fault string
	wantFail     bool
	want         []string
}{
	{"past-end", "", true, []string{"emu: illegal address", "in k_zero", "byte 4096 of the allocation of 4096 bytes", "0 past its end"}},
	{"freed", "", true, []string{"emu: illegal address", "in k_zero", "of a FREED allocation of 4096 bytes"}},
	{"past-end", "sticky", false, []string{"emu: illegal address", "in k_zero", "CUDA_ERROR_ILLEGAL_ADDRESS (700)"}},
}

// runEmuProbes runs TestEmuProbe once per probe with the emulator's
// environment env (from TestEmulated).
func runEmuProbes(t *testing.T, env []string) {
	for _, p := range emuProbes {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestEmuProbe$", "-test.v")
		cmd.Env = append(append([]string(nil), env...), envEmuProbe+"="+p.probe, "APR_CUDA_EMU_FAULT="+p.fault)
		out, err := cmd.CombinedOutput()
		if (err != nil) != p.wantFail {
			t.Errorf("probe %s (fault mode %q): exit %v, want failure %v\n%.2000s", p.probe, p.fault, err, p.wantFail, out)
		}
		for _, w := range p.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("probe %s (fault mode %q): the output lacks %q:\n%.2000s", p.probe, p.fault, w, out)
			}
		}
	}
}

// TestEmuProbe plants one bad access on the emulator (never on a device:
// it refuses one whose name is not the emulator's).
func TestEmuProbe(t *testing.T) {
	probe := os.Getenv(envEmuProbe)
	if probe == "" {
		t.Skip("SKIP (not a pass): run by TestEmulated only")
	}
	d, err := cu.Load()
	if err != nil {
		t.Fatal(err)
	}
	var f cu.Func
	var p cu.Ptr
	err = d.Do(func() error {
		in, err := d.Info()
		if err != nil {
			return err
		}
		if !strings.Contains(in.Name, "emulator") {
			t.Fatalf("%s is not the emulator: no bad access is planted on a device", in.Name)
		}
		mod, err := d.LoadModule([]byte("// the emulator does not read it"))
		if err != nil {
			return err
		}
		if f, err = d.Function(mod, "k_zero"); err != nil {
			return err
		}
		if p, err = d.Alloc(4096); err != nil {
			return err
		}
		if probe == "freed" {
			return d.Free(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// k_zero(d, ds, rows, cols) over 1 row of 1025 floats: the last one is
	// the 4 bytes after a 4096-byte buffer.
	err = d.Do(func() error {
		if err := d.Launch(f, cu.Dim{X: 5}, cu.Dim{X: 256}, 0, 0, p, 1025, 1, 1025); err != nil {
			return err
		}
		return d.Sync()
	})
	t.Logf("after the bad launch: %v", err)
	if err == nil {
		t.Fatal("the bad access went unnoticed")
	}
}
