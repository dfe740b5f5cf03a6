package kern_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
)

// TestPoolCoversEveryIndexOnce runs many loops of every size on pools of 1 to
// 4 threads, back to back (helpers polling), after pauses longer than
// SpinWait (helpers parked), and with GOMAXPROCS below the thread count: each
// index must be visited exactly once per loop, and For must return only after
// every call has.
func TestPoolCoversEveryIndexOnce(t *testing.T) {
	for _, procs := range []int{runtime.GOMAXPROCS(0), 1} {
		prev := runtime.GOMAXPROCS(procs)
		for threads := 1; threads <= 4; threads++ {
			pool := kern.NewPool(threads)
			hits := make([]atomic.Int32, 64)
			for iter := 0; iter < 400; iter++ {
				n, grain := 1+iter%64, 1+iter%5
				if iter%100 == 99 {
					time.Sleep(2 * kern.SpinWait) // let the helpers park
				}
				pool.For(n, grain, func(lo, hi int) {
					if hi-lo > grain || lo >= hi {
						t.Errorf("range [%d,%d) with grain %d", lo, hi, grain)
					}
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				})
				for i := range hits {
					want := int32(0)
					if i < n {
						want = 1
					}
					if got := hits[i].Swap(0); got != want {
						t.Fatalf("GOMAXPROCS=%d threads=%d loop %d (n=%d grain=%d): index %d visited %d times after For returned, want %d",
							procs, threads, iter, n, grain, i, got, want)
					}
				}
			}
			pool.Close()
		}
		runtime.GOMAXPROCS(prev)
	}
}
