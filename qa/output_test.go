package qa_test

import (
	"testing"

	"github.com/aprqa/apr/qa"
	"github.com/aprqa/apr/verdict"
)

// TestMeasuredShowsRawBesideJudged: a value judged beyond the model's noise
// floor (min_cosine 1 after the floor) is shown with what was measured
// (measured_min_cosine), so that the table does not read as exact
// agreement; a value with no measured_ twin, or an equal one, is shown
// alone.
func TestMeasuredShowsRawBesideJudged(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values []qa.Value
		want   string
	}{
		{"judged beyond the floor", []qa.Value{
			{Name: "min_cosine", Value: 1, Threshold: ">= 0.999"},
			{Name: "max_logit_delta", Value: 0, Threshold: "<= 0.25"},
			{Name: "measured_min_cosine", Value: 0.99812},
			{Name: "measured_max_logit_delta", Value: 0.3127},
		}, "min_cosine=1 (measured 0.9981) max_logit_delta=0 (measured 0.3127)"},
		{"no floor", []qa.Value{{Name: "min_cosine", Value: 0.99991, Threshold: ">= 0.999"}}, "min_cosine=0.9999"},
		{"the same", []qa.Value{{Name: "min_cosine", Value: 0.99991, Threshold: ">= 0.999"}, {Name: "measured_min_cosine", Value: 0.99991}}, "min_cosine=0.9999"},
	} {
		got, thr := qa.Measured(qa.Gate{Verdict: verdict.Pass, Values: tt.values})
		if got != tt.want {
			t.Errorf("%s: measured %q, want %q", tt.name, got, tt.want)
		}
		if thr == "" || thr == "-" {
			t.Errorf("%s: threshold %q", tt.name, thr)
		}
	}
}
