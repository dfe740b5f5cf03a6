package ladder

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aprqa/apr/internal/buildinfo"
	"github.com/aprqa/apr/internal/hostinfo"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
)

// NoContracts is the contracts digest recorded when the run was judged
// under no contracts at all (nothing could exclude a cell).
const NoContracts = "none: no contracts were loaded"

// Defaults of Config.
const (
	DefaultTimeout = 10 * time.Minute
	DefaultGrace   = 5 * time.Second
)

// Config is one ladder run.
type Config struct {
	Roots    []string // directories (or files) to search for GGUF models
	Verbs    []string // default DefaultVerbs
	Backends []string // default DefaultBackends
	Shard    Shard    // default All

	Executors *Executors // what executes each (verb, backend); missing ones are refused
	Gate      Gate       // contract exclusions; nil excludes nothing
	// ContractsDigest identifies the contracts cells are judged under; ""
	// records NoContracts.
	ContractsDigest string

	Timeout time.Duration // per cell; default DefaultTimeout
	// Grace is how long a cell past its deadline may take to return before
	// the runner abandons it (its goroutine cannot be killed) and moves on.
	Grace time.Duration

	// OutDir holds one result file per finished cell and the receipt. A
	// re-run over the same OutDir reuses cells whose binary, model sha256 and
	// contracts digest match, so an interrupted run resumes. "" keeps nothing.
	OutDir string
	Fresh  bool // ignore results already in OutDir
	// SumCache remembers model sha256 sums across runs; nil hashes every time.
	SumCache *SumCache

	// Worker, when set, makes a command that runs `apr ladder worker` (this
	// same binary, serving ServeWorker): each model's cells then run in a
	// child process, so a crash the runtime cannot recover or a hard hang
	// costs one cell. nil runs cells in goroutines.
	Worker func() *exec.Cmd

	Progress Progress
	Log      *slog.Logger

	Binary *buildinfo.Identity // default buildinfo.Current()
	Host   *hostinfo.Host      // default hostinfo.Probe()
	Now    func() time.Time    // default time.Now
}

// Progress is told about cells as they finish. The CLI draws a bar with it.
type Progress interface {
	Begin(total int)
	Cell(c *Cell, reused bool)
	End()
}

// InterruptedError says a run stopped before every cell of its shard was
// decided. Finished cells are kept in OutDir; running again resumes.
type InterruptedError struct {
	Done, Total int
	Cause       error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("ladder: interrupted after %d of %d cells (%v); run the same command again to finish the rest", e.Done, e.Total, e.Cause)
}

func (e *InterruptedError) Unwrap() error { return e.Cause }

// ReceiptFile is the receipt's name inside OutDir.
const ReceiptFile = "receipt.json"

// Run runs the cells of cfg.Shard and returns the receipt, which is also
// written to OutDir/receipt.json when OutDir is set.
func Run(ctx context.Context, cfg Config) (*Receipt, error) {
	r, err := newRunner(cfg)
	if err != nil {
		return nil, err
	}
	defer r.unlock()
	return r.run(ctx)
}

type runner struct {
	Config
	binary   buildinfo.Identity
	host     hostinfo.Host
	lockFile *os.File
	session  *workerSession // the current model's worker process, with Worker set
}

