package tokenizer

// Pre-tokenizers split a text fragment into words before byte-level BPE.
// llama.cpp (llama-vocab.cpp, llm_tokenizer_bpe) names a list of regexes per
// pre-tokenizer type and applies them one after another: each regex splits
// every piece the previous ones left into its matches and the gaps between
// them. Some regexes run through hand-written splitters in unicode.cpp, the
// others through std::regex over a text whose non-ASCII code points are
// collapsed to one representative per category. Each splitter below is the
// behaviour of one of those regexes, written out by hand (Go's regexp has no
// look-ahead); the llama.cpp vocabulary test vectors prove them.

// cps is a fragment decoded into code points, with the byte offset of each.
type cps struct {
	text string
	cp   []rune
	fl   []uint16
	off  []int32 // off[i] is the byte offset of cp[i]; off[len(cp)] == len(text)
}

func (c *cps) reset(text string) {
	c.text = text
	if cap(c.off) < len(text)+1 {
		c.cp = make([]rune, 0, len(text))
		c.fl = make([]uint16, 0, len(text))
		c.off = make([]int32, 0, len(text)+1)
	}
	c.cp = c.cp[:0]
	c.fl = c.fl[:0]
	c.off = c.off[:0]
	for i := 0; i < len(text); {
		var r rune
		var n int
		if b := text[i]; b < 0x80 {
			r, n = rune(b), 1
		} else {
			r, n = decodeLax(text, i)
		}
		c.cp = append(c.cp, r)
		c.fl = append(c.fl, flagsOf(r))
		c.off = append(c.off, int32(i))
		i += n
	}
	c.off = append(c.off, int32(len(text)))
}

// splitFunc splits code points [ini, end) and appends the end index of each
// piece to out (pieces are never empty).
type splitFunc func(c *cps, ini, end int, out []int) []int

// preTokenizer is an ordered list of splits.
type preTokenizer struct {
	name         string
	splits       []splitFunc
	ignoreMerges bool // a word that is a whole token is taken as is (llama.cpp ignore_merges)
	addBOS       bool // the type's default for add_bos (the file's key overrides it)
}

const outOfRange = rune(-1)

func (c *cps) at(pos, ini, end int) rune {
	if pos >= ini && pos < end {
		return c.cp[pos]
	}
	return outOfRange
}

// flags returns the flags at pos, or 0 outside [ini, end) (llama.cpp's
// default-constructed flags there).
func (c *cps) flags(pos, ini, end int) uint16 {
	if pos >= ini && pos < end {
		return c.fl[pos]
	}
	return 0
}

func isLetter(f uint16) bool { return f&uint16(catLetter) != 0 }
func isNumber(f uint16) bool { return f&uint16(catNumber) != 0 }
func isMark(f uint16) bool   { return f&uint16(catMark) != 0 }
func isPunct(f uint16) bool  { return f&uint16(catPunct) != 0 }
func isWS(f uint16) bool     { return f&flagWS != 0 }

// splitGPT2 is llama.cpp's unicode_regex_split_custom_gpt2, the splitter for
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(c *cps, ini, end int, out []int) []int {
	for pos := ini; pos < end; {
		cpt := c.cp[pos]
		fl := c.fl[pos]
		if cpt == '\'' && pos+1 < end {
			n := c.cp[pos+1]
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += 2
				out = append(out, pos)
				continue
			}
			if pos+2 < end {
				nn := c.cp[pos+2]
				if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
					pos += 3
					out = append(out, pos)
					continue
				}
			}
		}
		fl2 := fl
		sp := 0
		if cpt == ' ' {
			fl2 = c.flags(pos+1, ini, end)
			sp = 1
		}
		if isLetter(fl2) {
			pos += sp
			for isLetter(c.flags(pos, ini, end)) {
				pos++
			}
			out = append(out, pos)
			continue
		}
		if isNumber(fl2) {
			pos += sp
			for isNumber(c.flags(pos, ini, end)) {
				pos++
			}
			out = append(out, pos)
			continue
		}
		if isOther(fl2, false) {
			pos += sp
			for isOther(c.flags(pos, ini, end), false) {
				pos++
			}
			out = append(out, pos)
			continue
		}
		nws := 0
		for isWS(c.flags(pos+nws, ini, end)) {
			nws++
		}
		if nws > 1 && pos+nws < end {
			pos += nws - 1
			out = append(out, pos)
			continue
		}
		if nws > 0 {
			pos += nws
			out = append(out, pos)
			continue
		}
		pos++
		out = append(out, pos)
	}
	return out
}

// isOther is [^\s\p{L}\p{N}] (and \p{M} too when marks is set) for a code
// point inside the fragment (flags 0 means outside).
func isOther(f uint16, marks bool) bool {
	if f == 0 || isWS(f) || isLetter(f) || isNumber(f) {
		return false
	}
	return !(marks && isMark(f))
}

