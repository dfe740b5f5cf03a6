package falsify

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
)

// TimedRun runs a timed pipeline once, sleeping plant[stage] inside each
// stage, and returns its output's fields (JSON names) that hold numbers.
type TimedRun func(ctx context.Context, plant map[string]time.Duration) (map[string]float64, error)

// CheckTiming is the timing kind: for each stage, a run with delay planted
// in it must move that stage's field by at least the delay (less the
// shortfall threshold) and no other stage's field by more than the leak
// threshold, against a baseline run. Every configuration runs samples times,
// the configurations taking turns (a slow drift of the machine reaches them
// all alike), and each field keeps its fastest value, so a one-off stall of
// a loaded machine does not count, while a misplaced delay (in every run)
// does. It
// measures max_leak_ms, max_shortfall_ms and max_excess_ms (a planted
// stage's field moving by more than the delay) over all stages; attempts > 1
// repeats the whole measurement when noise pushed it over a threshold, each
// attempt with twice the samples of the one before (a stall that recurs,
// such as a background hash of a large file landing in one stage, must then
// miss the fastest of more runs), and measures the attempts and samples
// used. A misplaced delay is in every run, so more samples never hide it.
func CheckTiming(ctx context.Context, c *Check, run TimedRun, stages map[string]string, delay time.Duration, attempts, samples int) error {
	leakTh, ok1 := c.F.Thresholds["max_leak_ms"]
	shortTh, ok2 := c.F.Thresholds["max_shortfall_ms"]
	if !ok1 || !ok2 {
		return c.Refuse("thresholds max_leak_ms and max_shortfall_ms are needed")
	}
	names := make([]string, 0, len(stages))
	for s := range stages {
		names = append(names, s)
	}
	sort.Strings(names)
	delayMS := float64(delay) / float64(time.Millisecond)
	excessTh, haveExcess := c.F.Thresholds["max_excess_ms"]
	var leak, short, excess float64
	var notes []string
	for a := 1; a <= max(1, attempts); a++ {
		if err := ctx.Err(); err != nil {
			return refuse.Wrap(c.By(), err)
		}
		// Every configuration (the baseline, then one per planted stage)
		// runs samples times, round-robin, so that a drift of the machine
		// over the attempt (caches, clocks, a neighbour's load) reaches all
		// of them alike; each field keeps its fastest value.
		plants := []map[string]time.Duration{nil}
		for _, s := range names {
			plants = append(plants, map[string]time.Duration{s: delay})
		}
		best := make([]map[string]float64, len(plants))
		for i := range best {
			best[i] = map[string]float64{}
		}
		n := max(1, samples) << (a - 1)
		for i := 0; i < n; i++ {
			for k, plant := range plants {
				r, err := run(ctx, plant)
				if err != nil {
					return refuse.Wrap(c.By(), fmt.Errorf("run with %v planted: %w", plant, err))
				}
				for _, s := range names {
					v, ok := r[stages[s]]
					if !ok {
						return Fail("the output has no field %s for stage %s", stages[s], s)
					}
					if old, seen := best[k][stages[s]]; !seen || v < old {
						best[k][stages[s]] = v
					}
				}
			}
		}
		base := best[0]
		leak, short, excess, notes = 0, 0, 0, nil
		for k, s := range names {
			r := best[k+1]
			var moves []string
			for _, o := range names {
				f := stages[o]
				moved := r[f] - base[f]
				moves = append(moves, fmt.Sprintf("%s %+.1f", f, moved))
				if o == s {
					short = math.Max(short, delayMS-moved)
					excess = math.Max(excess, moved-delayMS)
					continue
				}
				leak = math.Max(leak, moved)
			}
			notes = append(notes, fmt.Sprintf("attempt %d, %.0f ms planted in %s: %s ms", a, delayMS, s, strings.Join(moves, ", ")))
		}
		c.Measure("attempts", float64(a))
		c.Measure("samples", float64(n))
		if leakTh.Holds(leak) && shortTh.Holds(short) && (!haveExcess || excessTh.Holds(excess)) {
			break
		}
	}
	for _, n := range notes {
		c.Note("%s", n)
	}
	c.Measure("max_leak_ms", leak)
	c.Measure("max_shortfall_ms", short)
	c.Measure("max_excess_ms", excess)
	c.Measure("delay_ms", delayMS)
	return nil
}

// timingFromGenerate times engine/generate.Run (apr run) on the model.
func timingFromGenerate(ctx context.Context, c *Check) error {
	path := c.ModelPath()
	if path == "" {
		return c.Refuse("needs a model (--model FILE)")
	}
	v, ok := verbOf(c)
	if !ok || v.Timing == nil {
		return c.Refuse("binds %s, which is not a verb contract with timed stages", c.F.Binds)
	}
	backend, err := c.ParamString("backend", "ref")
	if err != nil {
		return err
	}
	prompt, err := c.ParamString("prompt", "Once upon a time")
	if err != nil {
		return err
	}
	tokens, err := c.ParamInt("tokens", 4)
	if err != nil {
		return err
	}
	delayMS, err := c.ParamInt("delay_ms", 100)
	if err != nil {
		return err
	}
	attempts, err := c.ParamInt("attempts", 1)
	if err != nil {
		return err
	}
	samples, err := c.ParamInt("samples", 2)
	if err != nil {
		return err
	}
	run := func(ctx context.Context, plant map[string]time.Duration) (map[string]float64, error) {
		pd := map[generate.Stage]time.Duration{}
		for s, d := range plant {
			st, err := generate.ParseStage(s)
			if err != nil {
				return nil, err
			}
			pd[st] = d
		}
		res, err := generate.Run(ctx, generate.Options{Model: path, Backend: backend, Prompt: prompt, Raw: true,
			MaxTokens: tokens, IgnoreEOS: true, PlantDelay: pd})
		if err != nil {
			return nil, err
		}
		return numberFields(res)
	}
	return CheckTiming(ctx, c, run, v.Timing.Stages, time.Duration(delayMS)*time.Millisecond, attempts, samples)
}

// numberFields returns the top-level numeric fields of v's JSON form.
func numberFields(v any) (map[string]float64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for k, x := range m {
		if f, ok := x.(float64); ok {
			out[k] = f
		}
	}
	return out, nil
}

func verbOf(c *Check) (*schema.Verb, bool) {
	name, ok := strings.CutPrefix(c.F.Binds, contracts.GroupVerb+".")
	if !ok {
		return nil, false
	}
	return c.Set.Verb(name)
}

func vetTiming(f schema.Falsifier, set *contracts.Set) []string {
	name, ok := strings.CutPrefix(f.Binds, contracts.GroupVerb+".")
	if !ok {
		return []string{"binds " + f.Binds + "; timing binds a verb contract"}
	}
	v, ok := set.Verb(name)
	if !ok || v.Timing == nil || len(v.Timing.Stages) == 0 {
		return []string{"verb contract " + f.Binds + " lists no timed stages"}
	}
	for s := range v.Timing.Stages {
		if _, err := generate.ParseStage(s); err != nil && name == "run" {
			return []string{fmt.Sprintf("stage %s: %v", s, err)}
		}
	}
	return nil
}
