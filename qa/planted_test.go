package qa_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/qa"
)

// plantedDefect is one row of the mutation table of issue 13: a defect
// planted in one weight type's CPU kernel (cpu.EnvPlant), on the fixture
// model of that type.
type plantedDefect struct {
	model, plant string
	reportOnly   bool // below both gates' tolerance: reported, not asserted
	goldenReport bool // near golden_output's noise allowance: its verdict reported, not asserted
}

// The table, every row of which the parity and golden_output gates
// must fail (not refuse, not pass) — except its first row, one block's
// scale × (1 + 2⁻⁸): cpu against the reference in ggml numerics measures
// min 0.99958, mean 0.99977 with it, which the deployed tier (0.999 /
// 0.9995, set so that apr synth's qwen2.5-0.5b passes with room: 0.99978 /
// 0.99982 there) lets through, as the plain tier did; it is reported.
var plantedDefects = []plantedDefect{
	{"qwen2-tiny-Q8_0", "Q8_0:scale:1:1.00390625", true, false},
	{"qwen2-tiny-Q8_0", "Q8_0:scale:1:1.05", false, false},
	{"qwen2-tiny-Q8_0", "Q8_0:drop_last", false, false},
	{"qwen2-tiny-Q4_K_M", "Q4_K:min_sign:3", false, false},
	{"qwen2-tiny-Q6_K", "Q6_K:scale_from:15:14", false, false},
	{"qwen2-tiny-Q4_K_M", "Q4_K:nibble:5", false, false},
}

// envLongMutation runs the longer matrix of TestPlantedDefectsFailTheGates:
// every sub-block of the Q4_K and Q6_K defects, and the Q4_K defects on the
// llama and qwen3 fixtures too (all must fail both gates), and every Q8_0
// block's scale × 1.05 (parity must fail; golden_output, whose allowance
// the logit moves of 0.24–0.30 straddle, is reported) and × (1 + 2⁻⁸)
// (reported).
const envLongMutation = "APR_LONG_MUTATION"

func plantedMatrix() []plantedDefect {
	rows := append([]plantedDefect(nil), plantedDefects...)
	if os.Getenv(envLongMutation) == "" {
		return rows
	}
	for _, m := range []string{"qwen2-tiny-Q4_K_M", "llama-tiny-Q4_K_M", "qwen3-tiny-Q4_K_M"} {
		for sb := range 8 {
			rows = append(rows, plantedDefect{m, "Q4_K:min_sign:" + itoa(sb), false, false}, plantedDefect{m, "Q4_K:nibble:" + itoa(sb), false, false})
		}
	}
	for sb := 1; sb < 16; sb++ {
		rows = append(rows, plantedDefect{"qwen2-tiny-Q6_K", "Q6_K:scale_from:" + itoa(sb) + ":" + itoa(sb-1), false, false})
	}
	for b := range 8 {
		rows = append(rows, plantedDefect{"qwen2-tiny-Q8_0", "Q8_0:scale:" + itoa(b) + ":1.05", false, true}, plantedDefect{"qwen2-tiny-Q8_0", "Q8_0:scale:" + itoa(b) + ":1.00390625", true, false})
	}
	return rows
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestPlantedDefectsFailTheGates is the mutation test of the engine gates:
// with each defect of the table planted in the CPU engine's kernel of its
// weight type, apr qa's parity and golden_output gates on the fixture model
// of that type end fail — golden_output included, whose noise allowance is
// the contract's, so a broken engine cannot widen it into "undecided" — and
// with nothing planted both pass on the same models.
func TestPlantedDefectsFailTheGates(t *testing.T) {
	run := func(model, plant string) qa.Report {
		t.Setenv(cpu.EnvPlant, plant)
		return gateRun(t, qa.Options{Model: testutil.Fixture(t, "models/synth/"+model+".gguf"), Backends: []string{"ref", "cpu"},
			Gates: []string{qa.GateGolden, qa.GateParity}})
	}
	seen := map[string]bool{}
	for _, d := range plantedMatrix() {
		if !seen[d.model] {
			seen[d.model] = true
			rep := run(d.model, "")
			for _, name := range []string{qa.GateGolden, qa.GateParity} {
				wantStatus(t, gate(t, rep, name, "cpu"), "pass")
			}
		}
		rep := run(d.model, d.plant)
		for _, name := range []string{qa.GateGolden, qa.GateParity} {
			g := gate(t, rep, name, "cpu")
			if d.reportOnly || (d.goldenReport && name == qa.GateGolden) {
				t.Logf("%s planted %s: %s[cpu] %s (not asserted: below the gate's tolerance) %v", d.model, d.plant, name, g.Status, g.Values)
				continue
			}
			if g.Status != "fail" {
				t.Errorf("%s planted %s: %s[cpu] = %s (%s), want fail", d.model, d.plant, name, g.Status, g.Reason)
				continue
			}
			t.Logf("%s planted %s: %s[cpu] fail: %.200s", d.model, d.plant, name, g.Reason)
		}
		if g := gate(t, rep, qa.GateGolden, "cpu"); !d.reportOnly && !d.goldenReport && g.Status == "fail" && !strings.Contains(g.Reason, "max_logit_delta") && !strings.Contains(g.Reason, "mismatches") {
			t.Errorf("%s planted %s: golden_output fails for another reason: %s", d.model, d.plant, g.Reason)
		}
	}
}

// TestGoldenNoiseFloor: golden_output counts, on a case beyond the
// contract's logit noise, only what lies beyond params.noise_floor times
// the reference's own distance from its jittered twin there. A planted
// block scale × 1.05 fails the gate (TestPlantedDefectsFailTheGates); where
// the contract allows 1e12 times the model's noise, the same engine passes
// and the gate reports what it measured and the floor it judged by.
func TestGoldenNoiseFloor(t *testing.T) {
	set := editedContracts(t, func(s string) string {
		if !strings.Contains(s, "_golden_noise_floor: {llama: 2, qwen2: 2,") {
			t.Fatal("common.cue no longer holds _golden_noise_floor: {llama: 2, qwen2: 2, …}")
		}
		return strings.Replace(s, "_golden_noise_floor: {llama: 2, qwen2: 2,", "_golden_noise_floor: {llama: 2, qwen2: 1e12,", 1)
	})
	t.Setenv(cpu.EnvPlant, "Q8_0:scale:1:1.05")
	rep := gateRun(t, qa.Options{Model: testutil.Fixture(t, "models/synth/qwen2-tiny-Q8_0.gguf"), Backends: []string{"cpu"},
		Gates: []string{qa.GateGolden}, Contracts: set})
	g := gate(t, rep, qa.GateGolden, "cpu")
	wantStatus(t, g, "pass")
	if m := value(t, g, "measured_max_logit_delta").Value; m <= 0.25 {
		t.Errorf("measured_max_logit_delta %v: want the planted defect beyond the noise 0.25 before the floor", m)
	}
	if f := value(t, g, "noise_floor_max_abs").Value; f <= 0 {
		t.Errorf("noise_floor_max_abs %v: want the twin's distance measured", f)
	}
}
