package synth

import (
	"sort"
	"strings"
)

// Vocab is a byte-level BPE vocabulary in the form GGUF stores it
// (tokenizer.ggml.model = "gpt2").
type Vocab struct {
	Tokens    []string
	Types     []int32 // llama.cpp token types: 1 normal, 3 control
	Merges    []string
	BOS, EOS  int32
	Template  string
	Pre       string
	AddBOS    bool
	EndOfText int32
}

// Token types as llama.cpp stores them in tokenizer.ggml.token_type.
const (
	tokNormal  = 1
	tokControl = 3
)

// corpus is the text the synthetic vocabulary's merges are learned from. It
// only has to make tokenization realistic (words become a few tokens).
const corpus = `The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away,
there lived a little girl who loved to read. Every day she walked to the library and
read the stories of the world. What is the meaning of life? The capital of France is
Paris. Hello world, 2+2=4. The model reads the prompt, then writes the answer, one token
at a time. Engines must agree with the reference before they ship: the release gate
checks tensors, tokenizers, templates, outputs, parity, timing and throughput.
func main() { fmt.Println("hello, world") } for i in range(10): print(i)
`

// byteToRune is GPT-2's reversible map from bytes to printable runes, which
// byte-level BPE vocabularies use for their token strings.
func byteToRune() [256]rune {
	var m [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// ByteLevelVocab builds a byte-level BPE vocabulary: the 256 byte symbols,
// nMerges merges learned greedily from a small built-in English corpus, and
// the ChatML control tokens <|endoftext|>, <|im_start|>, <|im_end|>. It is
// deterministic.
func ByteLevelVocab(nMerges int) Vocab {
	b2r := byteToRune()
	var v Vocab
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, string(b2r[b]))
		v.Types = append(v.Types, tokNormal)
	}
	// Words are split the simple GPT-2 way: a space sticks to the word after it.
	var words [][]string
	for _, w := range strings.SplitAfter(strings.ReplaceAll(corpus, "\n", " "), " ") {
		if w == "" {
			continue
		}
		w = " " + strings.TrimSuffix(w, " ")
		var syms []string
		for _, c := range []byte(w) {
			syms = append(syms, string(b2r[c]))
		}
		words = append(words, syms)
	}
	have := map[string]bool{}
	for _, t := range v.Tokens {
		have[t] = true
	}
	for len(v.Merges) < nMerges {
		counts := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w); i++ {
				counts[[2]string{w[i], w[i+1]}]++
			}
		}
		if len(counts) == 0 {
			break
		}
		pairs := make([][2]string, 0, len(counts))
		for p := range counts {
			pairs = append(pairs, p)
		}
		sort.Slice(pairs, func(i, j int) bool {
			ci, cj := counts[pairs[i]], counts[pairs[j]]
			if ci != cj {
				return ci > cj
			}
			return pairs[i][0]+" "+pairs[i][1] < pairs[j][0]+" "+pairs[j][1]
		})
		best := pairs[0]
		if counts[best] < 2 {
			break
		}
		joined := best[0] + best[1]
		v.Merges = append(v.Merges, best[0]+" "+best[1])
		if !have[joined] {
			have[joined] = true
			v.Tokens = append(v.Tokens, joined)
			v.Types = append(v.Types, tokNormal)
		}
		for wi, w := range words {
			var out []string
			for i := 0; i < len(w); i++ {
				if i+1 < len(w) && w[i] == best[0] && w[i+1] == best[1] {
					out = append(out, joined)
					i++
					continue
				}
				out = append(out, w[i])
			}
			words[wi] = out
		}
	}
	v.EndOfText = int32(len(v.Tokens))
	v.Tokens = append(v.Tokens, "<|endoftext|>", "<|im_start|>", "<|im_end|>")
	v.Types = append(v.Types, tokControl, tokControl, tokControl)
	v.BOS = v.EndOfText
	v.EOS = v.EndOfText + 2
	v.Pre = "qwen2"
	v.Template = chatMLTemplate
	return v
}

// chatMLTemplate is a plain ChatML template with a default system prompt.
const chatMLTemplate = `{%- if messages[0]['role'] != 'system' -%}
<|im_start|>system
You are a helpful assistant.<|im_end|>
{% endif -%}
{%- for message in messages -%}
<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}`
