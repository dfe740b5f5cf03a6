package tokenizer

import (
	"fmt"
	"strings"
)

// fragment is a piece of the text to encode: raw text [start, end) or a
// special token found in it.
type fragment struct {
	token      int32 // none for raw text
	start, end int
}

// partition is llama.cpp's tokenizer_st_partition: for each special token,
// longest text first, every raw fragment is split around each occurrence of
// the token's text. Control and unknown-type tokens take part only when
// parseSpecial is set; user-defined tokens always do. A token with LSTRIP
// (RSTRIP) eats the whitespace before (after) it.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{token: none, start: 0, end: len(text)}}
	var next []fragment
	for _, id := range t.special {
		a := t.attrs[id]
		if !parseSpecial && a&(AttrControl|AttrUnknown) != 0 {
			continue
		}
		tok := t.tokens[id]
		found := false
		for _, f := range frags {
			if f.token == none && strings.Contains(text[f.start:f.end], tok) {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		next = next[:0]
		for _, f := range frags {
			if f.token != none {
				next = append(next, f)
				continue
			}
			start, end := f.start, f.end
			for start < end {
				i := strings.Index(text[start:end], tok)
				if i < 0 {
					break
				}
				m := start + i
				if m > start {
					l := m
					if a&AttrLStrip != 0 {
						for l > start && isCSpace(text[l-1]) {
							l--
						}
					}
					if l > start {
						next = append(next, fragment{token: none, start: start, end: l})
					}
				}
				next = append(next, fragment{token: id, start: m, end: m + len(tok)})
				start = m + len(tok)
				if a&AttrRStrip != 0 {
					for start < end && isCSpace(text[start]) {
						start++
					}
				}
			}
			if start < end {
				next = append(next, fragment{token: none, start: start, end: end})
			}
		}
		frags, next = next, frags
	}
	return frags
}

// MaxText is the longest text Encode takes (offsets are int32).
const MaxText = 1<<31 - 16

// Encode returns the token ids of text, as llama.cpp's llama_tokenize with
// add_special = opt.AddSpecial and parse_special = opt.ParseSpecial does.
func (t *Tokenizer) Encode(text string, opt Options) ([]int32, error) {
	if len(text) > MaxText {
		return nil, fmt.Errorf("%w: text of %d bytes is longer than %d", ErrEncode, len(text), MaxText)
	}
	e := t.scratch.Get().(*encoder)
	defer t.scratch.Put(e)
	frags := t.partition(text, opt.ParseSpecial)
	out := make([]int32, 0, len(text)/3+4)
	addBOS := opt.AddSpecial && t.addBOS && !opt.SkipBOS
	if addBOS {
		out = append(out, t.bos) // load checked bos exists when add_bos is set
	}
	switch t.kind {
	case kindSPM:
		prevSpecial := true // a space prefix goes before the first fragment
		for _, f := range frags {
			if f.token != none {
				out = append(out, f.token)
				prevSpecial = true
				continue
			}
			raw := text[f.start:f.end]
			if t.addSpacePrefix && prevSpecial {
				raw = " " + raw
			}
			var err error
			out, err = t.spm(e, strings.ReplaceAll(raw, " ", "▁"), out)
			if err != nil {
				return nil, err
			}
			prevSpecial = false
		}
	case kindBPE:
		for _, f := range frags {
			if f.token != none {
				out = append(out, f.token)
				continue
			}
			out = t.bpeFragment(e, text[f.start:f.end], out)
		}
	}
	if opt.AddSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out, nil
}

// spmSym is a SentencePiece symbol: bytes [start, start+n) of the text.
type spmSym struct {
	start, n   int32
	prev, next int32
}

type spmBigram struct {
	score       float32
	left, right int32
	size        int32
}

// spm appends the tokens of text (spaces already escaped as ▁) as
// llama.cpp's llm_tokenizer_spm_session does: start from UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the token with the
// highest score (leftmost on ties), then write each symbol as its token or,
// failing that, as byte tokens.
//
// llama.cpp runs this over the whole fragment at once. When no token has a ▁
// after anything but another ▁ (t.spmChunks, checked at load), no merge can
// join a symbol to a ▁ that follows a non-▁ symbol, so the text is cut
// before each such ▁ and the pieces are merged separately (and cached): the
// merges inside each piece, and their order, are the same as llama.cpp's.
func (t *Tokenizer) spm(e *encoder, text string, out []int32) ([]int32, error) {
	if !t.spmChunks {
		return t.spmChunk(e, text, out)
	}
	var err error
	start, prevSpace := 0, false
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		space := n == 3 && text[off:off+3] == "▁"
		if space && !prevSpace && off > start {
			if out, err = t.spmCached(e, text[start:off], out); err != nil {
				return nil, err
			}
			start = off
		}
		prevSpace = space
		off += n
	}
	return t.spmCached(e, text[start:], out)
}

func (t *Tokenizer) spmCached(e *encoder, chunk string, out []int32) ([]int32, error) {
	if toks, ok := e.cache.get(chunk); ok {
		return append(out, toks...), nil
	}
	start := len(out)
	out, err := t.spmChunk(e, chunk, out)
	if err != nil {
		return nil, err
	}
	e.cache.put(chunk, out[start:])
	return out, nil
}

// spmSplittable reports whether every ▁ in every token is at its start or
// right after another ▁ (see spm).
func spmSplittable(tokens []string) bool {
	for _, s := range tokens {
		for i := 1; i < len(s); i++ {
			if strings.HasPrefix(s[i:], "▁") && (i < 3 || s[i-3:i] != "▁") {
				return false
			}
		}
	}
	return true
}

func (t *Tokenizer) spmChunk(e *encoder, text string, out []int32) ([]int32, error) {
	syms := e.ssyms[:0]
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		idx := int32(len(syms))
		next := idx + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, spmSym{start: int32(off), n: int32(n), prev: idx - 1, next: next})
		off += n
	}
	heap := e.sheap[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		s := text[syms[l].start : syms[r].start+syms[r].n]
		id, ok := t.ids[s]
		if !ok {
			return
		}
		heap = spmPush(heap, spmBigram{score: t.scores[id], left: l, right: r, size: int32(len(s))})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(heap) > 0 {
		var b spmBigram
		b, heap = spmPop(heap)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	e.ssyms, e.sheap = syms, heap
	for i := int32(0); i >= 0 && int(i) < len(syms); i = syms[i].next {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(s); j++ {
			id := t.byteTok[s[j]]
			if id == none {
				return nil, fmt.Errorf("%w: byte 0x%02X has no byte token (<0x%02X>) in the vocabulary", ErrEncode, s[j], s[j])
			}
			out = append(out, id)
		}
	}
	return out, nil
}

func spmLess(a, b spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

func spmPush(h []spmBigram, b spmBigram) []spmBigram {
	h = append(h, b)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !spmLess(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func spmPop(h []spmBigram) (spmBigram, []spmBigram) {
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
		if r := l + 1; r < len(h) && spmLess(h[r], h[l]) {
			m = r
		}
		if !spmLess(h[m], h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}
