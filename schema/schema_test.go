package schema_test

import (
	"strings"
	"testing"

	"github.com/aprqa/apr/schema"
)

func TestSchemaCompilesWithEveryDefinition(t *testing.T) {
	for _, def := range []string{schema.DefContracts, schema.DefModel, schema.DefKernel, schema.DefVerb,
		schema.DefFalsifier, schema.DefTolerance, schema.DefThreshold, schema.DefReceipt, schema.DefCell} {
		// A definition that exists rejects an empty document (each has required fields) or
		// accepts it (#Contracts, #Tolerance); it never reports "no definition".
		err := schema.Validate(def, "empty.json", []byte(`{}`), nil)
		if err != nil && strings.Contains(err.Error(), "no definition") {
			t.Errorf("Validate(%s): %v", def, err)
		}
	}
}

const goodCell = `{
  "id": "m|run|ref", "model": {"key": "m", "path": "m.gguf", "bytes": 10, "sha256": "` + sha + `"},
  "arch": "llama", "weight_type": "F32", "verb": "run", "backend": "ref",
  "verdict": "pass", "timings": {"started": "2026-01-01T00:00:00Z", "wall_s": 3, "phases_s": {"prefill": 1.5}},
  "values": [{"name": "tok_s", "value": 12, "threshold": ">= 1"}, {"name": "extra_metric", "value": 3}]
}`

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestCell(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		wantErr string // substring of Details, "" for valid
	}{
		{"valid", goodCell, ""},
		{"extra field allowed", strings.Replace(goodCell, `"verb"`, `"new_field": 1, "verb"`, 1), ""},
		{"bad verdict", strings.Replace(goodCell, `"pass"`, `"skipped"`, 1), "verdict"},
		{"fail needs reason", strings.Replace(goodCell, `"pass"`, `"fail"`, 1), "reason"},
		{"refused needs removed_by", strings.Replace(goodCell, `"pass"`, `"refused", "reason": "no GPU"`, 1), "removed_by"},
		{"bad sha", strings.Replace(goodCell, sha, "xyz", 1), "sha256"},
		{"negative timing", strings.Replace(goodCell, `"prefill": 1.5`, `"prefill": -1`, 1), "prefill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := schema.Validate(schema.DefCell, "cell.json", []byte(tt.doc), nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(#Cell): %s", schema.Details(err))
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(#Cell) of %s: no error, want one mentioning %q", tt.name, tt.wantErr)
			}
			d := schema.Details(err)
			// A missing field is positioned in the schema; a bad value in the data.
			if !strings.Contains(d, tt.wantErr) || !strings.Contains(d, ".cue:") && !strings.Contains(d, "cell.json:") {
				t.Errorf("Validate(#Cell) error %q does not mention %q with a position", d, tt.wantErr)
			}
		})
	}
}

func TestThresholdHolds(t *testing.T) {
	nan := 0.0
	nan = nan / nan
	tests := []struct {
		name string
		th   schema.Threshold
		v    float64
		want bool
	}{
		{"le ok", schema.Threshold{Op: "<=", Value: 1}, 1, true},
		{"le fail", schema.Threshold{Op: "<=", Value: 1}, 1.1, false},
		{"ge ok", schema.Threshold{Op: ">=", Value: 0.99}, 0.995, true},
		{"lt edge", schema.Threshold{Op: "<", Value: 1}, 1, false},
		{"gt", schema.Threshold{Op: ">", Value: 1}, 2, true},
		{"eq", schema.Threshold{Op: "==", Value: 0}, 0, true},
		{"nan never", schema.Threshold{Op: "<=", Value: 1}, nan, false},
		{"unknown op never", schema.Threshold{Op: "~", Value: 1}, 1, false},
	}
	for _, tt := range tests {
		if got := tt.th.Holds(tt.v); got != tt.want {
			t.Errorf("%s: Threshold%+v.Holds(%v) = %v, want %v", tt.name, tt.th, tt.v, got, tt.want)
		}
	}
}

const goodReceipt = `{
  "schema": "apr/ladder-receipt/v1",
  "binary": {"module": "github.com/aprqa/apr", "version": "(devel)", "revision": "abc", "dirty": "false",
             "go_version": "go1.26.8", "tags": [], "sha256": "` + sha + `"},
  "contracts_digest": "` + sha + `",
  "runs": [{"shard": "1/1", "host": {"os": "linux", "arch": "amd64", "cpu_model": "x", "cpu_features": ["avx2"],
            "cores": 2, "memory_bytes": 0, "gpus": [], "notes": ["memory unknown"]},
            "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:01:00Z", "cells": 1, "executed": 1, "reused": 0}],
  "models": [{"key": "m", "path": "m.gguf", "bytes": 10, "sha256": "` + sha + `", "header": {"architecture": "llama", "dominant_type": "F32"}}],
  "cells": [` + goodCell + `],
  "summary": {"cells": 1, "pass": 1, "fail": 0, "refused": 0}
}`

func TestReceipt(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		wantErr string
	}{
		{"valid", goodReceipt, ""},
		{"unknown binary sha needs error", strings.Replace(goodReceipt, `"sha256": "`+sha+`"},`, `"sha256": ""},`, 1), "error"},
		{"bad digest", strings.Replace(goodReceipt, `"contracts_digest": "`+sha, `"contracts_digest": "abc`, 1), "contracts_digest"},
		{"no cores", strings.Replace(goodReceipt, `"cores": 2`, `"cores": 0`, 1), "cores"},
		{"other schema", strings.Replace(goodReceipt, "ladder-receipt/v1", "ladder-receipt/v0", 1), "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := schema.Validate(schema.DefReceipt, "receipt.json", []byte(tt.doc), nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate(#Receipt): %s", schema.Details(err))
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Validate(#Receipt) of %s: no error, want one mentioning %q", tt.name, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(schema.Details(err), tt.wantErr):
				t.Errorf("Validate(#Receipt) error %q does not mention %q", schema.Details(err), tt.wantErr)
			}
		})
	}
}
