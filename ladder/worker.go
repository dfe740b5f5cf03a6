package ladder

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/aprqa/apr/verdict"
)

// Process isolation. With Config.Worker set, the runner executes each
// model's cells in a child process (the same binary, `apr ladder worker`)
// instead of a goroutine: a crash the Go runtime cannot recover (a fatal
// error, a segfault in a driver, running out of memory) or a hang that
// ignores its deadline then costs that one cell, and a fresh worker takes the
// next cell. The worker keeps the model resident across the model's cells,
// as the in-process runner does.
//
// The protocol is JSON lines. The runner writes the model, then one request
// per cell; the worker answers each request with one result line:
//
//	runner → worker  {"model": {...}}
//	runner → worker  {"verb": "run", "backend": "ref", "timeout_ns": …, "grace_ns": …}
//	worker → runner  {"result": {...}}

type workerModel struct {
	Key    string  `json:"key"`
	Path   string  `json:"path"`
	Target string  `json:"target,omitempty"`
	Bytes  int64   `json:"bytes"`
	SHA256 string  `json:"sha256"`
	Header *Header `json:"header"`
}

type workerRequest struct {
	Model   *workerModel  `json:"model,omitempty"`
	Verb    string        `json:"verb,omitempty"`
	Backend string        `json:"backend,omitempty"`
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	Grace   time.Duration `json:"grace_ns,omitempty"`
}

type workerResult struct {
	Verdict   verdict.Verdict    `json:"verdict"`
	Reason    string             `json:"reason,omitempty"`
	RemovedBy string             `json:"removed_by,omitempty"`
	Detail    string             `json:"detail,omitempty"`
	Phases    map[string]float64 `json:"phases,omitempty"`
	Values    []Value            `json:"values,omitempty"`
}

type workerReply struct {
	Result *workerResult `json:"result"`
}

// ServeWorker is the child side of process isolation: it reads the model and
// cell requests from in and writes one result line per request to out,
// running each cell with ex under the request's deadline. It returns when in
// ends.
func ServeWorker(ctx context.Context, in io.Reader, out io.Writer, ex *Executors, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dec := json.NewDecoder(bufio.NewReader(in))
	enc := json.NewEncoder(out)
	var m *Model
	lastBackend := ""
	defer func() {
		if m != nil {
			m.close(log)
		}
	}()
	for {
		var req workerRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("ladder worker: reading a request: %w", err)
		}
		if req.Model != nil {
			if m != nil {
				m.close(log)
			}
			wm := req.Model
			m = &Model{Key: wm.Key, Path: wm.Path, Target: wm.Target, Bytes: wm.Bytes, SHA256: wm.SHA256, Header: wm.Header}
			lastBackend = ""
			// Map the model now and keep it for all its cells; an error
			// here is each executor's to report when it asks for the file.
			_, _ = m.File()
			continue
		}
		if m == nil {
			return errors.New("ladder worker: a cell request came before the model")
		}
		if lastBackend != "" && req.Backend != lastBackend {
			m.release(log)
		}
		lastBackend = req.Backend
		var res Result
		fn, ref := ex.Lookup(req.Verb, req.Backend)
		if ref != nil {
			res = Result{Verdict: verdict.Refused, RemovedBy: ref.By, Reason: ref.Reason}
		} else {
			var err error
			res, err = executeCell(ctx, fn, m, req.Verb, req.Backend, req.Timeout, req.Grace, log)
			if err != nil {
				return err
			}
		}
		r := workerResult(res)
		if err := enc.Encode(workerReply{Result: &r}); err != nil {
			return fmt.Errorf("ladder worker: writing a result: %w", err)
		}
	}
}

// workerSession is the runner's side: one child process serving one
// model's cells, restarted after a crash or a kill.
type workerSession struct {
	r      *runner
	m      *Model
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	done   chan struct{} // closed when the process has exited
	err    error         // its exit status, valid after done
	stderr *tailBuffer
}

