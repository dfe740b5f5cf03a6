package kern

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a fixed set of worker goroutines that run parallel loops for the
// kernels. Workers live as long as the pool, so a matmul costs a wake-up per
// worker, not a goroutine per row. A Pool runs one loop at a time; For calls
// from several goroutines are serialised.
//
// A worker that finishes a loop keeps polling for the next one for
// SpinWait before it parks on its channel, and the caller of For polls for
// the workers' completion instead of sleeping on a WaitGroup: waking a
// parked goroutine goes through the kernel (futex) and cost 50–100 µs on the
// 2-vCPU VMs this was tuned on, longer than many decode-step products take.
// A decode step issues a hundred or so loops a few microseconds apart, so
// with polling its helpers never park inside a step; between steps (sampling,
// I/O) they park after SpinWait and cost nothing. Polling yields the
// processor (runtime.Gosched) every few hundred loads, so a pool with more
// threads than GOMAXPROCS still makes progress.
type Pool struct {
	threads int
	mu      sync.Mutex   // one For at a time; guards j
	j       job          // reused by every For
	seq     uint64       // the number of the current j; guarded by mu
	pending atomic.Int64 // helpers still running the current j
	quit    atomic.Bool
	ws      []poolWorker
	closed  bool
}

// poolWorker is one helper's mailbox: the number of the last job handed to
// it, and whether it is parked on its wake channel.
type poolWorker struct {
	gen    atomic.Uint64
	done   atomic.Uint64 // the number of the last job it finished
	parked atomic.Bool
	wake   chan struct{}
	_      [32]byte // keep workers' flags on separate cache lines
}

type job struct {
	n, grain int
	next     atomic.Int64
	fn       func(lo, hi int)
	fnw      func(w, lo, hi int) // set instead of fn by forW
}

// SpinWait is how long an idle worker polls for the next loop before it
// parks.
const SpinWait = 200 * time.Microsecond

// NewPool starts a pool of threads workers (the calling goroutine counts as
// one of them). threads ≤ 0 means every CPU (runtime.NumCPU).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, ws: make([]poolWorker, threads-1)}
	for i := range p.ws {
		p.ws[i].wake = make(chan struct{}, 1)
		go p.work(i + 1)
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
	p.quit.Store(true)
	p.seq++
	for i := range p.ws {
		p.ws[i].gen.Store(p.seq)
		close(p.ws[i].wake)
	}
}

// work is helper w's life: wait for a job handed to it (polling, then
// parked), run it, repeat. Only the helpers a loop needs are handed it, and
// For waits for each of them, so p.j is stable while a helper reads it.
func (p *Pool) work(w int) {
	pw := &p.ws[w-1]
	var last uint64
	for {
		s, ok := pw.await(last)
		if !ok || p.quit.Load() {
			return
		}
		last = s
		p.j.run(w)
		pw.done.Store(s)
		p.pending.Add(-1)
	}
}

// await returns the first job number after last: polled for SpinWait, then
// parked. The parking handshake: the worker sets parked and re-reads gen;
// For stores gen and then claims a parked worker by CompareAndSwap before it
// sends on the channel. Whoever clears parked owns the wake-up, so a worker
// never misses a job and never sees a stale wake.
//
// A wake-up that brings no new job (a token For's rescue sent while the
// worker was finding the job itself) is not a job: the worker waits again
// rather than run the last job twice.
func (pw *poolWorker) await(last uint64) (uint64, bool) {
	for {
		start := time.Now()
		for i := 1; ; i++ {
			if s := pw.gen.Load(); s != last {
				return s, true
			}
			if i%256 == 0 {
				if time.Since(start) > SpinWait {
					break
				}
				runtime.Gosched()
			}
		}
		pw.parked.Store(true)
		if s := pw.gen.Load(); s != last && pw.parked.CompareAndSwap(true, false) {
			return s, true
		}
		// parked, or claimed by For, which sends
		if _, ok := <-pw.wake; !ok {
			return 0, false
		}
		if s := pw.gen.Load(); s != last {
			return s, true
		}
	}
}

// claimAndWake wakes a parked worker: whoever clears parked owns the
// wake-up. The send never blocks (the token a worker has not taken yet
// already wakes it).
func (pw *poolWorker) claimAndWake() {
	if pw.parked.Load() && pw.parked.CompareAndSwap(true, false) {
		select {
		case pw.wake <- struct{}{}:
		default:
		}
	}
}

// rescue sends a helper that has not finished the loop a wake-up whatever
// its parked flag says (clearing it): parked, it wakes and finds the loop;
// busy or spinning, the token waits in its channel and the next wake-up
// without a new loop is ignored (await).
func (pw *poolWorker) rescue() {
	pw.parked.Store(false)
	select {
	case pw.wake <- struct{}{}:
	default:
	}
}

// rescueAfter is how long For waits for its helpers before it wakes again
// any that is parked without having finished the loop. The handshake should
// make this unnecessary; a CI run once hung here with both helpers parked on
// a job they had been handed (cause not found), and a loop that cannot end
// is worse than a redundant wake-up.
const rescueAfter = 2 * time.Millisecond

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
	p.pending.Store(int64(helpers))
	p.seq++
	for i := 0; i < helpers; i++ {
		pw := &p.ws[i]
		pw.gen.Store(p.seq) // publishes j to this helper
		pw.claimAndWake()
	}
	j.run(0)
	start := time.Now()
	for i := 1; p.pending.Load() != 0; i++ {
		if i%256 == 0 {
			runtime.Gosched()
			if time.Since(start) > rescueAfter {
				for h := 0; h < helpers; h++ {
					if pw := &p.ws[h]; pw.done.Load() != p.seq {
						pw.rescue()
					}
				}
				start = time.Now()
			}
		}
	}
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
