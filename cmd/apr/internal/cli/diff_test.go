package cli_test

import (
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

// TestDiff: `apr diff` bisects cpu against ref op by op. On an F32 llama
// every stage agrees (exit 0, every op of every layer listed, no
// divergence); on apr synth's tiny qwen35 at Q5_0 the first record below
// cosine 0.99 is named (exit 1) and it is a Gated DeltaNet op, with the
// products before it in agreement; --json keeps stdout to one document;
// bad flags exit 2.
func TestDiff(t *testing.T) {
	prompt := "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away,"
	llama := testutil.TinyModel(t, "llama", quant.F32)
	code, stdout, stderr := runApr(t, "diff", llama, "--prompt", prompt)
	if code != 0 {
		t.Fatalf("llama F32: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"attn_norm", "ffn_out", "l_out", "logits:", "no record below cosine 0.999", "worst channel"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("llama F32: output lacks %q:\n%s", want, stdout)
		}
	}

	q35 := testutil.TinyModel(t, "qwen35", quant.Q5_0)
	code, stdout, stderr = runApr(t, "diff", q35, "--prompt", prompt, "--min-cosine", "0.99", "--json")
	if code != 1 {
		t.Fatalf("qwen35 Q5_0: exit %d, want 1 (a divergence)\n%s", code, stderr)
	}
	var rep struct {
		First *struct {
			Layer  int     `json:"layer"`
			Op     string  `json:"op"`
			Pos    int     `json:"pos"`
			Cosine float64 `json:"cosine"`
		} `json:"first_divergence"`
		Stages []struct {
			Layer        int      `json:"layer"`
			Op           string   `json:"op"`
			MinCosine    float64  `json:"min_cosine"`
			WorstChannel *int     `json:"worst_channel"`
			Share        float64  `json:"worst_channel_share"`
			Scale        *float64 `json:"worst_channel_scale"`
		} `json:"stages"`
	}
	oneJSON(t, stdout, &rep)
	if rep.First == nil || !strings.HasPrefix(rep.First.Op, "ssm_") || rep.First.Cosine >= 0.99 {
		t.Fatalf("qwen35 Q5_0: first divergence %+v, want a DeltaNet (ssm_*) op below 0.99", rep.First)
	}
	for _, s := range rep.Stages {
		// Every stage names its worst channel: a value index with a share
		// in (0, 1] where the engines differ, -1 with none where they agree.
		if s.WorstChannel == nil || (*s.WorstChannel >= 0) != (s.Share > 0) || s.Share > 1 || (*s.WorstChannel < 0 && s.Scale != nil) {
			t.Errorf("stage layer %d %s: worst channel %v, share %v, scale %v", s.Layer, s.Op, s.WorstChannel, s.Share, s.Scale)
		}
	}
	for _, s := range rep.Stages {
		if s.Layer == rep.First.Layer && s.Op == rep.First.Op {
			break
		}
		if s.MinCosine < 0.99 {
			t.Errorf("stage layer %d %s has min cosine %v before the first divergence %+v", s.Layer, s.Op, s.MinCosine, rep.First)
		}
	}

	for _, args := range [][]string{
		{"diff", llama},
		{"diff", llama, "--tokens", "1,2", "--prompt", "x"},
		{"diff", llama, "--tokens", "1,2", "--backend", "ref", "--against", "ref"},
		{"diff", llama, "--tokens", "1,2", "--min-cosine", "2"},
	} {
		if code, _, stderr := runApr(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args[2:], code, stderr)
		}
	}
}
