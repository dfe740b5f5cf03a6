package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unicode"
	"unicode/utf8"
)

// This file checks the hand-written pre-tokenizer splits against a plain
// backtracking interpretation of the regexes llama.cpp names for them
// (leftmost alternative first, greedy quantifiers, look-ahead), with
// character classes taken straight from Go's unicode package. It is a
// second, independent implementation: the splits are written for speed, the
// oracle for being obviously the regex.

type rx interface{}

type (
	rxClass func(r rune) bool
	rxSeq   []rx
	rxAlt   []rx
	rxRep   struct {
		x        rx
		min, max int // max < 0: unbounded
	}
	rxNotAhead struct{ x rx }
)

// match calls k with every end position at which x matches from pos, in
// priority order, stopping when k returns true.
func rxMatch(x rx, s []rune, pos int, k func(int) bool) bool {
	switch x := x.(type) {
	case rxClass:
		return pos < len(s) && x(s[pos]) && k(pos+1)
	case rxSeq:
		if len(x) == 0 {
			return k(pos)
		}
		return rxMatch(x[0], s, pos, func(p int) bool { return rxMatch(x[1:], s, p, k) })
	case rxAlt:
		for _, a := range x {
			if rxMatch(a, s, pos, k) {
				return true
			}
		}
		return false
	case rxRep:
		var try func(n, p int) bool
		try = func(n, p int) bool {
			if x.max < 0 || n < x.max {
				if rxMatch(x.x, s, p, func(q int) bool { return q > p && try(n+1, q) }) {
					return true
				}
			}
			return n >= x.min && k(p)
		}
		return try(0, pos)
	case rxNotAhead:
		if rxMatch(x.x, s, pos, func(int) bool { return true }) {
			return false
		}
		return k(pos)
	}
	panic(fmt.Sprintf("rx: %T", x))
}

// rxSplit splits s as llama.cpp's regex split does: matches and the gaps
// between them.
func rxSplit(x rx, s []rune, ini, end int) []int {
	var out []int
	sub := s[:end]
	prev := ini
	for pos := ini; pos < end; {
		n := -1
		rxMatch(x, sub, pos, func(p int) bool { n = p; return true })
		if n <= pos {
			pos++
			continue
		}
		if pos > prev {
			out = append(out, pos)
		}
		out = append(out, n)
		pos, prev = n, n
	}
	if prev < end {
		out = append(out, end)
	}
	return out
}

func oWS(r rune) bool {
	return slices.Contains(whitespace, r)
}

var (
	oL     = rxClass(unicode.IsLetter)
	oN     = rxClass(func(r rune) bool { return unicode.In(r, unicode.N) })
	oM     = rxClass(func(r rune) bool { return unicode.In(r, unicode.M) })
	oP     = rxClass(func(r rune) bool { return unicode.In(r, unicode.P) })
	oS     = rxClass(oWS)
	oNotS  = rxClass(func(r rune) bool { return !oWS(r) })
	oCRLF  = rxClass(func(r rune) bool { return r == '\r' || r == '\n' })
	oSpace = rxClass(func(r rune) bool { return r == ' ' })
)

func lit(s string) rx {
	var q rxSeq
	for _, r := range s {
		q = append(q, rxClass(func(x rune) bool { return x == r }))
	}
	return q
}

// ilit is a literal matching ASCII letters in either case.
func ilit(s string) rx {
	var q rxSeq
	for _, r := range s {
		q = append(q, rxClass(func(x rune) bool { return x == r || x == unicode.ToUpper(r) && x < 128 }))
	}
	return q
}

func not(cs ...rxClass) rxClass {
	return func(r rune) bool {
		for _, c := range cs {
			if c(r) {
				return false
			}
		}
		return true
	}
}

func or(cs ...rxClass) rxClass {
	return func(r rune) bool {
		for _, c := range cs {
			if c(r) {
				return true
			}
		}
		return false
	}
}

func optional(x rx) rx      { return rxRep{x, 0, 1} }
func plus(x rx) rx          { return rxRep{x, 1, -1} }
func star(x rx) rx          { return rxRep{x, 0, -1} }
func rep(x rx, a, b int) rx { return rxRep{x, a, b} }

