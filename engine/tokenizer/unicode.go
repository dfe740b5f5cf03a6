package tokenizer

import (
	"sync"
	"unicode"
)

// Character flags as llama.cpp's unicode_cpt_flags sees them: exactly one
// category per code point, plus a separate whitespace bit.
const (
	catUndefined uint8 = 1 << iota // unassigned, or past U+10FFFF
	catNumber                      // \p{N}
	catLetter                      // \p{L}
	catSeparator                   // \p{Z} (all of which are also whitespace)
	catMark                        // \p{M}
	catPunct                       // \p{P}
	catSymbol                      // \p{S}
	catControl                     // \p{C}: Cc, Cf, Co, Cs
)

// flagWS is kept apart from the categories: a code point is whitespace in
// addition to its category.
const flagWS uint16 = 1 << 8

const maxCodepoint = 0x110000

var (
	cpFlagsOnce sync.Once
	cpFlags     []uint16 // indexed by code point, len maxCodepoint
)

// whitespace is the White_Space property, the set llama.cpp's generator took
// from Python's regex \s.
var whitespace = []rune{
	0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
	0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
	0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
}

func buildFlags() {
	f := make([]uint16, maxCodepoint)
	for i := range f {
		f[i] = uint16(catUndefined)
	}
	set := func(t *unicode.RangeTable, c uint8) {
		for _, r := range t.R16 {
			for x := uint32(r.Lo); x <= uint32(r.Hi); x += uint32(r.Stride) {
				f[x] = uint16(c)
			}
		}
		for _, r := range t.R32 {
			for x := r.Lo; x <= r.Hi; x += r.Stride {
				f[x] = uint16(c)
			}
		}
	}
	set(unicode.C, catControl) // Cc Cf Co Cs
	set(unicode.L, catLetter)
	set(unicode.M, catMark)
	set(unicode.N, catNumber)
	set(unicode.P, catPunct)
	set(unicode.S, catSymbol)
	set(unicode.Z, catSeparator)
	for _, r := range whitespace {
		f[r] |= flagWS
	}
	cpFlags = f
}

// flagsOf returns the flags of code point c.
func flagsOf(c rune) uint16 {
	if c < 0 || c >= maxCodepoint {
		return uint16(catUndefined)
	}
	return cpFlags[c]
}

// decodeLax decodes one code point at b[i:] the way llama.cpp's
// unicode_cpt_from_utf8 does: it checks lead and continuation bits only (so it
// accepts overlong forms, surrogates and values up to 0x1FFFFF). An invalid
// sequence yields U+FFFD and a length of 1, as unicode_cpts_from_utf8 does.
func decodeLax(b string, i int) (rune, int) {
	c := b[i]
	switch {
	case c < 0x80:
		return rune(c), 1
	case c&0x40 == 0:
		return 0xFFFD, 1
	case c&0x20 == 0:
		if i+1 < len(b) && b[i+1]&0xC0 == 0x80 {
			return rune(c&0x1F)<<6 | rune(b[i+1]&0x3F), 2
		}
	case c&0x10 == 0:
		if i+2 < len(b) && b[i+1]&0xC0 == 0x80 && b[i+2]&0xC0 == 0x80 {
			return rune(c&0x0F)<<12 | rune(b[i+1]&0x3F)<<6 | rune(b[i+2]&0x3F), 3
		}
	case c&0x08 == 0:
		if i+3 < len(b) && b[i+1]&0xC0 == 0x80 && b[i+2]&0xC0 == 0x80 && b[i+3]&0xC0 == 0x80 {
			return rune(c&0x07)<<18 | rune(b[i+1]&0x3F)<<12 | rune(b[i+2]&0x3F)<<6 | rune(b[i+3]&0x3F), 4
		}
	}
	return 0xFFFD, 1
}

// utf8Len is llama.cpp's unicode_len_utf8: the length a lead byte announces,
// 1 for continuation bytes.
func utf8Len(c byte) int {
	return [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[c>>4]
}

// isCSpace is C's isspace in the "C" locale, which llama.cpp uses to strip
// around special tokens (LSTRIP/RSTRIP).
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
