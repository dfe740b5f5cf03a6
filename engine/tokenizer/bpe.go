package tokenizer

import (
	"hash/maphash"
	"strings"
	"unicode/utf8"

	"github.com/aprqa/apr/engine/gguf"
)

// byteToUnicode is GPT-2's byte-level alphabet: printable bytes stand for
// themselves, the others (controls, space, DEL, NBSP, soft hyphen) for
// U+0100 onwards in byte order. unicodeToByte inverts it.
var (
	byteToUnicode [256]rune
	unicodeToByte [324]int16 // -1 where a code point is no byte-level character
	byteToUTF8    [256]string
)

func init() {
	for i := range unicodeToByte {
		unicodeToByte[i] = -1
	}
	n := 0
	for b := range 256 {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToUnicode[b] = rune(b)
		} else {
			byteToUnicode[b] = rune(256 + n)
			n++
		}
		unicodeToByte[byteToUnicode[b]] = int16(b)
		byteToUTF8[b] = string(byteToUnicode[b])
	}
}

// byteLevel returns word in GPT-2's byte-level alphabet.
func byteLevel(dst []byte, word string) []byte {
	for i := 0; i < len(word); i++ {
		dst = utf8.AppendRune(dst, byteToUnicode[word[i]])
	}
	return dst
}

// mergeTable maps a pair of symbols to the rank of their merge; results
// holds, by rank, the symbol the merge makes. Symbols are interned strings:
// ids below len(tokens) are tokens, the others strings that occur only in
// merges. The pairs live in an open-addressing hash table (linear probing, at
// most half full) of 8-byte slots, left<<44 | right<<24 | rank: lookups are
// the inner loop of BPE and mostly miss the CPU caches, so the table is kept
// small.
type mergeTable struct {
	slots   []uint64
	mask    uint64
	results []int32
}

const (
	symBits     = 20
	maxSymbols  = 1<<symBits - 1 // the all-ones pair marks an empty slot
	rankBits    = 24
	maxMerges   = 1 << rankBits
	emptySlot   = ^uint64(0)
	rankMask    = 1<<rankBits - 1
	pairKeyMask = ^uint64(0) >> rankBits
)

func pairKey(l, r int32) uint64 { return uint64(l)<<symBits | uint64(r) }

func mix(k uint64) uint64 {
	k *= 0x9E3779B97F4A7C15
	return k ^ k>>32
}

func newMergeTable(n int) mergeTable {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	slots := make([]uint64, size)
	for i := range slots {
		slots[i] = emptySlot
	}
	return mergeTable{slots: slots, mask: uint64(size - 1), results: make([]int32, 0, n)}
}

// rank returns the rank of merging l and r.
func (m *mergeTable) rank(l, r int32) (int32, bool) {
	k := pairKey(l, r)
	for i := mix(k) & m.mask; ; i = (i + 1) & m.mask {
		s := m.slots[i]
		if s>>rankBits == k {
			return int32(s & rankMask), true
		}
		if s == emptySlot {
			return 0, false
		}
	}
}

// add records merge number len(results) of l and r into result, unless the
// pair is already there (the first merge counts).
func (m *mergeTable) add(l, r, result int32) {
	rank := uint64(len(m.results))
	m.results = append(m.results, result)
	k := pairKey(l, r)
	for i := mix(k) & m.mask; ; i = (i + 1) & m.mask {
		s := m.slots[i]
		if s>>rankBits == k {
			return
		}
		if s == emptySlot {
			m.slots[i] = k<<rankBits | rank
			return
		}
	}
}

