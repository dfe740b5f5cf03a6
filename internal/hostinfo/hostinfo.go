// Package hostinfo describes the machine apr runs on (CPU model and the
// vector features engines care about, cores, memory, GPUs) for receipts.
//
// # Conventions
//
// A fact that could not be read is "unknown" (strings) or 0 with a note in
// Notes, never a guess. GPUs are listed only from what the kernel driver
// exposes (/proc/driver/nvidia); an empty list with a note means none was
// found, not that none exists.
package hostinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/cpu"
)

// Unknown is written wherever a fact could not be read.
const Unknown = "unknown"

// Host is one machine as apr saw it.
type Host struct {
	Hostname    string   `json:"hostname"`
	OS          string   `json:"os"`
	Arch        string   `json:"arch"`
	CPUModel    string   `json:"cpu_model"`
	CPUFeatures []string `json:"cpu_features"` // sorted, lower-case: avx2, fma, avx512f, asimd …
	Cores       int      `json:"cores"`        // logical CPUs usable by this process
	MemoryBytes uint64   `json:"memory_bytes"` // physical memory; 0 when unknown (see Notes)
	GPUs        []GPU    `json:"gpus"`
	Notes       []string `json:"notes,omitempty"` // what could not be read, and why
}

// GPU is one accelerator the driver reports.
type GPU struct {
	Vendor string `json:"vendor"`
	Model  string `json:"model"`
	BusID  string `json:"bus_id,omitempty"`
}

// Probe reads the current host. It does not fail: what it cannot read it
// reports as unknown with a note.
func Probe() Host {
	return probe("/")
}

// probe reads the host with root as the file-system root, so tests can
// plant /proc files.
func probe(root string) Host {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH, Cores: runtime.NumCPU(), GPUs: []GPU{},
		CPUModel: Unknown, Hostname: Unknown}
	if name, err := os.Hostname(); err == nil {
		h.Hostname = name
	} else {
		h.note("hostname: %v", err)
	}
	h.CPUFeatures = cpuFeatures()
	if m, err := cpuModel(filepath.Join(root, "proc/cpuinfo")); err != nil {
		h.note("cpu model: %v", err)
	} else {
		h.CPUModel = m
	}
	if mem, err := memTotal(filepath.Join(root, "proc/meminfo")); err != nil {
		h.note("memory: %v", err)
	} else {
		h.MemoryBytes = mem
	}
	gpus, err := nvidiaGPUs(filepath.Join(root, "proc/driver/nvidia/gpus"))
	switch {
	case err != nil:
		h.note("gpu: %v", err)
	case len(gpus) == 0:
		h.note("gpu: no NVIDIA driver GPU entries found under /proc/driver/nvidia/gpus")
	}
	h.GPUs = append(h.GPUs, gpus...)
	return h
}

func (h *Host) note(format string, args ...any) {
	h.Notes = append(h.Notes, fmt.Sprintf(format, args...))
}

func cpuModel(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	// x86 says "model name", arm64 often only "CPU implementer"/"CPU part";
	// some kernels say "Hardware" or "Model".
	for _, key := range []string{"model name", "Model", "Hardware", "cpu model"} {
		if v, ok := field(b, key); ok && v != "" {
			return v, nil
		}
	}
	if impl, ok := field(b, "CPU implementer"); ok {
		part, _ := field(b, "CPU part")
		return "implementer " + impl + " part " + part, nil
	}
	return "", fmt.Errorf("%s has no model name line", path)
}

// field returns the value of the first "key : value" line.
func field(b []byte, key string) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

func memTotal(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, ok := field(b, "MemTotal")
	if !ok {
		return 0, fmt.Errorf("%s has no MemTotal line", path)
	}
	num, unit, _ := strings.Cut(v, " ")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: MemTotal %q: %v", path, v, err)
	}
	switch strings.TrimSpace(unit) {
	case "kB":
		return n * 1024, nil
	case "":
		return n, nil
	}
	return 0, fmt.Errorf("%s: MemTotal %q: unknown unit", path, v)
}

func nvidiaGPUs(dir string) ([]GPU, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gpus []GPU
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "information"))
		if err != nil {
			return gpus, err
		}
		model, _ := field(b, "Model")
		if model == "" {
			model = Unknown
		}
		gpus = append(gpus, GPU{Vendor: "nvidia", Model: model, BusID: e.Name()})
	}
	return gpus, nil
}

func cpuFeatures() []string {
	var fs []string
	add := func(name string, has bool) {
		if has {
			fs = append(fs, name)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "386":
		x := &cpu.X86
		add("sse3", x.HasSSE3)
		add("ssse3", x.HasSSSE3)
		add("sse4.1", x.HasSSE41)
		add("sse4.2", x.HasSSE42)
		add("popcnt", x.HasPOPCNT)
		add("avx", x.HasAVX)
		add("avx2", x.HasAVX2)
		add("fma", x.HasFMA)
		add("f16c", x.HasF16C)
		add("bmi2", x.HasBMI2)
		add("avxvnni", x.HasAVXVNNI)
		add("avx512f", x.HasAVX512F)
		add("avx512bw", x.HasAVX512BW)
		add("avx512vl", x.HasAVX512VL)
		add("avx512dq", x.HasAVX512DQ)
		add("avx512vnni", x.HasAVX512VNNI)
		add("avx512vbmi", x.HasAVX512VBMI)
		add("avx512bf16", x.HasAVX512BF16)
		add("amx-tile", x.HasAMXTile)
		add("amx-int8", x.HasAMXInt8)
		add("amx-bf16", x.HasAMXBF16)
	case "arm64":
		a := &cpu.ARM64
		add("asimd", a.HasASIMD)
		add("asimdhp", a.HasASIMDHP)
		add("asimddp", a.HasASIMDDP)
		add("fphp", a.HasFPHP)
		add("i8mm", a.HasI8MM)
		add("sve", a.HasSVE)
		add("sve2", a.HasSVE2)
	}
	slices.Sort(fs)
	if fs == nil {
		fs = []string{}
	}
	return fs
}
