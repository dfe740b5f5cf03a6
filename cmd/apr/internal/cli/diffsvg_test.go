package cli_test

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

// svgTexts parses an SVG document and returns the content of its <text>
// elements; a malformed document fails the test.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var texts []string
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "text" {
				var s string
				if err := dec.DecodeElement(&s, &se); err != nil {
					t.Fatal(err)
				}
				texts = append(texts, s)
			}
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", path, root)
	}
	return texts
}

// TestDiffNMSEAndSVG: apr diff reports each stage's worst NMSE (0 where the
// engines agree bit for bit, positive where quantization enters) and --svg
// draws the stages with the threshold, the first divergence and one tick
// per layer.
func TestDiffNMSEAndSVG(t *testing.T) {
	model := testutil.TinyModel(t, "llama", quant.Q8_0)
	svg := filepath.Join(t.TempDir(), "d.svg")
	code, stdout, stderr := runApr(t, "diff", model, "--prompt", "The quick brown fox jumps over the lazy dog",
		"--min-cosine", "0.9999999", "--json", "--svg", svg)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a divergence below 0.9999999)\n%s", code, stderr)
	}
	var rep struct {
		Stages []struct {
			Layer     int     `json:"layer"`
			Op        string  `json:"op"`
			MinCosine float64 `json:"min_cosine"`
			MaxNMSE   float64 `json:"max_nmse"`
		} `json:"stages"`
		First *struct {
			Layer int    `json:"layer"`
			Op    string `json:"op"`
		} `json:"first_divergence"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.First == nil {
		t.Fatalf("--json: %v, first %v", err, rep.First)
	}
	var sawZero, sawPositive bool
	layers := map[int]bool{}
	for _, s := range rep.Stages {
		if s.MaxNMSE < 0 || (s.MinCosine == 1 && s.MaxNMSE > 1e-12) {
			t.Errorf("layer %d %s: cosine %v with NMSE %v", s.Layer, s.Op, s.MinCosine, s.MaxNMSE)
		}
		sawZero = sawZero || s.MaxNMSE == 0
		sawPositive = sawPositive || s.MaxNMSE > 1e-9
		if s.Layer >= 0 {
			layers[s.Layer] = true
		}
	}
	if !sawZero || !sawPositive {
		t.Errorf("NMSE never 0 (%v) or never positive (%v) across %d stages", sawZero, sawPositive, len(rep.Stages))
	}
	texts := strings.Join(svgTexts(t, svg), "\n")
	for _, want := range []string{"1 - min cosine", "max NMSE", "1 - threshold",
		"first divergence: layer " + itoa(rep.First.Layer) + " " + rep.First.Op} {
		if !strings.Contains(texts, want) {
			t.Errorf("the SVG lacks %q; its texts:\n%s", want, texts)
		}
	}
	for l := range layers {
		if !strings.Contains("\n"+texts+"\n", "\nL"+itoa(l)+"\n") {
			t.Errorf("the SVG has no tick for layer %d", l)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