func newRunner(cfg Config) (*runner, error) {
	r := &runner{Config: cfg}
	if len(r.Verbs) == 0 {
		r.Verbs = DefaultVerbs
	}
	if len(r.Backends) == 0 {
		r.Backends = DefaultBackends
	}
	for _, list := range [][]string{r.Verbs, r.Backends} {
		seen := map[string]bool{}
		for _, s := range list {
			if s == "" || strings.ContainsAny(s, "|/ \t\n") || seen[s] {
				return nil, fmt.Errorf("ladder: verb or backend %q is empty, repeated or has a separator in it", s)
			}
			seen[s] = true
		}
	}
	if r.Shard == (Shard{}) {
		r.Shard = All
	}
	if err := r.Shard.Valid(); err != nil {
		return nil, fmt.Errorf("ladder: %w", err)
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	if r.Grace <= 0 {
		r.Grace = DefaultGrace
	}
	if r.ContractsDigest == "" {
		r.ContractsDigest = NoContracts
	}
	if r.Executors == nil {
		r.Executors = &Executors{}
	}
	if r.SumCache == nil {
		r.SumCache = OpenSumCache("")
	}
	if r.Log == nil {
		r.Log = slog.New(slog.DiscardHandler)
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Binary != nil {
		r.binary = *r.Binary
	} else {
		r.binary = buildinfo.Current()
	}
	if r.Host != nil {
		r.host = *r.Host
	} else {
		r.host = hostinfo.Probe()
	}
	if r.OutDir != "" {
		if err := os.MkdirAll(filepath.Join(r.OutDir, cellsDir), 0o755); err != nil {
			return nil, fmt.Errorf("ladder: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(r.OutDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("ladder: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			return nil, fmt.Errorf("ladder: %s is in use by another ladder run (%v)", r.OutDir, err)
		}
		r.lockFile = f
	}
	return r, nil
}

func (r *runner) unlock() {
	if r.lockFile != nil {
		r.lockFile.Close() // releases the flock
	}
}

func (r *runner) run(ctx context.Context) (*Receipt, error) {
	started := r.Now()
	models, err := Discover(r.Roots)
	if err != nil {
		return nil, err
	}
	universe := newUniverse(r.Roots, models, r.Verbs, r.Backends)
	shards := AssignShards(models, r.Shard.N)
	var mine []*Model
	for i, m := range models {
		if shards[i] == r.Shard.K {
			mine = append(mine, m)
		}
	}
	total := len(mine) * len(r.Verbs) * len(r.Backends)
	if r.Progress != nil {
		r.Progress.Begin(total)
		defer r.Progress.End()
	}
	run := RunRecord{Shard: r.Shard.String(), Host: r.host, Started: started, Cells: total}
	var cells []Cell
	var infos []ModelInfo
	for _, m := range mine {
		info := r.prepare(m)
		if r.Worker != nil {
			r.session = &workerSession{r: r, m: m}
		}
		infos = append(infos, info)
		for _, backend := range r.Backends {
			for _, verb := range r.Verbs {
				if err := ctx.Err(); err != nil {
					r.endSession()
					m.close(r.Log)
					return nil, &InterruptedError{Done: len(cells), Total: total, Cause: err}
				}
				c, reused, err := r.cell(ctx, m, verb, backend)
				if err != nil {
					r.endSession()
					m.close(r.Log)
					if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
						return nil, &InterruptedError{Done: len(cells), Total: total, Cause: err}
					}
					return nil, err
				}
				if reused {
					run.Reused++
				} else {
					run.Executed++
				}
				cells = append(cells, *c)
				if r.Progress != nil {
					r.Progress.Cell(c, reused)
				}
			}
			m.release(r.Log)
		}
		r.endSession()
		m.close(r.Log)
	}
	if err := r.SumCache.Save(); err != nil {
		r.Log.Warn("saving the sha256 cache", "err", err)
	}
	slices.SortFunc(cells, func(a, b Cell) int { return cmp.Compare(a.ID, b.ID) })
	run.Finished = r.Now()
	rec := &Receipt{
		Schema:          SchemaID,
		Binary:          r.binary,
		ContractsDigest: r.ContractsDigest,
		Universe:        universe,
		Runs:            []RunRecord{run},
		Models:          infos,
		Cells:           cells,
		Summary:         summarize(cells),
	}
	if rec.Models == nil {
		rec.Models = []ModelInfo{}
	}
	if rec.Cells == nil {
		rec.Cells = []Cell{}
	}
	if r.OutDir != "" {
		if err := rec.WriteFile(filepath.Join(r.OutDir, ReceiptFile)); err != nil {
			return rec, fmt.Errorf("ladder: writing the receipt: %w", err)
		}
	}
	return rec, nil
}

func (r *runner) endSession() {
	if r.session != nil {
		r.session.close()
		r.session = nil
	}
}

// prepare hashes m and reads its header; what fails refuses the model.
func (r *runner) prepare(m *Model) ModelInfo {
	if m.Refusal == nil {
		if sum, err := r.SumCache.Sum(m); err != nil {
			m.Refusal, m.Broken = refuse.New(ByUniverse, "cannot hash: %v", err), true
		} else {
			m.SHA256 = sum
		}
	}
	if m.Refusal == nil {
		f, err := m.File()
		if err != nil {
			m.Refusal, m.Broken = refuse.New(ByUniverse, "cannot read the GGUF header: %v", err), true
		} else {
			h := ReadHeader(f)
			m.Header = &h
			m.Refusal = modelRefusal(&h)
		}
	}
	info := ModelInfo{Key: m.Key, Path: m.Path, Target: m.Target, Aliases: m.Aliases, Bytes: m.Bytes,
		SHA256: m.SHA256, Header: m.Header, Shard: r.Shard.String()}
	if m.Refusal != nil {
		info.RemovedBy, info.Reason = m.Refusal.By, m.Refusal.Reason
	}
	return info
}

// cell decides one cell: reused from OutDir, refused, or executed. A non-nil
// error means the run was interrupted (ctx) and the cell was not decided.
func (r *runner) cell(ctx context.Context, m *Model, verb, backend string) (*Cell, bool, error) {
	id := CellID(m.Key, verb, backend)
	base := Cell{
		ID:              id,
		Model:           CellModel{Key: m.Key, Path: m.Path, Target: m.Target, Bytes: m.Bytes, SHA256: m.SHA256},
		Verb:            verb,
		Backend:         backend,
		Shard:           r.Shard.String(),
		Binary:          r.binary.SHA256,
		ContractsDigest: r.ContractsDigest,
	}
	if m.Header != nil {
		base.Arch, base.WeightType = m.Header.Architecture, m.Header.DominantType
	}
	if m.Refusal != nil {
		c := base
		c.Verdict, c.RemovedBy, c.Reason = verdict.Refused, m.Refusal.By, m.Refusal.Reason
		if m.Broken {
			c.Verdict, c.RemovedBy, c.Reason = verdict.Fail, "", "the model cannot be read: "+m.Refusal.Reason
		}
		c.Timings.Started = r.Now()
		return &c, false, r.save(&c)
	}
	if prev := r.load(id); prev != nil && r.reusable(prev, &base) {
		prev.Shard = base.Shard
		return prev, true, nil
	}
	c := base
	start := r.Now()
	c.Timings.Started = start
	var res Result
	if r.Gate != nil {
		if ref := r.Gate(m, verb, backend); ref != nil {
			res = Result{Verdict: verdict.Refused, RemovedBy: ref.By, Reason: ref.Reason}
		}
	}
	if res.Verdict == "" {
		fn, ref := r.Executors.Lookup(verb, backend)
		if ref != nil {
			res = Result{Verdict: verdict.Refused, RemovedBy: ref.By, Reason: ref.Reason}
		} else {
			var err error
			res, err = r.execute(ctx, fn, m, verb, backend)
			if err != nil {
				return nil, false, err
			}
		}
	}
	res = res.normalize()
	c.Verdict, c.Reason, c.RemovedBy, c.Detail, c.Values = res.Verdict, res.Reason, res.RemovedBy, res.Detail, res.Values
	c.Timings.Phases = res.Phases
	c.Timings.WallSeconds = r.Now().Sub(start).Seconds()
	return &c, false, r.save(&c)
}

// reusable reports whether an earlier result may stand for this cell.
func (r *runner) reusable(prev, want *Cell) bool {
	return !r.Fresh && prev.ID == want.ID && prev.Verb == want.Verb && prev.Backend == want.Backend &&
		prev.Model.SHA256 != "" && prev.Model.SHA256 == want.Model.SHA256 &&
		prev.Binary != "" && prev.Binary != buildinfo.Unknown && prev.Binary == want.Binary &&
		prev.ContractsDigest == want.ContractsDigest &&
		(prev.Verdict == verdict.Pass || prev.Verdict == verdict.Fail || prev.Verdict == verdict.Refused)
}

// execute runs one cell's executor: in the model's worker process when
// process isolation is on, else in a goroutine (executeCell).
func (r *runner) execute(ctx context.Context, fn CellFunc, m *Model, verb, backend string) (Result, error) {
	if r.session != nil {
		return r.session.exec(ctx, verb, backend)
	}
	return executeCell(ctx, fn, m, verb, backend, r.Timeout, r.Grace, r.Log)
}

// executeCell runs fn under the cell's deadline, turning a panic or a hang
// into the cell's fail. It returns an error only when ctx itself was
// cancelled (the run is being interrupted): that cell is then left
// undecided.
func executeCell(ctx context.Context, fn CellFunc, m *Model, verb, backend string, timeout, grace time.Duration, log *slog.Logger) (Result, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- panicResult(p)
			}
		}()
		done <- fn(cctx, m, backend)
	}()
	var res Result
	select {
	case res = <-done:
	case <-cctx.Done():
		select {
		case res = <-done:
		case <-time.After(grace):
			m.mu.Lock()
			m.leaked = true
			m.mu.Unlock()
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
			log.Warn("cell abandoned: its executor ignored the deadline", "cell", CellID(m.Key, verb, backend))
			return Result{Verdict: verdict.Fail, Reason: fmt.Sprintf("timed out after %s and did not return within %s of cancellation (abandoned)", timeout, grace)}, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		why := fmt.Sprintf("timed out after %s", timeout)
		if res.Reason != "" {
			why += ": " + res.Reason
		}
		return Result{Verdict: verdict.Fail, Reason: why, Phases: res.Phases, Values: res.Values, Detail: res.Detail}, nil
	}
	return res, nil
}

