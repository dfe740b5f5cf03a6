package ladder

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/refuse"
)

// ByUniverse is the refuser named when a file cannot take part at all: a
// dangling link, an unreadable file, a .gguf file without the GGUF magic, a
// GGUF file that is not a model.
const ByUniverse = "ladder:universe"

// Model is one GGUF file of the universe. Path is where it was found;
// everything else (bytes, sha256, header) describes the one object that path
// resolves to, so a symlink's receipt is its target's.
type Model struct {
	Key     string    // stable name across machines: root's base name + path under the root, slash-separated
	Path    string    // as found under the root (symlinks not resolved)
	Target  string    // the resolved file, when it differs from Path
	Aliases []string  // other paths under the roots that resolve to the same file
	Bytes   int64     // of the target
	ModTime time.Time // of the target

	// Refusal is set when the file cannot take part (see ByUniverse); its
	// cells are refused with this reason, or failed when Broken.
	Refusal *refuse.Error
	// Broken is set with Refusal when the file claims to be a model but
	// cannot be read as one (a dangling link, a truncated or corrupt GGUF,
	// a *.gguf without the magic, a FIFO): the file is broken, not the
	// question unanswerable, so its cells fail. A readable GGUF that is not
	// a model (an imatrix, a vocabulary) stays refused.
	Broken bool

	// Filled by the runner for models in its shard.
	SHA256 string
	Header *Header

	mu       sync.Mutex
	file     *gguf.File
	resident []residentEntry
	leaked   bool // a cell was abandoned while it may still use the mapping
}

type residentEntry struct {
	key string
	val io.Closer
}

// File returns the model's GGUF file, mapped once and kept until the runner
// is done with the model. Executors share it; they must not Close it.
func (m *Model) File() (*gguf.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.file != nil {
		return m.file, nil
	}
	f, err := gguf.Open(m.realPath())
	if err != nil {
		return nil, err
	}
	m.file = f
	return f, nil
}

// Keep returns the object kept under key (an engine loaded for a backend,
// say), loading it with load the first time. Kept objects stay resident
// while the model's cells on the current backend run, and are closed by the
// runner afterwards. Executors use it so that run and logits on one backend
// load the engine once.
func (m *Model) Keep(key string, load func() (io.Closer, error)) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.resident {
		if e.key == key {
			return e.val, nil
		}
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	m.resident = append(m.resident, residentEntry{key, v})
	return v, nil
}

// release closes the kept objects (in reverse order of loading). When a cell
// was abandoned, nothing is closed: the abandoned goroutine may still use it.
func (m *Model) release(log *slog.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leaked {
		return
	}
	for i := len(m.resident) - 1; i >= 0; i-- {
		if err := m.resident[i].val.Close(); err != nil {
			log.Warn("closing a resident object", "model", m.Key, "key", m.resident[i].key, "err", err)
		}
	}
	m.resident = nil
}

// close releases everything, the mapping last.
func (m *Model) close(log *slog.Logger) {
	m.release(log)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leaked {
		log.Warn("model left mapped: a cell was abandoned while it may still use it", "model", m.Key)
		return
	}
	if m.file != nil {
		if err := m.file.Close(); err != nil {
			log.Warn("unmapping model", "model", m.Key, "err", err)
		}
		m.file = nil
	}
}

func (m *Model) realPath() string {
	if m.Target != "" {
		return m.Target
	}
	return m.Path
}

// ggufMagic is what a GGUF file starts with.
var ggufMagic = []byte("GGUF")

// Discover walks roots (directories or single files) and returns the models
// found, sorted by Key.
//
// What counts as a model is decided by content, not by name:
//   - a regular file (or a link to one) that starts with the GGUF magic is a
//     model, whatever its name;
//   - a file named *.gguf that does not start with the magic is kept as a
//     refused model (it claims to be one), so a corrupt download is visible;
//   - a dangling symlink is kept as a refused model, whatever its name: what
//     it pointed at cannot be known;
//   - any other file is not a model and is ignored.
//
// Symlinked directories are followed once each (a loop is cut where a
// directory is seen again). Paths that resolve to the same file become one
// model with Aliases. Whether a GGUF file is a model (general.type) is
// decided later, when its header is read.
func Discover(roots []string) ([]*Model, error) {
	if len(roots) == 0 {
		return nil, errors.New("ladder: no directory given")
	}
	d := &discoverer{seenDirs: map[string]bool{}, byReal: map[string]*Model{}}
	bases := map[string]string{}
	for _, root := range roots {
		root = filepath.Clean(root)
		st, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("ladder: root %s: %w", root, err)
		}
		base := filepath.Base(root)
		if abs, err := filepath.Abs(root); err == nil {
			base = filepath.Base(abs)
		}
		if other, dup := bases[base]; dup {
			return nil, fmt.Errorf("ladder: roots %s and %s have the same base name %q: model keys would collide", other, root, base)
		}
		bases[base] = root
		if !st.IsDir() {
			d.file(root, base, root)
			continue
		}
		if err := d.dir(root, base, root); err != nil {
			return nil, err
		}
	}
	models := d.models
	slices.SortFunc(models, func(a, b *Model) int { return cmp.Compare(a.Key, b.Key) })
	for _, m := range models {
		slices.Sort(m.Aliases)
	}
	return models, nil
}

