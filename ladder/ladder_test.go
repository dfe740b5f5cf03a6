package ladder_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/ladder"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
)

func TestDiscover(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	good := writeModel(t, root, "good.gguf", "llama", quant.F32, 1)
	writeModel(t, root, "deep/a/b/renamed.bin", "qwen2", quant.F16, 2) // GGUF without the extension
	must(t, os.WriteFile(filepath.Join(root, "fake.gguf"), []byte("not a model at all"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "empty.GGUF"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(root, "notes.txt"), []byte("hello"), 0o644))
	must(t, os.Symlink("good.gguf", filepath.Join(root, "link.gguf")))
	must(t, os.Symlink("missing.gguf", filepath.Join(root, "dangling.gguf")))
	must(t, os.Symlink("nowhere", filepath.Join(root, "dangling-noext")))
	must(t, os.Symlink("deep", filepath.Join(root, "deeplink"))) // symlinked directory: followed once
	must(t, os.Symlink("..", filepath.Join(root, "deep", "loop")))
	must(t, syscall.Mkfifo(filepath.Join(root, "pipe.gguf"), 0o644)) // never opened: a FIFO would block the walk
	must(t, syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644))      // not named a model: not one

	models, err := ladder.Discover([]string{root})
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	type got struct {
		Key, Refusal string
		Broken       bool
		Aliases      []string
	}
	var gs []got
	for _, m := range models {
		g := got{Key: m.Key, Broken: m.Broken}
		if m.Refusal != nil {
			g.Refusal = m.Refusal.By
		}
		for _, a := range m.Aliases {
			rel, _ := filepath.Rel(root, a)
			g.Aliases = append(g.Aliases, rel)
		}
		gs = append(gs, g)
	}
	want := []got{
		{Key: "tree/dangling-noext", Refusal: ladder.ByUniverse, Broken: true},
		{Key: "tree/dangling.gguf", Refusal: ladder.ByUniverse, Broken: true},
		{Key: "tree/deep/a/b/renamed.bin"}, // deeplink/ is the same directory: walked once
		{Key: "tree/empty.GGUF", Refusal: ladder.ByUniverse, Broken: true},
		{Key: "tree/fake.gguf", Refusal: ladder.ByUniverse, Broken: true},
		{Key: "tree/good.gguf", Aliases: []string{"link.gguf"}},
		{Key: "tree/pipe.gguf", Refusal: ladder.ByUniverse, Broken: true},
	}
	if diff := cmp.Diff(want, gs); diff != "" {
		t.Errorf("Discover(%s) mismatch (-want +got):\n%s", root, diff)
	}
	for _, m := range models {
		switch m.Key {
		case "tree/dangling.gguf":
			if !strings.Contains(m.Refusal.Reason, "dangling symlink") || !strings.Contains(m.Refusal.Reason, "missing.gguf") {
				t.Errorf("dangling link reason = %q, want it to name the link and its target", m.Refusal.Reason)
			}
		case "tree/fake.gguf":
			if !strings.Contains(m.Refusal.Reason, "not a GGUF file") {
				t.Errorf("fake.gguf reason = %q, want 'not a GGUF file'", m.Refusal.Reason)
			}
		case "tree/good.gguf":
			st, _ := os.Stat(good)
			if m.Bytes != st.Size() {
				t.Errorf("good.gguf Bytes = %d, want %d", m.Bytes, st.Size())
			}
		}
	}
}

