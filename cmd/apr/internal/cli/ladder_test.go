package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/ladder"
	"github.com/aprqa/apr/verdict"
)

func apr(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// ladderTree writes n tiny synthetic llama models (seeds differ, so their
// sha256 do too) under a root named zoo. They satisfy the llama contract, so
// the contracts gate lets their cells through to the planted executors.
func ladderTree(t *testing.T, n int) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "zoo")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := synth.FindPreset("llama", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		path := filepath.Join(root, "m"+string(rune('a'+i))+".gguf")
		if _, err := synth.Write(path, synth.Options{Preset: p, Type: quant.F32, Seed: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// plant makes run pass everywhere and logits fail on model "mb".
func plant(t *testing.T) {
	t.Helper()
	t.Cleanup(cli.SetLadderExecutors(func(ladder.ExecOptions) *ladder.Executors {
		e := &ladder.Executors{}
		e.Register("run", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
			return ladder.Passed(ladder.Value{Name: "tensors", Value: float64(m.Header.Tensors)})
		}, "ref", "cpu")
		e.Register("logits", func(ctx context.Context, m *ladder.Model, b string) ladder.Result {
			if strings.HasSuffix(m.Key, "/mb.gguf") {
				return ladder.Failed("planted logits failure")
			}
			return ladder.Passed()
		}, "ref")
		return e
	}))
}

func decodeReceipt(t *testing.T, stdout string) *ladder.Receipt {
	t.Helper()
	r, err := ladder.DecodeReceipt("stdout", []byte(stdout))
	if err != nil {
		t.Fatalf("decoding the receipt on stdout: %v\n%s", err, stdout)
	}
	return r
}

func TestLadderMatrix(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
	}{
		{"github", []string{"--shards", "3", "--format", "github"}, cli.ExitOK, `{"shard":["1/3","2/3","3/3"]}` + "\n"},
		{"github by default", []string{"--shards", "1"}, cli.ExitOK, `{"shard":["1/1"]}` + "\n"},
		{"lines", []string{"--shards", "2", "--format", "lines"}, cli.ExitOK, "1/2\n2/2\n"},
		{"one shard by default", []string{}, cli.ExitOK, `{"shard":["1/1"]}` + "\n"},
		{"zero shards", []string{"--shards", "0"}, cli.ExitBadInput, ""},
		{"too many", []string{"--shards", "100000"}, cli.ExitBadInput, ""},
		{"bad format", []string{"--shards", "2", "--format", "yaml"}, cli.ExitBadInput, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := apr(t, append([]string{"ladder", "matrix"}, tc.args...)...)
			if code != tc.code || out != tc.stdout {
				t.Errorf("apr ladder matrix %v = %d, %q (stderr %q); want %d, %q", tc.args, code, out, errs, tc.code, tc.stdout)
			}
		})
	}
}

func TestLadderExitCodes(t *testing.T) {
	plant(t)
	root := ladderTree(t, 2)
	tests := []struct {
		name       string
		args       []string
		code       int
		stderrHas  string
		stdoutHave string
	}{
		{"a failed cell exits 1 and names it", []string{root}, cli.ExitFail, "FAIL zoo/mb.gguf|logits|ref: planted logits failure", "5 pass, 1 fail, 12 refused"},
		{"only passing verbs exit 0", []string{"--verbs", "run", "--backends", "ref", root}, cli.ExitOK, "", "2 pass, 0 fail, 0 refused"},
		{"missing directory", []string{filepath.Join(root, "nope")}, cli.ExitBadInput, "no such file", ""},
		{"bad shard", []string{"--shard", "4/3", root}, cli.ExitBadInput, "K must be in", ""},
		{"bad progress", []string{"--progress", "fancy", root}, cli.ExitBadInput, "--progress", ""},
		{"bad isolation", []string{"--isolate", "vm", root}, cli.ExitBadInput, "--isolate", ""},
		{"no directory", []string{}, cli.ExitBadInput, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"ladder", "--isolate", "goroutine", "--progress", "none", "--sum-cache", "", "--out", t.TempDir()}, tc.args...)
			code, out, errs := apr(t, args...)
			if code != tc.code || !strings.Contains(errs, tc.stderrHas) || !strings.Contains(out, tc.stdoutHave) {
				t.Errorf("apr %v = %d\nstdout: %s\nstderr: %s\nwant exit %d, stderr with %q, stdout with %q", args, code, out, errs, tc.code, tc.stderrHas, tc.stdoutHave)
			}
		})
	}
}

