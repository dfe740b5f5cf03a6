package chat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/refuse"
)

// KeyTemplate is the GGUF key holding the model's chat template.
const KeyTemplate = "tokenizer.chat_template"

// Refuser is who refuses a model without a usable template.
const Refuser = "chat"

// Input is what apply_chat_template passes to the template.
//
// Values inside messages, tools and kwargs may be nil, bool, string, int,
// int64, float64, json.Number, []any, map[string]any (keys presented in
// sorted order) or *Map (keys in their own order).
type Input struct {
	Messages []map[string]any
	// OrderedMessages, when non-nil, is used instead of Messages: messages
	// whose key order matters (DecodeInput fills it from JSON).
	OrderedMessages     []*Map
	Tools               []any // nil: the template sees tools = None
	AddGenerationPrompt bool
	// Kwargs are extra template variables (enable_thinking, ...). They
	// override the model's special tokens, as in transformers.
	Kwargs map[string]any
}

// Template is a parsed chat template, safe for concurrent renders.
type Template struct {
	Name string
	// Now is the clock strftime_now reads; nil means time.Now.
	Now func() time.Time

	source string
	vars   map[string]any
	tpl    *exec.Template
}

// Source returns the template text.
func (t *Template) Source() string { return t.source }

// Vars returns a copy of the template-level variables (special tokens).
func (t *Template) Vars() map[string]any {
	out := make(map[string]any, len(t.vars))
	for k, v := range t.vars {
		out[k] = v
	}
	return out
}

// FromGGUF parses the model's own tokenizer.chat_template, with the model's
// special tokens as variables. A model without one is refused.
func FromGGUF(f *gguf.File) (*Template, error) {
	v, ok := f.Get(KeyTemplate)
	if !ok {
		return nil, refuse.New(Refuser, "model %s has no %s: apr renders only the model's own template", f.Path, KeyTemplate)
	}
	src, ok := v.Str()
	if !ok {
		return nil, refuse.New(Refuser, "model %s: %s is a %s, not a string", f.Path, KeyTemplate, v.Type)
	}
	if strings.TrimSpace(src) == "" {
		return nil, refuse.New(Refuser, "model %s: %s is empty", f.Path, KeyTemplate)
	}
	return Parse(f.Path, src, SpecialTokens(f))
}

// specialTokenKeys maps transformers' variable names to GGUF keys (llama.cpp
// spells "seperator" so).
var specialTokenKeys = []struct{ name, key string }{
	{"bos_token", "tokenizer.ggml.bos_token_id"},
	{"eos_token", "tokenizer.ggml.eos_token_id"},
	{"unk_token", "tokenizer.ggml.unknown_token_id"},
	{"sep_token", "tokenizer.ggml.seperator_token_id"},
	{"pad_token", "tokenizer.ggml.padding_token_id"},
	{"cls_token", "tokenizer.ggml.cls_token_id"},
	{"mask_token", "tokenizer.ggml.mask_token_id"},
}

// SpecialTokens returns the text of the special tokens the model declares
// (bos_token, eos_token, unk_token, pad_token, and sep/cls/mask where set),
// each looked up by id in tokenizer.ggml.tokens. Tokens not declared, or
// whose id is out of range, are absent.
func SpecialTokens(f *gguf.File) map[string]any {
	out := map[string]any{}
	tv, ok := f.Get("tokenizer.ggml.tokens")
	if !ok {
		return out
	}
	tokens, ok := tv.Strings()
	if !ok {
		return out
	}
	for _, st := range specialTokenKeys {
		v, ok := f.Get(st.key)
		if !ok {
			continue
		}
		id, ok := v.Uint()
		if !ok || id >= uint64(len(tokens)) {
			continue
		}
		out[st.name] = tokens[id]
	}
	return out
}

// Parse parses a Jinja chat template. vars are template-level variables
// (bos_token, eos_token, ...). A template that does not parse is refused by
// "chat", by name.
func Parse(name, source string, vars map[string]any) (t *Template, err error) {
	if len(source) > MaxTemplateBytes {
		return nil, refuse.New(Refuser, "template %s is %d bytes; the limit is %d", name, len(source), MaxTemplateBytes)
	}
	if !utf8.ValidString(source) {
		return nil, refuse.New(Refuser, "template %s is not valid UTF-8", name)
	}
	e, err := environment()
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			t = nil
			err = refuse.New(Refuser, "template %s cannot be parsed: Jinja engine panicked: %v", name, p)
		}
	}()
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	cfg.KeepTrailingNewline = false
	loader := &oneShotLoader{name: "/template", source: source}
	tpl, err := exec.NewTemplate(loader.name, cfg, loader, e)
	if err != nil {
		return nil, refuse.Wrap(Refuser, fmt.Errorf("template %s cannot be parsed: %w", name, err))
	}
	if err := rewriteTemplate(tpl.Root()); err != nil {
		return nil, refuse.Wrap(Refuser, fmt.Errorf("template %s: %w", name, err))
	}
	vv := make(map[string]any, len(vars))
	for k, v := range vars {
		c, err := toEngine(v, 0)
		if err != nil {
			return nil, fmt.Errorf("chat: variable %s: %w", k, err)
		}
		vv[k] = c
	}
	return &Template{Name: name, source: source, vars: vv, tpl: tpl}, nil
}