func TestDiscoverSymlinkReceiptDescribesTarget(t *testing.T) {
	dir := t.TempDir()
	target := writeModel(t, filepath.Join(dir, "store"), "real.gguf", "llama", quant.F32, 3)
	root := filepath.Join(dir, "zoo")
	must(t, os.MkdirAll(root, 0o755))
	must(t, os.Symlink(target, filepath.Join(root, "model.gguf")))
	must(t, os.Symlink(filepath.Join(dir, "gone.gguf"), filepath.Join(root, "gone.gguf")))

	rec, err := ladder.Run(context.Background(), baseConfig(root))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	st, _ := os.Stat(target)
	var linked, gone *ladder.ModelInfo
	for i := range rec.Models {
		switch rec.Models[i].Key {
		case "zoo/model.gguf":
			linked = &rec.Models[i]
		case "zoo/gone.gguf":
			gone = &rec.Models[i]
		}
	}
	if linked == nil || gone == nil {
		t.Fatalf("Run: models %v, want zoo/model.gguf and zoo/gone.gguf", rec.Models)
	}
	if linked.Target != target || linked.Bytes != st.Size() || len(linked.SHA256) != 64 || linked.Header == nil {
		t.Errorf("symlinked model = %+v, want target %s with its %d bytes, sha256 and header", linked, target, st.Size())
	}
	if gone.RemovedBy != ladder.ByUniverse || !strings.Contains(gone.Reason, "dangling") {
		t.Errorf("dangling model = %+v, want removed by %s with a reason naming the dangling link", gone, ladder.ByUniverse)
	}
	for _, c := range rec.Cells {
		// A model that cannot be read is a broken file, not an unanswerable
		// question: its cells fail (a CI gate must not go green on it).
		if c.Model.Key == "zoo/gone.gguf" && (c.Verdict != verdict.Fail || !strings.Contains(c.Reason, "dangling")) {
			t.Errorf("cell %s = %s (%q), want fail naming the dangling link", c.ID, c.Verdict, c.Reason)
		}
	}
}

