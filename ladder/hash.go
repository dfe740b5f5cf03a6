package ladder

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/aprqa/apr/internal/regfile"

	"github.com/aprqa/apr/internal/atomicfile"
)

// SumCache remembers file sha256 sums keyed by (absolute resolved path,
// size, modification time), so an unchanged model is hashed once. A file
// that changes in place keeps its size and mtime only if someone forges
// them; the ladder accepts that, as make and go do.
//
// The cache is one JSON file, rewritten atomically by Save. A missing or
// unreadable cache file is an empty cache, never an error: the sums are
// recomputed.
type SumCache struct {
	path string
	mu   sync.Mutex
	m    map[string]sumEntry
	// Hashed counts the files actually read (not served from the cache).
	Hashed int
}

type sumEntry struct {
	Size    int64  `json:"size"`
	MTimeNS int64  `json:"mtime_ns"`
	SHA256  string `json:"sha256"`
}

// OpenSumCache loads the cache at path; path "" gives a cache that lives in
// memory only.
func OpenSumCache(path string) *SumCache {
	c := &SumCache{path: path, m: map[string]sumEntry{}}
	if path == "" {
		return c
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c
	}
	var m map[string]sumEntry
	if json.Unmarshal(b, &m) == nil && m != nil {
		c.m = m
	}
	return c
}

// Sum returns the sha256 of the file m resolves to.
func (c *SumCache) Sum(m *Model) (string, error) {
	real := m.realPath()
	abs, err := filepath.Abs(real)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	e, ok := c.m[abs]
	c.mu.Unlock()
	if ok && e.Size == st.Size() && e.MTimeNS == st.ModTime().UnixNano() && len(e.SHA256) == 64 {
		return e.SHA256, nil
	}
	sum, n, err := regfile.SHA256(abs)
	if err != nil {
		return "", err
	}
	if n != st.Size() {
		return "", fmt.Errorf("hashing %s: read %d bytes, stat said %d: the file changed while it was read", abs, n, st.Size())
	}
	c.mu.Lock()
	c.m[abs] = sumEntry{Size: st.Size(), MTimeNS: st.ModTime().UnixNano(), SHA256: sum}
	c.Hashed++
	c.mu.Unlock()
	return sum, nil
}

// Save writes the cache back atomically. A cache without a path is not saved.
func (c *SumCache) Save() error {
	if c.path == "" {
		return nil
	}
	c.mu.Lock()
	b, err := json.MarshalIndent(c.m, "", " ")
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(c.path, append(b, '\n'))
}

// writeFileAtomic writes b to a temporary file beside path, syncs it and
// renames it over path, so a reader (or a run killed half-way) sees either
// the old file or the whole new one.
func writeFileAtomic(path string, b []byte) error { return writeAtomic(path, b, true) }

// writeAtomic is writeFileAtomic with the fsyncs optional. Without them the
// rename is still atomic for every process (a killed run leaves the old file
// or the new one); only a machine crash can leave a torn file, which the
// cell loader then fails to decode and re-runs the cell.
func writeAtomic(path string, b []byte, durable bool) error {
	return atomicfile.Write(path, durable, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}
