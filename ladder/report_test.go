package ladder_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/aprqa/apr/ladder"
	"github.com/aprqa/apr/verdict"
)

// pageFacts is what a reader of the report sees: the matrix cells (by
// verdict), where they link, the anchors that exist and the summary line.
type pageFacts struct {
	cells    map[verdict.Verdict]int
	links    []string
	anchors  map[string]bool
	summary  string
	external []string // src/href that leave the page
}

func (p pageFacts) total() int {
	n := 0
	for _, c := range p.cells {
		n += c
	}
	return n
}

func parsePage(t *testing.T, page []byte) pageFacts {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("html.Parse(report): %v", err)
	}
	f := pageFacts{cells: map[verdict.Verdict]int{}, anchors: map[string]bool{}}
	attr := func(n *html.Node, key string) string {
		for _, a := range n.Attr {
			if a.Key == key {
				return a.Val
			}
		}
		return ""
	}
	text := func(n *html.Node) string {
		var b strings.Builder
		var walk func(*html.Node)
		walk = func(n *html.Node) {
			if n.Type == html.TextNode {
				b.WriteString(n.Data)
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c)
			}
		}
		walk(n)
		return b.String()
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if id := attr(n, "id"); id != "" {
				f.anchors[id] = true
			}
			classes := strings.Fields(attr(n, "class"))
			if n.Data == "td" && len(classes) > 0 && classes[0] == "cell" {
				f.cells[verdict.Verdict(attr(n, "data-verdict"))]++
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					if c.Type == html.ElementNode && c.Data == "a" {
						f.links = append(f.links, attr(c, "href"))
					}
				}
			}
			if n.Data == "p" && attr(n, "id") == "summary" {
				f.summary = strings.TrimSpace(text(n))
			}
			for _, k := range []string{"src", "href"} {
				if v := attr(n, k); v != "" && !strings.HasPrefix(v, "#") {
					f.external = append(f.external, v)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return f
}

func reportFor(t *testing.T) (*ladder.Receipt, []byte) {
	t.Helper()
	root := modelTree(t, 3)
	must(t, os.Symlink("nowhere.gguf", filepath.Join(root, "broken.gguf")))
	rec, err := runWith(t, baseConfig(root), t.TempDir(), &counter{}, 0)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var buf bytes.Buffer
	if err := ladder.WriteReport(&buf, rec); err != nil {
		t.Fatalf("WriteReport: %v", err)
	}
	return rec, buf.Bytes()
}

func TestReportShowsEveryCell(t *testing.T) {
	rec, page := reportFor(t)
	f := parsePage(t, page)
	want := map[verdict.Verdict]int{verdict.Pass: rec.Summary.Pass, verdict.Fail: rec.Summary.Fail, verdict.Refused: rec.Summary.Refused}
	for v, n := range want {
		if f.cells[v] != n {
			t.Errorf("report shows %d %s cells, the receipt has %d", f.cells[v], v, n)
		}
	}
	if f.total() != rec.Summary.Cells || rec.Summary.Cells != 4*len(ladder.DefaultVerbs)*len(ladder.DefaultBackends) {
		t.Errorf("report shows %d cells, receipt %d, want 4 models × %d verbs × %d backends", f.total(), rec.Summary.Cells, len(ladder.DefaultVerbs), len(ladder.DefaultBackends))
	}
	if rec.Summary.Pass == 0 || rec.Summary.Fail == 0 || rec.Summary.Refused == 0 {
		t.Errorf("summary %v: the test universe should hold every verdict", rec.Summary)
	}
	if len(f.links) != f.total() {
		t.Errorf("%d of %d matrix cells link to their details", len(f.links), f.total())
	}
	for _, l := range f.links {
		if !f.anchors[strings.TrimPrefix(l, "#")] {
			t.Errorf("matrix cell links to %s, which is not on the page", l)
		}
	}
	if f.summary != rec.Summary.String() {
		t.Errorf("summary line %q, want %q", f.summary, rec.Summary.String())
	}
	if len(f.external) > 0 {
		t.Errorf("report is not self-contained: it refers to %v", f.external)
	}
	for _, c := range rec.Cells {
		if c.Verdict != verdict.Pass && !bytes.Contains(page, []byte(html.EscapeString(c.Reason))) {
			t.Errorf("the reason of cell %s (%q) is not on the page", c.ID, c.Reason)
		}
	}
}

// TestReportInChromium opens the report in headless Chromium and counts the
// cells of the DOM it rendered. It runs only where /usr/bin/chromium exists
// (apt-get install chromium) and says SKIP otherwise.
func TestReportInChromium(t *testing.T) {
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("SKIP (not a pass): %s is absent; the report was checked by TestReportShowsEveryCell's HTML parse only", chromium)
	}
	rec, page := reportFor(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	must(t, os.WriteFile(file, page, 0o644))
	shot := filepath.Join(dir, "report.png")
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile")}
	run := func(extra ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, chromium, append(append(flags, extra...), "file://"+file)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
		}
		return out
	}
	dom := run("--dump-dom")
	f := parsePage(t, dom)
	if f.total() != rec.Summary.Cells {
		t.Errorf("Chromium rendered %d matrix cells, the receipt has %d", f.total(), rec.Summary.Cells)
	}
	if f.summary != rec.Summary.String() {
		t.Errorf("Chromium shows summary %q, want %q", f.summary, rec.Summary.String())
	}
	// A screenshot costs a second browser start: taken only when asked for
	// (APR_LADDER_SCREENSHOT=FILE.png), for a person to look at.
	if dst := os.Getenv("APR_LADDER_SCREENSHOT"); dst != "" {
		run("--screenshot="+shot, "--window-size=1400,1000", "--hide-scrollbars")
		st, err := os.Stat(shot)
		if err != nil || st.Size() < 1000 {
			t.Fatalf("Chromium screenshot %s: %v (size %d)", shot, err, sizeOf(st))
		}
		b, _ := os.ReadFile(shot)
		must(t, os.WriteFile(dst, b, 0o644))
	}
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return 0
	}
	return st.Size()
}
