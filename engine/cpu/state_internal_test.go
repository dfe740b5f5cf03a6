package cpu

import (
	"runtime"
	"testing"
	"time"
)

// TestAllocState checks the recurrent states' memory: zeroed, released by
// FreeState (after which the buffer is empty), refused for a view, and
// released by the collector's cleanup when a state is never freed.
func TestAllocState(t *testing.T) {
	be, err := newBackend(1)
	if err != nil {
		t.Fatal(err)
	}
	defer be.close()
	b := asBuf(be.AllocState(3, 1000))
	if b.rows != 3 || b.cols != 1000 || len(b.d) != 3000 {
		t.Fatalf("AllocState(3, 1000) gave %d×%d with %d values", b.rows, b.cols, len(b.d))
	}
	for i, v := range b.d {
		if v != 0 {
			t.Fatalf("value %d of a new state is %g", i, v)
		}
	}
	for i := range b.d {
		b.d[i] = float32(i)
	}
	v := asBuf(be.View(b, 1, 2, 0, 10))
	if v.keep != b || v.d[3] != 1003 {
		t.Fatalf("a view of a state keeps %p (want %p) and reads %g (want 1003)", v.keep, b, v.d[3])
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("FreeState of a view did not panic")
			}
		}()
		be.FreeState(v)
	}()
	be.FreeState(b)
	if b.d != nil || b.rows != 0 {
		t.Errorf("after FreeState the buffer still holds %d values, %d rows", len(b.d), b.rows)
	}

	// A state never freed: its mapping is released once unreferenced.
	released := make(chan struct{})
	func() {
		g := asBuf(be.AllocState(2, 64))
		m := g.mem
		if m == nil {
			t.Skip("AllocState fell back to the Go heap (no anonymous mappings here)")
		}
		free := m.free
		m.free = func() { free(); close(released) }
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-released:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Error("an unreferenced state was not released after 50 collections")
}
