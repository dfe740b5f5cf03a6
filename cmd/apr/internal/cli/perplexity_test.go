package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/internal/testutil"
)

// TestPerplexityAndKLDVerbs: apr perplexity writes a base file that apr kld
// reads; text and JSON outputs; bad input exits 2 naming the problem.
func TestPerplexityAndKLDVerbs(t *testing.T) {
	fx := testutil.Fixtures(t)
	model := filepath.Join(fx, "models/stories260K.gguf")
	text := filepath.Join(fx, "kld/story.txt")
	base := filepath.Join(t.TempDir(), "s.kld")

	code, out, errs := apr(t, "perplexity", model, "-f", text, "-c", "128", "--kl-divergence-base", base)
	if code != 0 || !strings.Contains(out, "[12]") || !strings.Contains(out, "Final estimate: PPL = 4.1003 +/- 0.25672") {
		t.Fatalf("apr perplexity: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	code, out, errs = apr(t, "perplexity", model, "-f", text, "-c", "128", "--chunks", "3", "--json")
	var pr struct {
		NChunk int     `json:"n_chunk"`
		Scored int     `json:"scored"`
		PPL    float64 `json:"ppl"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &pr) != nil || pr.NChunk != 3 || pr.Scored != 3*63 {
		t.Fatalf("apr perplexity --json: exit %d, %+v\nstdout %s\nstderr %s", code, pr, out, errs)
	}

	code, out, errs = apr(t, "kld", model, "--base", base, "--backend", "cpu")
	if code != 0 || !strings.Contains(out, "Mean PPL(base)") || !strings.Contains(out, "Same top p: 100.000") {
		t.Fatalf("apr kld: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	code, out, _ = apr(t, "kld", model, "--base", filepath.Join(fx, "kld/stories260K.kld"), "--json")
	var kr struct {
		Count   int `json:"count"`
		Summary struct {
			PPLBase struct{ Value float64 } `json:"ppl_base"`
		} `json:"summary"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &kr) != nil || kr.Count != 12*63 || kr.Summary.PPLBase.Value < 4.1002 || kr.Summary.PPLBase.Value > 4.1003 {
		t.Fatalf("apr kld --json: exit %d, %+v", code, kr)
	}

	bad := filepath.Join(t.TempDir(), "bad.kld")
	if err := os.WriteFile(bad, []byte("_logits_\x80\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kld", model, "--base", bad}, "offset 12: header: truncated"},
		{[]string{"kld", model}, "--base FILE.kld is required"},
		{[]string{"perplexity", model}, "-f TEXT is required"},
		{[]string{"perplexity", model, "-f", text, "-c", "2"}, "leaves no token to score"},
		{[]string{"kld", filepath.Join(fx, "models/synth/qwen2-tiny-F32.gguf"), "--base", base}, "vocabulary"},
	} {
		code, _, errs := apr(t, c.args...)
		if code != cli.ExitBadInput || !strings.Contains(errs, c.want) {
			t.Errorf("apr %v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errs, c.want)
		}
	}
}