func TestLadderShardsMergeAndResume(t *testing.T) {
	plant(t)
	root := ladderTree(t, 5)
	dir := t.TempDir()
	base := []string{"ladder", "--isolate", "goroutine", "--progress", "lines", "--sum-cache", "", "--json"}

	code, out, errs := apr(t, append(base, "--out", filepath.Join(dir, "whole"), root)...)
	if code != cli.ExitFail {
		t.Fatalf("apr ladder (whole) exit %d, want 1 (a planted failure)\n%s", code, errs)
	}
	whole := decodeReceipt(t, out)
	if !strings.Contains(errs, "[1/45] ") || !strings.Contains(errs, "45 cells: ") {
		t.Errorf("apr ladder --progress lines: stderr lacks per-cell progress lines:\n%s", errs)
	}

	var receipts []string
	for _, s := range []string{"1/3", "2/3", "3/3"} {
		out := filepath.Join(dir, "shard"+s[:1])
		apr(t, append(base, "--shard", s, "--out", out, root)...)
		receipts = append(receipts, filepath.Join(out, ladder.ReceiptFile))
	}
	report := filepath.Join(dir, "merged.html")
	mergedPath := filepath.Join(dir, "merged.json")
	code, out, errs = apr(t, "ladder", "merge", "--json", "-o", mergedPath, "--report", report, receipts[2], receipts[0], receipts[1])
	if code != cli.ExitFail {
		t.Fatalf("apr ladder merge exit %d, want 1 (the planted failure survives the merge)\n%s", code, errs)
	}
	merged := decodeReceipt(t, out)
	if diff := cmp.Diff(whole.Verdicts(), merged.Verdicts()); diff != "" {
		t.Errorf("merged shard verdicts differ from the unsharded run's (-whole +merged):\n%s", diff)
	}
	if b, err := os.ReadFile(mergedPath); err != nil || !bytes.Equal(b, []byte(out)) {
		t.Errorf("merged receipt file %s (err %v) differs from the receipt on stdout", mergedPath, err)
	}
	if n := countReportCells(t, report); n != whole.Summary.Cells {
		t.Errorf("merged report shows %d cells, want %d", n, whole.Summary.Cells)
	}
	code, _, errs = apr(t, "ladder", "merge", "-o", filepath.Join(dir, "partial.json"), receipts[0], receipts[1])
	if code != cli.ExitBadInput || !strings.Contains(errs, "are in no receipt") {
		t.Errorf("apr ladder merge of 2 of 3 shards = %d (%s), want exit 2 naming the missing cells", code, errs)
	}

	// Re-running over a finished directory reuses every cell.
	code, _, errs = apr(t, append(base, "--out", filepath.Join(dir, "whole"), root)...)
	if code != cli.ExitFail || strings.Count(errs, "(reused)") != 45 {
		t.Errorf("re-run over a finished --out: exit %d, %d cells reused, want 1 and 45\n%s", code, strings.Count(errs, "(reused)"), errs)
	}
}

func countReportCells(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("html.Parse(%s): %v", path, err)
	}
	n := 0
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.ElementNode && x.Data == "td" {
			for _, a := range x.Attr {
				if a.Key == "data-verdict" {
					n++
				}
			}
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return n
}

// TestLadderFixtures is the acceptance run: every fixture model gets a cell
// per verb and backend with the real executors, and each is pass, or fail or
// refused with a reason that names what failed. Cells run in worker
// processes (--isolate process, the default): this test binary serves them
// as "apr ladder worker" through testscript.Main's dispatch on argv[0].
func TestLadderFixtures(t *testing.T) {
	fx := testutil.Fixtures(t)
	if testing.Short() {
		t.Skip("SKIP (not a pass): -short: the fixture ladder runs every model on the reference engine")
	}
	models := filepath.Join(fx, "models")
	dir := t.TempDir()
	report := filepath.Join(dir, "ladder.html")
	code, out, errs := apr(t, "ladder", "--progress", "none", "--sum-cache", "", "--json", "--out", filepath.Join(dir, "out"),
		"--expect", filepath.Join(fx, "expect"), "--report", report, models)
	// 3: cells refused (cuda where it is not linked, an undecided golden)
	// and none failed.
	if code != cli.ExitOK && code != cli.ExitFail && code != cli.ExitRefused {
		t.Fatalf("apr ladder %s: exit %d\n%s", models, code, errs)
	}
	rec := decodeReceipt(t, out)
	if err := rec.Validate(); err != nil {
		t.Errorf("the fixture receipt does not satisfy #Receipt: %v", err)
	}
	// Every GGUF file under models/ is a row.
	var files []string
	filepath.WalkDir(models, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".gguf") {
			rel, _ := filepath.Rel(models, p)
			files = append(files, "models/"+filepath.ToSlash(rel))
		}
		return nil
	})
	if diff := cmp.Diff(files, rec.Universe.Models); diff != "" {
		t.Errorf("receipt models differ from the fixture files (-files +receipt):\n%s", diff)
	}
	if want := len(files) * len(ladder.DefaultVerbs) * len(ladder.DefaultBackends); len(rec.Cells) != want {
		t.Errorf("receipt has %d cells, want %d", len(rec.Cells), want)
	}
	for _, c := range rec.Cells {
		switch c.Verdict {
		case verdict.Pass:
		case verdict.Fail:
			if c.Reason == "" {
				t.Errorf("cell %s failed without a reason", c.ID)
			}
			t.Logf("FAIL %s: %s", c.ID, c.Reason)
		case verdict.Refused:
			if c.Reason == "" || c.RemovedBy == "" {
				t.Errorf("cell %s refused without a reason or refuser: %q by %q", c.ID, c.Reason, c.RemovedBy)
			}
		default:
			t.Errorf("cell %s has verdict %q", c.ID, c.Verdict)
		}
		// The reference engine runs every fixture model: its run and logits
		// cells must pass (the imatrix file is not a model and is refused).
		if c.Backend == "ref" && (c.Verb == "run" || c.Verb == "logits") && !strings.Contains(c.Model.Key, "imatrix") && c.Verdict != verdict.Pass {
			t.Errorf("cell %s = %s (%s), want pass", c.ID, c.Verdict, c.Reason)
		}
	}
	if n := countReportCells(t, report); n != len(rec.Cells) {
		t.Errorf("report shows %d cells, the receipt has %d", n, len(rec.Cells))
	}
	t.Logf("%s", rec.Summary)
}

func TestLadderJSONIsOneDocument(t *testing.T) {
	plant(t)
	root := ladderTree(t, 1)
	_, out, errs := apr(t, "ladder", "--isolate", "goroutine", "--progress", "bar", "--sum-cache", "", "--json", "--out", t.TempDir(), root)
	if !strings.Contains(errs, "(9/9)") {
		t.Errorf("--progress bar drew no bar reaching 9/9 on stderr:\n%q", errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Errorf("stdout holds more than one JSON document:\n%s", out)
	}
}
