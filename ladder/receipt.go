package ladder

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aprqa/apr/internal/buildinfo"
	"github.com/aprqa/apr/internal/hostinfo"
	"github.com/aprqa/apr/verdict"
)

// SchemaID names the receipt format; it changes when a field changes meaning.
const SchemaID = "apr/ladder-receipt/v1"

// Receipt is one ladder run's record (or the merge of several shards' runs):
// which binary judged which model objects under which contracts, on which
// hosts, and every cell's verdict.
type Receipt struct {
	Schema          string             `json:"schema"`
	Binary          buildinfo.Identity `json:"binary"`
	ContractsDigest string             `json:"contracts_digest"`
	Universe        Universe           `json:"universe"`
	Runs            []RunRecord        `json:"runs"`
	Models          []ModelInfo        `json:"models"`
	Cells           []Cell             `json:"cells"`
	Summary         Summary            `json:"summary"`
}

// Universe is every cell the run was asked about, across all shards.
type Universe struct {
	Roots    []string `json:"roots"` // as given on the command line (informational; paths differ across machines)
	Verbs    []string `json:"verbs"`
	Backends []string `json:"backends"`
	Models   []string `json:"models"` // every model key, sorted
	Cells    int      `json:"cells"`
	// Digest is the sha256 of verbs, backends and model keys: shards agree on
	// it exactly when they sliced the same universe.
	Digest string `json:"digest"`
}

