package oracle_test

import (
	"errors"
	"testing"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/oracle"
)

func routerRec(layer, pos int, v ...float32) oracle.Record {
	return oracle.Record{Layer: layer, Op: model.OpRouter, Pos: pos, Values: v}
}

// TestRoutingFlips: a flip is found at its lowest layer with the judge's
// gap and the engines' largest difference there; equal sets are no flip;
// Excused needs both the difference within the noise and the gap within
// twice the difference; a missing record is an error, never "no flip".
func TestRoutingFlips(t *testing.T) {
	judge := []oracle.Record{
		routerRec(0, 0, 0.5, 0.3, 0.2), routerRec(1, 0, 0.6, 0.3, 0.1),
		routerRec(0, 1, 0.4, 0.31, 0.29), routerRec(1, 1, 0.5, 0.26, 0.24),
	}
	got := []oracle.Record{
		routerRec(0, 0, 0.49, 0.31, 0.2), routerRec(1, 0, 0.6, 0.3, 0.1), // same top-1
		routerRec(0, 1, 0.4, 0.295, 0.305), routerRec(1, 1, 0.5, 0.24, 0.26), // flips at both layers
	}
	flips, err := oracle.RoutingFlips(judge, got, 2, 1) // top-1 sets
	if err != nil {
		t.Fatal(err)
	}
	if len(flips) != 0 {
		t.Fatalf("k=1: flips %v, want none (top-1 agrees everywhere)", flips)
	}
	flips, err = oracle.RoutingFlips(judge, got, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(flips) != 1 || flips[0].Pos != 1 || flips[0].Layer != 0 {
		t.Fatalf("k=2: flips %v, want one at position 1, layer 0 (its lowest)", flips)
	}
	f := flips[0]
	if d := f.Gap - 0.02; d > 1e-6 || d < -1e-6 {
		t.Errorf("gap %v, want 0.02 (0.31 − 0.29)", f.Gap)
	}
	if d := f.Diff - 0.015; d > 1e-6 || d < -1e-6 {
		t.Errorf("diff %v, want 0.015", f.Diff)
	}
	if !f.Excused(0.02) {
		t.Errorf("gap 0.02 ≤ 2·0.015 and diff 0.015 ≤ 0.02: want excused")
	}
	if f.Excused(0.01) {
		t.Errorf("diff 0.015 > noise 0.01: want not excused")
	}
	if (oracle.RoutingFlip{Gap: 0.05, Diff: 0.015}).Excused(0.02) {
		t.Errorf("gap 0.05 > 2·0.015: want not excused")
	}
	if _, err := oracle.RoutingFlips(judge, got[:3], 2, 2); !errors.Is(err, oracle.ErrTrace) {
		t.Errorf("a missing engine record: err %v, want oracle.ErrTrace", err)
	}
	if _, err := oracle.RoutingFlips(judge, got, 1, 2); !errors.Is(err, oracle.ErrTrace) {
		t.Errorf("a record outside the positions: err %v, want oracle.ErrTrace", err)
	}
}
