package falsify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
)

// VerbRunner runs apr's command line with args and returns what it printed:
// the CLI's root command, in-process, in apr.
type VerbRunner func(ctx context.Context, args []string) (stdout, stderr []byte, err error)

// RegisterVerbFields registers verb_fields in r over run. Its code is here;
// only the runner (apr's own command line) comes from the CLI.
func RegisterVerbFields(r *Registry, run VerbRunner) {
	r.Register("verb_fields", KindShape, verbFields(run),
		Needs(NeedModel), Thresholds("violations"), Params("args"),
		Doc("a verb's --json output carries every field of its contract, of its type, and no other"))
}

// verbFields runs an apr verb through run with the falsifier's args
// ({model} replaced by --model, {tmp} by a fresh directory removed
// afterwards) and checks its --json document against the verb's contract.
func verbFields(run VerbRunner) Func {
	return func(ctx context.Context, c *Check) error {
		name, ok := strings.CutPrefix(c.F.Binds, contracts.GroupVerb+".")
		if !ok {
			return c.Refuse("binds %s, which is not a verb contract", c.F.Binds)
		}
		v, ok := c.Set.Verb(name)
		if !ok {
			return c.Refuse("no verb contract %s", c.F.Binds)
		}
		args, err := c.ParamStrings("args")
		if err != nil {
			return err
		}
		tmp := ""
		for i, a := range args {
			a = strings.ReplaceAll(a, "{model}", c.ModelPath())
			if strings.Contains(a, "{tmp}") {
				if tmp == "" {
					if tmp, err = os.MkdirTemp("", "apr-verb-fields-"); err != nil {
						return err
					}
					defer os.RemoveAll(tmp)
				}
				a = strings.ReplaceAll(a, "{tmp}", tmp)
			}
			args[i] = a
		}
		if err := c.Ref("verb contract"); err != nil {
			return err
		}
		stdout, stderr, err := run(ctx, args)
		if err != nil {
			if _, ok := refuse.As(err); ok {
				return err
			}
			return Fail("apr %s: %v (stderr: %.200s)", strings.Join(args, " "), err, stderr)
		}
		violations := CheckVerbOutput(v, stdout)
		for _, s := range violations {
			c.Note("%s", s)
		}
		c.Measure("violations", float64(len(violations)))
		return nil
	}
}

// ResponsesFunc serves a model on loopback and returns one response of
// each kind gathered into one document, and the stream framing violations:
// serve.Responses in apr (package serve imports falsify, so it is passed in).
type ResponsesFunc func(ctx context.Context, model, backend string) (doc map[string]any, framing []string, err error)

// RegisterServeResponses registers serve_responses in r over responses.
func RegisterServeResponses(r *Registry, responses ResponsesFunc) {
	r.Register("serve_responses", KindShape, serveResponses(responses),
		Needs(NeedModel), Thresholds("violations", "framing_violations"),
		Doc("apr serve's responses (completion, chat, streamed chunks, error, models, health) carry every field of verb.serve, of its type, and its streams are framed as SSE ending in [DONE]"))
}

// ServeParityRun serves a model on loopback, sends requests concurrent
// requests of tokens tokens each over parallel slots (request i seeded with
// seed + i), and returns how many answers differ from the same request run
// alone, the most sequences one step advanced, and a line per mismatch:
// serve.Parity in apr (passed in, since package serve imports falsify).
type ServeParityRun func(ctx context.Context, model, backend string, seed uint64, requests, tokens, parallel int) (mismatches, maxBatch int, notes []string, err error)

// RegisterServeParity registers serve_parity in r over run.
func RegisterServeParity(r *Registry, run ServeParityRun) {
	r.Register("serve_parity", KindProperty, serveParity(run),
		Needs(NeedModel), Thresholds("mismatches", "max_batch"),
		Params("backend", "requests", "tokens", "parallel"),
		Doc("concurrent requests to apr serve on a backend give the token ids of the same requests run alone on it (batch invariance at the serving shape)"))
}

// serveParity compares concurrent answers of apr serve with solo runs of
// the same requests.
func serveParity(run ServeParityRun) Func {
	return func(ctx context.Context, c *Check) error {
		requests, err := c.ParamInt("requests", 8)
		if err != nil {
			return err
		}
		tokens, err := c.ParamInt("tokens", 12)
		if err != nil {
			return err
		}
		parallel, err := c.ParamInt("parallel", 4)
		if err != nil {
			return err
		}
		mismatches, maxBatch, notes, err := run(ctx, c.ModelPath(), backendOf(c, "cpu"), uint64(c.Seed()), requests, tokens, parallel)
		if err != nil {
			return err
		}
		for _, n := range notes {
			c.Note("%s", n)
		}
		c.Measure("mismatches", float64(mismatches))
		c.Measure("max_batch", float64(maxBatch))
		return nil
	}
}

