package graph_test

import (
	"testing"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/model"
)

// stateCounter is the CPU backend with graph.StateAllocator: it counts
// the recurrent states taken and given back.
type stateCounter struct {
	graph.Backend
	sa          graph.StateAllocator
	live, taken int
}

func (s *stateCounter) AllocState(rows, cols int) graph.Buf {
	s.live++
	s.taken++
	return s.sa.AllocState(rows, cols)
}

func (s *stateCounter) FreeState(b graph.Buf) {
	s.live--
	s.sa.FreeState(b)
}

// TestRecurrentStatesFreedOnClose checks that a Gated DeltaNet session
// takes its states from a StateAllocator backend and gives every one back
// when it is closed (before, they waited for the garbage collector, and a
// closed session's 19 MiB of qwen3.5-0.8b states stayed resident), and that
// a later session on fresh states computes what the first one did.
func TestRecurrentStatesFreedOnClose(t *testing.T) {
	_, spec := load(t, "qwen35-tiny-F32")
	be, stop, err := cpu.NewBackend(1)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	sa, ok := be.(graph.StateAllocator)
	if !ok {
		t.Fatalf("the CPU backend (%T) is not a graph.StateAllocator", be)
	}
	sc := &stateCounter{Backend: be, sa: sa}
	m, err := graph.Build(spec, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	delta := 0
	for _, l := range spec.Layers {
		if l.Kind != model.LayerAttention && l.Kind != model.LayerGatedAttention {
			delta++
		}
	}
	if delta == 0 {
		t.Fatal("the fixture has no recurrent layer")
	}
	var first []float32
	for i := range 3 {
		s, err := m.NewSession(4)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.Eval([]int32{1, 2, 3}, false)
		if err != nil {
			t.Fatal(err)
		}
		if sc.live != 2*delta {
			t.Errorf("session %d: %d states live, want %d (conv and delta state of %d layers)", i, sc.live, 2*delta, delta)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if sc.live != 0 {
			t.Errorf("session %d: %d states still live after Close", i, sc.live)
		}
		last := rows[len(rows)-1]
		if first == nil {
			first = last
			continue
		}
		for j := range last {
			if last[j] != first[j] {
				t.Fatalf("session %d: logit %d = %g, the first session gave %g", i, j, last[j], first[j])
			}
		}
	}
	if sc.taken != 3*2*delta {
		t.Errorf("%d states taken over 3 sessions, want %d", sc.taken, 3*2*delta)
	}
}
