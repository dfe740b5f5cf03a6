package contracts

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"reflect"
	"sort"
	"strconv"

	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/schema"
)

// The embedded set's evaluation (CUE's unification, validation and
// decoding: ~150 ms of one core, before apr run's F2 can read a tier) is
// kept in snapshot.json, written by `go test ./contracts -run
// TestSnapshotCurrent -update` and embedded. It is a cache of what Load
// computes from the embedded sources, never a second source: it records
// the sha256 of every input the evaluation read (the contracts' and the
// schema's CUE, the reviewed goldens the digest covers), Embedded uses it
// only when that sum is the one of the sources built into this binary, and
// evaluates the CUE otherwise; TestSnapshotCurrent fails while it differs
// from a fresh Load in anything.
//
//go:embed snapshot.json
var snapshotJSON []byte

// snapshotFormat names this layout and is part of the inputs' sum: a new
// layout needs a new name, so that an old snapshot is not read. A change
// of the schema's Go types needs none: fromTree refuses a tree with a
// field missing or unknown, and Embedded then evaluates the CUE.
const snapshotFormat = "apr-contracts-snapshot 1"

// snapshot is what a loaded embedded Set holds that came from the CUE.
// The contracts travel as a tree (toTree): every field by its Go name, a
// nil map, slice or pointer as null and an empty one as {} or [], and
// each `any` value (falsifiers' params, hparams' defaults) with its Go
// type, so that reading it gives back exactly what CUE's decoding gave.
type snapshot struct {
	Sources   string            `json:"sources"`
	Files     []string          `json:"files"`
	Contracts any               `json:"contracts"`
	Pos       map[string]string `json:"pos"`
	Text      map[string]string `json:"text"`
	Digest    string            `json:"digest"`
}

// sourcesSum is the sha256 of everything the embedded set's evaluation
// reads: the snapshot's format, the contracts' and the schema's .cue files
// and the goldens, each as its name, its length and its bytes, in name
// order.
func sourcesSum() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", snapshotFormat)
	add := func(prefix string, fsys fs.FS, pattern string) error {
		names, err := fs.Glob(fsys, pattern)
		if err != nil {
			return err
		}
		sort.Strings(names)
		for _, n := range names {
			b, err := fs.ReadFile(fsys, n)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s%s\n%d\n", prefix, n, len(b))
			h.Write(b)
		}
		return nil
	}
	if err := add("contracts/", embedded, "*.cue"); err != nil {
		return "", err
	}
	if err := add("schema/", schema.FS(), "*.cue"); err != nil {
		return "", err
	}
	if err := add("golden/", golden.FS(), "data/*.json"); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// encodeSnapshot writes s (a Set loaded from the embedded sources) as
// snapshot.json's bytes.
func encodeSnapshot(s *Set) ([]byte, error) {
	s.detail()
	sum, err := sourcesSum()
	if err != nil {
		return nil, err
	}
	tree, err := toTree(reflect.ValueOf(s.Contracts))
	if err != nil {
		return nil, fmt.Errorf("snapshot: contracts: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	err = enc.Encode(snapshot{Sources: sum, Files: s.Files, Contracts: tree, Pos: s.pos, Text: s.text, Digest: s.digest})
	return buf.Bytes(), err
}

// fromSnapshot returns the embedded Set from b, or why it cannot (b not
// written from these sources, or not readable): Embedded then evaluates
// the CUE.
func fromSnapshot(b []byte) (*Set, error) {
	var sn snapshot
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sn); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	sum, err := sourcesSum()
	if err != nil {
		return nil, err
	}
	if sn.Sources != sum {
		return nil, fmt.Errorf("snapshot of sources %.12s…, these are %.12s…", sn.Sources, sum)
	}
	if sn.Pos == nil || sn.Text == nil || sn.Digest == "" {
		return nil, fmt.Errorf("snapshot: positions, texts or digest missing")
	}
	set := &Set{Source: "embedded", Files: sn.Files, owner: map[string]string{}, pos: sn.Pos, text: sn.Text, digest: sn.Digest}
	if err := fromTree(sn.Contracts, reflect.ValueOf(&set.Contracts).Elem()); err != nil {
		return nil, fmt.Errorf("snapshot: contracts: %w", err)
	}
	set.index()
	if ps := check(set); len(ps) > 0 {
		// Load names where each was written.
		return nil, fmt.Errorf("snapshot: %d problems", len(ps))
	}
	set.once.Do(func() {}) // pos, text and digest are here already
	return set, nil
}

// toTree turns v into JSON's values: a struct into an object of its
// exported fields by Go name, a map (string keys) into an object, a slice
// into an array, nil maps, slices, pointers and interfaces into null, an
// interface's value tagged with its type (tagAny).
func toTree(v reflect.Value) (any, error) {
	switch v.Kind() {
	case reflect.Struct:
		out := map[string]any{}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				return nil, fmt.Errorf("%s.%s is not exported", v.Type(), f.Name)
			}
			t, err := toTree(v.Field(i))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			out[f.Name] = t
		}
		return out, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("a map keyed by %s", v.Type().Key())
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			t, err := toTree(it.Value())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", it.Key().String(), err)
			}
			out[it.Key().String()] = t
		}
		return out, nil
	case reflect.Slice:
		if v.IsNil() {
			return nil, nil
		}
		out := make([]any, v.Len())
		for i := range out {
			t, err := toTree(v.Index(i))
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = t
		}
		return out, nil
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		return toTree(v.Elem())
	case reflect.Interface:
		return tagAny(v.Interface())
	case reflect.String:
		return v.String(), nil
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(v.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return json.Number(strconv.FormatUint(v.Uint(), 10)), nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("the float %v has no JSON", f)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, v.Type().Bits())), nil
	}
	return nil, fmt.Errorf("a %s: the snapshot does not write it", v.Type())
}

