package chat_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/chat"
)

// FuzzRender renders hostile template text over hostile messages: it must
// never panic (a panic inside gonja comes back as an error) and must stop
// within its deadline.
func FuzzRender(f *testing.F) {
	msgs := `[{"role":"system","content":"s"},{"role":"user","content":"Ça 🚀"},{"role":"assistant","content":"<think>x</think>y","tool_calls":[{"function":{"name":"f","arguments":{"a":[1,2.5,null]}}}]}]`
	for _, s := range []string{
		"{{ messages[0].content }}",
		"{% for m in messages %}{{ m.role ~ m.content|trim }}{% endfor %}",
		"{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
		"{{ 'x' * 99999999999 }}",
		"{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
		"{{ messages|tojson(indent=2) }}{{ messages[-1]['tool_calls'][0].function.arguments|items|list }}",
		"{% set ns = namespace(a=1) %}{% set ns.a = ns.a ~ ns.a %}{{ ns.a[::-1] }}",
		"{{ raise_exception('no') }}",
		"{% include 'x' %}", "{% extends '/template' %}", "{{", "{% if %}", "{{ 1/0 }}{{ 1 % 0 }}{{ 'a' % 1 }}",
	} {
		f.Add(s, msgs)
	}
	if dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "fixtures", "templates")); err == nil {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.jinja"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(string(b), msgs)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src, messages string) {
		if len(src) > 1<<14 || len(messages) > 1<<14 {
			return
		}
		tmpl, err := chat.Parse("fuzz", src, map[string]any{"bos_token": "<s>"})
		if err != nil {
			return
		}
		in, err := chat.DecodeInput([]byte(messages), nil, []byte(`{"enable_thinking":true}`), true)
		if err != nil {
			in = chat.Input{Messages: []map[string]any{{"role": "user", "content": messages}}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		_, _ = tmpl.Render(ctx, in)
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("Render(%q) ran %v past its 2s deadline", src, d)
		}
	})
}
