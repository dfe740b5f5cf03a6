package qa_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/qa"
)

// TestParityMoENearTies: on qwen3moe-tiny-Q8_0 the parity gate (cpu against
// the plain reference: in ggml numerics the two route alike) holds the dense quantized tier because the reference's two
// router near-ties are excluded and reported; a router that reports none
// leaves position 17 (cosine 0.955) in, and the gate fails; a router that
// cannot be traced refuses the gate for the reference.
func TestParityMoENearTies(t *testing.T) {
	model := testutil.Fixture(t, "models/synth/qwen3moe-tiny-Q8_0.gguf")
	plain := plainNumerics(t) // the plain reference, whose router differs from cpu's
	run := func(router falsify.RouterFunc) qa.Gate {
		o := qa.Options{Model: model, Backends: []string{"cpu"}, Gates: []string{qa.GateParity}, Contracts: plain}
		if router != nil {
			qa.WithRouter(&o, router)
		}
		return gate(t, gateRun(t, o), qa.GateParity, "cpu")
	}

	g := run(nil)
	wantStatus(t, g, "pass")
	if n := value(t, g, "excluded_positions").Value; n != 2 {
		t.Errorf("parity[cpu] excluded_positions = %v, want 2", n)
	}
	if c := value(t, g, "min_cosine"); c.Value < 0.998 || !strings.Contains(c.Threshold, "0.998") {
		t.Errorf("parity[cpu] min_cosine = %v (threshold %q), want ≥ 0.998 held to the dense quantized tier", c.Value, c.Threshold)
	}
	if d := strings.Join(g.Details, "\n"); !strings.Contains(d, "position 17 excluded: router near-tie at layer 1") {
		t.Errorf("parity[cpu] details do not report the near-tie at position 17:\n%s", d)
	}

	decided := func(ctx context.Context, m, b string, toks []int32) ([]oracle.Record, int, error) {
		recs, k, err := falsify.RouterProbs(ctx, m, b, toks)
		for i := range recs {
			for j := range recs[i].Values {
				recs[i].Values[j] = float32(j) / 64
			}
		}
		return recs, k, err
	}
	g = run(decided)
	wantStatus(t, g, "fail")
	if !strings.Contains(g.Reason, "min_cosine") {
		t.Errorf("parity[cpu] without near-ties: reason %q, want min_cosine named", g.Reason)
	}

	g = run(func(ctx context.Context, m, b string, toks []int32) ([]oracle.Record, int, error) {
		return nil, 0, errors.New("planted: no router trace")
	})
	wantStatus(t, g, "refused")
	if g.Code != qa.CodeReference || !strings.Contains(g.Reason, "planted: no router trace") {
		t.Errorf("parity[cpu] with a failing router: code %q reason %q, want %s naming the failure", g.Code, g.Reason, qa.CodeReference)
	}
}
