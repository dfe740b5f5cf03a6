package cuda

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/aprqa/apr/engine/cuda/internal/cu"
)

// The kernel sources and what `make kernels` built from them: a fatbin with
// sm_90 machine code beside the PTX of the same build (compute_90, which the
// driver compiles for other devices), whose sources' sha256
// kernels.fatbin.sum records. The PTX text build.sh also writes
// (kernels.ptx) is for reading and for APR_CUDA_PTX; it is not committed or
// embedded: the fatbin holds the same PTX, and the 9 MB text doubled what
// every build and every device run carried.
//
//go:embed kernels/*.cu kernels/*.cuh kernels.fatbin kernels.fatbin.sum
var kernelFS embed.FS

// sumHeader starts kernels.fatbin.sum (and the first line of the PTX text
// build.sh writes, after "// "); the sha256 of the sources follows it.
const sumHeader = "apr-kernels sources-sha256 "

// SourcesSHA256 is the sha256 of the kernel sources: for each file of
// kernels/ in name order, its name, a newline and its bytes (what
// kernels/build.sh computes with sha256sum).
func SourcesSHA256(fsys fs.FS) (string, error) {
	names, err := fs.Glob(fsys, "kernels/*")
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		if !strings.HasSuffix(n, ".cu") && !strings.HasSuffix(n, ".cuh") {
			continue
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return "", err
		}
		base := n[strings.LastIndexByte(n, '/')+1:]
		h.Write([]byte(base + "\n"))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// NotBuilt is what a placeholder kernels.fatbin.sum records instead of a
// sum: the kernels have never been built on a CUDA machine.
const NotBuilt = "not-built"

// EnvLibrary names a driver library to load instead of libcuda.so.1 (the
// host emulator, kernels/emu.cpp, in apr's tests).
const EnvLibrary = cu.EnvLibrary

// EnvPTX names a PTX or fatbin file that replaces the embedded kernels
// (kernel development on the GPU machine: `make kernels` output tried
// before it is committed). The module's sha256 is part of the engine's
// identity either way.
const EnvPTX = "APR_CUDA_PTX"

// fatbinSourcesSHA256 returns the sources' sha256 that kernels.fatbin.sum
// records ("" when it records none).
func fatbinSourcesSHA256(sum []byte) string {
	s, ok := strings.CutPrefix(strings.TrimSpace(string(sum)), sumHeader)
	if !ok {
		return ""
	}
	return strings.TrimSpace(s)
}

// kernelImage returns the image to load and where it came from: the
// embedded fatbin (sm_90 code, loaded without the driver compiling PTX),
// which must record the embedded sources' sha256: one built from other
// sources, or never built, is refused (run make kernels).
func kernelImage() (image []byte, origin string, err error) {
	if p := os.Getenv(EnvPTX); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, "", fmt.Errorf("%s=%s: %w", EnvPTX, p, err)
		}
		return b, p, nil
	}
	want, err := SourcesSHA256(kernelFS)
	if err != nil {
		return nil, "", err
	}
	fat, err := kernelFS.ReadFile("kernels.fatbin")
	if err != nil {
		return nil, "", err
	}
	sum, err := kernelFS.ReadFile("kernels.fatbin.sum")
	if err != nil {
		return nil, "", err
	}
	switch got := fatbinSourcesSHA256(sum); {
	case got == NotBuilt:
		return nil, "", fmt.Errorf("kernels.fatbin has never been built: run make kernels on a CUDA machine (nvcc) and commit it")
	case got != want || len(fat) == 0:
		return nil, "", fmt.Errorf("the embedded kernels.fatbin (%d bytes) was built from sources %q, not the embedded sources %s: run make kernels on a CUDA machine", len(fat), got, want)
	}
	return fat, "embedded fatbin (sm_90)", nil
}

// ModuleSHA256 is the sha256 of the kernel image this process loads (or
// would load).
func ModuleSHA256() (string, error) {
	b, _, err := kernelImage()
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// KernelIDs lists the contract id of every product kernel the engine has:
// (matvec, matmul) × every weight type, on sm_90 PTX
// ("kernel.matvec.Q4_K.cuda.sm90"). A type outside Types() has none, and
// a model with it is refused by that id when prepared.
func KernelIDs() []string {
	var out []string
	for _, t := range Types() {
		out = append(out, ContractID("matvec", t), ContractID("matmul", t))
	}
	return out
}