// serveResponses checks apr serve's responses against verb.serve with the
// verb field checker.
func serveResponses(responses ResponsesFunc) Func {
	return func(ctx context.Context, c *Check) error {
		v, ok := c.Set.Verb("serve")
		if !ok || c.F.Binds != contracts.GroupVerb+".serve" {
			return c.Refuse("binds %s, not verb.serve", c.F.Binds)
		}
		backend, err := c.ParamString("backend", "cpu")
		if err != nil {
			return err
		}
		doc, framing, err := responses(ctx, c.ModelPath(), backend)
		if err != nil {
			return err
		}
		out, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		if _, ok := doc["chat"]; !ok {
			// A model without a chat template answers no chat request: the
			// contract's chat fields are not held against it (and the details
			// say so; nothing about chat passed).
			c.Note("the model has no chat template: the chat responses were not checked")
			nv := *v
			nv.Fields = maps.Clone(v.Fields)
			maps.DeleteFunc(nv.Fields, func(k string, _ schema.Field) bool {
				return strings.HasPrefix(k, "chat.") || strings.HasPrefix(k, "chat_chunks")
			})
			v = &nv
		}
		violations := CheckVerbOutput(v, out)
		for _, s := range append(violations, framing...) {
			c.Note("%s", s)
		}
		c.Measure("violations", float64(len(violations)))
		c.Measure("framing_violations", float64(len(framing)))
		return nil
	}
}

// CheckVerbOutput checks out, a verb's stdout under --json, against the
// verb's contract: exactly one JSON document; every required field present
// (in every element, for fields under "[]"); every field of its contract
// type; no field the contract does not describe, at the levels it
// describes. It returns the violations.
func CheckVerbOutput(v *schema.Verb, out []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return []string{fmt.Sprintf("stdout is not a JSON document: %v", err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return []string{"stdout holds more than one JSON document"}
	}
	var bad []string
	described := map[string]map[string]bool{} // parent path → child names the contract lists
	for _, path := range slices.Sorted(maps.Keys(v.Fields)) {
		f := v.Fields[path]
		if f.Stream != "stdout" {
			continue
		}
		parent, child := splitFieldPath(path)
		if described[parent] == nil {
			described[parent] = map[string]bool{}
		}
		described[parent][child] = true
		vals := fieldValues(doc, path)
		if path == "[]" { // the document itself is an array
			vals = []fieldValue{{v: doc, present: true}}
		}
		for _, val := range vals {
			if !val.present {
				if f.Required {
					bad = append(bad, fmt.Sprintf("%s: required, absent%s", path, val.where))
				}
				continue
			}
			if !jsonTypeIs(val.v, f.Type) {
				bad = append(bad, fmt.Sprintf("%s: %s, the contract says %s%s", path, jsonTypeName(val.v), f.Type, val.where))
			}
		}
	}
	// Fields the contract does not describe, under the objects it does.
	for parent, kids := range described {
		for _, val := range fieldValues(doc, parent) {
			obj, ok := val.v.(map[string]any)
			if !val.present || !ok {
				continue
			}
			for k := range obj {
				if !kids[k] {
					bad = append(bad, fmt.Sprintf("%s: not in the contract%s", joinFieldPath(parent, k), val.where))
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

type fieldValue struct {
	v       any
	present bool
	where   string // " (element 3)" for fields under arrays
}

// splitFieldPath splits "a.b[].c" into ("a.b[]", "c"); a top-level field
// has parent "".
func splitFieldPath(p string) (string, string) {
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i], p[i+1:]
	}
	if p == "[]" {
		return "", ""
	}
	if strings.HasPrefix(p, "[].") {
		return "[]", p[3:]
	}
	return "", p
}

func joinFieldPath(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

// fieldValues returns the values at path in doc: one, or one per array
// element for every "[]" on the way. Path "" is doc itself.
func fieldValues(doc any, path string) []fieldValue {
	cur := []fieldValue{{v: doc, present: true}}
	if path == "" {
		return cur
	}
	for _, seg := range strings.Split(path, ".") {
		name, each := strings.CutSuffix(seg, "[]")
		var next []fieldValue
		for _, fv := range cur {
			if !fv.present {
				next = append(next, fv)
				continue
			}
			v := fv.v
			if name != "" {
				obj, ok := v.(map[string]any)
				x, present := obj[name]
				if !ok || !present {
					next = append(next, fieldValue{where: fv.where})
					continue
				}
				v = x
			}
			if !each {
				next = append(next, fieldValue{v: v, present: true, where: fv.where})
				continue
			}
			arr, ok := v.([]any)
			if !ok {
				next = append(next, fieldValue{v: v, present: true, where: fv.where + " (not an array)"})
				continue
			}
			for i, e := range arr {
				next = append(next, fieldValue{v: e, present: true, where: fmt.Sprintf("%s (element %d)", fv.where, i)})
			}
		}
		cur = next
	}
	return cur
}

func jsonTypeIs(v any, typ string) bool {
	switch typ {
	case "any":
		return true
	case "string":
		_, ok := v.(string)
		return ok
	case "bool":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "int":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	}
	return false
}

func jsonTypeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "an int"
		}
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