func contractions(ci bool) rx {
	l := lit
	if ci {
		l = ilit
	}
	return rxAlt{l("'s"), l("'t"), l("'re"), l("'ve"), l("'m"), l("'ll"), l("'d")}
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?W+|\p{N}{1,D}| ?[^\s\p{L}\p{N}X]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func oLlama3(d int, marks bool) rx {
	w := oL
	other := not(oS, oL, oN)
	if marks {
		w = or(oL, oM)
		other = not(oS, oL, oN, oM)
	}
	return rxAlt{
		contractions(true),
		rxSeq{optional(not(oCRLF, oL, oN)), plus(w)},
		rep(oN, 1, d),
		rxSeq{optional(oSpace), plus(other), star(oCRLF)},
		rxSeq{star(oS), plus(oCRLF)},
		rxSeq{plus(oS), rxNotAhead{oNotS}},
		plus(oS),
	}
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func oGPT2() rx {
	return rxAlt{
		contractions(false),
		rxSeq{optional(oSpace), plus(oL)},
		rxSeq{optional(oSpace), plus(oN)},
		rxSeq{optional(oSpace), plus(not(oS, oL, oN))},
		rxSeq{plus(oS), rxNotAhead{oNotS}},
		plus(oS),
	}
}

func inASCII(set string) rxClass {
	return func(r rune) bool { return r < 128 && slices.Contains([]byte(set), byte(r)) }
}

var oDigit = rxClass(func(r rune) bool { return r >= '0' && r <= '9' })

var oracles = map[string][]rx{
	"qwen2":     {oLlama3(1, false)},
	"qwen35":    {oLlama3(1, true)},
	"llama-bpe": {oLlama3(3, false)},
	"gpt-2":     {oGPT2()},
	"starcoder": {oN, oGPT2()},
	"falcon":    {plus(or(oP, inASCII("$+<=>^~|`"))), oGPT2(), rxSeq{oDigit, oDigit, oDigit}},
	"default":   {plus(or(oP, inASCII("$+<=>^~|"))), oGPT2(), plus(oN), rxSeq{oDigit, oDigit, oDigit}},
	"deepseek-coder": {
		oCRLF,
		rxSeq{optional(oS), plus(oL)},
		rxSeq{optional(oS), plus(oP)},
		plus(rxClass(func(r rune) bool {
			return !oWS(r) && ((r >= 0x4E00 && r <= 0x9FA5) || (r >= 0x0800 && r <= 0x4E00) || (r >= 0xAC00 && r <= 0xD7FF))
		})),
		oN,
	},
}

func oracleWords(name, text string) []string {
	s := []rune(text)
	ends := []int{len(s)}
	for _, x := range oracles[name] {
		var next []int
		prev := 0
		for _, e := range ends {
			next = append(next, rxSplit(x, s, prev, e)...)
			prev = e
		}
		ends = next
	}
	var words []string
	prev := 0
	for _, e := range ends {
		words = append(words, string(s[prev:e]))
		prev = e
	}
	return words
}

func splitWords(pt preTokenizer, text string) []string {
	cpFlagsOnce.Do(buildFlags)
	var c cps
	c.reset(text)
	ends := []int{len(c.cp)}
	for _, split := range pt.splits {
		var next []int
		prev := 0
		for _, e := range ends {
			next = split(&c, prev, e, next)
			prev = e
		}
		ends = next
	}
	var words []string
	prev := 0
	for _, e := range ends {
		words = append(words, text[c.off[prev]:c.off[e]])
		prev = e
	}
	return words
}

// alphabet mixes the classes the splits tell apart.
var alphabet = []rune("aZsStTrReEvVmMlLdD'' \t\r\n\v\f" +
	"0123456789²½Ⅻ" + ".,!?()-_/\\\"#$%&*+<=>^`|~{}[]@:;" +
	"\u00a0\u3000\u2003\u0085\u1680\u200b\u0301\u0308\u093f\u0915" +
	"éüйЖ中文字日本語한국어กัน🦙🚀😀\u0378\u0001\u001f\u007f" + "，。、！")

func randomText(r *rand.Rand, n int) string {
	var b []rune
	for range n {
		b = append(b, alphabet[r.IntN(len(alphabet))])
	}
	return string(b)
}

func TestSplitsMatchRegexOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	texts := []string{
		"", " ", "  ", "   a", "Hello world", " Hello  World!", "\n \n\n \t\t x", "I'm you'RE they'll",
		"3333333 12 1", "résumé naïve", "é", "a\u0301b", " \u0301", "\u0301\u0301a", "  \u0301",
		"你好，世界", "🦙.cpp", "x \r\n\r\n y", "'s's 's", "a  ", "a\t\n", "\u3000a", "(x)", " (x", "  ((x",
	}
	for range 3000 {
		texts = append(texts, randomText(r, 1+r.IntN(24)))
	}
	for name := range oracles {
		pt := preTokenizers[name]
		t.Run(name, func(t *testing.T) {
			for _, text := range texts {
				want := oracleWords(name, text)
				got := splitWords(pt, text)
				if !slices.Equal(want, got) {
					t.Errorf("split %s of %q:\n want %q\n  got %q", name, text, want, got)
				}
			}
		})
	}
}

func FuzzSplitsMatchRegexOracle(f *testing.F) {
	f.Add("Hello, y'all! How are you 😁 ?我想在apple工作1314151天～")
	f.Add("\n \n\n \t\t x 3333 a\u0301")
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) || len(text) > 256 {
			t.Skip()
		}
		for name := range oracles {
			want := oracleWords(name, text)
			got := splitWords(preTokenizers[name], text)
			if !slices.Equal(want, got) {
				t.Errorf("split %s of %q:\n want %q\n  got %q", name, text, want, got)
			}
		}
	})
}
