package junit_test

import (
	"bytes"
	"encoding/xml"
	"testing"

	"github.com/aprqa/apr/internal/junit"
)

// TestCounts: cases are counted by kind into their suite and the document,
// and the XML reads back with the same counts.
func TestCounts(t *testing.T) {
	var s junit.Suite
	s.Add(junit.Case{Name: "ok"})
	s.Add(junit.Case{Name: "bad", Failure: &junit.Problem{Message: "m", Type: "fail"}})
	s.Add(junit.Case{Name: "ref", Error: &junit.Problem{Message: "m", Type: "refused"}})
	s.Add(junit.Case{Name: "opt", Skipped: &junit.Problem{Message: "m", Type: "refused-optional"}})
	var d junit.Suites
	d.Add(s)
	d.Add(junit.Suite{Name: "empty"})
	var buf bytes.Buffer
	if err := junit.Write(&buf, d); err != nil {
		t.Fatal(err)
	}
	var back junit.Suites
	if err := xml.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if back.Tests != 4 || back.Failures != 1 || back.Errors != 1 || back.Skipped != 1 || len(back.Suites) != 2 {
		t.Fatalf("read back %+v\n%s", back, buf.String())
	}
}