// loadMerges reads tokenizer.ggml.merges as llama.cpp does: each entry is
// split at its first space after the first byte; an entry without one is the
// pair ("", ""); of duplicate pairs the first (lowest rank) counts.
func (t *Tokenizer) loadMerges(f *gguf.File) error {
	const key = "tokenizer.ggml.merges"
	v, ok := f.Get(key)
	if !ok {
		return vocabErr(key, "missing (a gpt2 vocabulary needs its merges)")
	}
	merges, ok := v.Strings()
	if !ok {
		return vocabErr(key, "not an array of strings (%s)", v.TypeName())
	}
	if len(t.tokens) >= maxSymbols {
		return vocabErr("tokenizer.ggml.tokens", "%d tokens; apr's byte-level BPE takes at most %d", len(t.tokens), maxSymbols-1)
	}
	if len(merges) >= maxMerges {
		return vocabErr(key, "%d merges; apr ranks at most %d", len(merges), maxMerges-1)
	}
	return t.buildMerges(merges)
}

func (t *Tokenizer) buildMerges(merges []string) error {
	n := int32(len(t.tokens))
	extra := map[string]int32{}
	intern := func(s string) int32 {
		if id, ok := t.ids[s]; ok {
			return id
		}
		if id, ok := extra[s]; ok {
			return id
		}
		id := n + int32(len(extra))
		if id >= maxSymbols {
			return maxSymbols // reported below
		}
		extra[s] = id
		return id
	}
	t.merges = newMergeTable(len(merges))
	for _, m := range merges {
		var first, second string
		if len(m) > 1 {
			if i := strings.IndexByte(m[1:], ' '); i >= 0 {
				first, second = m[:i+1], m[i+2:]
			}
		}
		l, r := intern(first), intern(second)
		res := none
		if _, dup := t.merges.rank(l, r); !dup {
			res = intern(first + second)
		}
		if l == maxSymbols || r == maxSymbols || res == maxSymbols {
			return vocabErr("tokenizer.ggml.merges", "tokens and merge parts make more than %d symbols", maxSymbols-1)
		}
		t.merges.add(l, r, res)
	}
	t.symTok = make([]int32, int(n)+len(extra))
	for i := range t.symTok {
		t.symTok[i] = none
		if i < int(n) {
			t.symTok[i] = int32(i)
		}
	}
	for b := range 256 {
		t.byteSym[b] = none
		s := byteToUTF8[b]
		if id, ok := t.ids[s]; ok {
			t.byteSym[b] = id
		} else if id, ok := extra[s]; ok {
			t.byteSym[b] = id
		}
		t.singleByte[b] = none
		if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.singleByte[b] = id
		}
	}
	return nil
}

// bpeSym is one symbol of a word being merged: the bytes [start, start+n) of
// the word, n == 0 once merged into its left neighbour.
type bpeSym struct {
	id         int32
	start, n   int32
	prev, next int32
}

// bigram is a candidate merge of symbols left and right.
type bigram struct {
	rank, left, right int32
	lid, rid          int32
}

// encoder is per-call scratch space.
type encoder struct {
	c     cps
	ends  []int
	ends2 []int
	syms  []bpeSym
	heap  []bigram
	buf   []byte
	ssyms []spmSym
	sheap []spmBigram
	cache wordCache
}

