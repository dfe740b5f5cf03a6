package cuda_test

import (
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/engine/cuda/internal/cu"
)

// TestDriverResultsOnMovedStacks: what the driver writes back through a Go
// pointer (cuMemAlloc's address, cuMemGetInfo's sizes) reaches the caller
// even when the goroutine's stack is copied elsewhere during the call. It
// calls Alloc and Info from fresh goroutines at every stack depth of a
// range that crosses the first stack growth, so one of them grows the stack
// inside the binding's call. With the pointer passed as a plain uintptr the
// driver wrote into the old stack there and Alloc returned 0 with no error
// (cu.Alloc now also refuses a 0 by name):
// apr qa's serving gate then stored a KV cache at device address 0 and
// failed with CUDA_ERROR_ILLEGAL_ADDRESS on an H200 (issue 11). It runs on
// a GPU, and on the emulator through TestEmulated.
func TestDriverResultsOnMovedStacks(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	d, err := cu.Load()
	if err != nil {
		t.Fatal(err)
	}
	// Frames of ~250 bytes (finer than the ~1 KiB window of call's and
	// purego's frames in which a growth loses the write) to ~128 KiB: past
	// the first growth whatever size new goroutines start with (the runtime
	// starts them at the average stack use it saw at the last GC).
	const depths = 512
	lostAllocs := 0
	for depth := range depths {
		var p cu.Ptr
		if err := onFreshStack(depth, func() error {
			return d.Do(func() error {
				var err error
				p, err = d.Alloc(256)
				return err
			})
		}); err != nil && !strings.Contains(err.Error(), "with the address 0") {
			t.Fatalf("depth %d: Alloc: %v", depth, err)
		} else if err != nil || p == 0 {
			// cu.Alloc refuses the 0 it would otherwise return
			if lostAllocs++; lostAllocs <= 3 {
				t.Errorf("depth %d: cuMemAlloc succeeded but Alloc got address 0 (the driver wrote the address into a stack the runtime had moved): %v", depth, err)
			}
			continue
		}
		if err := d.Do(func() error { return d.Free(p) }); err != nil {
			t.Fatalf("depth %d: Free: %v", depth, err)
		}
	}
	lostInfos := 0
	for depth := range depths {
		var in cu.Info
		if err := onFreshStack(depth, func() error {
			return d.Do(func() error {
				var err error
				in, err = d.Info()
				return err
			})
		}); err != nil {
			t.Fatalf("depth %d: Info: %v", depth, err)
		}
		if in.TotalBytes == 0 || in.Driver == 0 || in.Major == 0 {
			if lostInfos++; lostInfos <= 3 {
				t.Errorf("depth %d: Info succeeded with %d bytes in all, driver %d, sm_%d%d (the driver wrote into a stack the runtime had moved)",
					depth, in.TotalBytes, in.Driver, in.Major, in.Minor)
			}
		}
	}
	if lostAllocs+lostInfos > 0 {
		t.Errorf("%d of %d Allocs and %d of %d Infos lost what the driver wrote", lostAllocs, depths, lostInfos, depths)
	}
}

// onFreshStack runs f on a new goroutine (a small stack) below depth frames.
func onFreshStack(depth int, f func() error) error {
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		atDepth(depth, func() { err = f() })
	}()
	<-done
	return err
}

// atDepth calls f below n frames of about 250 bytes each.
//
//go:noinline
func atDepth(n int, f func()) {
	var pad [28]uint64
	if n == 0 {
		f()
		return
	}
	pad[n%28] = uint64(n)
	atDepth(n-1, f)
	if pad[n%28] != uint64(n) {
		panic("atDepth")
	}
}
