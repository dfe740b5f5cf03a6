package falsify

import (
	"context"
	"fmt"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

// failClosed runs the target falsifier twice, once with its references
// unavailable and once with them erroring, and counts the runs that did not
// end refused: a check that passes (or fails) without its reference decided
// something it could not know.
func failClosed(ctx context.Context, c *Check) error {
	tf, code, err := failClosedTarget(c)
	if err != nil {
		return err
	}
	non := 0
	for _, fl := range []fault{faultUnavailable, faultErrors} {
		tc := c.run.newCheck(tf, fl)
		res := c.run.execute(ctx, tc)
		if tc.refsUsed == 0 && res.Verdict == verdict.Refused {
			return c.Refuse("target %s refused before consulting its reference (%s): fail-closedness cannot be judged", tf.ID, res.Reason)
		}
		if res.Verdict == verdict.Refused {
			c.Note("reference %s: %s refused (%s)", fl, tf.ID, res.Reason)
			continue
		}
		non++
		c.Note("reference %s: %s gave %s instead of refusing (%s consults %v)", fl, tf.ID, res.Verdict, code.ID, code.Refs)
	}
	c.Measure("non_refusals", float64(non))
	return nil
}

func failClosedTarget(c *Check) (schema.Falsifier, Code, error) {
	id, err := c.ParamString("target", "")
	if err != nil {
		return schema.Falsifier{}, Code{}, err
	}
	tf, ok := c.Set.Falsifier(id)
	if !ok {
		return schema.Falsifier{}, Code{}, c.Refuse("target %q is not a falsifier of the contract set", id)
	}
	code, ok := c.run.reg.Lookup(tf.Code)
	if !ok {
		return schema.Falsifier{}, Code{}, c.Refuse("target %s names code %q, which is not registered", id, tf.Code)
	}
	return tf, code, nil
}

// failClosedApplies: failclosed applies where its target does.
func failClosedApplies(c *Check) (bool, string) {
	tf, _, err := failClosedTarget(c)
	if err != nil {
		return true, "" // Run refuses with the reason
	}
	if ok, why := c.run.applies(c.run.newCheck(tf, faultNone)); !ok {
		return false, fmt.Sprintf("its target %s does not apply: %s", tf.ID, why)
	}
	return true, ""
}

func vetFailClosed(f schema.Falsifier, set *contracts.Set) []string {
	id, _ := f.Params["target"].(string)
	tf, ok := set.Falsifier(id)
	switch {
	case id == "":
		return []string{"param target must name a falsifier"}
	case !ok:
		return []string{fmt.Sprintf("target %q is not a falsifier of the contract set", id)}
	case tf.Kind == string(KindFailClosed):
		return []string{fmt.Sprintf("target %s is itself a failclosed falsifier", id)}
	}
	return nil
}

// vetFailClosedRefs checks, with the registry at hand, that the target's
// code consults a reference (see Vet).
func vetFailClosedRefs(f schema.Falsifier, set *contracts.Set, reg *Registry) []string {
	id, _ := f.Params["target"].(string)
	tf, ok := set.Falsifier(id)
	if !ok {
		return nil
	}
	if code, ok := reg.Lookup(tf.Code); ok && len(code.Refs) == 0 {
		return []string{fmt.Sprintf("target %s's code %s consults no reference: there is nothing to withdraw", id, tf.Code)}
	}
	return nil
}
