package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/aprqa/apr/engine/chat"
)

// Tool calls (OpenAI's tools and tool_choice): the tools go to the model's
// own chat template, which tells the model how to call them, and the calls
// come back out of the completion's text in the format that template
// taught. A forced call (a named function, or "required") is started by
// apr at the end of the prompt, the name included when there is one to
// call; the model writes the name held to one of the tools' (SeqOptions.
// JSONAfter) when there are several, then its arguments held to one JSON
// object (forcedCall). apr serve parses the <tool_call> blocks of the Qwen
// templates: Hermes's JSON ({"name": …, "arguments": {…}}; Qwen2.5, Qwen3,
// QwQ) and Qwen's XML (<function=NAME><parameter=P>value</parameter>…;
// Qwen3-Coder, Qwen3.5); Llama 3.1's reply that is one JSON object
// {"name": …, "parameters": {…}} (after <|python_tag|>, when shown); and
// Mistral's reply that is a list of calls (after [TOOL_CALLS]). A template that renders no tools, or teaches
// another format, is refused by name when tools are sent, never given
// tools whose calls would come back as plain text.

// toolFormat is how a template's model writes a call.
type toolFormat int

const (
	toolsNone    toolFormat = iota // the template renders no tools
	toolsOther                     // it does, in a format apr does not parse
	toolsHermes                    // <tool_call>{"name": …, "arguments": …}</tool_call>
	toolsXML                       // <tool_call><function=…><parameter=…>…</parameter></function></tool_call>
	toolsLlama3                    // the whole reply {"name": …, "parameters": {…}} (Llama 3.1+)
	toolsMistral                   // the whole reply [TOOL_CALLS][{"name": …, "arguments": {…}}, …]
)

const (
	callOpen  = "<tool_call>"
	callClose = "</tool_call>"
)

// templateToolFormat reads a chat template's source for the format it
// teaches.
func templateToolFormat(src string) toolFormat {
	switch {
	case !strings.Contains(src, "tools"):
		return toolsNone
	case strings.Contains(src, callOpen) && strings.Contains(src, "<function="):
		return toolsXML
	case strings.Contains(src, callOpen):
		return toolsHermes
	case strings.Contains(src, `"parameters": `) && strings.Contains(src, pythonTag):
		return toolsLlama3
	case strings.Contains(src, mistralTag):
		return toolsMistral
	default:
		return toolsOther
	}
}