// panicResult names where the panic happened: the first frame outside the
// runtime.
func panicResult(p any) Result {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	where := "unknown location"
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") && f.Function != "" {
			where = fmt.Sprintf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line)
			break
		}
		if !more {
			break
		}
	}
	buf := make([]byte, 16<<10)
	buf = buf[:runtime.Stack(buf, false)]
	return Result{Verdict: verdict.Fail, Reason: fmt.Sprintf("panic in %s: %v", where, p), Detail: string(buf)}
}

const cellsDir = "cells"

func (r *runner) cellPath(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(r.OutDir, cellsDir, hex.EncodeToString(sum[:12])+".json")
}

func (r *runner) load(id string) *Cell {
	if r.OutDir == "" || r.Fresh {
		return nil
	}
	b, err := os.ReadFile(r.cellPath(id))
	if err != nil {
		return nil
	}
	var c Cell
	if err := json.Unmarshal(b, &c); err != nil {
		r.Log.Warn("ignoring an unreadable cell result", "cell", id, "err", err)
		return nil
	}
	return &c
}

func (r *runner) save(c *Cell) error {
	if r.OutDir == "" {
		return nil
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("ladder: encoding cell %s: %w", c.ID, err)
	}
	// Not fsynced: one fsync per cell costs more than most cells; a torn
	// file after a machine crash is re-run (see writeAtomic).
	if err := writeAtomic(r.cellPath(c.ID), append(b, '\n'), false); err != nil {
		return fmt.Errorf("ladder: saving cell %s: %w", c.ID, err)
	}
	return nil
}
