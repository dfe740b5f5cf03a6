package generate

// jsonPrefix is a recognizer of the prefixes of one JSON object (RFC 8259,
// the top-level value an object, as OpenAI's response_format json_object
// asks), fed byte by byte: a value that copies it is an independent
// recognizer, so that a sampler can try a token's bytes on a copy. As
// llama.cpp's JSON grammar, the text starts with '{' and ends with the
// object's '}' (no whitespace around it), and whitespace inside comes in
// runs of at most maxJSONSpace bytes, so that a model cannot pad forever.
// The nesting is bounded (maxJSONDepth); deeper text is refused.
type jsonPrefix struct {
	stack [maxJSONDepth]byte // '{' or '[' per open container
	depth int
	st    jsonState
	lit   string // the rest of a literal being read (true, false, null)
	hex   int    // \u digits still to read
	done  bool   // the top-level object is closed (then nothing may follow)
	bad   bool
	space int // whitespace bytes in a row, outside strings
}

const (
	maxJSONDepth = 64
	maxJSONSpace = 20
)

type jsonState uint8

const (
	jValue       jsonState = iota // a value is expected (at the top: '{' only)
	jObjKeyOrEnd                  // after '{': a key or '}'
	jObjKey                       // after ',' in an object: a key
	jColon                        // after a key
	jAfterValue                   // after a value: ',' or the container's end
	jArrValOrEnd                  // after '[': a value or ']'
	jString                       // inside a string value
	jKeyString                    // inside a key
	jEscape                       // after '\' in a string (key: keyEsc)
	jKeyEscape
	jHex // \uXXXX digits (returns to the string it came from: lit = "k" or "")
	jLiteral
	jNumSign   // after '-'
	jNumZero   // a leading 0
	jNumInt    // integer digits
	jNumDot    // after '.'
	jNumFrac   // fraction digits
	jNumE      // after 'e'
	jNumESign  // after 'e' and a sign
	jNumExpDig // exponent digits
)

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Complete reports whether one whole object has been read.
func (p *jsonPrefix) Complete() bool { return p.done && !p.bad }

// Feed reads b and reports whether the text so far is still a prefix of
// one JSON object.
func (p *jsonPrefix) Feed(b []byte) bool {
	for _, c := range b {
		if p.bad || !p.step(c) {
			p.bad = true
			return false
		}
	}
	return true
}

// FeedString is Feed of s's bytes, without copying them.
func (p *jsonPrefix) FeedString(s string) bool {
	for i := 0; i < len(s); i++ {
		if p.bad || !p.step(s[i]) {
			p.bad = true
			return false
		}
	}
	return true
}

// endValue is a value's end: the container goes on, or the object closed.
func (p *jsonPrefix) endValue() {
	p.st = jAfterValue
}

