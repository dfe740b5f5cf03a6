package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// progress reports the steps of a long command on stderr, never stdout.
// On a terminal it keeps one status line, rewritten in place (with the time
// elapsed, refreshed every second so a long step is visibly alive); on
// anything else it prints one plain line per step ("synth: [3/12] blk.0.…"),
// which logs and CI keep readably. --quiet (or a nil *progress) prints
// nothing. Methods are safe for concurrent use.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	name  string // the command: "qa", "bench", "synth"
	tty   bool
	start time.Time
	line  string // the current status (terminal)
	shown bool   // a status line is on screen (terminal)
	stop  chan struct{}
	done  sync.WaitGroup
}

// quietFlag adds the shared --quiet flag.
func quietFlag(c *cobra.Command, p *bool) {
	c.Flags().BoolVarP(p, "quiet", "q", false, "no progress on stderr (results, errors and --json are unchanged)")
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress returns the progress of command name on w, or nil when quiet.
func newProgress(w io.Writer, name string, quiet bool) *progress {
	if quiet || w == nil {
		return nil
	}
	p := &progress{w: w, name: name, tty: isTerminal(w), start: time.Now()}
	if p.tty {
		p.stop = make(chan struct{})
		p.done.Add(1)
		go p.tick()
	}
	return p
}

func (p *progress) tick() {
	defer p.done.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if p.line != "" {
				p.draw()
			}
			p.mu.Unlock()
		}
	}
}

// draw rewrites the status line; p.mu is held.
func (p *progress) draw() {
	el := time.Since(p.start).Round(time.Second)
	line := fmt.Sprintf("%s: %s (%v)", p.name, p.line, el)
	if width := p.width(); width > 0 && len(line) > width-1 {
		line = line[:width-1]
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
	p.shown = true
}

func (p *progress) width() int {
	if f, ok := p.w.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil {
			return w
		}
	}
	return 0
}

// Step reports a step: the status line on a terminal, a line otherwise.
func (p *progress) Step(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if !p.tty {
		fmt.Fprintf(p.w, "%s: %s\n", p.name, msg)
		return
	}
	p.line = msg
	p.draw()
}

// Clear removes the status line (before other text goes to stderr); the
// next Step draws it again.
func (p *progress) Clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

func (p *progress) clear() {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// Done clears the status line and stops the ticker.
func (p *progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.clear()
	p.line = ""
	p.mu.Unlock()
	if p.stop != nil {
		close(p.stop)
		p.done.Wait()
		p.stop = nil
	}
}

// Print runs fn, which writes to the same stream, with the status line
// cleared and the ticker held off, so the two never interleave.
func (p *progress) Print(fn func()) {
	if p == nil {
		fn()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fn()
}