// exec runs one cell in the session's worker, starting one if needed.
func (s *workerSession) exec(ctx context.Context, verb, backend string) (Result, error) {
	if s.cmd == nil {
		if err := s.start(); err != nil {
			return Result{}, err
		}
	}
	req := workerRequest{Verb: verb, Backend: backend, Timeout: s.r.Timeout, Grace: s.r.Grace}
	b, _ := json.Marshal(req)
	if _, err := s.stdin.Write(append(b, '\n')); err != nil {
		// The worker ended after its last answer (a goroutine abandoned by
		// an earlier cell may have crashed it): this cell gets a new one.
		s.kill()
		if err := s.start(); err != nil {
			return Result{}, err
		}
		if _, err := s.stdin.Write(append(b, '\n')); err != nil {
			return s.died("could not be sent the cell"), nil
		}
	}
	// The worker enforces the cell's deadline itself; the runner waits a
	// little longer for it and then kills it.
	timer := time.NewTimer(s.r.Timeout + s.r.Grace + s.r.Grace + time.Second)
	defer timer.Stop()
	select {
	case line, ok := <-s.lines:
		if !ok {
			if err := ctx.Err(); err != nil {
				s.kill() // interrupted: the worker went down with the run, the cell stays undecided
				return Result{}, err
			}
			return s.died("died while running this cell"), nil
		}
		var rep workerReply
		if err := json.Unmarshal(line, &rep); err != nil || rep.Result == nil {
			s.kill()
			return Failed("the worker process answered %q, not a result", truncate(string(line), 200)), nil
		}
		return Result(*rep.Result), nil
	case <-timer.C:
		s.kill()
		return Failed("timed out after %s: the worker process did not answer and was killed", s.r.Timeout), nil
	case <-ctx.Done():
		s.kill()
		return Result{}, ctx.Err()
	}
}

func (s *workerSession) start() error {
	cmd := s.r.Worker()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	s.stderr = &tailBuffer{max: 4096}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ladder: starting a worker process: %w", err)
	}
	s.cmd, s.stdin = cmd, stdin
	s.lines = make(chan []byte)
	s.done = make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
		for sc.Scan() {
			s.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(s.lines)
		s.err = cmd.Wait()
		close(s.done)
	}()
	m := s.m
	b, _ := json.Marshal(workerRequest{Model: &workerModel{Key: m.Key, Path: m.Path, Target: m.Target, Bytes: m.Bytes, SHA256: m.SHA256, Header: m.Header}})
	if _, err := stdin.Write(append(b, '\n')); err != nil {
		s.kill()
		return fmt.Errorf("ladder: the worker process would not take its model: %w", err)
	}
	return nil
}

// died waits for the dead worker and says how it ended.
func (s *workerSession) died(what string) Result {
	s.kill()
	status := "exited"
	if s.err != nil {
		status = s.err.Error()
	}
	res := Failed("the worker process %s (%s)", what, status)
	if tail := strings.TrimSpace(s.stderr.String()); tail != "" {
		res.Detail = tail
		if first := firstLine(tail); first != "" {
			res.Reason += ": " + first
		}
	}
	return res
}

// kill ends the worker (if any) and waits for it, so the next cell gets a
// fresh one.
func (s *workerSession) kill() {
	if s.cmd == nil {
		return
	}
	s.stdin.Close()
	_ = s.cmd.Process.Kill()
	for range s.lines { // drain, so the reader reaches Wait
	}
	<-s.done
	s.cmd = nil
}

// close lets the worker finish (its stdin ends) and waits for it.
func (s *workerSession) close() {
	if s.cmd == nil {
		return
	}
	s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(s.r.Grace + time.Second):
	}
	s.kill()
}

func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "goroutine ") {
			return truncate(l, 200)
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// tailBuffer keeps the first and last bytes written to it (a crash prints
// its cause first and a long stack after).
type tailBuffer struct {
	mu   sync.Mutex
	max  int
	head []byte
	tail []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.head); room > 0 {
		t.head = append(t.head, p[:min(room, len(p))]...)
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > t.max {
		t.tail = t.tail[len(t.tail)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.head) < t.max {
		return string(t.head)
	}
	return string(t.head) + "\n…\n" + string(t.tail)
}
