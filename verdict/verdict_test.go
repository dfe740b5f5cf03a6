package verdict_test

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

func TestFormatThreshold(t *testing.T) {
	tests := []struct {
		name string
		t    schema.Threshold
		want string
	}{
		{"integer", schema.Threshold{Op: "==", Value: 0}, "== 0"},
		{"exact digits", schema.Threshold{Op: ">=", Value: 0.9999995}, ">= 0.9999995"},
		{"small", schema.Threshold{Op: "<=", Value: 1e-7}, "<= 1e-07"},
		{"unit", schema.Threshold{Op: "<=", Value: 5, Unit: "%"}, "<= 5 %"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdict.FormatThreshold(tt.t); got != tt.want {
				t.Errorf("FormatThreshold(%+v) = %q, want %q", tt.t, got, tt.want)
			}
		})
	}
	if got := verdict.Limit(">=", 2); got != ">= 2" {
		t.Errorf(`Limit(">=", 2) = %q, want ">= 2"`, got)
	}
}

func TestJudge(t *testing.T) {
	th := map[string]schema.Threshold{"cos": {Op: ">=", Value: 0.999}, "miss": {Op: "==", Value: 0}}
	tests := []struct {
		name   string
		hold   func(j *verdict.Judge)
		want   verdict.Verdict
		reason string
	}{
		{"holds", func(j *verdict.Judge) { j.Hold("cos", 1, ""); j.Hold("miss", 0, "count") }, verdict.Pass, ""},
		{"one fails", func(j *verdict.Judge) { j.Hold("cos", 0.5, ""); j.Hold("miss", 0, "count") }, verdict.Fail, "cos = 0.5, want >= 0.999: d"},
		{"NaN fails", func(j *verdict.Judge) { j.Hold("cos", math.NaN(), "") }, verdict.Fail, "cos is NaN (threshold >= 0.999): d"},
		{"missing threshold refuses", func(j *verdict.Judge) { j.Hold("cos", 1, ""); j.Hold("other", 1, "") }, verdict.Refused, "falsifier f has no threshold other"},
		{"a note is not judged", func(j *verdict.Judge) { j.Hold("cos", 1, ""); j.Note("other", -1, "") }, verdict.Pass, ""},
		{"holdIf without threshold notes", func(j *verdict.Judge) { j.HoldIf("other", -1, "") }, verdict.Pass, ""},
		{"compare does not decide", func(j *verdict.Judge) {
			if j.Compare("cos", 0.5, "") {
				t.Error("Compare(cos, 0.5) held")
			}
		}, verdict.Pass, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := verdict.NewJudge("f", th)
			tt.hold(j)
			o := j.Outcome("d")
			if o.Verdict != tt.want || o.Reason != tt.reason {
				t.Errorf("Outcome() = %s %q, want %s %q", o.Verdict, o.Reason, tt.want, tt.reason)
			}
			if o.Verdict == verdict.Refused && (o.RemovedBy != "f" || o.Code != verdict.CodeNoContract) {
				t.Errorf("refusal by %q code %q, want by f, code %s", o.RemovedBy, o.Code, verdict.CodeNoContract)
			}
		})
	}
	j := verdict.NewJudge("f", th)
	j.Hold("cos", 1, "")
	j.Note("n", 2, "tok/s")
	want := []verdict.Value{{Name: "cos", Value: 1, Threshold: ">= 0.999"}, {Name: "n", Value: 2, Unit: "tok/s"}}
	if diff := cmp.Diff(want, j.Outcome("").Values); diff != "" {
		t.Errorf("Outcome().Values mismatch (-want +got):\n%s", diff)
	}
}

func TestFinite(t *testing.T) {
	for x, want := range map[float64]string{math.NaN(): "NaN", math.Inf(1): "+Inf", math.Inf(-1): "-Inf", 3: ""} {
		v := verdict.Value{Name: "x", Value: x}.Finite()
		if v.NonFinite != want || (want != "" && v.Value != 0) || (want == "" && v.Value != x) {
			t.Errorf("Value{%v}.Finite() = %+v, want non_finite %q", x, v, want)
		}
	}
}

func TestMerge(t *testing.T) {
	a := verdict.Passed(verdict.Value{Name: "a", Value: 1})
	r := verdict.RefusedBy("no_baseline", "f1", nil, "no baseline")
	f1 := verdict.Failed([]verdict.Value{{Name: "b", Value: 2}}, "b too big")
	f2 := verdict.Failed(nil, "c too small")
	got := verdict.Merge(a, r, f1, f2)
	if got.Verdict != verdict.Fail || got.Reason != "b too big; c too small" || got.RemovedBy != "" || len(got.Values) != 2 {
		t.Errorf("Merge(pass, refused, fail, fail) = %+v, want fail with both reasons and both values", got)
	}
	got = verdict.Merge(a, r)
	if got.Verdict != verdict.Refused || got.RemovedBy != "f1" || got.Code != "no_baseline" {
		t.Errorf("Merge(pass, refused) = %+v, want refused by f1 (no_baseline)", got)
	}
	if got := verdict.Merge(a); got.Verdict != verdict.Pass {
		t.Errorf("Merge(pass) = %s", got.Verdict)
	}
}

func TestSortValues(t *testing.T) {
	vs := []verdict.Value{{Name: "z"}, {Name: "b", Threshold: "== 0"}, {Name: "a"}, {Name: "a2", Threshold: ">= 1"}}
	verdict.SortValues(vs)
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	if got := strings.Join(names, " "); got != "a2 b a z" {
		t.Errorf("SortValues order %q, want thresholded first, each by name: a2 b a z", got)
	}
}
