package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/internal/hostinfo"
)

func init() { register(34, newDevicesCmd) }

// DevicesReport is what `apr devices --json` prints: the CPU the cpu engine
// runs on, and the CUDA device or the exact reason there is none.
type DevicesReport struct {
	CPU  DeviceCPU  `json:"cpu"`
	CUDA DeviceCUDA `json:"cuda"`
}

// DeviceCPU is the host's processor as the CPU kernels see it.
type DeviceCPU struct {
	Model    string   `json:"model"`
	Cores    int      `json:"cores"`
	Features []string `json:"features"` // the ISA features the kernels choose between (avx2, fma, avx512*, …)
	Memory   uint64   `json:"memory_bytes"`
}

// DeviceCUDA is the CUDA backend's view: available with the device's
// description, or unavailable with the reason.
type DeviceCUDA struct {
	Available    bool   `json:"available"`
	Reason       string `json:"reason,omitempty"` // why not: no libcuda.so.1, cuInit's error, no device, no kernels
	Driver       string `json:"driver_version,omitempty"`
	Name         string `json:"name,omitempty"`
	Capability   string `json:"compute_capability,omitempty"`
	SMs          int    `json:"multiprocessors,omitempty"`
	TotalBytes   uint64 `json:"total_memory_bytes,omitempty"`
	FreeBytes    uint64 `json:"free_memory_bytes,omitempty"`
	KernelModule string `json:"kernel_module_sha256,omitempty"` // the kernel image (fatbin or PTX) this build loads
	// Overrides are the environment variables that change what the CUDA
	// engine runs (APR_LIBCUDA, APR_CUDA_PTX, APR_CUDA_PLANT) or how
	// (APR_CUDA_GRAPHS, APR_CUDA_FUSE, APR_CUDA_EARLY, APR_CUDA_CHUNK, APR_CUDA_ATTG, APR_CUDA_PROFILE), as NAME=VALUE.
	Overrides []string `json:"overrides"`
}

func newDevicesCmd(env *Env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "devices [--json]",
		Short: "Show the CPU and the CUDA device apr can run on, or why CUDA is unavailable",
		Long: `devices shows what the engines can run on: the CPU (model, cores, the
instruction-set features the CPU kernels choose between, memory) and CUDA —
the driver version, the device's name, compute capability, multiprocessors,
total and free memory and the kernel module this build loads — or the exact
reason CUDA is unavailable (libcuda.so.1 missing, cuInit's error by name, no
device, kernels not built). It exits 0 either way: it reports, it does not
gate; --backend cuda on the other verbs refuses with the same reason.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r := Devices()
			if asJSON {
				return writeJSON(env.Stdout, r)
			}
			printDevices(env.Stderr, r)
			return nil
		},
	}
	jsonFlag(c, &asJSON)
	return c
}

// Devices probes the CPU and CUDA.
func Devices() DevicesReport {
	h := hostinfo.Probe()
	r := DevicesReport{CPU: DeviceCPU{Model: h.CPUModel, Cores: h.Cores, Features: h.CPUFeatures, Memory: h.MemoryBytes}}
	if r.CPU.Features == nil {
		r.CPU.Features = []string{}
	}
	var overrides []string
	for _, k := range append([]string{cuda.EnvLibrary, cuda.EnvPTX, cuda.EnvPlant}, cuda.SwitchNames()...) {
		if v := os.Getenv(k); v != "" {
			overrides = append(overrides, k+"="+v)
		}
	}
	r.CUDA.Overrides = append([]string{}, overrides...)
	in, err := cuda.Available()
	if err != nil {
		r.CUDA.Reason = err.Error()
		return r
	}
	r.CUDA = DeviceCUDA{Overrides: r.CUDA.Overrides, Available: true, Driver: fmt.Sprintf("%d.%d", in.Driver/1000, in.Driver%1000/10), Name: in.Name,
		Capability: fmt.Sprintf("%d.%d", in.Major, in.Minor), SMs: in.SMs, TotalBytes: in.TotalBytes, FreeBytes: in.FreeBytes}
	sum, err := cuda.ModuleSHA256()
	if err != nil {
		r.CUDA.Available = false
		r.CUDA.Reason = "the device is there but this build has no usable kernels: " + err.Error()
		return r
	}
	r.CUDA.KernelModule = sum
	return r
}

func printDevices(w io.Writer, r DevicesReport) {
	defer func() {
		for _, o := range r.CUDA.Overrides {
			fmt.Fprintf(w, "      override: %s\n", o)
		}
	}()
	fmt.Fprintf(w, "cpu   %s, %d cores, %.1f GiB\n      features: %v\n", r.CPU.Model, r.CPU.Cores, float64(r.CPU.Memory)/(1<<30), r.CPU.Features)
	if !r.CUDA.Available {
		fmt.Fprintf(w, "cuda  unavailable: %s\n", r.CUDA.Reason)
		return
	}
	fmt.Fprintf(w, "cuda  %s (compute capability %s, %d multiprocessors), driver %s\n      memory %.1f GiB total, %.1f GiB free\n      kernels %s\n",
		r.CUDA.Name, r.CUDA.Capability, r.CUDA.SMs, r.CUDA.Driver, float64(r.CUDA.TotalBytes)/(1<<30), float64(r.CUDA.FreeBytes)/(1<<30), r.CUDA.KernelModule)
}
