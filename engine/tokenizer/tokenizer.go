package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/refuse"
)

// ErrVocab marks a GGUF whose tokenizer.ggml.* keys are missing or malformed.
var ErrVocab = errors.New("tokenizer: bad vocabulary")

// ErrEncode marks a text that the vocabulary cannot encode (an SPM vocabulary
// without the byte token a byte needs), or an id Decode does not know.
var ErrEncode = errors.New("tokenizer: cannot encode")

// ErrID marks a token id outside the vocabulary.
var ErrID = errors.New("tokenizer: token id out of range")

// Attr is a token's attribute set, llama.cpp's llama_token_attr.
type Attr uint32

// Token attributes (llama.h's LLAMA_TOKEN_ATTR_*).
const (
	AttrUndefined   Attr = 0
	AttrUnknown     Attr = 1 << 0
	AttrUnused      Attr = 1 << 1
	AttrNormal      Attr = 1 << 2
	AttrControl     Attr = 1 << 3
	AttrUserDefined Attr = 1 << 4
	AttrByte        Attr = 1 << 5
	AttrNormalized  Attr = 1 << 6
	AttrLStrip      Attr = 1 << 7
	AttrRStrip      Attr = 1 << 8
	AttrSingleWord  Attr = 1 << 9
)

// Model kinds.
const (
	kindSPM = iota + 1 // tokenizer.ggml.model = "llama"
	kindBPE            // tokenizer.ggml.model = "gpt2"
)

// none is llama.cpp's LLAMA_TOKEN_NULL.
const none int32 = -1

// Options says how Encode treats a text.
type Options struct {
	// AddSpecial adds BOS and EOS exactly as the model's add_bos/add_eos
	// flags say (llama.cpp's add_special).
	AddSpecial bool
	// ParseSpecial matches the text of control tokens (and unknown-type
	// tokens) in the text, as llama.cpp's parse_special. User-defined tokens
	// are matched either way, as llama.cpp does.
	ParseSpecial bool
	// SkipBOS leaves out the BOS that AddSpecial would add (EOS still
	// follows the model's flag).
	SkipBOS bool
}

// Tokenizer encodes and decodes one vocabulary. It is immutable after New
// and safe for concurrent use.
type Tokenizer struct {
	kind  int
	model string // tokenizer.ggml.model
	pre   string // tokenizer.ggml.pre as used ("default" when the file has none)

	tokens []string
	scores []float32
	attrs  []Attr
	ids    map[string]int32
	pieces []string // token_to_piece(id, special=true)

	bos, eos, eot, eom, unk, sep, pad, mask        int32
	fimPre, fimSuf, fimMid, fimPad, fimRep, fimSep int32

	addBOS, addEOS, addSpacePrefix bool
	eogs                           []int32 // sorted
	special                        []int32 // special-token cache: longest text first
	warnings                       []string

	// byte-level BPE
	pretok     preTokenizer
	merges     mergeTable
	byteSym    [256]int32 // symbol of each byte's byte-level character, or none
	symTok     []int32    // symbol → token id (none for strings that are only merge parts)
	singleByte [256]int32 // token of the one-byte string (llama.cpp's fallback), or none

	// SentencePiece
	byteTok   [256]int32 // token for byte fallback (<0xXX>, else the 1-byte string), or none
	spmChunks bool       // the text may be cut before a ▁ that follows a non-▁ (see spm)

	scratch sync.Pool
}

// New builds the tokenizer of f from its tokenizer.ggml.* keys. A model or
// pre-tokenizer apr does not implement is refused by name; missing or
// malformed keys give an error wrapping ErrVocab that names the key.
func New(f *gguf.File) (*Tokenizer, error) {
	cpFlagsOnce.Do(buildFlags)
	t := &Tokenizer{
		bos: none, eos: none, eot: none, eom: none, unk: none, sep: none, pad: none, mask: none,
		fimPre: none, fimSuf: none, fimMid: none, fimPad: none, fimRep: none, fimSep: none,
	}
	if err := t.load(f); err != nil {
		return nil, err
	}
	return t, nil
}

func vocabErr(key, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrVocab, key, fmt.Sprintf(format, args...))
}

func (t *Tokenizer) warnf(format string, args ...any) {
	t.warnings = append(t.warnings, fmt.Sprintf(format, args...))
}

