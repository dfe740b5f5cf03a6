// Package chat renders a model's own chat template (Jinja, from the GGUF key
// tokenizer.chat_template) exactly as Hugging Face's apply_chat_template does.
//
// # Conventions
//
// The Jinja language itself is github.com/nikolalohinski/gonja/v2; this
// package only configures it the way transformers configures Jinja2
// (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop
// controls; tojson as json.dumps(ensure_ascii=False); raise_exception;
// strftime_now) and fills the gaps where gonja's filters, tests and methods
// differ from Jinja2's.
//
// Key order matters: tojson and dict iteration follow insertion order, as
// Python dicts do. JSON objects decoded with DecodeJSON keep their order
// (*Map); plain Go maps are presented with their keys sorted.
//
// A model without a template, or a template that cannot be parsed, is
// refused by "chat": apr never substitutes another template.
//
// Rendering is bounded: a context deadline, a nesting limit (macro
// recursion), an output-size limit and Jinja's sandbox range limit stop
// hostile templates, and a panic inside the engine becomes an error.
package chat