// fromTree sets v (settable) from what toTree wrote, as decoded with
// json.Decoder.UseNumber; anything else is an error.
func fromTree(t any, v reflect.Value) error {
	if t == nil {
		switch v.Kind() {
		case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface:
			v.SetZero()
			return nil
		}
		return fmt.Errorf("null for a %s", v.Type())
	}
	switch v.Kind() {
	case reflect.Struct:
		obj, ok := t.(map[string]any)
		if !ok {
			return fmt.Errorf("a %T for the struct %s", t, v.Type())
		}
		for name := range obj {
			if _, ok := v.Type().FieldByName(name); !ok {
				return fmt.Errorf("%s has no field %s", v.Type(), name)
			}
		}
		for i := 0; i < v.NumField(); i++ {
			name := v.Type().Field(i).Name
			ft, ok := obj[name]
			if !ok {
				return fmt.Errorf("%s.%s is missing", v.Type(), name)
			}
			if err := fromTree(ft, v.Field(i)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	case reflect.Map:
		obj, ok := t.(map[string]any)
		if !ok {
			return fmt.Errorf("a %T for the map %s", t, v.Type())
		}
		m := reflect.MakeMapWithSize(v.Type(), len(obj))
		for k, et := range obj {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := fromTree(et, e); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		v.Set(m)
		return nil
	case reflect.Slice:
		arr, ok := t.([]any)
		if !ok {
			return fmt.Errorf("a %T for the slice %s", t, v.Type())
		}
		sl := reflect.MakeSlice(v.Type(), len(arr), len(arr))
		for i, et := range arr {
			if err := fromTree(et, sl.Index(i)); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		v.Set(sl)
		return nil
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := fromTree(t, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Interface:
		x, err := untagAny(t)
		if err != nil {
			return err
		}
		if x == nil {
			v.SetZero()
		} else {
			v.Set(reflect.ValueOf(x))
		}
		return nil
	case reflect.String:
		s, ok := t.(string)
		if !ok {
			return fmt.Errorf("a %T for a string", t)
		}
		v.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := t.(bool)
		if !ok {
			return fmt.Errorf("a %T for a bool", t)
		}
		v.SetBool(b)
		return nil
	}
	n, ok := t.(json.Number)
	if !ok {
		return fmt.Errorf("a %T for a %s", t, v.Type())
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(string(n), 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(i)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(string(n), 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(u)
		return nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(string(n), v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetFloat(f)
		return nil
	}
	return fmt.Errorf("a %s: the snapshot does not read it", v.Type())
}

// tagAny writes v (a value CUE decoded into an `any`) as {"t": its Go
// type, "v": its value}, lists and structs element by element.
func tagAny(v any) (any, error) {
	tag := func(t string, v any) map[string]any { return map[string]any{"t": t, "v": v} }
	switch x := v.(type) {
	case nil:
		return map[string]any{"t": "null"}, nil
	case bool:
		return tag("bool", x), nil
	case string:
		return tag("string", x), nil
	case int64:
		return tag("int64", json.Number(strconv.FormatInt(x, 10))), nil
	case int:
		return tag("int", json.Number(strconv.Itoa(x))), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("the float %v has no JSON", x)
		}
		return tag("float64", json.Number(strconv.FormatFloat(x, 'g', -1, 64))), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			t, err := tagAny(e)
			if err != nil {
				return nil, err
			}
			out[i] = t
		}
		return tag("list", out), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			t, err := tagAny(e)
			if err != nil {
				return nil, err
			}
			out[k] = t
		}
		return tag("struct", out), nil
	}
	return nil, fmt.Errorf("a %T: the snapshot does not write it", v)
}

// untagAny reads what tagAny wrote, as json.Decoder.UseNumber decoded it.
func untagAny(v any) (any, error) {
	m, ok := v.(map[string]any)
	tag, _ := m["t"].(string)
	if !ok || len(m) > 2 || (len(m) == 2) == (tag == "null") {
		return nil, fmt.Errorf("not a tagged value: %v", v)
	}
	val, bad := m["v"], fmt.Errorf("a %s tagged with a %T value", tag, m["v"])
	switch tag {
	case "null":
		return nil, nil
	case "bool":
		if b, ok := val.(bool); ok {
			return b, nil
		}
	case "string":
		if s, ok := val.(string); ok {
			return s, nil
		}
	case "int64", "int", "float64":
		n, ok := val.(json.Number)
		if !ok {
			return nil, bad
		}
		switch tag {
		case "int64":
			return strconv.ParseInt(string(n), 10, 64)
		case "int":
			return strconv.Atoi(string(n))
		}
		return strconv.ParseFloat(string(n), 64)
	case "list":
		l, ok := val.([]any)
		if !ok {
			return nil, bad
		}
		out := make([]any, len(l))
		for i, e := range l {
			var err error
			if out[i], err = untagAny(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "struct":
		o, ok := val.(map[string]any)
		if !ok {
			return nil, bad
		}
		out := make(map[string]any, len(o))
		for k, e := range o {
			var err error
			if out[k], err = untagAny(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unknown tag %q", tag)
	}
	return nil, bad
}