// llama3Rules parameterizes the family of regexes shared by llama3, qwen2
// and qwen35:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?W+|\p{N}{1,D}| ?[^\s\p{L}\p{N}X]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// where W is \p{L} (or [\p{L}\p{M}] with marks), X is \p{M} with marks, and D
// is maxDigits. llama.cpp's unicode_regex_split_custom_llama3 is this with
// D=3; the qwen2 and qwen35 regexes are it with D=1 (and marks for qwen35).
type llama3Rules struct {
	maxDigits int
	marks     bool
}

func (r llama3Rules) split(c *cps, ini, end int, out []int) []int {
	word := func(f uint16) bool { return isLetter(f) || (r.marks && isMark(f)) }
	for pos := ini; pos < end; {
		cpt := c.cp[pos]
		fl := c.fl[pos]
		// (?i:'s|'t|'re|'ve|'m|'ll|'d)
		if cpt == '\'' && pos+1 < end {
			n := asciiLower(c.cp[pos+1])
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += 2
				out = append(out, pos)
				continue
			}
			if pos+2 < end {
				nn := asciiLower(c.cp[pos+2])
				if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
					pos += 3
					out = append(out, pos)
					continue
				}
			}
		}
		// [^\r\n\p{L}\p{N}]?W+
		if !(cpt == '\r' || cpt == '\n' || isNumber(fl)) {
			if word(fl) || word(c.flags(pos+1, ini, end)) {
				pos++
				for word(c.flags(pos, ini, end)) {
					pos++
				}
				out = append(out, pos)
				continue
			}
		}
		// \p{N}{1,D}
		if isNumber(fl) {
			start := pos
			for isNumber(c.flags(pos, ini, end)) {
				pos++
				if pos-start >= r.maxDigits {
					out = append(out, pos)
					start = pos
				}
			}
			if pos > start {
				out = append(out, pos)
			}
			continue
		}
		//  ?[^\s\p{L}\p{N}X]+[\r\n]*
		fl2 := fl
		if cpt == ' ' {
			fl2 = c.flags(pos+1, ini, end)
		}
		if !(isWS(fl2) || isLetter(fl2) || isNumber(fl2) || (r.marks && isMark(fl2))) && fl != 0 {
			if cpt == ' ' {
				pos++
			}
			for isOther(c.flags(pos, ini, end), r.marks) {
				pos++
			}
			for x := c.at(pos, ini, end); x == '\r' || x == '\n'; x = c.at(pos, ini, end) {
				pos++
			}
			out = append(out, pos)
			continue
		}
		nws, lastNL := 0, 0
		for isWS(c.flags(pos+nws, ini, end)) {
			if x := c.cp[pos+nws]; x == '\r' || x == '\n' {
				lastNL = pos + nws + 1
			}
			nws++
		}
		// \s*[\r\n]+
		if lastNL > 0 {
			pos = lastNL
			out = append(out, pos)
			continue
		}
		// \s+(?!\S)
		if nws > 1 && pos+nws < end {
			pos += nws - 1
			out = append(out, pos)
			continue
		}
		// \s+
		if nws > 0 {
			pos += nws
			out = append(out, pos)
			continue
		}
		pos++
		out = append(out, pos)
	}
	return out
}

func asciiLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + ('a' - 'A')
	}
	return r
}

// searchSplit turns a matcher into a split with std::regex_iterator's
// semantics: find the leftmost match from the current position, emit the gap
// before it (if any) and the match, continue after the match; what is left
// after the last match is one more piece. match returns the length of the
// match at pos, 0 for none (none of these regexes matches the empty string).
func searchSplit(match func(c *cps, pos, end int) int) splitFunc {
	return func(c *cps, ini, end int, out []int) []int {
		prev := ini
		for pos := ini; pos < end; {
			n := match(c, pos, end)
			if n == 0 {
				pos++
				continue
			}
			if pos > prev {
				out = append(out, pos)
			}
			pos += n
			out = append(out, pos)
			prev = pos
		}
		if prev < end {
			out = append(out, end)
		}
		return out
	}
}

// runOf matches class+ (a maximal run).
func runOf(class func(c *cps, i int) bool) splitFunc {
	return searchSplit(func(c *cps, pos, end int) int {
		n := 0
		for pos+n < end && class(c, pos+n) {
			n++
		}
		return n
	})
}

// oneOf matches a single code point of class.
func oneOf(class func(c *cps, i int) bool) splitFunc {
	return searchSplit(func(c *cps, pos, end int) int {
		if class(c, pos) {
			return 1
		}
		return 0
	})
}

