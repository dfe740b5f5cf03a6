package chat_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/refuse"
)

// buildModel writes a vocab-only GGUF with the given extra keys.
func buildModel(tb testing.TB, kv map[string]any) *gguf.File {
	tb.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.V("llama"))
	b.Set("tokenizer.ggml.model", gguf.V("gpt2"))
	b.Set("tokenizer.ggml.tokens", gguf.V([]string{"<s>", "</s>", "<unk>", "a", "b"}))
	for k, v := range kv {
		b.Set(k, gguf.V(v))
	}
	path := filepath.Join(tb.TempDir(), "m.gguf")
	if err := b.WriteFile(path); err != nil {
		tb.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

func TestFromGGUF(t *testing.T) {
	f := buildModel(t, map[string]any{
		chat.KeyTemplate:                  "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{{ eos_token }}{% endfor %}{{ unk_token }}",
		"tokenizer.ggml.bos_token_id":     uint32(0),
		"tokenizer.ggml.eos_token_id":     uint32(1),
		"tokenizer.ggml.unknown_token_id": uint32(2),
		"tokenizer.ggml.padding_token_id": uint32(99), // out of range: absent
	})
	if diff := cmp.Diff(map[string]any{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, chat.SpecialTokens(f)); diff != "" {
		t.Errorf("SpecialTokens mismatch (-want +got):\n%s", diff)
	}
	tmpl, err := chat.FromGGUF(f)
	if err != nil {
		t.Fatalf("FromGGUF: %v", err)
	}
	got, err := tmpl.Render(context.Background(), chat.Input{Messages: []map[string]any{{"role": "user", "content": "hi"}}})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if want := "<s>user:hi</s><unk>"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

func TestFromGGUFRefusals(t *testing.T) {
	tests := []struct {
		name string
		kv   map[string]any
		want string
	}{
		{"absent", nil, "has no tokenizer.chat_template"},
		{"empty", map[string]any{chat.KeyTemplate: "  "}, "is empty"},
		{"not a string", map[string]any{chat.KeyTemplate: uint32(7)}, "not a string"},
		{"unparsable", map[string]any{chat.KeyTemplate: "{% for x in %}"}, "cannot be parsed"},
		{"unknown tag", map[string]any{chat.KeyTemplate: "{% generation %}x{% endgeneration %}"}, "cannot be parsed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := chat.FromGGUF(buildModel(t, tt.kv))
			r, ok := refuse.As(err)
			if !ok {
				t.Fatalf("FromGGUF: %v, want a refusal", err)
			}
			if r.By != chat.Refuser || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("FromGGUF: refusal %q by %q, want one by %q saying %q", err, r.By, chat.Refuser, tt.want)
			}
		})
	}
}

// TestQwen3TokenizerGGUF renders the template carried by the real Qwen3
// tokenizer GGUF and checks it against the fixture case rendered from the
// same template's text.
func TestQwen3TokenizerGGUF(t *testing.T) {
	dir := testutil.Fixtures(t)
	f, err := gguf.Open(filepath.Join(dir, "vocab", "qwen3-tokenizer.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tmpl, err := chat.FromGGUF(f)
	if err != nil {
		t.Fatalf("FromGGUF(qwen3-tokenizer.gguf): %v", err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "templates", "qwen3-tokenizer-config.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Source() != string(src) {
		t.Errorf("FromGGUF(qwen3-tokenizer.gguf).Source() differs from qwen3-tokenizer-config.jinja")
	}
	st := chat.SpecialTokens(f)
	if st["eos_token"] != "<|im_end|>" || st["pad_token"] != "<|endoftext|>" {
		t.Errorf("SpecialTokens(qwen3) = %v, want eos <|im_end|> and pad <|endoftext|>", st)
	}
	tmpl.Now = frozen
	for _, c := range loadCases(t, filepath.Join(dir, "templates", "cases.json")) {
		if c.Template != "qwen3-tokenizer-config.jinja" {
			continue
		}
		got, err := tmpl.Render(context.Background(), c.Input)
		if err != nil {
			t.Errorf("Render(%s): %v", c.ID, err)
			continue
		}
		if got != c.Expected {
			t.Errorf("Render(%s) = %q, want %q", c.ID, got, c.Expected)
		}
	}
}

// TestSynthModelsCarryTemplates checks that every synthetic model's
// template parses and renders a one-turn chat.
func TestSynthModelsCarryTemplates(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(testutil.Fixtures(t), "models", "synth", "*.gguf"))
	if len(paths) == 0 {
		t.Skip("SKIP (not a pass): no synth models in the fixtures")
	}
	for _, p := range paths[:min(len(paths), 4)] {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tmpl, err := chat.FromGGUF(f)
			if err != nil {
				t.Fatalf("FromGGUF: %v", err)
			}
			got, err := tmpl.Render(context.Background(), chat.Input{
				Messages: []map[string]any{{"role": "user", "content": "hello"}}, AddGenerationPrompt: true})
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if !strings.Contains(got, "hello") {
				t.Errorf("Render = %q, want the message in it", got)
			}
		})
	}
}

func render(t *testing.T, src string, in chat.Input) (string, error) {
	t.Helper()
	tmpl, err := chat.Parse("t", src, map[string]any{"bos_token": "<s>"})
	if err != nil {
		return "", err
	}
	tmpl.Now = frozen
	return tmpl.Render(context.Background(), in)
}

func TestRenderInputs(t *testing.T) {
	tools := []any{chat.NewMap("type", "function", "function", chat.NewMap("name", "f", "parameters", chat.NewMap()))}
	tests := []struct {
		name string
		src  string
		in   chat.Input
		want string
	}{
		{"variables", "{{ bos_token }}{{ add_generation_prompt }}{{ tools is none }}{{ documents is none }}{{ messages|length }}",
			chat.Input{AddGenerationPrompt: true}, "<s>TrueTrueTrue0"},
		{"kwargs override special tokens", "{{ bos_token }}{{ enable_thinking }}",
			chat.Input{Kwargs: map[string]any{"bos_token": "B", "enable_thinking": false}}, "BFalse"},
		{"tools keep key order", "{{ tools|tojson }}", chat.Input{Tools: tools},
			`[{"type": "function", "function": {"name": "f", "parameters": {}}}]`},
		{"plain maps sort keys", "{{ messages[0]|tojson }}",
			chat.Input{Messages: []map[string]any{{"role": "user", "content": "x"}}}, `{"content": "x", "role": "user"}`},
		{"ordered messages", "{{ messages[0]|tojson }}",
			chat.Input{OrderedMessages: []*chat.Map{chat.NewMap("role", "user", "content", "x")}}, `{"role": "user", "content": "x"}`},
		{"strftime_now frozen", "{{ strftime_now('%d %b %Y %H:%M') }}", chat.Input{}, "15 Jan 2026 12:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := render(t, tt.src, tt.in)
			if err != nil {
				t.Fatalf("Render(%q): %v", tt.src, err)
			}
			if got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestRaiseException(t *testing.T) {
	_, err := render(t, "{% if messages|length == 0 %}{{ raise_exception('No messages provided.') }}{% endif %}", chat.Input{})
	var te *chat.TemplateError
	if !errors.As(err, &te) || te.Message != "No messages provided." {
		t.Fatalf("Render: %v, want a TemplateError 'No messages provided.'", err)
	}
}

func TestKwargsMayNotReplaceInputs(t *testing.T) {
	_, err := render(t, "x", chat.Input{Kwargs: map[string]any{"messages": []any{}}})
	if err == nil || !strings.Contains(err.Error(), `"messages"`) {
		t.Fatalf("Render with kwargs messages: %v, want an error naming messages", err)
	}
}

// TestLimits checks that hostile templates stop with ErrLimit instead of
// running away.
func TestLimits(t *testing.T) {
	tests := []struct {
		name, src string
	}{
		{"recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"},
		{"mutual recursion", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}"},
		{"huge range", "{% for i in range(1000000000) %}{% endfor %}"},
		{"string repetition", "{{ 'x' * 100000000000 }}"},
		{"list repetition", "{{ [1] * 100000000000 }}"},
		{"doubling", "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"},
		{"wide center", "{{ 'x'.center(10000000000) }}"},
		{"wide indent", "{{ 'x\ny'|indent(10000000000) }}"},
		{"tojson indent", "{{ [[[[1]]]]|tojson(indent=100000000) }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.src, chat.Input{})
			if !errors.Is(err, chat.ErrLimit) {
				t.Fatalf("Render(%q): %v, want ErrLimit", tt.src, err)
			}
		})
	}
}

// TestContextStopsRender checks that a long render honours its context.
func TestContextStopsRender(t *testing.T) {
	tmpl, err := chat.Parse("slow", "{% for a in range(100000) %}{% for b in range(100000) %}{% if b %}{% endif %}{% endfor %}{% endfor %}", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = tmpl.Render(ctx, chat.Input{})
	if !errors.Is(err, chat.ErrLimit) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Render: %v, want ErrLimit wrapping DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Render stopped after %v, want soon after the 200ms deadline", d)
	}
}

func TestNoLoader(t *testing.T) {
	for _, src := range []string{`{% include "t" %}`, `{% extends "/template" %}`, `{% import "x" as y %}`} {
		if _, err := render(t, src, chat.Input{}); err == nil {
			t.Errorf("Render(%q) succeeded, want an error: chat templates load no other template", src)
		}
	}
}

func TestDecodeInput(t *testing.T) {
	in, err := chat.DecodeInput([]byte(`[{"role":"user","content":"x","n":1.5}]`), []byte(`null`), []byte(`{"enable_thinking":false}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if got := in.OrderedMessages[0].Keys(); !cmp.Equal(got, []string{"role", "content", "n"}) {
		t.Errorf("DecodeInput message keys = %v, want role content n", got)
	}
	if in.Tools != nil || in.Kwargs["enable_thinking"] != false || !in.AddGenerationPrompt {
		t.Errorf("DecodeInput = %+v", in)
	}
	bad := []struct{ name, msgs, tools, kwargs, want string }{
		{"messages not a list", `{}`, ``, ``, "messages: want a JSON list"},
		{"message not an object", `["x"]`, ``, ``, "messages[0]: want an object"},
		{"tools not a list", `[]`, `{}`, ``, "tools: want a JSON list"},
		{"kwargs not an object", `[]`, ``, `[1]`, "kwargs: want a JSON object"},
		{"malformed", `[{"a":}]`, ``, ``, "messages: chat: JSON"},
		{"trailing", `[] []`, ``, ``, "trailing data"},
		{"invalid utf-8", "[\"\xff\"]", ``, ``, "not valid UTF-8"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			_, err := chat.DecodeInput([]byte(b.msgs), []byte(b.tools), []byte(b.kwargs), false)
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Errorf("DecodeInput: %v, want an error containing %q", err, b.want)
			}
		})
	}
}