// Warnings lists what llama.cpp would warn about while loading this
// vocabulary (a missing pre-tokenizer, an out-of-range special id, …).
func (t *Tokenizer) Warnings() []string { return slices.Clone(t.warnings) }

func (t *Tokenizer) load(f *gguf.File) error {
	model, ok := f.String("tokenizer.ggml.model")
	if !ok {
		if _, present := f.Get("tokenizer.ggml.model"); present {
			return vocabErr("tokenizer.ggml.model", "not a string")
		}
		return vocabErr("tokenizer.ggml.model", "missing")
	}
	t.model = model
	pre, hasPre := f.String("tokenizer.ggml.pre")
	switch model {
	case "llama":
		t.kind = kindSPM
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addSpacePrefix = true
		t.addBOS = true
		t.pre = pre
	case "gpt2":
		t.kind = kindBPE
		t.bos, t.eos = 11, 11
		if !hasPre || pre == "" {
			pre = "default"
			t.warnf("missing pre-tokenizer type (tokenizer.ggml.pre), using 'default' as llama.cpp does; generation quality will be degraded")
		}
		pt, ok := preTokenizers[pre]
		if !ok {
			return refuse.New("tokenizer", "unknown pre-tokenizer %q (tokenizer.ggml.pre); apr implements %s", pre, knownPre())
		}
		t.pretok = pt
		t.pre = pre
		t.addBOS = pt.addBOS
	default:
		return refuse.New("tokenizer", "tokenizer model %q (tokenizer.ggml.model) is not implemented; apr implements \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece)", model)
	}
	if v, ok := f.Get("tokenizer.ggml.add_space_prefix"); ok {
		b, ok := v.Bool()
		if !ok {
			return vocabErr("tokenizer.ggml.add_space_prefix", "not a bool (%s)", v.TypeName())
		}
		t.addSpacePrefix = b
	}

	if err := t.loadTokens(f); err != nil {
		return err
	}
	if t.kind == kindBPE {
		if err := t.loadMerges(f); err != nil {
			return err
		}
	}
	if err := t.loadSpecialIDs(f); err != nil {
		return err
	}
	t.deriveSpecial()
	t.buildSpecialCache()
	t.buildPieces()
	if err := t.modelAttrs(f); err != nil {
		return err
	}
	if t.kind == kindSPM {
		t.buildByteTokens()
		t.spmChunks = spmSplittable(t.tokens)
	}
	t.scratch.New = func() any { return new(encoder) }
	return nil
}

