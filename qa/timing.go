package qa

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/schema"
)

// stageField reads a stage's field of apr run --json's document.
func stageField(r generate.Result, field string) (float64, bool) {
	switch field {
	case "load_ms":
		return r.LoadMS, true
	case "h2d_ms":
		return r.H2DMS, true
	case "prefill_ms":
		return r.PrefillMS, true
	case "decode_ms":
		return r.DecodeMS, true
	case "wall_ms":
		return r.WallMS, true
	}
	return 0, false
}

// timingGate is the planted-delay falsifier of apr run --json: for every
// stage the run contract times, a delay planted in that stage must move the
// stage's field by the delay (within the tolerance) and no other stage's
// field by more than the tolerance. Noise only ever adds time, so an
// attempt that fails is repeated up to params.attempts times; a delay
// reported in the wrong field fails every attempt.
func (m *modelRun) timingGate(ctx context.Context, fz schema.Falsifier, backend string) outcome {
	v, _ := m.opts.Contracts.Verb("run")
	if v.Timing == nil || len(v.Timing.Stages) == 0 {
		return refused(CodeNoContract, v.ID, nil, "the run contract times no stage")
	}
	delay := time.Duration(paramFloat(fz, "delay_ms", 120) * float64(time.Millisecond))
	attempts := max(1, paramInt(fz, "attempts", 3))
	base := generate.Options{Model: m.path, Backend: backend, Prompt: paramString(fz, "prompt", "Once upon a time"),
		Raw: true, MaxTokens: max(2, paramInt(fz, "tokens", 4)), IgnoreEOS: true, Threads: m.opts.Threads, Log: m.opts.Log}
	stages := sortedKeys(v.Timing.Stages)
	// Order stages as the pipeline runs them.
	order := map[string]int{}
	for i, s := range generate.Stages() {
		order[string(s)] = i
	}
	sort.SliceStable(stages, func(i, j int) bool { return order[stages[i]] < order[stages[j]] })
	for _, st := range stages {
		if _, err := generate.ParseStage(st); err != nil {
			return refused(CodeNoContract, v.ID, nil, "the run contract times stage %q, which the generation loop does not have", st)
		}
	}

	var best *timingAttempt
	for a := 0; a < attempts; a++ {
		at, o := m.timingAttempt(ctx, base, v.Timing.Stages, stages, delay, backend)
		if o != nil {
			return *o
		}
		at.n = a + 1
		if best == nil || at.worse() < best.worse() {
			best = at
		}
		if at.ok(fz) {
			best = at
			break
		}
	}
	c := newCheck(fz)
	c.note("delay_ms", ms(delay), "ms")
	c.hold("max_leak_ms", best.leak, "ms")
	c.hold("max_shortfall_ms", best.shortfall, "ms")
	c.holdIf("max_excess_ms", best.excess, "ms")
	for _, st := range stages {
		c.note("moved_"+v.Timing.Stages[st], best.moved[st], "ms")
	}
	c.note("attempts", float64(best.n), "count")
	return c.outcome(best.detail)
}

type timingAttempt struct {
	n                       int
	leak, shortfall, excess float64
	moved                   map[string]float64 // stage → how far its own field moved when delayed there
	detail                  string
}

func (a *timingAttempt) worse() float64 { return math.Max(a.leak, math.Max(a.shortfall, a.excess)) }

func (a *timingAttempt) ok(fz schema.Falsifier) bool {
	for name, v := range map[string]float64{"max_leak_ms": a.leak, "max_shortfall_ms": a.shortfall, "max_excess_ms": a.excess} {
		if t, ok := fz.Thresholds[name]; ok && !t.Holds(v) {
			return false
		}
	}
	return true
}

// timingAttempt runs one undelayed run, then one run per stage with the
// delay planted there, and measures how each field moved.
func (m *modelRun) timingAttempt(ctx context.Context, base generate.Options, fields map[string]string, stages []string, delay time.Duration, backend string) (*timingAttempt, *outcome) {
	run := func(plant map[generate.Stage]time.Duration) (generate.Result, *outcome) {
		o := base
		o.PlantDelay = plant
		r, err := m.opts.hooks.run(ctx, o)
		if err != nil {
			out := fromError(CodeBackend, err, "backend %s", backend)
			return r, &out
		}
		return r, nil
	}
	ref, o := run(nil)
	if o != nil {
		return nil, o
	}
	at := &timingAttempt{moved: map[string]float64{}}
	d := ms(delay)
	var worst string
	worstV := -1.0
	for _, st := range stages {
		r, o := run(map[generate.Stage]time.Duration{generate.Stage(st): delay})
		if o != nil {
			return nil, o
		}
		for _, other := range stages {
			f := fields[other]
			after, _ := stageField(r, f)
			before, _ := stageField(ref, f)
			moved := after - before
			if other == st {
				at.moved[st] = moved
				if s := d - moved; s > at.shortfall {
					at.shortfall = s
				}
				if e := moved - d; e > at.excess {
					at.excess = e
				}
				if dev := math.Abs(moved - d); dev > worstV {
					worstV, worst = dev, fmt.Sprintf("delay %.0f ms in %s moved %s by %.1f ms", d, st, f, moved)
				}
				continue
			}
			if moved > at.leak {
				at.leak = moved
			}
			if moved > worstV {
				worstV, worst = moved, fmt.Sprintf("delay %.0f ms in %s moved %s by %.1f ms", d, st, f, moved)
			}
		}
	}
	at.detail = worst
	return at, nil
}
