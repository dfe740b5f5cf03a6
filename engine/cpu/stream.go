package cpu

import (
	"fmt"
	"sync"
	"time"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
)

// StreamRead measures the memory bandwidth decode is bound by, as kern's
// BenchmarkStreamRead does: threads goroutines each sum their share of a
// buffer of size bytes (far larger than the caches) once per repetition,
// with the streaming read the kernels' bandwidth is compared to
// (kern.StreamSum). It returns the best repetition's bytes per second. The
// buffer is an anonymous mapping, touched before the first repetition and
// released before returning, so it adds size bytes to the process's peak
// resident set while it runs.
func StreamRead(size, threads, reps int) (float64, error) {
	if size < 1<<20 || threads < 1 || reps < 1 {
		return 0, fmt.Errorf("cpu: StreamRead of %d bytes on %d threads, %d repetitions", size, threads, reps)
	}
	chunk := size / threads &^ 63
	d, free, err := mapF32(chunk * threads / 4)
	if err != nil {
		return 0, err
	}
	defer free()
	b := bytesOf(d)
	for i := 0; i < len(b); i += 4096 {
		b[i] = byte(i >> 12) // make every page resident (and not the shared zero page)
	}
	best := time.Duration(0)
	var sink uint64
	var mu sync.Mutex
	for r := 0; r < reps; r++ {
		start := time.Now()
		var wg sync.WaitGroup
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func(p []byte) {
				defer wg.Done()
				s := kern.StreamSum(p)
				mu.Lock()
				sink += s
				mu.Unlock()
			}(b[t*chunk : (t+1)*chunk])
		}
		wg.Wait()
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	_ = sink
	return float64(chunk*threads) / best.Seconds(), nil
}