// RunRecord is one execution of the ladder: one shard on one host.
type RunRecord struct {
	Shard    string        `json:"shard"`
	Host     hostinfo.Host `json:"host"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Cells    int           `json:"cells"`    // cells in this shard
	Executed int           `json:"executed"` // cells decided in this run
	Reused   int           `json:"reused"`   // cells taken from an earlier, interrupted run of the same binary, models and contracts
}

// ModelInfo is one model object as the receipt records it.
type ModelInfo struct {
	Key       string   `json:"key"`
	Path      string   `json:"path"`
	Target    string   `json:"target,omitempty"`
	Aliases   []string `json:"aliases,omitempty"`
	Bytes     int64    `json:"bytes"`
	SHA256    string   `json:"sha256,omitempty"`
	Header    *Header  `json:"header,omitempty"`
	RemovedBy string   `json:"removed_by,omitempty"` // set when the model could not take part
	Reason    string   `json:"reason,omitempty"`
	Shard     string   `json:"shard"`
}

// Summary counts verdicts.
type Summary struct {
	Cells   int `json:"cells"`
	Pass    int `json:"pass"`
	Fail    int `json:"fail"`
	Refused int `json:"refused"`
}

func (s Summary) String() string {
	return fmt.Sprintf("%d cells: %d pass, %d fail, %d refused", s.Cells, s.Pass, s.Fail, s.Refused)
}

func summarize(cells []Cell) Summary {
	s := Summary{Cells: len(cells)}
	for _, c := range cells {
		switch c.Verdict {
		case verdict.Pass:
			s.Pass++
		case verdict.Fail:
			s.Fail++
		case verdict.Refused:
			s.Refused++
		}
	}
	return s
}

func newUniverse(roots []string, models []*Model, verbs, backends []string) Universe {
	u := Universe{Roots: slices.Clone(roots), Verbs: slices.Clone(verbs), Backends: slices.Clone(backends)}
	for _, m := range models {
		u.Models = append(u.Models, m.Key)
	}
	slices.Sort(u.Models)
	if u.Models == nil {
		u.Models = []string{}
	}
	u.Cells = len(u.Models) * len(verbs) * len(backends)
	b, _ := json.Marshal(struct {
		V, B, M []string
	}{u.Verbs, u.Backends, u.Models})
	sum := sha256.Sum256(b)
	u.Digest = hex.EncodeToString(sum[:])
	return u
}

// CellIDs lists every cell of the universe, sorted.
func (u Universe) CellIDs() []string {
	ids := make([]string, 0, u.Cells)
	for _, m := range u.Models {
		for _, v := range u.Verbs {
			for _, b := range u.Backends {
				ids = append(ids, CellID(m, v, b))
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// Verdicts maps cell id to "verdict|removed_by|reason": what two runs must
// agree on to have judged alike (timings and measured values may differ).
func (r *Receipt) Verdicts() map[string]string {
	m := make(map[string]string, len(r.Cells))
	for _, c := range r.Cells {
		m[c.ID] = string(c.Verdict) + "|" + c.RemovedBy + "|" + c.Reason
	}
	return m
}

// ErrMerge wraps every reason receipts cannot be merged.
var ErrMerge = errors.New("receipts cannot be merged")

// Merge combines shard receipts into one. They must come from the same
// binary (sha256 of the executable), the same contracts digest and the same
// universe; together they must cover every cell of it, and where two cover
// the same cell their verdicts must agree.
func Merge(rs []*Receipt) (*Receipt, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: no receipt given", ErrMerge)
	}
	first := rs[0]
	out := &Receipt{Schema: SchemaID, Binary: first.Binary, ContractsDigest: first.ContractsDigest, Universe: first.Universe}
	out.Universe.Roots = nil
	cells := map[string]Cell{}
	models := map[string]ModelInfo{}
	for i, r := range rs {
		where := fmt.Sprintf("receipt %d (shard %s)", i+1, shardsOf(r))
		switch {
		case r.Schema != SchemaID:
			return nil, fmt.Errorf("%w: %s has schema %q, want %q", ErrMerge, where, r.Schema, SchemaID)
		case r.Binary.SHA256 == "" || r.Binary.SHA256 == buildinfo.Unknown:
			return nil, fmt.Errorf("%w: %s does not know the sha256 of its binary", ErrMerge, where)
		case r.Binary.SHA256 != first.Binary.SHA256:
			return nil, fmt.Errorf("%w: %s was produced by binary %s, receipt 1 by %s", ErrMerge, where, r.Binary.Short(), first.Binary.Short())
		case r.ContractsDigest != first.ContractsDigest:
			return nil, fmt.Errorf("%w: %s was judged under contracts %s, receipt 1 under %s", ErrMerge, where, r.ContractsDigest, first.ContractsDigest)
		case r.Universe.Digest != first.Universe.Digest:
			return nil, fmt.Errorf("%w: %s sliced another universe (%d models × %v × %v) than receipt 1 (%d models × %v × %v)",
				ErrMerge, where, len(r.Universe.Models), r.Universe.Verbs, r.Universe.Backends,
				len(first.Universe.Models), first.Universe.Verbs, first.Universe.Backends)
		}
		for _, root := range r.Universe.Roots {
			if !slices.Contains(out.Universe.Roots, root) {
				out.Universe.Roots = append(out.Universe.Roots, root)
			}
		}
		out.Runs = append(out.Runs, r.Runs...)
		for _, c := range r.Cells {
			if prev, ok := cells[c.ID]; ok {
				if prev.Verdict != c.Verdict || prev.Reason != c.Reason || prev.RemovedBy != c.RemovedBy {
					return nil, fmt.Errorf("%w: cell %s is %s in one receipt and %s in %s", ErrMerge, c.ID, prev.Verdict, c.Verdict, where)
				}
				continue
			}
			cells[c.ID] = c
		}
		for _, m := range r.Models {
			if prev, ok := models[m.Key]; ok && prev.SHA256 != m.SHA256 && prev.SHA256 != "" && m.SHA256 != "" {
				return nil, fmt.Errorf("%w: model %s has sha256 %s in one receipt and %s in %s", ErrMerge, m.Key, prev.SHA256, m.SHA256, where)
			}
			models[m.Key] = m
		}
	}
	var missing []string
	for _, id := range out.Universe.CellIDs() {
		c, ok := cells[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		out.Cells = append(out.Cells, c)
	}
	if len(missing) > 0 {
		show := missing[:min(len(missing), 5)]
		return nil, fmt.Errorf("%w: %d of %d cells are in no receipt (a shard is missing?), e.g. %s",
			ErrMerge, len(missing), out.Universe.Cells, strings.Join(show, ", "))
	}
	if len(cells) != len(out.Cells) {
		return nil, fmt.Errorf("%w: receipts hold %d cells that are not in their universe", ErrMerge, len(cells)-len(out.Cells))
	}
	for _, m := range models {
		out.Models = append(out.Models, m)
	}
	slices.SortFunc(out.Models, func(a, b ModelInfo) int { return cmp.Compare(a.Key, b.Key) })
	slices.SortFunc(out.Runs, func(a, b RunRecord) int { return cmp.Compare(a.Shard, b.Shard) })
	out.Summary = summarize(out.Cells)
	return out, nil
}

func shardsOf(r *Receipt) string {
	var s []string
	for _, run := range r.Runs {
		s = append(s, run.Shard)
	}
	if len(s) == 0 {
		return "?"
	}
	return strings.Join(s, ",")
}

// ReadReceipt reads and decodes a receipt file, refusing unknown fields so a
// receipt of another format is not half-read.
func ReadReceipt(path string) (*Receipt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeReceipt(path, b)
}

// DecodeReceipt decodes b (named name in errors).
func DecodeReceipt(name string, b []byte) (*Receipt, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var r Receipt
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: not a ladder receipt: %w", name, err)
	}
	if r.Schema != SchemaID {
		return nil, fmt.Errorf("%s: schema %q, want %q", name, r.Schema, SchemaID)
	}
	return &r, nil
}

// Encode returns the receipt as indented JSON with a trailing newline.
func (r *Receipt) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteFile writes the receipt atomically.
func (r *Receipt) WriteFile(path string) error {
	b, err := r.Encode()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}