// tool is one function of a request's tools.
type tool struct {
	Name   string
	Params map[string]string // parameter name → its JSON schema type ("" unknown)
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// tools decodes the tools field: a list of {"type": "function", "function":
// {"name", "description", "parameters", "strict"}}. It returns the list as
// the template sees it (key order kept) and each function's name and
// parameter types.
func (d *fieldDecoder) tools(name string) ([]any, []tool) {
	v := d.get(name)
	if v == nil {
		return nil, nil
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(v, &arr); err != nil {
		d.typeErr(name, "an array of tools", v)
		return nil, nil
	}
	if len(arr) == 0 {
		return nil, nil
	}
	var out []tool
	seen := map[string]bool{}
	for i, raw := range arr {
		at := fmt.Sprintf("%s[%d]", name, i)
		var t struct {
			Type     *string                    `json:"type"`
			Function map[string]json.RawMessage `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || t.Function == nil {
			d.err = badRequest(at, "field %s: want {\"type\": \"function\", \"function\": {\"name\": …}}, got %s", at, kind(raw))
			return nil, nil
		}
		if t.Type == nil || *t.Type != "function" {
			d.err = badRequest(at+".type", "field %s.type: only \"function\" tools are supported", at)
			return nil, nil
		}
		var f struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		}
		fb, _ := json.Marshal(t.Function)
		if err := json.Unmarshal(fb, &f); err != nil || !toolName.MatchString(f.Name) {
			d.err = badRequest(at+".function.name", "field %s.function.name: want 1 to 64 letters, digits, _ or -, got %s", at, bytes.TrimSpace(t.Function["name"]))
			return nil, nil
		}
		if seen[f.Name] {
			d.err = badRequest(at+".function.name", "field %s.function.name: %q is named twice", at, f.Name)
			return nil, nil
		}
		seen[f.Name] = true
		tl := tool{Name: f.Name, Params: map[string]string{}}
		if p := bytes.TrimSpace(f.Parameters); len(p) > 0 && string(p) != "null" {
			var schema struct {
				Properties map[string]struct {
					Type any `json:"type"`
				} `json:"properties"`
			}
			if p[0] != '{' || json.Unmarshal(p, &schema) != nil {
				d.err = badRequest(at+".function.parameters", "field %s.function.parameters: want a JSON schema object, got %s", at, kind(p))
				return nil, nil
			}
			for k, s := range schema.Properties {
				if ty, ok := s.Type.(string); ok {
					tl.Params[k] = ty
				}
			}
		}
		out = append(out, tl)
	}
	generic, err := chat.DecodeJSON(v)
	if err != nil {
		d.err = badRequest(name, "field %s: %v", name, err)
		return nil, nil
	}
	return generic.([]any), out
}

// toolChoice decodes tool_choice against the tools decoded before it:
// "auto" (the default), "none" (the tools are not shown to the model), or
// a call the model must make: a named function ({"type": "function",
// "function": {"name": …}}), or "required" (any of the tools). The
// functions one of which the model must call are returned.
func (d *fieldDecoder) toolChoice(name string, defs []tool) (none bool, force []string) {
	v := d.get(name)
	if v == nil {
		return false, nil
	}
	var got string
	if json.Unmarshal(v, &got) == nil {
		switch got {
		case "auto":
			return false, nil
		case "none":
			return true, nil
		case "required":
			if len(defs) == 0 {
				d.err = badRequest(name, "field %s: \"required\" with no tools to call", name)
				return false, nil
			}
			for _, t := range defs {
				force = append(force, t.Name)
			}
			return false, force
		}
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(v, &named) != nil || named.Type != "function" || named.Function.Name == "" {
		d.err = badRequest(name, "field %s: want \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}, got %s", name, bytes.TrimSpace(v))
		return false, nil
	}
	for _, t := range defs {
		if t.Name == named.Function.Name {
			return false, []string{t.Name}
		}
	}
	d.err = badRequest(name, "field %s: function %q is not among the tools", name, named.Function.Name)
	return false, nil
}

// forcedCall is how a format's call of one of names starts and ends, when
// apr makes the model call it: the prompt gains start (control tokens
// parsed), the completion is one of leads (none: the one name is in start)
// then one JSON object (the arguments), and the splitter reads text + the
// completion + end. ok is false for a format whose arguments are not one
// JSON object (Qwen's XML).
func forcedCall(f toolFormat, names []string) (start, text, end string, leads []string, ok bool) {
	var open, args string // up to the name, and from its end to the arguments
	switch f {
	case toolsHermes:
		open, args, end = callOpen+"\n{\"name\": ", ", \"arguments\": ", "}\n"+callClose
	case toolsLlama3:
		open, args, end = "{\"name\": ", ", \"parameters\": ", "}"
	case toolsMistral:
		open, args, end = "[{\"name\": ", ", \"arguments\": ", "}]"
	default:
		return "", "", "", nil, false
	}
	if len(names) == 1 {
		text = open + jsonText(names[0]) + args
	} else {
		// The model writes the name: each choice is a name's JSON text
		// after its opening quote, then what leads to the arguments.
		text = open + `"`
		for _, n := range names {
			leads = append(leads, jsonText(n)[1:]+args)
		}
	}
	start = text
	if f == toolsMistral {
		start = mistralTag + text
	}
	return start, text, end, leads, true
}

// toolCallsField decodes an assistant message's tool_calls for the
// template: each {"id", "type": "function", "function": {"name",
// "arguments"}}, arguments (a JSON text in OpenAI's API) decoded to the
// object templates iterate or print with tojson.
func (d *fieldDecoder) toolCallsField(name string) []any {
	v := d.get(name)
	if v == nil {
		return nil
	}
	var arr []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(v, &arr); err != nil {
		d.typeErr(name, "an array of tool calls ({\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}})", v)
		return nil
	}
	out := make([]any, 0, len(arr))
	for i, c := range arr {
		at := fmt.Sprintf("%s[%d]", name, i)
		if c.Function == nil || c.Function.Name == "" || (c.Type != "" && c.Type != "function") {
			d.err = badRequest(at, "field %s: want {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", at)
			return nil
		}
		// No arguments (an empty text) are an empty object, which templates
		// iterate as they do any other.
		var args any = chat.NewMap()
		if strings.TrimSpace(c.Function.Arguments) != "" {
			a, err := chat.DecodeJSON([]byte(c.Function.Arguments))
			if err != nil {
				d.err = badRequest(at+".function.arguments", "field %s.function.arguments: not a JSON text: %v", at, err)
				return nil
			}
			args = a
		}
		out = append(out, chat.NewMap("id", c.ID, "type", "function",
			"function", chat.NewMap("name", c.Function.Name, "arguments", args)))
	}
	return out
}

// toolCall is a call parsed out of a completion.
type toolCall struct {
	Name      string
	Arguments string // a JSON object's text
}

// callSplitter separates a completion's text into its content and its
// tool calls as the text arrives (the whole response feeds it once; a
// stream, delta by delta). Text that may begin a call is held until it
// does or cannot; so is whitespace, which is dropped where it only
// separates calls (before, between and after them). A block that does not
// parse as a call of a requested tool stays content, as the model wrote it.
type callSplitter struct {
	format toolFormat
	tools  []tool
	held   string // text not yet passed on: a possible call's start, whitespace, or an open call
	open   bool   // held starts with callOpen and has no callClose yet
	ws     string // the whitespace before the open block: dropped if it is a call
	calls  int
	whole  int // a whole-reply format: 0 undecided, 1 the reply may be calls (held to the end), 2 it is text
}

// The tags that open a Llama 3 and a Mistral call (control tokens: the
// reply's text shows them only when control tokens are not skipped).
const (
	pythonTag  = "<|python_tag|>"
	mistralTag = "[TOOL_CALLS]"
)

// wholeReply returns, for a format whose calls are the whole reply, the
// tag that may open it and the character its calls start with.
func wholeReply(f toolFormat) (tag string, start string, ok bool) {
	switch f {
	case toolsLlama3:
		return pythonTag, "{", true
	case toolsMistral:
		return mistralTag, "[", true
	}
	return "", "", false
}

// feed takes the next text and returns the content to pass on and the
// calls completed by it.
func (s *callSplitter) feed(text string) (content string, calls []toolCall) {
	s.held += text
	if tag, start, ok := wholeReply(s.format); ok {
		// The calls are the whole reply: one that starts as they do (or
		// with the tag) is held to the end; any other is text.
		if s.whole == 0 {
			t := strings.TrimLeftFunc(s.held, unicode.IsSpace)
			switch {
			case t == "" || (len(t) < len(tag) && strings.HasPrefix(tag, t)):
				return "", nil
			case strings.HasPrefix(t, start) || strings.HasPrefix(t, tag):
				s.whole = 1
			default:
				s.whole = 2
			}
		}
		if s.whole == 2 {
			out := s.held
			s.held = ""
			return out, nil
		}
		return "", nil
	}
	var b strings.Builder
	for {
		if s.open {
			k := s.closeIndex()
			if k < 0 {
				return b.String(), calls
			}
			block := s.held[:k+len(callClose)]
			s.held, s.open = s.held[k+len(callClose):], false
			if c, ok := s.parse(block[len(callOpen) : len(block)-len(callClose)]); ok {
				calls = append(calls, c)
				s.calls++
			} else {
				b.WriteString(s.ws + block)
			}
			s.ws = ""
			continue
		}
		if k := strings.Index(s.held, callOpen); k >= 0 {
			pre := s.held[:k]
			text := strings.TrimRightFunc(pre, unicode.IsSpace)
			b.WriteString(text)
			s.ws, s.held, s.open = pre[len(text):], s.held[k:], true
			continue
		}
		// No call starts here: pass on all but a tail that may begin one,
		// and the whitespace before that tail.
		keep := partialSuffix(s.held, callOpen)
		out := s.held[:len(s.held)-keep]
		ws := len(out) - len(strings.TrimRightFunc(out, unicode.IsSpace))
		b.WriteString(out[:len(out)-ws])
		s.held = s.held[len(out)-ws:]
		return b.String(), calls
	}
}

// closeIndex is where the open block's callClose is in s.held, or -1: the
// first one outside the call's values, so that a value that mentions the
// tag (a JSON string; Qwen XML's parameter text, which runs to
// </parameter>) does not end the block.
func (s *callSplitter) closeIndex() int {
	from := len(callOpen)
	for {
		k := strings.Index(s.held[from:], callClose)
		if k < 0 {
			return -1
		}
		k += from
		inside := false
		switch body := s.held[len(callOpen):k]; s.format {
		case toolsHermes:
			inside = inJSONString(body)
		case toolsXML:
			inside = strings.Count(body, "<parameter=") > strings.Count(body, "</parameter>")
		}
		if !inside {
			return k
		}
		from = k + len(callClose)
	}
}

// inJSONString reports whether JSON text ends inside a string.
func inJSONString(text string) bool {
	in := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case in && c == '\\':
			i++ // the escaped character
		case c == '"':
			in = !in
		}
	}
	return in
}

// finish returns what is still held: an unclosed call or a partial start
// is content; trailing whitespace is too unless a call was made. A Llama 3
// reply held to the end is its call, or else its text.
func (s *callSplitter) finish() (string, []toolCall) {
	h := s.ws + s.held
	s.held, s.open, s.ws = "", false, ""
	if tag, _, ok := wholeReply(s.format); ok && s.whole == 1 {
		if cs, ok := s.parseReply(strings.TrimPrefix(strings.TrimSpace(h), tag)); ok {
			s.calls += len(cs)
			return "", cs
		}
	}
	if s.calls > 0 && strings.TrimSpace(h) == "" {
		return "", nil
	}
	return h, nil
}

// partialSuffix is the length of the longest proper prefix of tag that text
// ends with.
func partialSuffix(text, tag string) int {
	for n := min(len(tag)-1, len(text)); n > 0; n-- {
		if strings.HasSuffix(text, tag[:n]) {
			return n
		}
	}
	return 0
}

// parse reads one block's inside (or a whole reply's one call) as a call of
// one of the tools.
func (s *callSplitter) parse(body string) (toolCall, bool) {
	if s.format == toolsXML {
		return parseXMLCall(body, s.tool)
	}
	// JSON: {"name", "arguments"}; Llama 3's {"name", "parameters"}.
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if dec.Decode(&c) != nil || dec.More() || s.tool(c.Name) == nil {
		return toolCall{}, false
	}
	if s.format != toolsHermes && c.Parameters != nil {
		c.Arguments = c.Parameters
	}
	return objectCall(c.Name, c.Arguments)
}

// tool is the requested tool named name, or nil.
func (s *callSplitter) tool(name string) *tool {
	for i := range s.tools {
		if s.tools[i].Name == name {
			return &s.tools[i]
		}
	}
	return nil
}

// parseReply reads a whole reply as its calls: Llama 3's one object,
// Mistral's list of them (every one a call of a requested tool).
func (s *callSplitter) parseReply(body string) ([]toolCall, bool) {
	if s.format != toolsMistral {
		c, ok := s.parse(body)
		return []toolCall{c}, ok
	}
	var items []json.RawMessage
	dec := json.NewDecoder(strings.NewReader(body))
	if dec.Decode(&items) != nil || dec.More() || len(items) == 0 {
		return nil, false
	}
	calls := make([]toolCall, len(items))
	for i, it := range items {
		c, ok := s.parse(string(it))
		if !ok {
			return nil, false
		}
		calls[i] = c
	}
	return calls, true
}

// objectCall is a call of name with arguments, a JSON object (absent or
// null: none).
func objectCall(name string, arguments json.RawMessage) (toolCall, bool) {
	args := bytes.TrimSpace(arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	var compact bytes.Buffer
	if args[0] != '{' || json.Compact(&compact, args) != nil {
		return toolCall{}, false
	}
	return toolCall{Name: name, Arguments: compact.String()}, true
}

var (
	xmlFunction  = regexp.MustCompile(`(?s)^\s*<function=([^>\n]+)>(.*?)</function>\s*$`)
	xmlParameter = regexp.MustCompile(`(?s)<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>`)
)

// parseXMLCall reads Qwen's XML call: <function=NAME> and its
// <parameter=P>value</parameter>s. A value is a string unless the tool's
// schema gives the parameter another type and the value is that JSON.
func parseXMLCall(body string, lookup func(string) *tool) (toolCall, bool) {
	m := xmlFunction.FindStringSubmatch(body)
	if m == nil {
		return toolCall{}, false
	}
	t := lookup(strings.TrimSpace(m[1]))
	if t == nil {
		return toolCall{}, false
	}
	inner, at := m[2], 0
	var b strings.Builder
	b.WriteByte('{')
	for n, p := range xmlParameter.FindAllStringSubmatchIndex(inner, -1) {
		if strings.TrimSpace(inner[at:p[0]]) != "" {
			return toolCall{}, false
		}
		name, val := strings.TrimSpace(inner[p[2]:p[3]]), inner[p[4]:p[5]]
		at = p[1]
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonText(name))
		b.WriteByte(':')
		var c bytes.Buffer
		if ty := t.Params[name]; ty != "" && ty != "string" && json.Compact(&c, []byte(strings.TrimSpace(val))) == nil {
			b.Write(c.Bytes())
		} else {
			b.WriteString(jsonText(val))
		}
	}
	if strings.TrimSpace(inner[at:]) != "" {
		return toolCall{}, false
	}
	b.WriteByte('}')
	return toolCall{Name: t.Name, Arguments: b.String()}, true
}

// jsonText is s as a JSON string, <, > and & as they are (arguments are
// read by programs, not pasted into HTML).
func jsonText(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// callID is a new call's id: "call_" and 24 hex digits, or for Mistral's
// template, which refuses any other id when the call comes back in the
// next turn, 9 letters and digits.
func callID(f toolFormat) string {
	if f != toolsMistral {
		return newID("call_")
	}
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [9]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b[:])
}
