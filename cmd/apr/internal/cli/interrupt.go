package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// ExitInterrupted is the exit code of a run stopped by Ctrl-C (SIGINT) or
// SIGTERM: 128 + SIGINT, as shells report it. What was done is printed, the
// temporary files are removed; running the command again redoes (or, for
// the ladder, resumes) the rest.
const ExitInterrupted = 130

// interruptGrace is how long a command may take to stop after an interrupt
// before apr removes its temporary files and exits on its own.
var interruptGrace = 3 * time.Second

// interrupted is the error of a command that stopped because of an
// interrupt; its message says what was done and what was not.
type interrupted struct{ msg string }

func (e interrupted) Error() string { return e.msg }

// interruptedf returns an interrupted error.
func interruptedf(format string, args ...any) error {
	return interrupted{fmt.Sprintf(format, args...)}
}

// cleanups are run when apr exits on an interrupt without the command having
// returned: each removes what a command created (a temporary directory).
var cleanups struct {
	sync.Mutex
	next int
	fns  map[int]func()
}

// atInterrupt registers fn to run if apr exits on an interrupt before the
// command returns; the returned function unregisters it (call it once the
// command cleaned up itself).
func atInterrupt(fn func()) (unregister func()) {
	cleanups.Lock()
	defer cleanups.Unlock()
	if cleanups.fns == nil {
		cleanups.fns = map[int]func(){}
	}
	id := cleanups.next
	cleanups.next++
	cleanups.fns[id] = fn
	return func() {
		cleanups.Lock()
		defer cleanups.Unlock()
		delete(cleanups.fns, id)
	}
}

func runCleanups() {
	cleanups.Lock()
	fns := cleanups.fns
	cleanups.fns = nil
	cleanups.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// tempDir makes a temporary directory that is removed when the command ends
// (call the returned function) or when apr exits on an interrupt.
func tempDir(pattern string) (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	unregister := atInterrupt(func() { os.RemoveAll(dir) })
	return dir, func() { unregister(); os.RemoveAll(dir) }, nil
}

// withInterrupt returns a context cancelled by SIGINT or SIGTERM. A command
// that watches the context stops and says what it did; one that does not
// return within interruptGrace is ended here: its temporary files are
// removed and apr exits with ExitInterrupted.
func withInterrupt(ctx context.Context, stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case s := <-sig:
			cancel()
			fmt.Fprintf(stderr, "apr: %v: stopping\n", s)
			first := time.Now()
			grace := time.After(interruptGrace)
			for {
				select {
				case <-done:
					return
				case <-grace:
					runCleanups()
					fmt.Fprintf(stderr, "apr: interrupted; the command did not stop within %v: temporary files removed, nothing more was done\n", interruptGrace)
					os.Exit(ExitInterrupted)
				case <-sig:
					// A signal sent to the whole process group (timeout(1),
					// a terminal) can arrive twice at once: only a second
					// Ctrl-C a moment later means "now".
					if time.Since(first) < 300*time.Millisecond {
						continue
					}
					runCleanups()
					fmt.Fprintln(stderr, "apr: interrupted twice: temporary files removed, nothing more was done")
					os.Exit(ExitInterrupted)
				}
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		close(done)
		cancel()
	}
}

// isInterrupt reports whether err is a command's answer to an interrupt.
func isInterrupt(err error) bool {
	var ie interrupted
	return errors.As(err, &ie) || errors.Is(err, context.Canceled)
}
