package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Map is a JSON object that keeps the order of its keys, as a Python dict
// does. The zero value is an empty map ready to use.
type Map struct {
	keys []string
	vals map[string]any
}

// NewMap returns a Map holding the given key/value pairs in order
// (NewMap("role", "user", "content", "hi")). It panics when kv has an odd
// length or a key that is not a string: that is a programmer error.
func NewMap(kv ...any) *Map {
	if len(kv)%2 != 0 {
		panic("chat: NewMap needs key/value pairs")
	}
	m := &Map{}
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			panic(fmt.Sprintf("chat: NewMap key %d is %T, not a string", i/2, kv[i]))
		}
		m.Set(k, kv[i+1])
	}
	return m
}

// Set sets key to v; a new key goes last.
func (m *Map) Set(key string, v any) {
	if m.vals == nil {
		m.vals = map[string]any{}
	}
	if _, ok := m.vals[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.vals[key] = v
}

// Get returns the value of key.
func (m *Map) Get(key string) (any, bool) {
	v, ok := m.vals[key]
	return v, ok
}

// Keys returns the keys in insertion order.
func (m *Map) Keys() []string { return append([]string(nil), m.keys...) }

// Len returns the number of keys.
func (m *Map) Len() int { return len(m.keys) }

// MarshalJSON writes the object with its keys in order.
func (m *Map) MarshalJSON() ([]byte, error) {
	s, err := pyJSON(m, jsonOpts{indent: -1, itemSep: ",", keySep: ":"})
	return []byte(s), err
}

// Limits on decoded JSON, checked before anything is built.
const (
	maxJSONDepth = 512 // nesting of arrays and objects
)

// DecodeJSON decodes one JSON document the way Python's json.loads does:
// objects become *Map (key order kept; a repeated key keeps its first
// position and its last value), arrays []any, integers int64 (or float64
// when they do not fit), other numbers float64, strings, bools and nil.
// Invalid UTF-8 and trailing data are errors.
func DecodeJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("chat: JSON is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("chat: JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("chat: JSON: trailing data after the document")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := &Map{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				m.Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return m, nil
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", s, err)
		}
		return f, nil
	}
	return tok, nil // string, bool, nil
}

// DecodeInput builds an Input from JSON documents: messages (a list of
// objects), tools (a list, or empty/null for none) and kwargs (an object, or
// empty for none). Key order is kept everywhere.
func DecodeInput(messages, tools, kwargs []byte, addGenerationPrompt bool) (Input, error) {
	in := Input{AddGenerationPrompt: addGenerationPrompt}
	v, err := DecodeJSON(messages)
	if err != nil {
		return in, fmt.Errorf("messages: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		return in, fmt.Errorf("messages: want a JSON list of objects, got %s", typeName(v))
	}
	for i, e := range list {
		m, ok := e.(*Map)
		if !ok {
			return in, fmt.Errorf("messages[%d]: want an object, got %s", i, typeName(e))
		}
		in.OrderedMessages = append(in.OrderedMessages, m)
	}
	if len(bytes.TrimSpace(tools)) > 0 {
		v, err := DecodeJSON(tools)
		if err != nil {
			return in, fmt.Errorf("tools: %w", err)
		}
		switch t := v.(type) {
		case nil:
		case []any:
			in.Tools = t
		default:
			return in, fmt.Errorf("tools: want a JSON list, got %s", typeName(v))
		}
	}
	if len(bytes.TrimSpace(kwargs)) > 0 {
		v, err := DecodeJSON(kwargs)
		if err != nil {
			return in, fmt.Errorf("kwargs: %w", err)
		}
		m, ok := v.(*Map)
		if !ok {
			return in, fmt.Errorf("kwargs: want a JSON object, got %s", typeName(v))
		}
		in.Kwargs = make(map[string]any, m.Len())
		for _, k := range m.keys {
			in.Kwargs[k] = m.vals[k]
		}
	}
	return in, nil
}

// typeName names a decoded JSON value's type the way a user reads it.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case int64, float64:
		return "a number"
	case []any:
		return "a list"
	case *Map:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