// reserved are the variables apr itself sets; kwargs may not replace them
// (transformers would fail with "got multiple values").
var reserved = []string{"messages", "tools", "documents", "add_generation_prompt"}

// Reserved reports whether kwargs may not set the variable name (apr sets
// it from the input).
func Reserved(name string) bool { return slices.Contains(reserved, name) }

// Render renders the template with in, as apply_chat_template(tokenize=False)
// does. An error from raise_exception is a *TemplateError (the template
// rejects the input); any other render failure is a refusal by "chat", and
// one stopped by ctx or a limit also wraps ErrLimit.
func (t *Template) Render(ctx context.Context, in Input) (out string, err error) {
	data := map[string]any{}
	for k, v := range t.vars {
		data[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(in.Kwargs)) {
		if Reserved(k) {
			return "", fmt.Errorf("chat: kwargs may not set %q", k)
		}
		c, err := toEngine(in.Kwargs[k], 0)
		if err != nil {
			return "", fmt.Errorf("chat: kwargs %s: %w", k, err)
		}
		data[k] = c
	}
	var msgs any
	if in.OrderedMessages != nil {
		msgs, err = toEngine(in.OrderedMessages, 0)
	} else {
		msgs, err = toEngine(in.Messages, 0)
	}
	if err != nil {
		return "", fmt.Errorf("chat: messages: %w", err)
	}
	if msgs == nil {
		msgs = []any{}
	}
	data["messages"] = msgs
	data["tools"] = nil
	if in.Tools != nil {
		if data["tools"], err = toEngine(in.Tools, 0); err != nil {
			return "", fmt.Errorf("chat: tools: %w", err)
		}
	}
	data["documents"] = nil
	data["add_generation_prompt"] = in.AddGenerationPrompt
	return t.execute(ctx, data)
}

func (t *Template) execute(ctx context.Context, data map[string]any) (out string, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return "", refuse.Wrap(Refuser, fmt.Errorf("%w: %w", ErrLimit, err))
	}
	g := &guard{ctx: ctx}
	now := t.Now
	if now == nil {
		now = time.Now
	}
	c := exec.EmptyContext().Update(builtins.GlobalFunctions)
	c.Set("range", rangeFunc)
	c.Set("raise_exception", raiseException)
	c.Set("strftime_now", func(va *exec.VarArgs) (*exec.Value, error) {
		if len(va.Args) != 1 || !va.Args[0].IsString() {
			return nil, errors.New("strftime_now() takes one format string")
		}
		return exec.AsValue(strftime(now(), va.Args[0].String())), nil
	})
	for k, v := range data {
		c.Set(k, v)
	}
	c.Set(guardKey, g)

	defer func() {
		if p := recover(); p != nil {
			out = ""
			err = refuse.New(Refuser, "template %s: the Jinja engine panicked: %v", t.Name, p)
		}
	}()
	var sb strings.Builder
	err = t.tpl.Execute(&limitWriter{w: &sb, g: g}, c)
	if err != nil || g.err != nil {
		return "", renderError(t.Name, g.err, err)
	}
	return sb.String(), nil
}

// renderError keeps the causes callers test for (TemplateError, ErrLimit),
// which gonja's error chains do not carry, and says which template failed.
// A limit hit or an exception raised fails the render even where the
// template went on (gonja's default filter swallows errors).
//
// raise_exception is the template rejecting its input: a plain error. Every
// other failure (a limit, the context, an operation the engine cannot do)
// means apr cannot render this template: a refusal by "chat".
func renderError(name string, cause, err error) error {
	var te *TemplateError
	switch {
	case errors.As(cause, &te):
		return fmt.Errorf("chat: template %s raised: %w", name, te)
	case cause != nil:
		return refuse.Wrap(Refuser, fmt.Errorf("template %s: %w", name, cause))
	case strings.Contains(err.Error(), ErrLimit.Error()):
		// A limit hit inside a method, which sees no guard: keep the text.
		msg := err.Error()
		rest := msg[strings.Index(msg, ErrLimit.Error())+len(ErrLimit.Error()):]
		return refuse.Wrap(Refuser, fmt.Errorf("template %s: %w%s", name, ErrLimit, rest))
	}
	return refuse.Wrap(Refuser, fmt.Errorf("template %s cannot be rendered: %w", name, err))
}
