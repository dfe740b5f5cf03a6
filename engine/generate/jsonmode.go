package generate

import (
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/tokenizer"
)

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
	key   bool   // the string being read (jString, jEscape, jHex) is a key
	lit   string // the rest of a literal being read (true, false, null)
	hex   int    // \u digits still to read
	space int    // whitespace bytes in a row, outside strings
	done  bool   // the top-level object is closed (then nothing may follow)
	bad   bool
	// A lead-in (SeqOptions.JSONAfter): before the object, the text is
	// one of the lead choices (leads: them joined by NUL; lead: the text
	// of one read so far). Empty once one was read whole.
	leads string
	lead  string
}

// newJSONPrefix returns a recognizer of one JSON object, after one of
// leads when there are any.
func newJSONPrefix(leads []string) jsonPrefix {
	return jsonPrefix{leads: strings.Join(leads, "\x00")}
}

// stepLead reads c of the lead-in: it must continue one of the choices;
// once one is read whole, the object follows.
func (p *jsonPrefix) stepLead(c byte) bool {
	n := len(p.lead)
	ok, whole := false, false
	for rest := p.leads; rest != ""; {
		ch, tail, _ := strings.Cut(rest, "\x00")
		rest = tail
		if len(ch) > n && ch[n] == c && ch[:n] == p.lead {
			ok, whole = true, whole || len(ch) == n+1
		}
	}
	switch {
	case !ok:
		return false
	case whole:
		p.leads, p.lead = "", ""
	default:
		p.lead += string(c)
	}
	return true
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
	jString                       // inside a string (a key when key)
	jEscape                       // after '\' in a string
	jHex                          // \uXXXX digits
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

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Complete reports whether one whole object has been read.
func (p *jsonPrefix) Complete() bool { return p.done && !p.bad }

// FeedString reads s and reports whether the text so far is still a
// prefix of one JSON object.
func (p *jsonPrefix) FeedString(s string) bool {
	for i := 0; i < len(s); i++ {
		if p.bad || !p.step(s[i]) {
			p.bad = true
			return false
		}
	}
	return true
}

// JSONObjectPrefix reports whether s is a prefix of one JSON object as
// SeqOptions.JSON constrains a completion (no whitespace around it, runs of
// at most 20 spaces inside), for callers that check such a completion.
func JSONObjectPrefix(s string) bool {
	var p jsonPrefix
	return p.FeedString(s)
}

// step reads c: the whitespace runs outside strings, then the grammar.
func (p *jsonPrefix) step(c byte) bool {
	if p.done {
		return false
	}
	if p.leads != "" {
		return p.stepLead(c)
	}
	inString := p.st == jString || p.st == jEscape || p.st == jHex
	if !inString && isWS(c) {
		if p.depth == 0 || p.space == maxJSONSpace {
			return false // before the object, or a run too long
		}
		p.space++
	} else {
		p.space = 0
	}
	return p.next(c)
}

func (p *jsonPrefix) next(c byte) bool {
	switch p.st {
	case jValue, jArrValOrEnd:
		switch {
		case isWS(c):
		case c == ']' && p.st == jArrValOrEnd:
			return p.close(c)
		case p.depth == 0 && c != '{':
			return false // the top-level value is an object
		case c == '{' || c == '[':
			if p.depth == maxJSONDepth {
				return false
			}
			p.stack[p.depth] = c
			p.depth++
			p.st = jArrValOrEnd
			if c == '{' {
				p.st = jObjKeyOrEnd
			}
		case c == '"':
			p.st, p.key = jString, false
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
	case jObjKeyOrEnd, jObjKey:
		switch {
		case isWS(c):
		case c == '"':
			p.st, p.key = jString, true
		case c == '}' && p.st == jObjKeyOrEnd:
			return p.close(c)
		default:
			return false
		}
	case jColon:
		switch {
		case isWS(c):
		case c == ':':
			p.st = jValue
		default:
			return false
		}
	case jAfterValue:
		switch {
		case isWS(c):
		case c == ',' && p.stack[p.depth-1] == '{':
			p.st = jObjKey
		case c == ',':
			p.st = jValue
		case c == '}' || c == ']':
			return p.close(c)
		default:
			return false
		}
	case jString:
		switch {
		case c == '"' && p.key:
			p.st = jColon
		case c == '"':
			p.st = jAfterValue
		case c == '\\':
			p.st = jEscape
		case c < 0x20:
			return false // control characters must be escaped
		} // UTF-8 bytes pass (a decoder checks the text)
	case jEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			p.st = jString
		case 'u':
			p.st, p.hex = jHex, 4
		default:
			return false
		}
	case jHex:
		if !(isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
		if p.hex--; p.hex == 0 {
			p.st = jString
		}
	case jLiteral:
		if c != p.lit[0] {
			return false
		}
		if p.lit = p.lit[1:]; p.lit == "" {
			p.st = jAfterValue
		}
	case jNumSign, jNumDot, jNumESign:
		if !isDigit(c) && !(p.st == jNumSign && c == '0') {
			return false
		}
		switch {
		case p.st == jNumSign && c == '0':
			p.st = jNumZero
		case p.st == jNumSign:
			p.st = jNumInt
		case p.st == jNumDot:
			p.st = jNumFrac
		default:
			p.st = jNumExpDig
		}
	case jNumE:
		switch {
		case c == '+' || c == '-':
			p.st = jNumESign
		case isDigit(c):
			p.st = jNumExpDig
		default:
			return false
		}
	case jNumZero, jNumInt, jNumFrac, jNumExpDig:
		switch {
		case isDigit(c) && p.st != jNumZero:
		case c == '.' && (p.st == jNumZero || p.st == jNumInt):
			p.st = jNumDot
		case (c == 'e' || c == 'E') && p.st != jNumExpDig:
			p.st = jNumE
		default:
			// The number ended: c is what follows the value (its
			// whitespace already counted by step).
			p.st = jAfterValue
			return p.next(c)
		}
	default:
		return false
	}
	return true
}

// close ends the innermost container with c ('}' or ']'), if it is one.
func (p *jsonPrefix) close(c byte) bool {
	if p.depth == 0 || (p.stack[p.depth-1] == '{') != (c == '}') {
		return false
	}
	p.depth--
	p.st = jAfterValue
	p.done = p.depth == 0
	return true
}

// jsonMasks caches, for a model, which tokens can continue JSON text in a
// recognizer state: a bitset over the vocabulary per state, for the states
// met most recently. A completion meets few states again and again (inside
// a string, after a comma, …), so most steps cost a pass over a bitset
// instead of each token's bytes fed to a recognizer. A state not met yet
// walks only the tokens that may matter (jsonTokens).
type jsonMasks struct {
	once  sync.Once
	toks  jsonTokens
	mu    sync.Mutex
	sets  map[jsonPrefix][]uint64
	order []jsonPrefix // oldest first, for eviction
}

// jsonMaskStates is how many states' bitsets a model keeps (19 KB each for
// a vocabulary of 152k tokens).
const jsonMaskStates = 64

// jsonTokens sorts a vocabulary for the walk of a state: the tokens that
// are text inside any string (no quote, backslash or control byte: a
// string's state reads them and stays a string's), the other text tokens
// by their first byte (a state that refuses the byte refuses them all),
// and the end-of-generation tokens. Control tokens never continue JSON.
type jsonTokens struct {
	plain  []uint64 // bitset: the string-safe tokens
	byte1  [256][]int32
	eog    []int32
	pieces []string // each token's text ("" for the control tokens)
}

func (t *jsonTokens) build(tok *tokenizer.Tokenizer) {
	n := tok.NVocab()
	t.plain = make([]uint64, (n+63)/64)
	t.pieces = make([]string, n)
	for id := range n {
		i := int32(id)
		pc, err := tok.Piece(i)
		switch {
		case tok.IsEOG(i):
			t.eog = append(t.eog, i)
			continue
		case err != nil || pc == "" || tok.IsControl(i):
			continue
		}
		t.pieces[id] = pc
		plain := true
		for k := 0; k < len(pc) && plain; k++ {
			plain = pc[k] >= 0x20 && pc[k] != '"' && pc[k] != '\\'
		}
		if plain {
			t.plain[id>>6] |= 1 << (id & 63)
		}
		t.byte1[pc[0]] = append(t.byte1[pc[0]], i)
	}
}

// jsonAllowed returns the bitset of the tokens (bit id of word id/64) that
// can follow text that left the recognizer in state p: an end-of-generation
// token once the object is complete, no other control token, and each other
// token whose text a copy of p accepts. The result is shared: read only.
func (m *Model) jsonAllowed(p jsonPrefix) []uint64 {
	// The stack above the depth is stale bytes of closed containers: not
	// part of the state.
	for i := p.depth; i < maxJSONDepth; i++ {
		p.stack[i] = 0
	}
	c := &m.masks
	c.mu.Lock()
	set, ok := c.sets[p]
	c.mu.Unlock()
	if ok {
		return set
	}
	c.once.Do(func() { c.toks.build(m.Tok) })
	t := &c.toks
	set = make([]uint64, len(t.plain))
	if p.Complete() {
		for _, id := range t.eog {
			set[id>>6] |= 1 << (id & 63)
		}
	}
	inString := p.st == jString && !p.bad
	if inString {
		copy(set, t.plain) // a string's state reads them and stays a string's
	}
	for b := range 256 {
		ids := t.byte1[b]
		if len(ids) == 0 {
			continue
		}
		if q := p; !q.step(byte(b)) {
			continue
		}
		for _, id := range ids {
			if inString && t.plain[id>>6]&(1<<(id&63)) != 0 {
				continue
			}
			if q := p; q.FeedString(t.pieces[id]) {
				set[id>>6] |= 1 << (id & 63)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sets == nil {
		c.sets = map[jsonPrefix][]uint64{}
	}
	if _, ok := c.sets[p]; !ok {
		if len(c.order) == jsonMaskStates {
			delete(c.sets, c.order[0])
			c.order = c.order[1:]
		}
		c.sets[p] = set
		c.order = append(c.order, p)
	}
	return set
}