// TestHeaderFixtures checks the header summary against the fixtures'
// manifest, which gguf-py wrote: parameter counts, tensor-type histograms and
// sha256 must agree, and the dominant type must be the variant's base type.
func TestHeaderFixtures(t *testing.T) {
	synth := testutil.Fixture(t, "models/synth")
	b, err := os.ReadFile(filepath.Join(synth, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		Models []struct {
			File       string         `json:"file"`
			Arch       string         `json:"arch"`
			Variant    string         `json:"variant"`
			SHA256     string         `json:"sha256"`
			Bytes      int64          `json:"bytes"`
			Params     int64          `json:"n_params"`
			TypeCounts map[string]int `json:"tensor_type_counts"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	rec, err := ladder.Run(context.Background(), baseConfig(synth))
	if err != nil {
		t.Fatalf("Run(%s): %v", synth, err)
	}
	infos := map[string]ladder.ModelInfo{}
	for _, m := range rec.Models {
		infos[filepath.Base(m.Path)] = m
	}
	checked := 0
	for _, want := range man.Models {
		got, ok := infos[want.File]
		if !ok {
			continue // the manifest lists variants kept back from this trimmed copy
		}
		checked++
		t.Run(want.File, func(t *testing.T) {
			if got.Header == nil {
				t.Fatalf("no header: %s %s", got.RemovedBy, got.Reason)
			}
			type facts struct {
				Arch, SHA256 string
				Bytes        int64
				Params       int64
				TypeCounts   map[string]int
			}
			w := facts{want.Arch, want.SHA256, want.Bytes, want.Params, want.TypeCounts}
			g := facts{got.Header.Architecture, got.SHA256, got.Bytes, got.Header.Params, got.Header.TypeCounts}
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("header of %s mismatch (-manifest +ladder):\n%s", want.File, diff)
			}
			if !strings.HasPrefix(want.Variant, got.Header.DominantType) {
				t.Errorf("DominantType = %s, want the base type of variant %s", got.Header.DominantType, want.Variant)
			}
		})
	}
	if checked < 20 {
		t.Errorf("checked %d fixture models against the manifest, want at least 20", checked)
	}
	// The imatrix GGUF in the tree is a GGUF but not a model: refused, visibly.
	for _, m := range rec.Models {
		if strings.HasSuffix(m.Key, ".imatrix.gguf") && (m.RemovedBy != ladder.ByUniverse || !strings.Contains(m.Reason, "imatrix")) {
			t.Errorf("imatrix file: removed by %q (%s), want %s naming general.type", m.RemovedBy, m.Reason, ladder.ByUniverse)
		}
	}
}

func TestCellIsolation(t *testing.T) {
	root := modelTree(t, 2)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	e := &ladder.Executors{}
	e.Register("pass", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		return ladder.Passed(ladder.Value{Name: "x", Value: 1, Unit: "tok/s"})
	}, "ref")
	e.Register("fail", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		return ladder.Failed("planted failure on %s", m.Key)
	}, "ref")
	e.Register("panic", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		var s []int
		_ = s[3] // index out of range
		return ladder.Passed()
	}, "ref")
	e.Register("hang", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		<-release // ignores its deadline
		return ladder.Passed()
	}, "ref")
	e.Register("slow", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		<-ctx.Done() // honours its deadline
		return ladder.Failed("stopped: %v", ctx.Err())
	}, "ref")
	e.Register("late", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		<-ctx.Done()
		return ladder.Passed() // claims a pass after its deadline
	}, "ref")
	e.Register("nan", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		return ladder.Passed(ladder.Value{Name: "cosine", Value: nanValue()})
	}, "ref")
	e.Register("refuse", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		return ladder.FromError(refuse.New("engine/ref", "architecture %q is not supported", "llama"))
	}, "ref")
	e.Register("bogus", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		return ladder.Result{Verdict: "skipped"}
	}, "ref")
	e.Register("pass", func(ctx context.Context, m *ladder.Model, b string) ladder.Result { return ladder.Passed() }, "cpu")
	cfg := baseConfig(root)
	cfg.Verbs = []string{"pass", "fail", "panic", "hang", "slow", "late", "nan", "refuse", "bogus", "none"}
	cfg.Backends = []string{"ref", "cpu"}
	cfg.Executors = e
	cfg.Timeout = 100 * time.Millisecond
	cfg.Grace = 50 * time.Millisecond

	rec, err := ladder.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rec.Summary.Cells != 2*10*2 {
		t.Fatalf("Run: %s, want 40 cells", rec.Summary)
	}
	tests := []struct {
		name, verb, backend string
		verdict             verdict.Verdict
		by, reason          string
	}{
		{"pass", "pass", "ref", verdict.Pass, "", ""},
		{"fail keeps its reason", "fail", "ref", verdict.Fail, "", "planted failure on zoo/m00.gguf"},
		{"panic is the cell's fail", "panic", "ref", verdict.Fail, "", "panic in "},
		{"hang is abandoned", "hang", "ref", verdict.Fail, "", "timed out after 100ms and did not return"},
		{"slow times out", "slow", "ref", verdict.Fail, "", "timed out after 100ms: stopped: context deadline exceeded"},
		{"a pass after the deadline is a fail", "late", "ref", verdict.Fail, "", "timed out after 100ms"},
		{"NaN fails", "nan", "ref", verdict.Fail, "", "non-finite or negative value: cosine=NaN"},
		{"refusal keeps its refuser", "refuse", "ref", verdict.Refused, "engine/ref", `architecture "llama" is not supported`},
		{"unknown verdict fails", "bogus", "ref", verdict.Fail, "", `verdict "skipped"`},
		{"verb without executor", "none", "ref", verdict.Refused, ladder.ByLadder, "no executor for verb none"},
		{"backend without executor", "fail", "cpu", verdict.Refused, ladder.ByLadder, "no executor for verb fail on backend cpu (it has: ref)"},
		{"other backend passes", "pass", "cpu", verdict.Pass, "", ""},
	}
	cells := map[string]ladder.Cell{}
	for _, c := range rec.Cells {
		cells[c.ID] = c
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, model := range []string{"zoo/m00.gguf", "zoo/sub/m01.gguf"} {
				c, ok := cells[ladder.CellID(model, tc.verb, tc.backend)]
				if !ok {
					t.Fatalf("no cell %s", ladder.CellID(model, tc.verb, tc.backend))
				}
				if c.Verdict != tc.verdict || c.RemovedBy != tc.by {
					t.Errorf("cell %s = %s by %q (%s), want %s by %q", c.ID, c.Verdict, c.RemovedBy, c.Reason, tc.verdict, tc.by)
				}
				if model == "zoo/m00.gguf" && !strings.Contains(c.Reason, tc.reason) {
					t.Errorf("cell %s reason = %q, want it to contain %q", c.ID, c.Reason, tc.reason)
				}
			}
		})
	}
	p := cells[ladder.CellID("zoo/m00.gguf", "panic", "ref")]
	if !strings.Contains(p.Reason, "ladder_test.go") || !strings.Contains(p.Detail, "goroutine") {
		t.Errorf("panic cell: reason %q should name the panicking line and detail hold the stack", p.Reason)
	}
}

func TestGateRefusesByContract(t *testing.T) {
	root := modelTree(t, 3) // F32, F16, Q8_0
	cfg := baseConfig(root)
	cnt := &counter{}
	cfg.Executors = deterministicExecutors(cnt, 0, nil)
	cfg.ContractsDigest = "sha256:test"
	cfg.Gate = func(m *ladder.Model, verb, backend string) *refuse.Error {
		if backend == "cpu" && m.Header.DominantType == "F16" {
			return refuse.New("contract:cpu-types", "the cpu engine does not cover %s weights", m.Header.DominantType)
		}
		return nil
	}
	rec, err := ladder.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	n := 0
	for _, c := range rec.Cells {
		if c.Backend == "cpu" && strings.HasSuffix(c.Model.Key, "m01.gguf") {
			n++
			if c.Verdict != verdict.Refused || c.RemovedBy != "contract:cpu-types" || !strings.Contains(c.Reason, "F16") {
				t.Errorf("cell %s = %s by %q (%s), want refused by contract:cpu-types", c.ID, c.Verdict, c.RemovedBy, c.Reason)
			}
			if cnt.n[c.ID] != 0 {
				t.Errorf("cell %s was refused by a contract but its executor ran", c.ID)
			}
		}
		if c.ContractsDigest != "sha256:test" {
			t.Errorf("cell %s contracts digest %q, want sha256:test", c.ID, c.ContractsDigest)
		}
	}
	if n != len(ladder.DefaultVerbs) {
		t.Errorf("found %d cpu cells of the F16 model, want %d (one per verb), none left out", n, len(ladder.DefaultVerbs))
	}
}

func TestResumeAfterCancel(t *testing.T) {
	root := modelTree(t, 4)
	total := 4 * len(ladder.DefaultVerbs) * len(ladder.DefaultBackends)

	// The uninterrupted run, in its own directory.
	want, err := runWith(t, baseConfig(root), t.TempDir(), &counter{}, 0)
	if err != nil {
		t.Fatalf("uninterrupted Run: %v", err)
	}

	out := t.TempDir()
	first := &counter{}
	_, err = runWith(t, baseConfig(root), out, first, 5)
	var ie *ladder.InterruptedError
	if !errors.As(err, &ie) {
		t.Fatalf("interrupted Run: err = %v, want *InterruptedError", err)
	}
	if _, err := os.Stat(filepath.Join(out, ladder.ReceiptFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an interrupted run wrote %s (err %v); it must leave only cell results", ladder.ReceiptFile, err)
	}
	done := ie.Done
	if done == 0 || done >= total {
		t.Fatalf("interrupted after %d of %d cells, want a run stopped half-way", done, total)
	}

	second := &counter{}
	got, err := runWith(t, baseConfig(root), out, second, 0)
	if err != nil {
		t.Fatalf("resumed Run: %v", err)
	}
	if got.Runs[0].Reused != done || got.Runs[0].Executed != total-done {
		t.Errorf("resumed run reused %d and executed %d cells, want %d and %d", got.Runs[0].Reused, got.Runs[0].Executed, done, total-done)
	}
	// Only the cell in flight when the run was interrupted ran in both.
	var both []string
	for id := range second.n {
		if first.n[id] > 0 {
			both = append(both, id)
		}
	}
	if len(both) != 1 {
		t.Errorf("cells executed by both runs: %v, want exactly the one interrupted in flight", both)
	}
	if diff := cmp.Diff(want.Verdicts(), got.Verdicts()); diff != "" {
		t.Errorf("resumed verdicts differ from an uninterrupted run's (-uninterrupted +resumed):\n%s", diff)
	}

	// A third run reuses everything; a new contracts digest reuses nothing.
	third := &counter{}
	if r, err := runWith(t, baseConfig(root), out, third, 0); err != nil || r.Runs[0].Executed != 0 {
		t.Errorf("third Run: err %v, executed %d cells, want 0", err, r.Runs[0].Executed)
	}
	cfg := baseConfig(root)
	cfg.ContractsDigest = "sha256:other"
	if r, err := runWith(t, cfg, out, &counter{}, 0); err != nil || r.Runs[0].Reused != 0 {
		t.Errorf("Run with other contracts: err %v, reused %d cells, want 0", err, r.Runs[0].Reused)
	}
	other := fixedBinary
	other.SHA256 = strings.Repeat("cd", 32)
	cfg = baseConfig(root)
	cfg.Binary = &other
	if r, err := runWith(t, cfg, out, &counter{}, 0); err != nil || r.Runs[0].Reused != 0 {
		t.Errorf("Run with another binary: err %v, reused %d cells, want 0", err, r.Runs[0].Reused)
	}
}

// runWith runs cfg over out with the deterministic executors, cancelling the
// run after stopAfter executions when stopAfter > 0.
func runWith(t *testing.T, cfg ladder.Config, out string, cnt *counter, stopAfter int64) (*ladder.Receipt, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.OutDir = out
	cfg.Executors = deterministicExecutors(cnt, stopAfter, cancel)
	return ladder.Run(ctx, cfg)
}

func TestShardsMergeToTheUnshardedVerdicts(t *testing.T) {
	root := modelTree(t, 7)
	whole, err := runWith(t, baseConfig(root), t.TempDir(), &counter{}, 0)
	if err != nil {
		t.Fatalf("unsharded Run: %v", err)
	}
	var parts []*ladder.Receipt
	seen := map[string]string{}
	for k := 1; k <= 3; k++ {
		cfg := baseConfig(root)
		cfg.Shard = ladder.Shard{K: k, N: 3}
		r, err := runWith(t, cfg, t.TempDir(), &counter{}, 0)
		if err != nil {
			t.Fatalf("Run shard %d/3: %v", k, err)
		}
		if len(r.Cells) == 0 {
			t.Errorf("shard %d/3 ran no cell: 7 models should spread over 3 shards", k)
		}
		for _, c := range r.Cells {
			if prev, dup := seen[c.ID]; dup {
				t.Errorf("cell %s is in shards %s and %d/3", c.ID, prev, k)
			}
			seen[c.ID] = r.Runs[0].Shard
		}
		parts = append(parts, r)
	}
	merged, err := ladder.Merge([]*ladder.Receipt{parts[2], parts[0], parts[1]})
	if err != nil {
		t.Fatalf("Merge(3 shards): %v", err)
	}
	if diff := cmp.Diff(whole.Verdicts(), merged.Verdicts()); diff != "" {
		t.Errorf("merged shard verdicts differ from the unsharded run's (-unsharded +merged):\n%s", diff)
	}
	if merged.Summary != whole.Summary || len(merged.Runs) != 3 || len(merged.Models) != 7 {
		t.Errorf("Merge: summary %v, %d runs, %d models; want %v, 3, 7", merged.Summary, len(merged.Runs), len(merged.Models), whole.Summary)
	}

	// What Merge must refuse.
	otherBin := *parts[1]
	otherBin.Binary.SHA256 = strings.Repeat("ef", 32)
	otherContracts := *parts[1]
	otherContracts.ContractsDigest = "sha256:x"
	conflicting := *parts[1]
	conflicting.Cells = slices.Clone(parts[1].Cells)
	conflicting.Cells[0].Verdict = verdict.Pass
	conflicting.Cells[0].Reason = "changed"
	tests := []struct {
		name string
		in   []*ladder.Receipt
		want string
	}{
		{"a shard missing", []*ladder.Receipt{parts[0], parts[2]}, "are in no receipt"},
		{"another binary", []*ladder.Receipt{parts[0], &otherBin, parts[2]}, "was produced by binary"},
		{"other contracts", []*ladder.Receipt{parts[0], &otherContracts, parts[2]}, "judged under contracts"},
		{"conflicting verdicts", []*ladder.Receipt{parts[0], parts[1], parts[2], &conflicting}, "in one receipt and"},
		{"nothing", nil, "no receipt given"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ladder.Merge(tc.in)
			if !errors.Is(err, ladder.ErrMerge) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Merge(%s) = %v, want ErrMerge containing %q", tc.name, err, tc.want)
			}
		})
	}
}

func TestShardAssignmentIsDeterministicAndComplete(t *testing.T) {
	var models []*ladder.Model
	for i, size := range []int64{900, 100, 500, 500, 300, 0, 700} {
		models = append(models, &ladder.Model{Key: string(rune('a' + i)), Bytes: size})
	}
	a := ladder.AssignShards(models, 3)
	b := ladder.AssignShards(slices.Clone(models), 3)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("AssignShards is not deterministic (-first +second):\n%s", diff)
	}
	load := make([]int64, 4)
	for i, s := range a {
		if s < 1 || s > 3 {
			t.Fatalf("AssignShards gave model %d shard %d", i, s)
		}
		load[s] += models[i].Bytes
	}
	if slices.Max(load[1:])-slices.Min(load[1:]) > 400 {
		t.Errorf("AssignShards loads %v: badly balanced", load[1:])
	}
	for _, tc := range []struct {
		in   string
		want ladder.Shard
		ok   bool
	}{{"2/3", ladder.Shard{K: 2, N: 3}, true}, {"0/3", ladder.Shard{}, false}, {"4/3", ladder.Shard{}, false}, {"3", ladder.Shard{}, false}, {"a/b", ladder.Shard{}, false}} {
		got, err := ladder.ParseShard(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseShard(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestSumCache(t *testing.T) {
	root := modelTree(t, 2)
	cachePath := filepath.Join(t.TempDir(), "sums.json")
	cache := ladder.OpenSumCache(cachePath)
	cfg := baseConfig(root)
	cfg.SumCache = cache
	r1, err := ladder.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cache.Hashed != 2 {
		t.Errorf("first run hashed %d files, want 2", cache.Hashed)
	}
	cache2 := ladder.OpenSumCache(cachePath)
	cfg.SumCache = cache2
	if _, err := ladder.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if cache2.Hashed != 0 {
		t.Errorf("second run hashed %d files, want 0 (all cached)", cache2.Hashed)
	}
	// Rewrite one model: new size and mtime, so it is hashed again.
	writeModel(t, root, "m00.gguf", "llama", quant.Q8_0, 99)
	future := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(root, "m00.gguf"), future, future))
	cache3 := ladder.OpenSumCache(cachePath)
	cfg.SumCache = cache3
	r3, err := ladder.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cache3.Hashed != 1 || r3.Models[0].SHA256 == r1.Models[0].SHA256 {
		t.Errorf("after a rewrite: hashed %d files (want 1), sha256 %s → %s (want a change)", cache3.Hashed, r1.Models[0].SHA256, r3.Models[0].SHA256)
	}
}

func TestReceiptRoundTrip(t *testing.T) {
	root := modelTree(t, 2)
	out := t.TempDir()
	rec, err := runWith(t, baseConfig(root), out, &counter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ladder.ReadReceipt(filepath.Join(out, ladder.ReceiptFile))
	if err != nil {
		t.Fatalf("ReadReceipt: %v", err)
	}
	if diff := cmp.Diff(rec, back); diff != "" {
		t.Errorf("ReadReceipt(written receipt) mismatch (-ran +read):\n%s", diff)
	}
	for _, bad := range []struct{ name, text, want string }{
		{"malformed", "{", "not a ladder receipt"},
		{"unknown field", `{"schema":"apr/ladder-receipt/v1","surprise":1}`, "unknown field"},
		{"other schema", `{"schema":"x"}`, `schema "x"`},
	} {
		if _, err := ladder.DecodeReceipt(bad.name, []byte(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("DecodeReceipt(%s) = %v, want an error containing %q", bad.name, err, bad.want)
		}
	}
}

func TestOutDirIsLocked(t *testing.T) {
	root := modelTree(t, 1)
	out := t.TempDir()
	started := make(chan struct{})
	release := make(chan struct{})
	e := &ladder.Executors{}
	e.Register("run", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
		close(started)
		<-release
		return ladder.Passed()
	}, "ref")
	cfg := baseConfig(root)
	cfg.OutDir, cfg.Executors, cfg.Verbs, cfg.Backends = out, e, []string{"run"}, []string{"ref"}
	errc := make(chan error, 1)
	go func() { _, err := ladder.Run(context.Background(), cfg); errc <- err }()
	<-started
	cfg2 := baseConfig(root)
	cfg2.OutDir = out
	_, err := ladder.Run(context.Background(), cfg2)
	close(release)
	if err == nil || !strings.Contains(err.Error(), "in use by another ladder run") {
		t.Errorf("second Run over a busy OutDir = %v, want 'in use by another ladder run'", err)
	}
	if err := <-errc; err != nil {
		t.Errorf("first Run: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReceiptSatisfiesSchema(t *testing.T) {
	root := modelTree(t, 2)
	must(t, os.Symlink("nowhere.gguf", filepath.Join(root, "broken.gguf")))
	rec, err := runWith(t, baseConfig(root), t.TempDir(), &counter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Validate(); err != nil {
		t.Errorf("Validate(receipt): %v", err)
	}
	merged, err := ladder.Merge([]*ladder.Receipt{rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := merged.Validate(); err != nil {
		t.Errorf("Validate(merged receipt): %v", err)
	}
	bad := *rec
	bad.Cells = slices.Clone(rec.Cells)
	bad.Cells[0].Verdict = "skipped"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "verdict") {
		t.Errorf("Validate(receipt with a skipped cell) = %v, want an error naming verdict", err)
	}
}