// wsOptRun matches \s?class+ (greedy, backtracking as ECMAScript does).
func wsOptRun(class func(c *cps, i int) bool) splitFunc {
	return searchSplit(func(c *cps, pos, end int) int {
		start := pos
		if isWS(c.fl[pos]) {
			if pos+1 < end && class(c, pos+1) {
				pos++
			} else {
				return 0 // \s? empty would need class at pos, which is whitespace
			}
		}
		n := 0
		for pos+n < end && class(c, pos+n) {
			n++
		}
		if n == 0 {
			return 0
		}
		return pos + n - start
	})
}

// asciiDigits3 matches [0-9][0-9][0-9].
func asciiDigits3(c *cps, pos, end int) int {
	if pos+3 > end {
		return 0
	}
	for i := pos; i < pos+3; i++ {
		if c.cp[i] < '0' || c.cp[i] > '9' {
			return 0
		}
	}
	return 3
}

func classN(c *cps, i int) bool { return isNumber(c.fl[i]) }
func classL(c *cps, i int) bool { return isLetter(c.fl[i]) }
func classP(c *cps, i int) bool { return isPunct(c.fl[i]) }
func classCRLF(c *cps, i int) bool {
	return c.cp[i] == '\r' || c.cp[i] == '\n'
}

// classPunctSym returns [\p{P}extra] where extra are ASCII characters.
func classPunctSym(extra string) func(c *cps, i int) bool {
	var set [128]bool
	for i := 0; i < len(extra); i++ {
		set[extra[i]] = true
	}
	return func(c *cps, i int) bool {
		r := c.cp[i]
		return isPunct(c.fl[i]) || (r >= 0 && r < 128 && set[r])
	}
}

// classDeepseekCJK is [一-龥ࠀ-一가-퟿] as std::wregex sees it: llama.cpp
// replaces non-ASCII whitespace by 0x0B first, so U+3000 does not match.
func classDeepseekCJK(c *cps, i int) bool {
	r := c.cp[i]
	if isWS(c.fl[i]) {
		return false
	}
	return (r >= 0x4E00 && r <= 0x9FA5) || (r >= 0x0800 && r <= 0x4E00) || (r >= 0xAC00 && r <= 0xD7FF)
}

// preTokenizers maps tokenizer.ggml.pre values to their splits and flags,
// following llama.cpp's llama_vocab::impl::load (names, flags) and
// llm_tokenizer_bpe (regexes) at the fixtures' commit. Names whose llama.cpp
// handling needs more than a split (add_sep, whitespace, SPM-style BPE) are
// left out and so refused.
var preTokenizers = map[string]preTokenizer{}

func init() {
	gpt2 := splitFunc(splitGPT2)
	llama3 := splitFunc(llama3Rules{maxDigits: 3}.split)
	qwen2 := splitFunc(llama3Rules{maxDigits: 1}.split)
	qwen35 := splitFunc(llama3Rules{maxDigits: 1, marks: true}.split)
	reg := func(t preTokenizer, names ...string) {
		for _, n := range names {
			t.name = n
			preTokenizers[n] = t
		}
	}
	// default: [\p{P}\$\+<=>\^~\|]+, gpt2, \p{N}+, [0-9][0-9][0-9]
	reg(preTokenizer{splits: []splitFunc{
		runOf(classPunctSym("$+<=>^~|")), gpt2, runOf(classN), searchSplit(asciiDigits3),
	}}, "default")
	// LLAMA3: ignore_merges, add_bos.
	reg(preTokenizer{splits: []splitFunc{llama3}, ignoreMerges: true, addBOS: true},
		"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano")
	// DBRX, SMAUG: the llama3 regex without the llama3 flags.
	reg(preTokenizer{splits: []splitFunc{llama3}}, "dbrx", "smaug-bpe")
	// DEEPSEEK_CODER: [\r\n], \s?\p{L}+, \s?\p{P}+, [一-龥ࠀ-一가-퟿]+, \p{N}
	reg(preTokenizer{splits: []splitFunc{
		oneOf(classCRLF), wsOptRun(classL), wsOptRun(classP), runOf(classDeepseekCJK), oneOf(classN),
	}}, "deepseek-coder")
	// FALCON: [\p{P}\$\+<=>\^~\|`]+, gpt2, [0-9][0-9][0-9]
	reg(preTokenizer{splits: []splitFunc{
		runOf(classPunctSym("$+<=>^~|`")), gpt2, searchSplit(asciiDigits3),
	}}, "falcon")
	// STARCODER and the types sharing its regexes: \p{N}, gpt2
	reg(preTokenizer{splits: []splitFunc{oneOf(classN), gpt2}},
		"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2")
	// GPT2 and the types sharing its regex.
	reg(preTokenizer{splits: []splitFunc{gpt2}},
		"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
		"modern-bert", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling")
	// QWEN2 and the types sharing its regex.
	reg(preTokenizer{splits: []splitFunc{qwen2}},
		"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open")
	reg(preTokenizer{splits: []splitFunc{qwen35}}, "qwen35")
}
