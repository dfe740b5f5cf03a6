package cu

import (
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"
)

func TestPack(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want uint64
	}{
		{"ptr", Ptr(0x7f0000001000), 0x7f0000001000},
		{"int", 5, 5},
		{"negative int", -1, 0xffffffff},
		{"int32", int32(-2), 0xfffffffe},
		{"int64", int64(-1), math.MaxUint64},
		{"uint32", uint32(7), 7},
		{"float32", float32(1.5), uint64(math.Float32bits(1.5))},
		{"nil", nil, 0},
		{"true", true, 1},
	}
	for _, tc := range tests {
		got, err := Pack(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Pack(%s %v) = %#x, %v; want %#x", tc.name, tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []any{1 << 40, "x", 1.5, []int{1}} {
		if _, err := Pack(bad); err == nil {
			t.Errorf("Pack(%v) accepted a value a kernel argument cannot hold", bad)
		}
	}
}

func TestErrorNamesCallAndCode(t *testing.T) {
	var d *Driver // no library: names come from the table
	err := d.check("cuMemAlloc_v2", 2)
	if err == nil || !strings.Contains(err.Error(), "cuMemAlloc_v2") || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("check(cuMemAlloc_v2, 2) = %v; want the call and CUDA_ERROR_OUT_OF_MEMORY named", err)
	}
	if !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("errors.Is(%v, ErrOutOfMemory) = false", err)
	}
	if err := d.check("cuInit", 0); err != nil {
		t.Errorf("CUDA_SUCCESS is an error: %v", err)
	}
	if got := Result(12345).Name(); got != "CUresult 12345" {
		t.Errorf("unknown code named %q", got)
	}
	if e := d.check("cuInit", 100); errors.Is(e, ErrOutOfMemory) || !strings.Contains(e.Error(), "CUDA_ERROR_NO_DEVICE") {
		t.Errorf("check(cuInit, 100) = %v", e)
	}
}

// TestLoadMissingLibrary: a library that is not there is Unavailable with
// its name and the loader's reason, never a panic.
func TestLoadMissingLibrary(t *testing.T) {
	_, err := load("libcuda-does-not-exist.so.1")
	var u *Unavailable
	if !errors.As(err, &u) || !strings.Contains(u.Reason, "libcuda-does-not-exist.so.1") {
		t.Fatalf("load(missing) = %v; want *Unavailable naming the library", err)
	}
}

// TestLaunchConfigLayout holds launchConfig and launchAttr to cuda.h's
// CUlaunchConfig and CUlaunchAttribute (x86-64): cuLaunchKernelEx reads
// them by offset, and a shifted field would launch another grid or pass
// another attribute.
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttr
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(CUlaunchConfig)", unsafe.Sizeof(c), 56},
		{"CUlaunchConfig.blockDimX", unsafe.Offsetof(c.block), 12},
		{"CUlaunchConfig.sharedMemBytes", unsafe.Offsetof(c.shared), 24},
		{"CUlaunchConfig.hStream", unsafe.Offsetof(c.stream), 32},
		{"CUlaunchConfig.attrs", unsafe.Offsetof(c.attrs), 40},
		{"CUlaunchConfig.numAttrs", unsafe.Offsetof(c.nattrs), 48},
		{"sizeof(CUlaunchAttribute)", unsafe.Sizeof(a), 72},
		{"CUlaunchAttribute.value", unsafe.Offsetof(a.value), 8},
	} {
		if f.got != f.want {
			t.Errorf("%s = %d, want %d", f.name, f.got, f.want)
		}
	}
}