func (p *jsonPrefix) step(c byte) bool {
	if p.done {
		return false
	}
	inString := p.st == jString || p.st == jKeyString || p.st == jEscape || p.st == jKeyEscape || p.st == jHex
	if !inString && isWS(c) {
		if p.depth == 0 && p.st == jValue || p.space == maxJSONSpace {
			return false // before the object, or a run too long
		}
		p.space++
	} else {
		p.space = 0
	}
	switch p.st {
	case jValue, jArrValOrEnd:
		if isWS(c) {
			return true
		}
		if p.st == jArrValOrEnd && c == ']' {
			return p.close(']')
		}
		if p.depth == 0 && c != '{' {
			return false // the top-level value is an object
		}
		switch {
		case c == '{' || c == '[':
			if p.depth == maxJSONDepth {
				return false
			}
			p.stack[p.depth] = c
			p.depth++
			if c == '{' {
				p.st = jObjKeyOrEnd
			} else {
				p.st = jArrValOrEnd
			}
		case c == '"':
			p.st = jString
		case c == '-':
			p.st = jNumSign
		case c == '0':
			p.st = jNumZero
		case c >= '1' && c <= '9':
			p.st = jNumInt
		case c == 't':
			p.st, p.lit = jLiteral, "rue"
		case c == 'f':
			p.st, p.lit = jLiteral, "alse"
		case c == 'n':
			p.st, p.lit = jLiteral, "ull"
		default:
			return false
		}
		return true
	case jObjKeyOrEnd, jObjKey:
		switch {
		case isWS(c):
			return true
		case c == '"':
			p.st = jKeyString
			return true
		case c == '}' && p.st == jObjKeyOrEnd:
			return p.close('}')
		}
		return false
	case jColon:
		if isWS(c) {
			return true
		}
		if c == ':' {
			p.st = jValue
			return true
		}
		return false
	case jAfterValue:
		switch {
		case isWS(c):
			return true
		case c == ',':
			if p.stack[p.depth-1] == '{' {
				p.st = jObjKey
			} else {
				p.st = jValue
			}
			return true
		case c == '}' || c == ']':
			return p.close(c)
		}
		return false
	case jString, jKeyString:
		switch {
		case c == '"':
			if p.st == jKeyString {
				p.st = jColon
			} else {
				p.endValue()
			}
		case c == '\\':
			if p.st == jKeyString {
				p.st = jKeyEscape
			} else {
				p.st = jEscape
			}
		case c < 0x20:
			return false // control characters must be escaped
		}
		return true // UTF-8 bytes pass (a decoder checks the text)
	case jEscape, jKeyEscape:
		back := jString
		if p.st == jKeyEscape {
			back = jKeyString
		}
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			p.st = back
		case 'u':
			p.st, p.hex = jHex, 4
			if back == jKeyString {
				p.lit = "k"
			} else {
				p.lit = ""
			}
		default:
			return false
		}
		return true
	case jHex:
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
		if p.hex--; p.hex == 0 {
			if p.lit == "k" {
				p.st = jKeyString
			} else {
				p.st = jString
			}
		}
		return true
	case jLiteral:
		if c != p.lit[0] {
			return false
		}
		if p.lit = p.lit[1:]; p.lit == "" {
			p.endValue()
		}
		return true
	case jNumSign:
		switch {
		case c == '0':
			p.st = jNumZero
		case c >= '1' && c <= '9':
			p.st = jNumInt
		default:
			return false
		}
		return true
	case jNumZero, jNumInt, jNumFrac, jNumExpDig:
		switch {
		case c >= '0' && c <= '9' && p.st != jNumZero:
			return true
		case c == '.' && (p.st == jNumZero || p.st == jNumInt):
			p.st = jNumDot
			return true
		case (c == 'e' || c == 'E') && p.st != jNumExpDig:
			p.st = jNumE
			return true
		}
		// The number ends here: c is what follows a value.
		p.endValue()
		return p.step(c)
	case jNumDot:
		if c >= '0' && c <= '9' {
			p.st = jNumFrac
			return true
		}
		return false
	case jNumE:
		switch {
		case c == '+' || c == '-':
			p.st = jNumESign
		case c >= '0' && c <= '9':
			p.st = jNumExpDig
		default:
			return false
		}
		return true
	case jNumESign:
		if c >= '0' && c <= '9' {
			p.st = jNumExpDig
			return true
		}
		return false
	}
	return false
}

// close ends the innermost container with c ('}' or ']'), if it is one.
func (p *jsonPrefix) close(c byte) bool {
	if p.depth == 0 {
		return false
	}
	open := p.stack[p.depth-1]
	if (open == '{') != (c == '}') {
		return false
	}
	p.depth--
	if p.depth == 0 {
		p.done = true
		return true
	}
	p.endValue()
	return true
}

// JSONObjectPrefix reports whether s is a prefix of one JSON object as
// SeqOptions.JSON constrains a completion (no whitespace around it, runs of
// at most 20 spaces inside), for callers that check such a completion.
func JSONObjectPrefix(s string) bool {
	var p jsonPrefix
	return p.FeedString(s)
}