type discoverer struct {
	seenDirs map[string]bool
	byReal   map[string]*Model
	models   []*Model
}

// dir walks one directory. path is the path as found; key the model key
// prefix for it.
func (d *discoverer) dir(path, key, root string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("ladder: %s: %w", path, err)
	}
	if d.seenDirs[real] {
		return nil
	}
	d.seenDirs[real] = true
	ents, err := os.ReadDir(path)
	if err != nil {
		if path == root {
			return fmt.Errorf("ladder: %w", err)
		}
		// An unreadable subdirectory might hold models: say so as a refusal
		// rather than leave them out silently.
		d.add(&Model{Key: key, Path: path, Broken: true, Refusal: refuse.New(ByUniverse, "directory cannot be read: %v", err)})
		return nil
	}
	for _, e := range ents { // ReadDir sorts by name
		p := filepath.Join(path, e.Name())
		k := key + "/" + e.Name()
		switch {
		case e.IsDir():
			if err := d.dir(p, k, root); err != nil {
				return err
			}
		case e.Type()&fs.ModeSymlink != 0:
			st, err := os.Stat(p)
			switch {
			case err != nil:
				target, _ := os.Readlink(p)
				d.add(&Model{Key: k, Path: p, Target: target, Broken: true,
					Refusal: refuse.New(ByUniverse, "dangling symlink to %q: %v", target, unwrapPath(err))})
			case st.IsDir():
				if err := d.dir(p, k, root); err != nil {
					return err
				}
			default:
				d.file(p, k, root)
			}
		case e.Type().IsRegular():
			d.file(p, k, root)
		case strings.EqualFold(filepath.Ext(p), ".gguf"):
			// A FIFO, socket or device named *.gguf claims to be a model:
			// file refuses it as not a regular file (never opening it, so a
			// FIFO cannot block the walk) rather than leave it out silently.
			d.file(p, k, root)
		}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// file considers one file (or link to a file).
func (d *discoverer) file(path, key, root string) {
	claims := strings.EqualFold(filepath.Ext(path), ".gguf")
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if claims {
			d.add(&Model{Key: key, Path: path, Broken: true, Refusal: refuse.New(ByUniverse, "cannot resolve: %v", err)})
		}
		return
	}
	st, err := os.Stat(real)
	if err != nil || !st.Mode().IsRegular() {
		if claims {
			why := "not a regular file"
			if err != nil {
				why = unwrapPath(err).Error()
			}
			d.add(&Model{Key: key, Path: path, Broken: true, Refusal: refuse.New(ByUniverse, "%s", why)})
		}
		return
	}
	m := &Model{Key: key, Path: path, Bytes: st.Size(), ModTime: st.ModTime()}
	if real != path {
		m.Target = real
	}
	if prev, ok := d.byReal[real]; ok {
		// One object, several names. Prefer the name that is the file itself
		// over a link to it, else the first found.
		if path == real && prev.Target != "" {
			prev.Aliases = append(prev.Aliases, prev.Path)
			prev.Key, prev.Path, prev.Target = key, path, ""
			return
		}
		prev.Aliases = append(prev.Aliases, path)
		return
	}
	head, err := readHead(real)
	switch {
	case err != nil:
		if !claims {
			return
		}
		m.Refusal, m.Broken = refuse.New(ByUniverse, "cannot read: %v", err), true
	case !bytes.Equal(head, ggufMagic):
		if !claims {
			return
		}
		m.Refusal, m.Broken = refuse.New(ByUniverse, "named .gguf but not a GGUF file: starts with %q, want \"GGUF\"", head), true
	}
	d.byReal[real] = m
	d.add(m)
}

func (d *discoverer) add(m *Model) { d.models = append(d.models, m) }

func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	b := make([]byte, len(ggufMagic))
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}
