package schema_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
  "model": "m.gguf", "model_bytes": 10, "model_sha256": "` + sha + `",
  "arch": "llama", "weight_type": "F32", "verb": "run", "backend": "ref",
  "verdict": "pass", "timings_ms": {"prefill": 1.5}, "values": {"tok_s": 12, "extra_metric": 3},
  "thresholds": {"tok_s": {"op": ">=", "value": 1}}, "duration_ms": 3
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
		{"bad sha", strings.Replace(goodCell, sha, "xyz", 1), "model_sha256"},
		{"negative timing", strings.Replace(goodCell, `"prefill": 1.5`, `"prefill": -1`, 1), "prefill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c schema.Cell
			err := schema.Validate(schema.DefCell, "cell.json", []byte(tt.doc), &c)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(#Cell): %s", schema.Details(err))
				}
				if diff := cmp.Diff(map[string]float64{"tok_s": 12, "extra_metric": 3}, c.Values); diff != "" {
					t.Errorf("Validate(#Cell) values mismatch (-want +got):\n%s", diff)
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
