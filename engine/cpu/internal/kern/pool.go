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
		go func() {
			for j := range ch {
				j.run()
				j.done.Done()
			}
		}()
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
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	helpers := min(p.threads-1, (n-1)/grain)
	if helpers <= 0 {
		fn(0, n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		panic("kern: Pool.For after Close")
	}
	j := &p.j
	j.n, j.grain, j.fn = n, grain, fn
	j.next.Store(0)
	j.done.Add(helpers)
	for i := 0; i < helpers; i++ {
		p.wake[i] <- j
	}
	j.run()
	j.done.Wait()
	j.fn = nil
}

func (j *job) run() {
	g := int64(j.grain)
	for {
		lo := j.next.Add(g) - g
		if lo >= int64(j.n) {
			return
		}
		j.fn(int(lo), int(min(lo+g, int64(j.n))))
	}
}
