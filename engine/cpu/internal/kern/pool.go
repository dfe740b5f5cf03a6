package kern

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a fixed set of worker goroutines that run parallel loops for the
// kernels. Workers live as long as the pool, so a matmul costs a wake-up per
// worker, not a goroutine per row. A Pool runs one loop at a time; For calls
// from several goroutines are serialised.
type Pool struct {
	threads int
	mu      sync.Mutex // one For at a time; guards j too
	wake    []chan *job
	j       job // reused by every For
	closed  bool
}

type job struct {
	n, grain int
	next     atomic.Int64
	fn       func(lo, hi int)
	fnw      func(w, lo, hi int) // set instead of fn by forW
	done     sync.WaitGroup
}

// NewPool starts a pool of threads workers (the calling goroutine counts as
// one of them). threads ≤ 0 means every CPU (runtime.NumCPU).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, wake: make([]chan *job, threads-1)}
	for i := range p.wake {
		ch := make(chan *job, 1)
		p.wake[i] = ch
		go func(w int) {
			for j := range ch {
				j.run(w)
				j.done.Done()
			}
		}(i + 1)
	}
	return p
}

// Threads returns the number of threads the pool runs loops on.
func (p *Pool) Threads() int { return p.threads }

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, ch := range p.wake {
		close(ch)
	}
}

// For calls fn(lo, hi) over disjoint ranges covering [0, n), each at most
// grain long, on all of the pool's threads, and returns when every call has
// returned. Ranges are handed out in order from a shared counter, so faster
// threads take more of them.
func (p *Pool) For(n, grain int, fn func(lo, hi int)) {
	p.loop(n, grain, fn, nil)
}

// forW is For with the worker's index (0 for the calling goroutine, 1 to
// Threads()−1 for the pool's) passed to fn: each worker's calls run one at a
// time, so fn may use per-worker scratch.
func (p *Pool) forW(n, grain int, fn func(w, lo, hi int)) {
	p.loop(n, grain, nil, fn)
}

func (p *Pool) loop(n, grain int, fn func(lo, hi int), fnw func(w, lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	helpers := min(p.threads-1, (n-1)/grain)
	if helpers <= 0 {
		// One thread: the same ranges, in order, on the calling goroutine
		// (callers tile their work by the grain).
		for lo := 0; lo < n; lo += grain {
			if fnw != nil {
				fnw(0, lo, min(lo+grain, n))
			} else {
				fn(lo, min(lo+grain, n))
			}
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		panic("kern: Pool.For after Close")
	}
	j := &p.j
	j.n, j.grain, j.fn, j.fnw = n, grain, fn, fnw
	j.next.Store(0)
	j.done.Add(helpers)
	for i := 0; i < helpers; i++ {
		p.wake[i] <- j
	}
	j.run(0)
	j.done.Wait()
	j.fn, j.fnw = nil, nil
}

func (j *job) run(w int) {
	g := int64(j.grain)
	for {
		lo := j.next.Add(g) - g
		if lo >= int64(j.n) {
			return
		}
		hi := int(min(lo+g, int64(j.n)))
		if j.fnw != nil {
			j.fnw(w, int(lo), hi)
		} else {
			j.fn(int(lo), hi)
		}
	}
}
