package hostinfo

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func plant(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProbePlanted(t *testing.T) {
	type facts struct {
		Model string
		Mem   uint64
		GPUs  []GPU
		Notes int
	}
	tests := []struct {
		name  string
		files map[string]string
		want  facts
	}{
		{"x86 with one gpu", map[string]string{
			"proc/cpuinfo": "processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t: fpu\n",
			"proc/meminfo": "MemTotal:       1024 kB\nMemFree: 1 kB\n",
			"proc/driver/nvidia/gpus/0000:01:00.0/information": "Model: \t\t NVIDIA H200\nIRQ: 1\n",
		}, facts{"Test CPU 9000", 1 << 20, []GPU{{"nvidia", "NVIDIA H200", "0000:01:00.0"}}, 0}},
		{"arm without model name, no gpu", map[string]string{
			"proc/cpuinfo": "processor : 0\nCPU implementer : 0x41\nCPU part : 0xd0c\n",
			"proc/meminfo": "MemTotal: 2048 kB\n",
		}, facts{"implementer 0x41 part 0xd0c", 2 << 20, []GPU{}, 1}},
		{"nothing readable", map[string]string{}, facts{Unknown, 0, []GPU{}, 3}},
		{"bad meminfo", map[string]string{
			"proc/cpuinfo": "model name : X\n",
			"proc/meminfo": "MemTotal: lots\n",
		}, facts{"X", 0, []GPU{}, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, c := range tc.files {
				plant(t, root, rel, c)
			}
			h := probe(root)
			got := facts{h.CPUModel, h.MemoryBytes, h.GPUs, len(h.Notes)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("probe(%s) mismatch (-want +got):\n%s\nnotes: %q", tc.name, diff, h.Notes)
			}
			if h.Cores != runtime.NumCPU() || h.OS != runtime.GOOS || h.Arch != runtime.GOARCH {
				t.Errorf("probe: cores/os/arch = %d/%s/%s", h.Cores, h.OS, h.Arch)
			}
		})
	}
}

func TestProbeThisMachine(t *testing.T) {
	h := Probe()
	if runtime.GOOS == "linux" && (h.CPUModel == Unknown || h.MemoryBytes == 0) {
		t.Errorf("Probe() on linux: cpu %q, memory %d; notes %q", h.CPUModel, h.MemoryBytes, h.Notes)
	}
	if runtime.GOARCH == "amd64" && len(h.CPUFeatures) == 0 {
		t.Errorf("Probe() on amd64 found no CPU features (sse3 at least is expected)")
	}
}
