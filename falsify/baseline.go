package falsify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/aprqa/apr/internal/atomicfile"
	"github.com/aprqa/apr/internal/hostinfo"
)

// HostKey identifies the machine a baseline was measured on: what decides
// its speed (OS, architecture, CPU model and features, cores, GPUs), not its
// name.
type HostKey struct {
	Fingerprint string `json:"fingerprint"` // 16 hex digits of a sha256 over the fields below
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	CPUModel    string `json:"cpu_model"`
	Cores       int    `json:"cores"`
	CPUFeatures string `json:"cpu_features"`
	GPUs        string `json:"gpus,omitempty"`
}

// HostKeyOf is h's HostKey.
func HostKeyOf(h hostinfo.Host) HostKey {
	var gpus []string
	for _, g := range h.GPUs {
		gpus = append(gpus, g.Vendor+" "+g.Model)
	}
	sort.Strings(gpus)
	feats := append([]string(nil), h.CPUFeatures...)
	sort.Strings(feats)
	k := HostKey{OS: h.OS, Arch: h.Arch, CPUModel: h.CPUModel, Cores: h.Cores,
		CPUFeatures: strings.Join(feats, " "), GPUs: strings.Join(gpus, "; ")}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\n%s\n%s\n%d\n%s\n%s", k.OS, k.Arch, k.CPUModel, k.Cores, k.CPUFeatures, k.GPUs)))
	k.Fingerprint = hex.EncodeToString(sum[:8])
	return k
}

// ThisHost is this machine's HostKey, probed once per process.
var ThisHost = sync.OnceValue(func() HostKey { return HostKeyOf(hostinfo.Probe()) })

// BaselineFormat is the version of the baseline file.
const BaselineFormat = 1

// Baselines is the baseline file: throughput samples per (model sha256,
// host fingerprint, backend).
type Baselines struct {
	Format  int                  `json:"format"`
	Entries map[string]*Baseline `json:"entries"` // key: BaselineKey
}

// Baseline is the throughput recorded for one model on one host and
// backend, with the parameters it was measured with.
type Baseline struct {
	ModelSHA256 string    `json:"model_sha256"`
	Model       string    `json:"model"`
	Host        HostKey   `json:"host"`
	Backend     string    `json:"backend"`
	Prompt      string    `json:"prompt"`
	Tokens      int       `json:"tokens"`
	Threads     int       `json:"threads"`
	Recorded    string    `json:"recorded"` // RFC 3339, when the samples were measured
	Decode      []float64 `json:"decode_tok_per_s"`
	Prefill     []float64 `json:"prefill_tok_per_s"`
}

// BaselineKey is the key of a baseline entry.
func BaselineKey(modelSHA, host, backend string) string {
	return modelSHA + "|" + host + "|" + backend
}

// DefaultBaselineFile is where baselines live unless --baseline says
// otherwise: apr/qa-baselines.json under the user's configuration directory
// (they are state a team curates, not a cache to be wiped).
func DefaultBaselineFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("qa: no configuration directory for the baseline file (use --baseline FILE): %w", err)
	}
	return filepath.Join(dir, "apr", "qa-baselines.json"), nil
}

// ErrBaselineFile marks a baseline file that exists but cannot be used.
var ErrBaselineFile = errors.New("qa: unusable baseline file")

// LoadBaselines reads the baseline file; a file that does not exist is an
// empty set. A file that exists but does not parse is an error (never
// treated as empty: that would let --accept-baseline overwrite it).
func LoadBaselines(path string) (*Baselines, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Baselines{Format: BaselineFormat, Entries: map[string]*Baseline{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBaselineFile, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var bl Baselines
	if err := dec.Decode(&bl); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBaselineFile, path, err)
	}
	if bl.Format != BaselineFormat {
		return nil, fmt.Errorf("%w: %s: format %d, this apr reads %d", ErrBaselineFile, path, bl.Format, BaselineFormat)
	}
	if bl.Entries == nil {
		bl.Entries = map[string]*Baseline{}
	}
	for k, e := range bl.Entries {
		if e == nil || k != BaselineKey(e.ModelSHA256, e.Host.Fingerprint, e.Backend) {
			return nil, fmt.Errorf("%w: %s: entry %q does not match its own model, host and backend", ErrBaselineFile, path, k)
		}
		if len(e.Decode) < 2 || len(e.Prefill) < 2 {
			return nil, fmt.Errorf("%w: %s: entry %q has fewer than 2 samples", ErrBaselineFile, path, k)
		}
		for _, v := range append(append([]float64(nil), e.Decode...), e.Prefill...) {
			if !(v > 0) {
				return nil, fmt.Errorf("%w: %s: entry %q has a sample %v that is not a positive rate", ErrBaselineFile, path, k, v)
			}
		}
	}
	return &bl, nil
}

// Save writes the baselines to path atomically: a temporary file in the
// same directory, synced, then renamed over path.
func (b *Baselines) Save(path string) error {
	b.Format = BaselineFormat
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return fmt.Errorf("qa: baselines: %w", err)
	}
	data = append(data, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("qa: baselines: %w", err)
	}
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("qa: baselines: %w", err)
	}
	return nil
}
