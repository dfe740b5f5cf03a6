package contracts_test

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/contracts"
)

func TestExpr(t *testing.T) {
	env := map[string]int64{"n_embd": 64, "n_head": 8, "i": 3, "big": math.MaxInt64}
	get := func(n string) (int64, bool) { v, ok := env[n]; return v, ok }
	tests := []struct {
		name  string
		src   string
		want  int64
		names []string
		err   bool // parse or eval error
	}{
		{"literal", "42", 42, []string{}, false},
		{"name", "n_embd", 64, []string{"n_embd"}, false},
		{"division", "n_embd / n_head", 8, []string{"n_embd", "n_head"}, false},
		{"precedence", "2 + 3 * 4", 14, []string{}, false},
		{"parens", "(2 + 3) * 4", 20, []string{}, false},
		{"left assoc", "20 - 4 - 3", 13, []string{}, false},
		{"unary minus", "-3 + 5", 2, []string{}, false},
		{"modulo", "(i + 1) % 4 == 0", 1, []string{"i"}, false},
		{"comparison false", "n_head > n_embd", 0, []string{"n_embd", "n_head"}, false},
		{"logic", "n_head == 8 && !(i == 2) || 0", 1, []string{"i", "n_head"}, false},
		{"short circuit guards", "0 && unknown", 0, []string{"unknown"}, false},
		{"division by zero", "n_embd / 0", 0, nil, true},
		{"overflow", "big * 2", 0, nil, true},
		{"overflow add", "big + 1", 0, nil, true},
		{"unknown name", "n_ff * 2", 0, nil, true},
		{"dangling operator", "n_embd *", 0, nil, true},
		{"unbalanced", "(n_embd", 0, nil, true},
		{"bad character", "n_embd # 2", 0, nil, true},
		{"trailing", "1 2", 0, nil, true},
		{"empty", "", 0, nil, true},
		{"huge literal", "99999999999999999999", 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := contracts.ParseExpr(tt.src)
			var v int64
			if err == nil {
				v, err = e.Eval(get)
			}
			if tt.err {
				if err == nil {
					t.Fatalf("ParseExpr/Eval(%q) = %d, want an error", tt.src, v)
				}
				if !errors.Is(err, contracts.ErrExpr) {
					t.Errorf("ParseExpr/Eval(%q) error %v does not wrap ErrExpr", tt.src, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseExpr/Eval(%q): %v", tt.src, err)
			}
			if v != tt.want {
				t.Errorf("Eval(%q) = %d, want %d", tt.src, v, tt.want)
			}
			if diff := cmp.Diff(tt.names, e.Names()); diff != "" {
				t.Errorf("ParseExpr(%q).Names() mismatch (-want +got):\n%s", tt.src, diff)
			}
		})
	}
}

func FuzzExpr(f *testing.F) {
	for _, s := range []string{"n_embd / n_head", "(i + 1) % 4 == 0", "-(-1)", "2*3+4", "a && b || !c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := contracts.ParseExpr(s)
		if err != nil {
			return
		}
		// Every name has a value; evaluation must return, never panic.
		_, _ = e.Eval(func(n string) (int64, bool) { return int64(len(n)) - 3, true })
		// The parsed expression's source round-trips.
		if e.String() != s {
			t.Errorf("ParseExpr(%q).String() = %q", s, e.String())
		}
		_ = strconv.Quote(s)
	})
}
