package cuda

import (
	"bytes"
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

// The kernel sources and what `make kernels` built from them: the PTX (the
// readable image, checked by the tests) and a fatbin with sm_90 machine
// code beside the same PTX, whose sources' sha256 kernels.fatbin.sum records.
//
//go:embed kernels/*.cu kernels/*.cuh kernels.ptx kernels.fatbin kernels.fatbin.sum
var kernelFS embed.FS

// ptxHeader starts the first line of kernels.ptx; the sha256 of the
// sources follows it.
const ptxHeader = "// apr-kernels sources-sha256 "

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

// PTXSourcesSHA256 returns the sources' sha256 that the first line of a
// PTX image records ("" when it records none).
func PTXSourcesSHA256(ptx []byte) string {
	line, _, _ := bytes.Cut(ptx, []byte("\n"))
	s, ok := strings.CutPrefix(string(line), ptxHeader)
	if !ok {
		return ""
	}
	return strings.TrimSpace(s)
}

// NotBuilt is what the placeholder kernels.ptx records instead of a sum:
// the kernels have never been built on a CUDA machine.
const NotBuilt = "not-built"

// EnvLibrary names a driver library to load instead of libcuda.so.1 (the
// host emulator, kernels/emu.cpp, in apr's tests).
const EnvLibrary = cu.EnvLibrary

// EnvPTX names a PTX file that replaces the embedded kernels (kernel
// development on the GPU machine: `make kernels` output tried before it is
// committed). The module's sha256 is part of the engine's identity either
// way.
const EnvPTX = "APR_CUDA_PTX"

// fatbinSourcesSHA256 returns the sources' sha256 that kernels.fatbin.sum
// records ("" when it records none).
func fatbinSourcesSHA256(sum []byte) string {
	s, ok := strings.CutPrefix(strings.TrimSpace(string(sum)), strings.TrimPrefix(ptxHeader, "// "))
	if !ok {
		return ""
	}
	return strings.TrimSpace(s)
}

// kernelImage returns the image to load and where it came from: the
// embedded fatbin (sm_90 code, no PTX compilation at load) when it was
// built, else the embedded PTX. Each must record the embedded sources'
// sha256: one built from other sources is refused (run make kernels).
func kernelImage() (ptx []byte, origin string, err error) {
	if p := os.Getenv(EnvPTX); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, "", fmt.Errorf("%s=%s: %w", EnvPTX, p, err)
		}
		return b, p, nil
	}
	b, err := kernelFS.ReadFile("kernels.ptx")
	if err != nil {
		return nil, "", err
	}
	want, err := SourcesSHA256(kernelFS)
	if err != nil {
		return nil, "", err
	}
	got := PTXSourcesSHA256(b)
	if got == NotBuilt {
		return nil, "", fmt.Errorf("kernels.ptx has never been built: run make kernels on a CUDA machine (nvcc) and commit it")
	}
	if got != want {
		return nil, "", fmt.Errorf("the embedded kernels.ptx was built from sources %q, not the embedded sources %s: run make kernels on a CUDA machine", got, want)
	}
	fat, err := kernelFS.ReadFile("kernels.fatbin")
	if err != nil {
		return nil, "", err
	}
	sum, err := kernelFS.ReadFile("kernels.fatbin.sum")
	if err != nil {
		return nil, "", err
	}
	switch fs := fatbinSourcesSHA256(sum); {
	case fs == NotBuilt && len(fat) == 0:
		return b, "embedded PTX", nil
	case fs != want || len(fat) == 0:
		return nil, "", fmt.Errorf("the embedded kernels.fatbin was built from sources %q, not the embedded sources %s: run make kernels on a CUDA machine", fs, want)
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