func less(a, b bigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

func (e *encoder) push(b bigram) {
	h := append(e.heap, b)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	e.heap = h
}

func (e *encoder) pop() bigram {
	h := e.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			m = r
		}
		if !less(h[m], h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	e.heap = h
	return top
}

func (t *Tokenizer) addBigram(e *encoder, left, right int32) {
	if left < 0 || right < 0 {
		return
	}
	l, r := e.syms[left].id, e.syms[right].id
	if l < 0 || r < 0 {
		return
	}
	rank, ok := t.merges.rank(l, r)
	if !ok {
		return
	}
	e.push(bigram{rank: rank, left: left, right: right, lid: l, rid: r})
}

// bpeWord appends the tokens of one pre-tokenized word (raw bytes), as
// llama.cpp's llm_tokenizer_bpe_session does: merges by lowest rank, then
// leftmost; a final symbol that is no token falls back to the tokens of its
// single (byte-level encoded) bytes, and is dropped where there are none.
func (t *Tokenizer) bpeWord(e *encoder, word string, out []int32) []int32 {
	if t.pretok.ignoreMerges {
		e.buf = byteLevel(e.buf[:0], word)
		if id, ok := t.ids[string(e.buf)]; ok {
			return append(out, id)
		}
	}
	if len(word) == 1 {
		if id := t.byteSym[word[0]]; id >= 0 && t.symTok[id] >= 0 {
			return append(out, t.symTok[id])
		}
	}
	if toks, ok := e.cache.get(word); ok {
		return append(out, toks...)
	}
	start := len(out)
	e.syms = e.syms[:0]
	e.heap = e.heap[:0]
	n := int32(len(word))
	for i := int32(0); i < n; i++ {
		next := i + 1
		if next == n {
			next = -1
		}
		e.syms = append(e.syms, bpeSym{id: t.byteSym[word[i]], start: i, n: 1, prev: i - 1, next: next})
	}
	for i := int32(1); i < n; i++ {
		t.addBigram(e, i-1, i)
	}
	for len(e.heap) > 0 {
		b := e.pop()
		l, r := &e.syms[b.left], &e.syms[b.right]
		if l.n == 0 || r.n == 0 || l.id != b.lid || r.id != b.rid {
			continue
		}
		l.id = t.merges.results[b.rank]
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			e.syms[r.next].prev = b.left
		}
		t.addBigram(e, l.prev, b.left)
		t.addBigram(e, b.left, l.next)
	}
	for i := int32(0); i >= 0; i = e.syms[i].next {
		s := e.syms[i]
		if s.id >= 0 && t.symTok[s.id] >= 0 {
			out = append(out, t.symTok[s.id])
			continue
		}
		e.buf = byteLevel(e.buf[:0], word[s.start:s.start+s.n])
		for _, c := range e.buf {
			if id := t.singleByte[c]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	e.cache.put(word, out[start:])
	return out
}

// bpeFragment appends the tokens of a raw text fragment: pre-tokenize, then
// BPE each word.
func (t *Tokenizer) bpeFragment(e *encoder, text string, out []int32) []int32 {
	c := &e.c
	c.reset(text)
	ends := append(e.ends[:0], len(c.cp))
	for _, split := range t.pretok.splits {
		next := e.ends2[:0]
		prev := 0
		for _, end := range ends {
			next = split(c, prev, end, next)
			prev = end
		}
		ends, e.ends2 = next, ends
	}
	e.ends = ends
	prev := 0
	for _, end := range ends {
		out = t.bpeWord(e, text[c.off[prev]:c.off[end]], out)
		prev = end
	}
	return out
}

// wordCache remembers the tokens of words (BPE) or chunks (SPM) already
// encoded. Each encoder owns one, so it takes no lock; words and tokens live
// in two arenas and the map holds only offsets, so a miss allocates nothing
// (amortized). It starts over when full.
type wordCache struct {
	seed  maphash.Seed
	m     map[uint64]cacheRef
	words []byte
	toks  []int32
}

type cacheRef struct {
	w, wn, t, tn int32
}

const (
	wordCacheEntries = 1 << 16
	wordCacheMaxLen  = 256
)

func (c *wordCache) get(w string) ([]int32, bool) {
	if len(w) > wordCacheMaxLen || c.m == nil {
		return nil, false
	}
	r, ok := c.m[maphash.String(c.seed, w)]
	if !ok || string(c.words[r.w:r.w+r.wn]) != w {
		return nil, false
	}
	return c.toks[r.t : r.t+r.tn], true
}

func (c *wordCache) put(w string, toks []int32) {
	if len(w) > wordCacheMaxLen {
		return
	}
	if c.m == nil {
		c.seed = maphash.MakeSeed()
		c.m = make(map[uint64]cacheRef, 1024)
	}
	if len(c.m) >= wordCacheEntries || len(c.words)+len(w) > 1<<30 || len(c.toks)+len(toks) > 1<<30 {
		clear(c.m)
		c.words, c.toks = c.words[:0], c.toks[:0]
	}
	c.m[maphash.String(c.seed, w)] = cacheRef{
		w: int32(len(c.words)), wn: int32(len(w)),
		t: int32(len(c.toks)), tn: int32(len(toks)),
	}
	c.words = append(c.words, w...)
	c.toks = append(c.toks, toks...)
}
