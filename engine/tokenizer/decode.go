package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// buildPieces fills the piece of every token as llama.cpp's token_to_piece
// with special=true renders it: control, unknown and user-defined tokens as
// their text, normal tokens decoded (byte-level characters back to bytes for
// BPE, ▁ back to a space for SentencePiece), byte tokens as their byte, and
// everything else (unused, undefined) as nothing.
func (t *Tokenizer) buildPieces() {
	t.pieces = make([]string, len(t.tokens))
	for i, text := range t.tokens {
		a := t.attrs[i]
		switch {
		case a&(AttrUnknown|AttrControl|AttrUserDefined) != 0:
			t.pieces[i] = text
		case a&AttrNormal != 0:
			if t.kind == kindSPM {
				t.pieces[i] = strings.ReplaceAll(text, "▁", " ")
			} else {
				t.pieces[i] = decodeByteLevel(text)
			}
		case a&AttrByte != 0:
			t.pieces[i] = string([]byte{tokenByte(text)})
		}
	}
}

// tokenByte is llama.cpp's token_to_byte: the hex number in text[3:5]
// ("<0x0A>" → 0x0A), read as strtol does (stops at the first non-hex digit).
func tokenByte(text string) byte {
	if len(text) <= 3 {
		return 0
	}
	h := text[3:min(5, len(text))]
	var v byte
	for i := 0; i < len(h); i++ {
		c := h[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return v
		}
		v = v<<4 | d
	}
	return v
}

// decodeByteLevel is llama.cpp's llama_decode_text: every code point of a
// byte-level token maps back to its byte; one that is no byte-level character
// is written as "[UNK_BYTE_0x<hex of its UTF-8>" + text + "]".
func decodeByteLevel(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); {
		r, n := decodeLax(text, i)
		if r >= 0 && int(r) < len(unicodeToByte) && unicodeToByte[r] >= 0 {
			b.WriteByte(byte(unicodeToByte[r]))
		} else {
			enc := cptToUTF8(r)
			b.WriteString("[UNK_BYTE_0x")
			for j := 0; j < len(enc); j++ {
				fmt.Fprintf(&b, "%02x", enc[j])
			}
			b.WriteString(text)
			b.WriteString("]")
		}
		i += n
	}
	return b.String()
}

// cptToUTF8 is llama.cpp's unicode_cpt_to_utf8 (no check for surrogates).
func cptToUTF8(c rune) []byte {
	switch {
	case c <= 0x7F:
		return []byte{byte(c)}
	case c <= 0x7FF:
		return []byte{0xC0 | byte(c>>6&0x1F), 0x80 | byte(c&0x3F)}
	case c <= 0xFFFF:
		return []byte{0xE0 | byte(c>>12&0x0F), 0x80 | byte(c>>6&0x3F), 0x80 | byte(c&0x3F)}
	default:
		return []byte{0xF0 | byte(c>>18&0x07), 0x80 | byte(c>>12&0x3F), 0x80 | byte(c>>6&0x3F), 0x80 | byte(c&0x3F)}
	}
}

// Piece returns the text of id as llama.cpp's token_to_piece(id, lstrip=0,
// special=true) gives it: exact bytes, which need not be valid UTF-8 on their
// own (a byte token, half of a character).
func (t *Tokenizer) Piece(id int32) (string, error) {
	if id < 0 || int(id) >= len(t.pieces) {
		return "", fmt.Errorf("%w: %d (vocab has %d)", ErrID, id, len(t.pieces))
	}
	return t.pieces[id], nil
}

// Decode returns the bytes of ids as llama.cpp's llama_detokenize with
// remove_special=false and unparse_special=true gives them, without its
// clean_up_tokenization_spaces pass (which drops spaces and so is not exact):
// the pieces concatenated, except that a vocabulary that adds a space prefix
// (SentencePiece) loses one leading space of the first token, so that
// Decode(Encode(text)) == text. Special tokens are rendered as their text.
func (t *Tokenizer) Decode(ids []int32) ([]byte, error) {
	n := 0
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.pieces) {
			return nil, fmt.Errorf("%w: %d (vocab has %d)", ErrID, id, len(t.pieces))
		}
		n += len(t.pieces[id])
	}
	out := make([]byte, 0, n)
	for i, id := range ids {
		p := t.pieces[id]
		if i == 0 && t.addSpacePrefix && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		out = append(out, p...)
	}
	return out, nil
}

// StreamDecoder turns ids into text one at a time, as a generation loop
// produces them: it returns only complete UTF-8 characters and holds back an
// incomplete one until the bytes that finish it arrive. Bytes that cannot
// start or continue a character are passed through as they are, so nothing
// is ever lost. Its output, Flush included, is the concatenation of the ids'
// pieces (Piece), with no space removed.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder returns a decoder over t.
func NewStreamDecoder(t *Tokenizer) *StreamDecoder { return &StreamDecoder{t: t} }

// Write adds id and returns the bytes that are now complete. The returned
// slice is only valid until the next call.
func (d *StreamDecoder) Write(id int32) ([]byte, error) {
	p, err := d.t.Piece(id)
	if err != nil {
		return nil, err
	}
	d.pending = append(d.pending, p...)
	keep := incompleteTail(d.pending)
	n := len(d.pending) - keep
	out := make([]byte, n)
	copy(out, d.pending[:n])
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return out, nil
}

// Flush returns whatever is held back (an incomplete character at the end of
// the stream) and empties the decoder.
func (d *StreamDecoder) Flush() []byte {
	out := d.pending
	d.pending = nil
	return out
}

// incompleteTail returns how many bytes at the end of b are the start of a
// UTF-8 character that more bytes could still complete.
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0 // ASCII: complete
		}
		if c >= 0xC0 { // a lead byte k bytes from the end
			need := 0
			switch {
			case c >= 0xC2 && c <= 0xDF:
				need = 2
			case c >= 0xE0 && c <= 0xEF:
				need = 3
			case c >= 0xF0 && c <= 0xF4:
				need = 4
			default:
				return 0 // C0, C1, F5..FF never start a character
			}
			if k >= need {
				return 0
			}
			// The bytes after the lead must be a valid prefix of a character.
			if !utf8.FullRune(b[len(b)-k:]) && validPrefix(b[len(b)-k:]) {
				return k
			}
			return 0
		}
		// continuation byte: look further back
	}
	return 0
}

// validPrefix reports whether p (a lead byte and fewer continuation bytes
// than it needs) can still become a valid character.
func validPrefix(p []byte) bool {
	lo, hi := byte(0x80), byte(0xBF)
	switch p[0] {
	case 0xE0:
		lo = 0xA0
	case 0xED:
		hi = 0x9F
	case 0xF0:
		lo = 0x90
	case 0xF4:
		hi = 0x8F
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		if i == 1 {
			if c < lo || c > hi {
				return false
			}
		} else if c < 0x80 || c > 0xBF {
			return false
		}
	}
	return true
}