func knownPre() string {
	names := make([]string, 0, len(preTokenizers))
	for n := range preTokenizers {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func (t *Tokenizer) loadTokens(f *gguf.File) error {
	const key = "tokenizer.ggml.tokens"
	v, ok := f.Get(key)
	if !ok {
		return vocabErr(key, "missing")
	}
	toks, ok := v.Strings()
	if !ok {
		return vocabErr(key, "not an array of strings (%s)", v.TypeName())
	}
	n := len(toks)
	if n == 0 {
		return vocabErr(key, "empty")
	}
	if n > 1<<30 {
		return vocabErr(key, "%d tokens is more than int32 ids can address", n)
	}
	t.tokens = make([]string, n)
	t.ids = make(map[string]int32, n)
	for i, s := range toks {
		if s == "" {
			t.warnf("empty token at index %d", i)
			s = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if j, dup := t.ids[s]; dup {
			return vocabErr(key, "duplicate token %q has ids %d and %d", s, j, i)
		}
		t.ids[s] = int32(i)
		t.tokens[i] = s
	}

	t.scores = make([]float32, n)
	if v, ok := f.Get("tokenizer.ggml.scores"); ok {
		const key = "tokenizer.ggml.scores"
		switch x := v.X.(type) {
		case []float32:
			if len(x) < n {
				return vocabErr(key, "%d scores for %d tokens", len(x), n)
			}
			copy(t.scores, x)
		case []int32:
			if len(x) < n {
				return vocabErr(key, "%d scores for %d tokens", len(x), n)
			}
			for i := range n {
				t.scores[i] = float32(x[i])
			}
		default:
			return vocabErr(key, "not an array of float32 or int32 (%s)", v.TypeName())
		}
	}

	t.attrs = make([]Attr, n)
	v, ok = f.Get("tokenizer.ggml.token_type")
	if !ok {
		for i := range t.attrs {
			t.attrs[i] = AttrNormal
		}
		return nil
	}
	x, ok := v.X.([]int32)
	if !ok {
		return vocabErr("tokenizer.ggml.token_type", "not an array of int32 (%s)", v.TypeName())
	}
	if len(x) < n {
		return vocabErr("tokenizer.ggml.token_type", "%d types for %d tokens", len(x), n)
	}
	for i := range n {
		switch x[i] {
		case 1:
			t.attrs[i] = AttrNormal
		case 2:
			t.attrs[i] = AttrUnknown
		case 3:
			t.attrs[i] = AttrControl
		case 4:
			t.attrs[i] = AttrUserDefined
		case 5:
			t.attrs[i] = AttrUnused
		case 6:
			t.attrs[i] = AttrByte
		default: // 0 (undefined) and anything unknown
			t.attrs[i] = AttrUndefined
		}
	}
	return nil
}

// specialKeys are the id keys llama.cpp reads, in its order (later keys for
// the same id override earlier ones).
func (t *Tokenizer) specialKeys() []struct {
	key string
	id  *int32
} {
	return []struct {
		key string
		id  *int32
	}{
		{"tokenizer.ggml.bos_token_id", &t.bos},
		{"tokenizer.ggml.eos_token_id", &t.eos},
		{"tokenizer.ggml.eot_token_id", &t.eot},
		{"tokenizer.ggml.eom_token_id", &t.eom},
		{"tokenizer.ggml.unknown_token_id", &t.unk},
		{"tokenizer.ggml.seperator_token_id", &t.sep},
		{"tokenizer.ggml.padding_token_id", &t.pad},
		{"tokenizer.ggml.mask_token_id", &t.mask},
		{"tokenizer.ggml.fim_pre_token_id", &t.fimPre},
		{"tokenizer.ggml.fim_suf_token_id", &t.fimSuf},
		{"tokenizer.ggml.fim_mid_token_id", &t.fimMid},
		{"tokenizer.ggml.fim_pad_token_id", &t.fimPad},
		{"tokenizer.ggml.fim_rep_token_id", &t.fimRep},
		{"tokenizer.ggml.fim_sep_token_id", &t.fimSep},
		// deprecated names
		{"tokenizer.ggml.prefix_token_id", &t.fimPre},
		{"tokenizer.ggml.suffix_token_id", &t.fimSuf},
		{"tokenizer.ggml.middle_token_id", &t.fimMid},
	}
}

func (t *Tokenizer) loadSpecialIDs(f *gguf.File) error {
	n := int64(len(t.tokens))
	for _, s := range t.specialKeys() {
		if *s.id >= 0 && int64(*s.id) >= n {
			t.warnf("default special token %s = %d out of vocab range, disabling", s.key, *s.id)
			*s.id = none
		}
		v, ok := f.Get(s.key)
		if !ok {
			continue
		}
		u, ok := v.Uint()
		if !ok {
			return vocabErr(s.key, "not a non-negative integer (%s)", v.TypeName())
		}
		if u >= uint64(n) {
			// 0xFFFFFFFF is -1 written unsigned: converters write it for
			// "no such token". When the default is no token as well, the
			// file and apr agree and there is nothing to say (llama.cpp
			// warns here; its result is the same).
			if u != math.MaxUint32 || *s.id != none {
				t.warnf("bad special token %s = %d (vocab has %d), using default id %d", s.key, u, n, *s.id)
			}
			continue
		}
		*s.id = int32(u)
	}
	for _, b := range []struct {
		key string
		p   *bool
	}{
		{"tokenizer.ggml.add_bos_token", &t.addBOS},
		{"tokenizer.ggml.add_eos_token", &t.addEOS},
	} {
		v, ok := f.Get(b.key)
		if !ok {
			continue
		}
		x, ok := v.Bool()
		if !ok {
			return vocabErr(b.key, "not a bool (%s)", v.TypeName())
		}
		*b.p = x
	}
	if t.addBOS && t.bos == none {
		return vocabErr("tokenizer.ggml.add_bos_token", "true, but tokenizer.ggml.bos_token_id is not set")
	}
	if t.addEOS && t.eos == none {
		return vocabErr("tokenizer.ggml.add_eos_token", "true, but tokenizer.ggml.eos_token_id is not set")
	}
	return nil
}

// Texts llama.cpp recognizes special tokens by (llama-vocab.cpp, load).
var (
	eotTexts          = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts          = []string{"<|eom_id|>"}
	fimPreTexts       = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts       = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts       = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadTexts       = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts       = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts       = []string{"<|file_sep|>"}
	eogTexts          = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["}
	alwaysUserDefined = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// deriveSpecial is llama.cpp's text-based detection of end-of-turn, FIM,
// unused and end-of-generation tokens, with the attribute changes it makes on
// the way. Where llama.cpp takes the first match in hash-map order, apr takes
// the lowest id (the order is unspecified in llama.cpp).
func (t *Tokenizer) deriveSpecial() {
	find := func(texts []string) []int32 {
		var ids []int32
		for _, s := range texts {
			if id, ok := t.ids[s]; ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return ids
	}
	detect := func(id *int32, texts []string) {
		if *id != none {
			return
		}
		if c := find(texts); len(c) > 0 {
			*id = c[0]
			t.attrs[c[0]] |= AttrControl
		}
	}
	detect(&t.eot, eotTexts)
	detect(&t.eom, eomTexts)
	detect(&t.fimPre, fimPreTexts)
	detect(&t.fimSuf, fimSufTexts)
	detect(&t.fimMid, fimMidTexts)
	detect(&t.fimPad, fimPadTexts)
	detect(&t.fimRep, fimRepTexts)
	detect(&t.fimSep, fimSepTexts)

	for i, s := range t.tokens {
		if t.attrs[i]&AttrControl != 0 && t.attrs[i]&AttrUnused == 0 && strings.Contains(s, "unused") {
			t.attrs[i] |= AttrUnused
		}
	}

	eog := map[int32]bool{}
	for _, id := range []int32{t.fimPad, t.fimRep, t.fimSep} {
		if id != none {
			eog[id] = true
		}
	}
	for _, id := range find(eogTexts) {
		eog[id] = true
		t.attrs[id] |= AttrControl
	}
	for _, id := range find(alwaysUserDefined) {
		t.attrs[id] = AttrUserDefined
	}
	for _, p := range []struct {
		id   int32
		name string
	}{{t.eos, "eos"}, {t.eot, "eot"}, {t.eom, "eom"}} {
		if p.id != none && !eog[p.id] {
			eog[p.id] = true
			t.warnf("special_%s_id is not in special_eog_ids - the tokenizer config may be incorrect", p.name)
		}
	}
	// o200k_harmony / solar-open: <|end|> is not end-of-generation there.
	has := func(s string) (int32, bool) {
		id, ok := t.ids[s]
		return id, ok && eog[id]
	}
	_, ret := has("<|return|>")
	_, call := has("<|call|>")
	_, calls := has("<|calls|>")
	_, flush := has("<|flush|>")
	if end, ok := has("<|end|>"); ok && ((ret && (call || calls)) || ((call || calls) && flush)) {
		delete(eog, end)
		t.attrs[end] = AttrUserDefined
	}
	// gemma4 / paddleocr: </s> is not end-of-generation there.
	if _, ok := has("<|tool_response>"); ok {
		if s, ok := has("</s>"); ok {
			delete(eog, s)
			t.attrs[s] = AttrNormal
		}
	}
	for id := range eog {
		t.eogs = append(t.eogs, id)
	}
	slices.Sort(t.eogs)
}

// buildSpecialCache lists the tokens the special-token partition looks for:
// control, user-defined and unknown-type tokens, longest text first (ties by
// id; llama.cpp's std::sort leaves their order unspecified).
func (t *Tokenizer) buildSpecialCache() {
	for i, a := range t.attrs {
		if a&(AttrControl|AttrUserDefined|AttrUnknown) != 0 {
			t.special = append(t.special, int32(i))
		}
	}
	slices.SortStableFunc(t.special, func(a, b int32) int {
		return len(t.tokens[b]) - len(t.tokens[a])
	})
}

// modelAttrs sets the strip attributes llama.cpp gives some models by name.
func (t *Tokenizer) modelAttrs(f *gguf.File) error {
	name, _ := f.String("general.name")
	name = strings.ToLower(name)
	arch, _ := f.String("general.architecture")
	pre, _ := f.String("tokenizer.ggml.pre")
	containsAny := func(s string, subs ...string) bool {
		for _, x := range subs {
			if strings.Contains(s, x) {
				return true
			}
		}
		return false
	}
	set := func(text string, a Attr, on bool) error {
		id, ok := t.ids[text]
		if !ok {
			return vocabErr("tokenizer.ggml.tokens", "model %q needs token %q, which the vocabulary lacks", name, text)
		}
		if on {
			t.attrs[id] |= a
		} else {
			t.attrs[id] &^= a
		}
		return nil
	}
	switch {
	case containsAny(pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(arch, "nomic-bert-moe", "jina-bert-v3"):
		if id, ok := t.ids["<mask>"]; ok {
			t.attrs[id] |= AttrLStrip
		} else {
			t.warnf("mask token is missing in vocab")
		}
	case containsAny(name, "phi-3", "phi3"):
		for _, id := range t.special {
			t.attrs[id] |= AttrRStrip
		}
		if err := set("</s>", AttrRStrip, true); err != nil {
			return err
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if err := set(s, AttrRStrip, false); err != nil {
				return err
			}
		}
	case containsAny(name, "modern-bert"):
		if id, ok := t.ids["[MASK]"]; ok {
			t.attrs[id] |= AttrLStrip
		} else {
			t.warnf("mask token missing in vocab")
		}
	}
	return nil
}

func (t *Tokenizer) buildByteTokens() {
	const hex = "0123456789ABCDEF"
	for b := range 256 {
		t.byteTok[b] = none
		if id, ok := t.ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
			t.byteTok[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.byteTok[b] = id
		}
	}
}

// NVocab returns the number of tokens.
func (t *Tokenizer) NVocab() int { return len(t.tokens) }

// Model returns tokenizer.ggml.model ("gpt2" or "llama").
func (t *Tokenizer) Model() string { return t.model }

// Pre returns the pre-tokenizer in use ("default" for a BPE vocabulary
// without tokenizer.ggml.pre); for SentencePiece it is the file's value.
func (t *Tokenizer) Pre() string { return t.pre }

func optID(id int32) (int32, bool) { return id, id != none }

// BOS returns the beginning-of-sequence id, if the vocabulary has one.
func (t *Tokenizer) BOS() (int32, bool) { return optID(t.bos) }

// EOS returns the end-of-sequence id, if the vocabulary has one.
func (t *Tokenizer) EOS() (int32, bool) { return optID(t.eos) }

// EOT returns the end-of-turn id, if any.
func (t *Tokenizer) EOT() (int32, bool) { return optID(t.eot) }

// UNK returns the unknown-token id, if any.
func (t *Tokenizer) UNK() (int32, bool) { return optID(t.unk) }

// PAD returns the padding id, if any.
func (t *Tokenizer) PAD() (int32, bool) { return optID(t.pad) }

// AddBOS and AddEOS report the model's add_bos/add_eos flags (after
// llama.cpp's defaults per model and pre-tokenizer).
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS: see AddBOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// EOGs returns every end-of-generation id in increasing order, derived as
// llama.cpp's vocabulary load does (eos, eot, eom, FIM pad/repo/file-sep and
// the tokens whose text marks an end of turn).
func (t *Tokenizer) EOGs() []int32 { return slices.Clone(t.eogs) }

// IsEOG reports whether id ends generation.
func (t *Tokenizer) IsEOG(id int32) bool {
	_, ok := slices.BinarySearch(t.eogs, id)
	return ok
}

// Attr returns the attributes of id (AttrUndefined for an unknown id).
func (t *Tokenizer) Attr(id int32) Attr {
	if id < 0 || int(id) >= len(t.attrs) {
		return AttrUndefined
	}
	return t.attrs[id]
}

// IsControl reports whether id is a control token.
func (t *Tokenizer) IsControl(id int32) bool { return t.Attr(id)&AttrControl != 0 }

// TokenID returns the id of the token whose vocabulary text is text (the
// stored form: "Ġworld" for byte-level BPE, "▁world" for SentencePiece).
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}

// Text returns the vocabulary text of id (its stored form).
func (t *Tokenizer) Text(id int32) (string, error) {
	if id < 0 || int(id) >= len(t.tokens) {
		return "", fmt.Errorf("%w: %d (vocab has %d)", ErrID, id, len(t.tokens))
	}
	return t.tokens[id], nil
}
