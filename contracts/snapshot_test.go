package contracts

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var update = flag.Bool("update", false, "rewrite snapshot.json from the embedded sources")

// TestSnapshotCurrent: snapshot.json is what evaluating the embedded CUE
// gives, to the type of every value; -update rewrites it (review the
// diff). A contract, schema or golden edited without it fails here.
func TestSnapshotCurrent(t *testing.T) {
	fresh, err := loadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	want, err := encodeSnapshot(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("snapshot.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote snapshot.json (%d bytes)", len(want))
		return
	}
	got, err := fromSnapshot(snapshotJSON)
	if err != nil {
		t.Fatalf("snapshot.json is not this tree's (go test ./contracts -run TestSnapshotCurrent -update, and review it): %v", err)
	}
	if !bytes.Equal(snapshotJSON, want) {
		t.Error("snapshot.json differs from what the embedded sources give (go test ./contracts -run TestSnapshotCurrent -update)")
	}
	sameSet(t, got, fresh)
}

// sameSet fails unless a and b hold the same contracts (each value of the
// same Go type), falsifiers, owners, files, positions, texts and digest.
func sameSet(t *testing.T, a, b *Set) {
	t.Helper()
	if d := cmp.Diff(a.Contracts, b.Contracts); d != "" {
		t.Errorf("contracts (-snapshot +evaluated):\n%s", d)
	}
	if d := cmp.Diff(a.Falsifiers, b.Falsifiers); d != "" {
		t.Errorf("falsifiers (-snapshot +evaluated):\n%s", d)
	}
	if d := cmp.Diff(a.owner, b.owner); d != "" {
		t.Errorf("owners (-snapshot +evaluated):\n%s", d)
	}
	if d := cmp.Diff(a.Files, b.Files); d != "" {
		t.Errorf("files (-snapshot +evaluated):\n%s", d)
	}
	if a.Source != b.Source {
		t.Errorf("source %q, evaluated %q", a.Source, b.Source)
	}
	if a.Digest() != b.Digest() {
		t.Errorf("digest %s, evaluated %s", a.Digest(), b.Digest())
	}
	for _, id := range b.IDs() {
		sa, _ := a.Show(id)
		sb, _ := b.Show(id)
		if sa != sb || a.Pos(id) != b.Pos(id) {
			t.Errorf("%s: position %q text %d bytes, evaluated %q %d bytes", id, a.Pos(id), len(sa), b.Pos(id), len(sb))
		}
	}
	for _, f := range b.Falsifiers {
		if a.Pos(f.ID) != b.Pos(f.ID) {
			t.Errorf("%s: position %q, evaluated %q", f.ID, a.Pos(f.ID), b.Pos(f.ID))
		}
	}
}

// TestEmbeddedReadsTheSnapshot: this binary's Embedded does not evaluate
// the CUE (the ~150 ms apr run's F2 waits for).
func TestEmbeddedReadsTheSnapshot(t *testing.T) {
	if _, err := Embedded(); err != nil {
		t.Fatal(err)
	}
	if snapshotMiss != nil {
		t.Fatalf("Embedded evaluated the CUE: %v", snapshotMiss)
	}
}

// TestSnapshotOfOtherSourcesIsNotRead: a snapshot whose sources sum is not
// this binary's, or that is damaged, is refused, so that Embedded
// evaluates the CUE instead of serving a stale set.
func TestSnapshotOfOtherSourcesIsNotRead(t *testing.T) {
	stale := bytes.Replace(snapshotJSON, []byte(`"sources": "`), []byte(`"sources": "0`), 1)
	if _, err := fromSnapshot(stale); err == nil || !strings.Contains(err.Error(), "snapshot of sources") {
		t.Errorf("a snapshot of other sources was read (err %v)", err)
	}
	for name, b := range map[string][]byte{
		"truncated":     snapshotJSON[:len(snapshotJSON)/2],
		"unknown tag":   bytes.Replace(snapshotJSON, []byte(`"t": "int64"`), []byte(`"t": "int65"`), 1),
		"unknown field": bytes.Replace(snapshotJSON, []byte(`"Summary":`), []byte(`"Summery":`), 1),
		"wrong type":    bytes.Replace(snapshotJSON, []byte(`"Required": true`), []byte(`"Required": 1`), 1),
		"empty":         nil,
	} {
		if _, err := fromSnapshot(b); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
	for _, s := range []string{`"t": "int64"`, `"Summary":`, `"Required": true`} {
		if !bytes.Contains(snapshotJSON, []byte(s)) {
			t.Errorf("the snapshot holds no %s: the damage above planted nothing", s)
		}
	}
}

// TestTaggedAnyRoundTrip: every type CUE decodes into an `any` comes back
// as the same type and value, a float with an integral value included.
func TestTaggedAnyRoundTrip(t *testing.T) {
	in := map[string]any{
		"i": int64(3), "n": int(-2), "f": 2.0, "g": 0.1, "s": "x\"y", "b": true, "z": nil,
		"l": []any{int64(1), 1.5, "a", []any{}}, "m": map[string]any{"k": int64(7), "e": map[string]any{}},
	}
	for k, v := range in {
		tg, err := tagAny(v)
		if err != nil {
			t.Fatal(k, err)
		}
		// Through JSON, as the snapshot travels.
		b, err := jsonRoundTrip(tg)
		if err != nil {
			t.Fatal(k, err)
		}
		got, err := untagAny(b)
		if err != nil {
			t.Fatal(k, err)
		}
		if d := cmp.Diff(v, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: %s", k, d)
		}
		if v != nil && got != nil && typeName(v) != typeName(got) {
			t.Errorf("%s: %T came back %T", k, v, got)
		}
	}
	if _, err := tagAny(struct{}{}); err == nil {
		t.Error("a struct was tagged")
	}
	for _, bad := range []any{
		map[string]any{"t": "int64", "v": "7"},
		map[string]any{"t": "bool", "v": json.Number("1")},
		map[string]any{"t": "list", "v": map[string]any{}},
		map[string]any{"t": "int64"},
		map[string]any{"t": "null", "v": nil},
		map[string]any{"t": "string", "v": "x", "w": 1},
		map[string]any{"v": "x"},
		json.Number("7"),
	} {
		if got, err := untagAny(bad); err == nil {
			t.Errorf("untagAny(%v) = %v, want an error", bad, got)
		}
	}
}

func jsonRoundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // as fromSnapshot reads
	err = dec.Decode(&out)
	return out, err
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
