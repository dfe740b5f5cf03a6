package chat_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/internal/testutil"
)

// frozen is the clock the fixtures were rendered with.
var frozen = func() time.Time { return time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC) }

type templateCase struct {
	Template, ID  string
	Input         chat.Input
	Special       map[string]any
	Expected      string
	ExpectedError bool
}

// loadCases reads a cases.json in the fixtures' layout, keeping key order.
func loadCases(tb testing.TB, path string) []templateCase {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	v, err := chat.DecodeJSON(b)
	if err != nil {
		tb.Fatalf("DecodeJSON(%s): %v", path, err)
	}
	list, ok := v.([]any)
	if !ok {
		tb.Fatalf("%s: not a list", path)
	}
	var out []templateCase
	for i, x := range list {
		m, ok := x.(*chat.Map)
		if !ok {
			tb.Fatalf("%s: case %d is not an object", path, i)
		}
		get := func(k string) any { v, _ := m.Get(k); return v }
		c := templateCase{}
		c.Template, _ = get("template").(string)
		c.ID, _ = get("id").(string)
		msgs, _ := get("messages").([]any)
		c.Input.OrderedMessages = []*chat.Map{}
		for _, e := range msgs {
			c.Input.OrderedMessages = append(c.Input.OrderedMessages, e.(*chat.Map))
		}
		if tools, ok := get("tools").([]any); ok {
			c.Input.Tools = tools
		}
		c.Input.AddGenerationPrompt, _ = get("add_generation_prompt").(bool)
		c.Input.Kwargs = mapOf(get("kwargs"))
		c.Special = mapOf(get("special_tokens"))
		if e, ok := get("expected").(string); ok {
			c.Expected = e
		} else if _, ok := m.Get("expected_error"); ok {
			c.ExpectedError = true
		} else {
			tb.Fatalf("%s: case %d has neither expected nor expected_error", path, i)
		}
		out = append(out, c)
	}
	return out
}

func mapOf(v any) map[string]any {
	m, ok := v.(*chat.Map)
	if !ok {
		return nil
	}
	out := map[string]any{}
	for _, k := range m.Keys() {
		out[k], _ = m.Get(k)
	}
	return out
}

// TestFixtureCases renders every case of the shared template fixtures and
// compares byte for byte.
func TestFixtureCases(t *testing.T) {
	dir := testutil.Fixture(t, "templates")
	cases := loadCases(t, filepath.Join(dir, "cases.json"))
	pass := 0
	for _, c := range cases {
		t.Run(c.Template+"/"+c.ID, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(dir, c.Template))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := chat.Parse(c.Template, string(src), c.Special)
			if err != nil {
				t.Fatalf("Parse(%s): %v", c.Template, err)
			}
			tmpl.Now = frozen
			got, err := tmpl.Render(context.Background(), c.Input)
			if c.ExpectedError {
				if err == nil {
					t.Fatalf("Render(%s/%s) = %q, want an error", c.Template, c.ID, got)
				}
				pass++
				return
			}
			if err != nil {
				t.Fatalf("Render(%s/%s): %v", c.Template, c.ID, err)
			}
			if got != c.Expected {
				t.Fatalf("Render(%s/%s) mismatch at byte %d:\n got  %q\n want %q", c.Template, c.ID, firstDiff(got, c.Expected), got, c.Expected)
			}
			pass++
		})
	}
	t.Logf("template fixtures: %d/%d cases pass", pass, len(cases))
	if pass != len(cases) {
		t.Errorf("template fixtures: %d/%d cases pass", pass, len(cases))
	}
}

func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

var _ = errors.Is

// TestVariations renders the shared fixture templates over message shapes
// the fixture cases leave out; the expected strings and errors are
// jinja2's (testdata/gen_variations.py).
func TestVariations(t *testing.T) {
	dir := testutil.Fixture(t, "templates")
	cases := loadCases(t, filepath.Join("testdata", "variations.json"))
	sources := map[string]*chat.Template{}
	pass := 0
	for _, c := range cases {
		tmpl, ok := sources[c.Template]
		if !ok {
			src, err := os.ReadFile(filepath.Join(dir, c.Template))
			if err != nil {
				t.Fatal(err)
			}
			if tmpl, err = chat.Parse(c.Template, string(src), c.Special); err != nil {
				t.Fatalf("Parse(%s): %v", c.Template, err)
			}
			tmpl.Now = frozen
			sources[c.Template] = tmpl
		}
		got, err := tmpl.Render(context.Background(), c.Input)
		switch {
		case c.ExpectedError && err == nil:
			t.Errorf("Render(%s/%s) = %q, want an error", c.Template, c.ID, got)
		case c.ExpectedError:
			pass++
		case err != nil:
			t.Errorf("Render(%s/%s): %v", c.Template, c.ID, err)
		case got != c.Expected:
			t.Errorf("Render(%s/%s) mismatch at byte %d:\n got  %q\n want %q", c.Template, c.ID, firstDiff(got, c.Expected), got, c.Expected)
		default:
			pass++
		}
	}
	t.Logf("template variations: %d/%d cases pass", pass, len(cases))
}
