package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/sample"
)

// Limits of a request.
const (
	MaxStops       = 4  // stop strings per request (OpenAI's limit)
	MaxTopLogprobs = 20 // top_logprobs (OpenAI's limit)
	MaxChoices     = 16 // n: choices per request (each a sequence in a slot)
	MaxSequences   = 64 // prompts × n: the sequences of one request
)

// apiError is an error response: an HTTP status and OpenAI's error object.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"` // the field at fault, or null
	Code    any    `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	var p any
	if param != "" {
		p = param
	}
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: p, Message: fmt.Sprintf(format, args...)}
}

// request is a decoded /v1/chat/completions or /v1/completions body.
type request struct {
	Chat         bool
	Model        string
	Messages     []map[string]any // chat: role and content (text)
	Prompts      []promptItem     // completions: one, or several (Batch)
	Batch        bool             // completions: prompt was a list (its items are named prompt[k])
	MaxTokens    int              // 0: unset (until the context is full), unless ScoreOnly
	ScoreOnly    bool             // completions: max_tokens 0 with echo (the prompt's logprobs, nothing generated)
	Echo         bool             // completions: the prompt comes back before the completion (with its logprobs)
	Sampling     sample.Params
	Stop         []string
	Logprobs     bool
	TopLogprobs  int
	Stream       bool
	IncludeUsage bool
	IgnoreEOS    bool
	N            int            // choices (n), each a sequence; choice i samples with Sampling.Seed + i
	JSON         bool           // response_format json_object: each completion is one JSON object
	Tools        []any          // chat: the tools as the template sees them (nil: none, or tool_choice "none")
	ToolDefs     []tool         // their names and parameter types, for reading the calls back
	ForceTools   []string       // tool_choice: the model must call one of these functions (nil: its choice)
	OneCall      bool           // parallel_tool_calls false: the reply ends with its first call
	Kwargs       map[string]any // chat_template_kwargs: the template's extra variables (enable_thinking)
	RawThinking  bool           // reasoning_format "none": a reply's <think> block stays in its content (reasoning.go)
}

// chatInput is what the chat template renders for a chat request.
func (r *request) chatInput() chat.Input {
	return chat.Input{Messages: r.Messages, Tools: r.Tools, Kwargs: r.Kwargs}
}

// Fields accepted and ignored: they change nothing apr computes.
var ignoredFields = map[string]bool{"user": true, "metadata": true, "store": true, "service_tier": true}

// decodeRequest parses and checks a request body. Every refusal is a 400
// that names the position (malformed JSON) or the field.
func decodeRequest(body []byte, chat bool) (*request, *apiError) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, jsonError(body, err)
	}
	if dec.More() {
		return nil, badRequest("", "malformed JSON at byte %d: data after the request object", dec.InputOffset())
	}
	if raw == nil {
		return nil, badRequest("", "the request body must be a JSON object, not null")
	}
	// Defaults: OpenAI's temperature 1; the penalties' window of apr run and
	// llama.cpp's server (the last 64 tokens).
	r := &request{Chat: chat, Sampling: sample.Params{Temp: 1, RepeatLastN: 64}}
	d := fieldDecoder{raw: raw}
	d.str("model", &r.Model)
	if chat {
		r.Messages = d.messages("messages")
		d.int("max_completion_tokens", &r.MaxTokens, 1, math.MaxInt32)
		if r.MaxTokens == 0 {
			d.int("max_tokens", &r.MaxTokens, 1, math.MaxInt32)
		} else {
			d.seen["max_tokens"] = true
		}
		d.boolean("logprobs", &r.Logprobs)
		d.int("top_logprobs", &r.TopLogprobs, 0, MaxTopLogprobs)
		if d.err == nil && r.TopLogprobs > 0 && !r.Logprobs {
			d.err = badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
		r.Kwargs = d.templateKwargs("chat_template_kwargs")
		var rf string
		d.str("reasoning_format", &rf)
		switch rf {
		case "", "auto", "deepseek":
		case "none":
			r.RawThinking = true
		default:
			if d.err == nil {
				d.err = badRequest("reasoning_format", "field reasoning_format: %q is not one of auto, deepseek, none", rf)
			}
		}
	} else {
		r.Prompts, r.Batch = d.prompt("prompt")
		d.boolean("echo", &r.Echo)
		mt := -1
		d.int("max_tokens", &mt, 0, math.MaxInt32)
		switch {
		case mt == 0 && !r.Echo && d.err == nil:
			d.err = badRequest("max_tokens", "field max_tokens: 0 generates nothing; it is only allowed with echo: true (to score the prompt)")
		case mt == 0:
			r.ScoreOnly = true
		case mt > 0:
			r.MaxTokens = mt
		}
		n := -1
		d.int("logprobs", &n, 0, MaxTopLogprobs)
		if n >= 0 {
			r.Logprobs, r.TopLogprobs = true, n
		}
		d.mustEqual("best_of", 1)
		d.mustEqual("suffix", nil)
	}
	d.float("temperature", &r.Sampling.Temp, 0, 2)
	d.float("top_p", &r.Sampling.TopP, 0, 1)
	d.int("top_k", &r.Sampling.TopK, 0, math.MaxInt32)
	d.float("min_p", &r.Sampling.MinP, 0, 1)
	d.float("repeat_penalty", &r.Sampling.RepeatPenalty, 0, 10)
	d.int("repeat_last_n", &r.Sampling.RepeatLastN, 0, math.MaxInt32)
	var seed int = -1
	d.int("seed", &seed, 0, math.MaxInt64)
	if seed >= 0 {
		r.Sampling.Seed = uint64(seed)
	}
	r.Stop = d.stop("stop")
	d.boolean("stream", &r.Stream)
	d.streamOptions("stream_options", &r.IncludeUsage, r.Stream)
	d.boolean("ignore_eos", &r.IgnoreEOS)
	r.N = 1
	d.int("n", &r.N, 1, MaxChoices)
	if d.err == nil && len(r.Prompts)*r.N > MaxSequences {
		d.err = badRequest("n", "%d prompts × n %d = %d sequences, at most %d in one request", len(r.Prompts), r.N, len(r.Prompts)*r.N, MaxSequences)
	}
	d.float("frequency_penalty", &r.Sampling.FrequencyPenalty, -2, 2)
	d.float("presence_penalty", &r.Sampling.PresencePenalty, -2, 2)
	r.Sampling.LogitBias = d.logitBias("logit_bias")
	// Tools (chat only, tools.go): the model may call them (tool_choice
	// "auto") or not see them ("none"); a call it must make is refused by
	// name. The legacy functions and function_call: absent, empty or
	// calling none only, which some clients always send.
	if chat {
		r.Tools, r.ToolDefs = d.tools("tools")
		parallel := true
		d.boolean("parallel_tool_calls", &parallel)
		r.OneCall = !parallel
		var none bool
		if none, r.ForceTools = d.toolChoice("tool_choice", r.ToolDefs); none {
			r.Tools, r.ToolDefs = nil, nil
		}
	} else {
		d.emptyList("tools")
		d.oneOf("tool_choice", "none", "auto")
	}
	d.emptyList("functions")
	d.oneOf("function_call", "none", "auto")
	r.JSON = d.responseFormat("response_format")
	if d.err != nil {
		return nil, d.err
	}
	var unknown []string
	for k := range raw {
		if !d.seen[k] && !ignoredFields[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, badRequest(unknown[0], "unrecognized request field(s): %s", strings.Join(unknown, ", "))
	}
	if err := r.Sampling.Validate(); err != nil {
		return nil, badRequest("", "%v", err)
	}
	return r, nil
}

// jsonError turns a decoding error into a 400 naming the byte offset, line
// and column.
func jsonError(body []byte, err error) *apiError {
	var off int64 = -1
	switch e := err.(type) {
	case *json.SyntaxError:
		off = max(e.Offset-1, 0) // Offset counts the bad byte as read
	case *json.UnmarshalTypeError:
		return badRequest("", "the request body must be a JSON object, not %s", e.Value)
	}
	if err.Error() == "EOF" || err.Error() == "unexpected EOF" {
		off = int64(len(body))
	}
	if off < 0 {
		return badRequest("", "malformed JSON: %v", err)
	}
	line, col := 1, 1
	for _, c := range body[:min(int(off), len(body))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return badRequest("", "malformed JSON at byte offset %d (line %d, column %d): %v", off, line, col, err)
}

// fieldDecoder decodes fields one by one; the first error sticks.
type fieldDecoder struct {
	raw  map[string]json.RawMessage
	seen map[string]bool
	err  *apiError
}

// get returns the field's raw value, or nil when absent or null.
func (d *fieldDecoder) get(name string) json.RawMessage {
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	d.seen[name] = true
	if d.err != nil {
		return nil
	}
	v, ok := d.raw[name]
	if !ok || string(v) == "null" {
		return nil
	}
	return v
}

func kind(v json.RawMessage) string {
	switch c := bytes.TrimSpace(v); {
	case len(c) == 0:
		return "nothing"
	case c[0] == '"':
		return "a string"
	case c[0] == '{':
		return "an object"
	case c[0] == '[':
		return "an array"
	case c[0] == 't' || c[0] == 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

func (d *fieldDecoder) typeErr(name, want string, v json.RawMessage) {
	d.err = badRequest(name, "field %s: want %s, got %s", name, want, kind(v))
}

func (d *fieldDecoder) str(name string, p *string) {
	v := d.get(name)
	if v == nil {
		return
	}
	if err := json.Unmarshal(v, p); err != nil {
		d.typeErr(name, "a string", v)
	}
}

func (d *fieldDecoder) boolean(name string, p *bool) {
	v := d.get(name)
	if v == nil {
		return
	}
	if err := json.Unmarshal(v, p); err != nil {
		d.typeErr(name, "a boolean", v)
	}
}

func (d *fieldDecoder) float(name string, p *float64, lo, hi float64) {
	v := d.get(name)
	if v == nil {
		return
	}
	var x float64
	if err := json.Unmarshal(v, &x); err != nil {
		d.typeErr(name, "a number", v)
		return
	}
	if !(x >= lo && x <= hi) {
		d.err = badRequest(name, "field %s: %v is out of range [%v, %v]", name, x, lo, hi)
		return
	}
	*p = x
}

func (d *fieldDecoder) int(name string, p *int, lo, hi int) {
	v := d.get(name)
	if v == nil {
		return
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		d.typeErr(name, "an integer", v)
		return
	}
	x, err := n.Int64()
	if err != nil {
		d.err = badRequest(name, "field %s: %s is not an integer in range", name, n)
		return
	}
	if x < int64(lo) || x > int64(hi) {
		d.err = badRequest(name, "field %s: %d is out of range [%d, %d]", name, x, lo, hi)
		return
	}
	*p = int(x)
}

// mustEqual accepts a field only when absent, null or equal to want (what
// apr does anyway): anything else would change the answer in a way apr
// does not implement, so it is refused by name.
func (d *fieldDecoder) mustEqual(name string, want any) {
	v := d.get(name)
	if v == nil {
		return
	}
	var got any
	if err := json.Unmarshal(v, &got); err != nil {
		d.typeErr(name, "a JSON value", v)
		return
	}
	if f, ok := got.(float64); ok {
		if w, ok := want.(int); ok && f == float64(w) {
			return
		}
	}
	if want != nil && fmt.Sprint(got) == fmt.Sprint(want) {
		return
	}
	if want == nil {
		d.err = badRequest(name, "field %s is not supported by apr serve", name)
		return
	}
	d.err = badRequest(name, "field %s: only %v is supported, got %s", name, want, bytes.TrimSpace(v))
}

// logitBias decodes OpenAI's logit_bias: token ids (decimal strings) to
// biases in [-100, 100]. Whether the ids are in the vocabulary is the
// handler's to check (sample.Params.CheckVocab).
func (d *fieldDecoder) logitBias(name string) map[int32]float64 {
	v := d.get(name)
	if v == nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		d.typeErr(name, "an object of token ids to biases", v)
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad entry named is the same every time
	out := make(map[int32]float64, len(m))
	for _, k := range keys {
		at := name + "." + k
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 {
			d.err = badRequest(at, "field %s: key %q is not a token id (a decimal integer ≥ 0)", name, k)
			return nil
		}
		var b float64
		if err := json.Unmarshal(m[k], &b); err != nil {
			d.err = badRequest(at, "field %s: want a number, got %s", at, kind(m[k]))
			return nil
		}
		if !(math.Abs(b) <= sample.MaxLogitBias) {
			d.err = badRequest(at, "field %s: %v is out of range [-%d, %d]", at, b, sample.MaxLogitBias, sample.MaxLogitBias)
			return nil
		}
		out[int32(id)] = b
	}
	return out
}

// emptyList accepts a field only when absent, null or an empty array.
func (d *fieldDecoder) emptyList(name string) {
	v := d.get(name)
	if v == nil {
		return
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(v, &arr); err != nil {
		d.typeErr(name, "an array", v)
		return
	}
	if len(arr) > 0 {
		d.err = badRequest(name, "field %s is not supported by apr serve (%d given; send tools on /v1/chat/completions)", name, len(arr))
	}
}

// oneOf accepts a string field only when absent, null or one of ok.
func (d *fieldDecoder) oneOf(name string, ok ...string) {
	v := d.get(name)
	if v == nil {
		return
	}
	var got string
	if err := json.Unmarshal(v, &got); err != nil || !slices.Contains(ok, got) {
		d.err = badRequest(name, "field %s: only %q are supported here, got %s", name, ok, bytes.TrimSpace(v))
	}
}

// templateKwargs decodes chat_template_kwargs: an object of the chat
// template's extra variables (Qwen3's enable_thinking), as vLLM's and
// llama.cpp's servers take them; the variables apr sets from the request
// (messages, tools, …) are refused by name.
func (d *fieldDecoder) templateKwargs(name string) map[string]any {
	v := d.get(name)
	if v == nil {
		return nil
	}
	val, err := chat.DecodeJSON(v)
	m, ok := val.(*chat.Map)
	if err != nil || !ok {
		d.typeErr(name, "an object", v)
		return nil
	}
	out := make(map[string]any, m.Len())
	for _, k := range m.Keys() {
		if chat.Reserved(k) {
			d.err = badRequest(name+"."+k, "field %s.%s: the chat template's %s comes from the request itself", name, k, k)
			return nil
		}
		out[k], _ = m.Get(k)
	}
	return out
}

// responseFormat decodes response_format: {"type": "text"} (the default)
// or {"type": "json_object"} (true: each completion is constrained to one
// JSON object, generate.SeqOptions.JSON); a JSON schema is refused by name.
func (d *fieldDecoder) responseFormat(name string) bool {
	v := d.get(name)
	if v == nil {
		return false
	}
	var rf struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(v, &rf); err != nil {
		d.typeErr(name, "an object", v)
		return false
	}
	switch rf.Type {
	case "text":
		return false
	case "json_object":
		return true
	}
	d.err = badRequest(name, "field %s: only {\"type\": \"text\"} and {\"type\": \"json_object\"} are supported, got type %q", name, rf.Type)
	return false
}

func (d *fieldDecoder) streamOptions(name string, include *bool, stream bool) {
	v := d.get(name)
	if v == nil {
		return
	}
	var so map[string]json.RawMessage
	if err := json.Unmarshal(v, &so); err != nil {
		d.typeErr(name, "an object", v)
		return
	}
	if !stream {
		d.err = badRequest(name, "field %s is only allowed with stream: true", name)
		return
	}
	sub := fieldDecoder{raw: so}
	sub.boolean("include_usage", include)
	if sub.err != nil {
		sub.err.Param = name + ".include_usage"
		sub.err.Message = strings.Replace(sub.err.Message, "field include_usage", "field "+name+".include_usage", 1)
		d.err = sub.err
	}
}

func (d *fieldDecoder) stop(name string) []string {
	v := d.get(name)
	if v == nil {
		return nil
	}
	var one string
	if json.Unmarshal(v, &one) == nil {
		if one == "" {
			d.err = badRequest(name, "field %s: a stop string must not be empty", name)
			return nil
		}
		return []string{one}
	}
	var many []string
	if err := json.Unmarshal(v, &many); err != nil {
		d.typeErr(name, "a string or an array of strings", v)
		return nil
	}
	if len(many) > MaxStops {
		d.err = badRequest(name, "field %s: %d stop strings, at most %d", name, len(many), MaxStops)
		return nil
	}
	for i, s := range many {
		if s == "" {
			d.err = badRequest(fmt.Sprintf("%s[%d]", name, i), "field %s[%d]: a stop string must not be empty", name, i)
			return nil
		}
	}
	return many
}

// promptItem is one prompt of /v1/completions: text, or token ids.
type promptItem struct {
	Text string
	IDs  []int32 // nil: Text
}

// prompt decodes /v1/completions' prompt: a string or token ids (one
// prompt), or a list of them (OpenAI's batch form: each gets its choices,
// batch true).
func (d *fieldDecoder) prompt(name string) ([]promptItem, bool) {
	v := d.get(name)
	if v == nil {
		if d.err == nil {
			d.err = badRequest(name, "field %s is required", name)
		}
		return nil, false
	}
	one := func(v json.RawMessage) (promptItem, bool) {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return promptItem{Text: s}, true
		}
		var ids []int32
		if json.Unmarshal(v, &ids) == nil && len(ids) > 0 {
			return promptItem{IDs: ids}, true
		}
		return promptItem{}, false
	}
	if it, ok := one(v); ok {
		return []promptItem{it}, false
	}
	var arr []json.RawMessage
	if json.Unmarshal(v, &arr) != nil || len(arr) == 0 {
		d.err = badRequest(name, "field %s: want a string or an array of token ids, or a non-empty array of either, got %s", name, kind(v))
		return nil, false
	}
	items := make([]promptItem, len(arr))
	for k, a := range arr {
		it, ok := one(a)
		if !ok {
			d.err = badRequest(fmt.Sprintf("%s[%d]", name, k), "field %s[%d]: want a string or a non-empty array of token ids, got %s", name, k, kind(a))
			return nil, false
		}
		items[k] = it
	}
	return items, true
}

// messages decodes chat messages: role and content, where content is a
// string or an array of text parts; an assistant's tool_calls and a tool's
// tool_call_id as the templates read them.
func (d *fieldDecoder) messages(name string) []map[string]any {
	v := d.get(name)
	if v == nil {
		if d.err == nil {
			d.err = badRequest(name, "field %s is required", name)
		}
		return nil
	}
	var arr []map[string]json.RawMessage
	if err := json.Unmarshal(v, &arr); err != nil {
		d.typeErr(name, "an array of message objects", v)
		return nil
	}
	if len(arr) == 0 {
		d.err = badRequest(name, "field %s: at least one message is needed", name)
		return nil
	}
	out := make([]map[string]any, 0, len(arr))
	for i, m := range arr {
		at := fmt.Sprintf("%s[%d]", name, i)
		sub := fieldDecoder{raw: m}
		var role string
		sub.str("role", &role)
		if sub.err == nil {
			switch role {
			case "system", "developer", "user", "assistant", "tool":
			case "":
				sub.err = badRequest("role", "field role is required")
			default:
				sub.err = badRequest("role", "field role: %q is not one of system, developer, user, assistant, tool", role)
			}
		}
		msg := map[string]any{"role": role}
		// An assistant's tool calls (its content may then be null) and a
		// tool's answer to one (tool_call_id).
		var calls []any
		if role == "assistant" {
			calls = sub.toolCallsField("tool_calls")
			if len(calls) > 0 {
				msg["tool_calls"] = calls
			}
		}
		if role == "tool" {
			var id string
			sub.str("tool_call_id", &id)
			msg["tool_call_id"] = id
		}
		// An assistant's reasoning (as apr serve returned it: reasoning.go)
		// goes back to the template, which renders it or drops it.
		if role == "assistant" {
			var rc string
			sub.str("reasoning_content", &rc)
			if rc != "" {
				msg["reasoning_content"] = rc
			}
		}
		if v := sub.get("content"); v != nil || len(calls) == 0 {
			msg["content"] = sub.content("content")
		} else {
			msg["content"] = ""
		}
		var who string
		sub.str("name", &who)
		if who != "" && role == "tool" {
			msg["name"] = who
		}
		if sub.err == nil {
			for k := range m {
				if !sub.seen[k] {
					sub.err = badRequest(k, "field %s is not supported", k)
					break
				}
			}
		}
		if sub.err != nil {
			p, _ := sub.err.Param.(string)
			d.err = badRequest(at+"."+p, "%s: %s", at, sub.err.Message)
			return nil
		}
		if role == "developer" {
			msg["role"] = "system"
		}
		out = append(out, msg)
	}
	return out
}

func (d *fieldDecoder) content(name string) string {
	v := d.get(name)
	if v == nil {
		if d.err == nil {
			d.err = badRequest(name, "field %s is required", name)
		}
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(v, &parts); err != nil {
		d.typeErr(name, "a string or an array of text parts", v)
		return ""
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			d.err = badRequest(fmt.Sprintf("%s[%d]", name, i), "field %s[%d]: only text parts ({\"type\": \"text\", \"text\": …}) are supported, got type %q", name, i, p.Type)
			return ""
		}
		b.WriteString(*p.Text)
	}
	return b.String()
}
