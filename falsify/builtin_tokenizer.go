package falsify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

// The ids of the code in this file (the contracts name it by these).
const (
	CodeTensorValues = "tensor_values"
	CodeTokenizer    = "tokenizer_roundtrip"
	CodeTemplate     = "chat_template"
)

// Refusal classes of the model-level code (a contract may list them as
// optional, params.optional_refusals).
const (
	RefusalModel      = "model_refused" // the model (or its tokenizer) was refused before the check could run
	RefusalNoTemplate = "no_template"   // the model carries no chat template
)

// registerModelValues registers the checks of a model's values, tokenizer
// and chat template, each written against the opened model (Check.Loaded).
func registerModelValues(r *Registry) {
	r.Register(CodeTensorValues, KindShape, outcomeCode(func(ctx context.Context, c *Check, m *loaded.Model) verdict.Outcome {
		return tensorValues(c.F, m.File)
	}), Needs(NeedModel), Thresholds("bad_tensors"),
		Doc("every tensor's values, read through the file's mapping: no NaN, no Inf, no all-zero tensor (biases excepted)"))
	r.Register(CodeTokenizer, KindProperty, outcomeCode(func(ctx context.Context, c *Check, m *loaded.Model) verdict.Outcome {
		tok, err := m.Tokenizer()
		if err != nil {
			return TokenizerOutcome(err)
		}
		return TokenizerRoundTrip(c.F, tok, c.Seed())
	}), Needs(NeedModel), Thresholds("roundtrip_mismatches", "split_control_tokens", "injected_control_tokens"),
		Doc("a built-in multilingual text round-trips through encode/decode; chat markers stay single tokens"))
	r.Register(CodeTemplate, KindShape, outcomeCode(func(ctx context.Context, c *Check, m *loaded.Model) verdict.Outcome {
		return chatTemplate(ctx, c.F, m)
	}), Needs(NeedModel), Thresholds("missing_messages", "split_control_tokens", "roundtrip_mismatches"),
		AppliesWhen(templateApplies),
		Doc("the model's chat template keeps every message of a two-turn conversation; its output tokenizes with chat markers intact"))
}

// templateApplies: a model without a chat template has none to check (apr
// qa reports it refused-optional, apr falsify as not run).
func templateApplies(c *Check) (bool, string) {
	f, err := c.Model()
	if err != nil {
		return true, ""
	}
	if _, ok := f.Get(chat.KeyTemplate); !ok {
		return false, "the model carries no " + chat.KeyTemplate + " (a base model)"
	}
	return true, ""
}

// outcomeCode turns code that decides an outcome on the opened model into
// falsifier code: the outcome's values are measured (the runner judges them
// against the contract's thresholds), its details noted, a fail is a Fail,
// a refusal keeps its refuser and class.
func outcomeCode(fn func(ctx context.Context, c *Check, m *loaded.Model) verdict.Outcome) Func {
	return func(ctx context.Context, c *Check) error {
		m, err := c.Loaded()
		if err != nil {
			return err
		}
		return Decide(c, fn(ctx, c, m))
	}
}

// Decide records an outcome decided by code in c and returns what the
// runner expects: its values measured, its details noted, nil for a pass,
// a Fail for a fail, a refusal (by the outcome's refuser, or c's) of its
// class otherwise.
func Decide(c *Check, o verdict.Outcome) error {
	for _, v := range o.Values {
		c.Measure(v.Name, v.Value)
	}
	for _, d := range o.Details {
		c.Note("%s", d)
	}
	switch o.Verdict {
	case verdict.Fail:
		return Fail("%s", o.Reason)
	case verdict.Refused:
		by := o.RemovedBy
		if by == "" {
			by = c.By()
		}
		return RefuseCode(o.Code, by, "%s", o.Reason)
	}
	return nil
}

// tensorValues scans every tensor's values through the mapping.
func tensorValues(fz schema.Falsifier, f *gguf.File) verdict.Outcome {
	scan := ScanTensors(f)
	c := verdict.NewJudge(fz.ID, fz.Thresholds)
	var bad []string
	count := map[string]float64{}
	for _, fd := range scan.Findings {
		bad = append(bad, fmt.Sprintf("%s: %s [%s]", fd.Tensor, fd.Detail, fd.Kind))
		count[fd.Kind]++
	}
	c.Hold("bad_tensors", float64(len(scan.Findings)), "count")
	c.Note("tensors_scanned", float64(scan.Tensors), "count")
	c.Note("values_scanned", float64(scan.Values), "count")
	c.Note("nonfinite_tensors", count["nonfinite"], "count")
	c.Note("zero_tensors", count["all_zero"], "count")
	c.Note("unreadable_tensors", count["unreadable"], "count")
	o := c.Outcome(verdict.FirstN(bad))
	o.Details = bad
	return o
}

// Multilingual is the built-in text the tokenizer gate round-trips: several
// scripts, combining marks, emoji with joiners, code, digits and
// whitespace runs.
var Multilingual = []string{
	"The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away,",
	"Falsches Üben von Xylophonmusik quält jeden größeren Zwerg.",
	"Portez ce vieux whisky au juge blond qui fume — déjà vu, naïve, café crème.",
	"Съешь же ещё этих мягких французских булок, да выпей чаю.",
	"Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
	"我能吞下玻璃而不伤身体。你好，世界！",
	"いろはにほへと ちりぬるを。日本語のテキストです。",
	"다람쥐 헌 쳇바퀴에 타고파.",
	"نص حكيم له سر قاطع وذو شأن عظيم.",
	"ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश।",
	"emoji 🦙🚀 and 👩‍💻 (ZWJ), flags 🇫🇷; math ∑ x² ≤ ∞; e\u0301 vs é",
	"func main() {\n\tfmt.Println(\"hi\") // tabs\n}\n",
	"numbers 3.14159 1,000,000 2+2=4   spaces   and\ttabs\n\n  newlines  ",
}

// scripts are the code point ranges RandomTexts draws from.
var scripts = [][2]rune{
	{0x20, 0x7e}, {0xa0, 0xff}, {0x100, 0x17f}, {0x300, 0x36f}, {0x370, 0x3ff}, {0x400, 0x4ff},
	{0x590, 0x5ff}, {0x600, 0x6ff}, {0x900, 0x97f}, {0xe00, 0xe7f}, {0x3040, 0x30ff}, {0x4e00, 0x9fff},
	{0xac00, 0xd7a3}, {0x1f300, 0x1f64f}, {0x1f680, 0x1f6ff}, {0x200d, 0x200d},
}

// RandomTexts returns n texts of 1 to 40 code points drawn, with seed, from
// many scripts, combining marks, emoji, joiners and whitespace runs.
func RandomTexts(seed int64, n int) []string {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x71a))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for k := 1 + rng.IntN(40); k > 0; k-- {
			switch rng.IntN(10) {
			case 0:
				b.WriteString([]string{" ", "  ", "\n", "\t", " \n"}[rng.IntN(5)])
			default:
				r := scripts[rng.IntN(len(scripts))]
				b.WriteRune(r[0] + rune(rng.IntN(int(r[1]-r[0]+1))))
			}
		}
		out[i] = b.String()
	}
	return out
}

// maxMarkers bounds how many chat markers the tokenizer gate tries.
const maxMarkers = 2048

// marker is a token a chat prompt must keep whole.
type marker struct {
	id   int32
	text string
	why  string
}

// markerRE matches the spelling of chat control markers: <|im_start|>,
// <|eot_id|>, DeepSeek's <｜end▁of▁sentence｜>.
var markerRE = regexp.MustCompile(`^<[|｜][^\s]+[|｜]>$`)

// chatMarkers returns the tokens a chat prompt must keep whole: every
// control token, every declared special token (BOS, EOS, EOT, padding)
// spelled as a tag, and every token spelled like a chat marker whatever
// its type — a GGUF that types <|im_start|> as a normal token gets it
// split in every chat prompt, which is the defect this finds.
func chatMarkers(t *tokenizer.Tokenizer) []marker {
	declared := map[int32]string{}
	for name, get := range map[string]func() (int32, bool){"BOS": t.BOS, "EOS": t.EOS, "EOT": t.EOT, "PAD": t.PAD} {
		if id, ok := get(); ok {
			declared[id] = name
		}
	}
	var out []marker
	for id := int32(0); int(id) < t.NVocab() && len(out) < maxMarkers; id++ {
		s, err := t.Text(id)
		if err != nil || s == "" {
			continue
		}
		tag := strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") && !strings.ContainsAny(s, " \t\n") && !strings.HasPrefix(s, "<0x")
		switch {
		case t.IsControl(id):
			out = append(out, marker{id, s, "control"})
		case declared[id] != "" && tag:
			out = append(out, marker{id, s, declared[id] + ", typed " + attrName(t.Attr(id))})
		case markerRE.MatchString(s):
			out = append(out, marker{id, s, "spelled as a chat marker, typed " + attrName(t.Attr(id))})
		}
	}
	return out
}

func attrName(a tokenizer.Attr) string {
	switch {
	case a&tokenizer.AttrControl != 0:
		return "control"
	case a&tokenizer.AttrUserDefined != 0:
		return "user-defined"
	case a&tokenizer.AttrUnknown != 0:
		return "unknown"
	case a&tokenizer.AttrUnused != 0:
		return "unused"
	case a&tokenizer.AttrByte != 0:
		return "byte"
	case a&tokenizer.AttrNormal != 0:
		return "normal"
	}
	return "undefined"
}

// TokenizerRoundTrip is tokenizer_roundtrip on t: the built-in text round-trips through encode/decode, and
// each control token written in a prompt between two words stays one token
// when control tokens are parsed (and is not produced from plain text when
// they are not).
func TokenizerRoundTrip(fz schema.Falsifier, t *tokenizer.Tokenizer, seed int64) verdict.Outcome {
	c := verdict.NewJudge(fz.ID, fz.Thresholds)
	var mismatches []string
	texts := append(append([]string(nil), Multilingual...), RandomTexts(seed, paramIntOr(fz, "random_cases", 64))...)
	for _, text := range texts {
		ids, err := t.Encode(text, tokenizer.Options{})
		if err != nil {
			mismatches = append(mismatches, fmt.Sprintf("%.24q: encode: %v", text, err))
			continue
		}
		dec, err := t.Decode(ids)
		if err != nil {
			mismatches = append(mismatches, fmt.Sprintf("%.24q: decode: %v", text, err))
			continue
		}
		if string(dec) != text {
			mismatches = append(mismatches, fmt.Sprintf("%q decodes to %q", text, string(dec)))
		}
	}
	var split, injected []string
	markers := chatMarkers(t)
	for _, mk := range markers {
		prompt := "Hello" + mk.text + "world"
		ids, err := t.Encode(prompt, tokenizer.Options{ParseSpecial: true})
		if err != nil || countID(ids, mk.id) != 1 {
			split = append(split, fmt.Sprintf("%q (id %d, %s) in %q tokenizes to %v", mk.text, mk.id, mk.why, prompt, ids))
		}
		if !t.IsControl(mk.id) {
			continue // normal and user-defined tokens may come from plain text
		}
		plain, err := t.Encode(prompt, tokenizer.Options{})
		if err == nil && countID(plain, mk.id) > 0 {
			injected = append(injected, fmt.Sprintf("%q (id %d) from plain text", mk.text, mk.id))
		}
	}
	checked := len(markers)
	c.Note("samples", float64(len(texts)), "count")
	c.Hold("roundtrip_mismatches", float64(len(mismatches)), "count")
	c.Note("markers_checked", float64(checked), "count")
	c.Hold("split_control_tokens", float64(len(split)), "count")
	c.HoldIf("injected_control_tokens", float64(len(injected)), "count")
	return c.Outcome(verdict.FirstN(append(append(mismatches, split...), injected...)))
}

// TokenizerOutcome is the outcome of a check whose model's tokenizer could
// not be built: refused by the tokenizer's refuser, or a fail.
func TokenizerOutcome(err error) verdict.Outcome {
	if r, ok := refuse.As(err); ok {
		return verdict.RefusedBy(RefusalModel, r.By, nil, "the tokenizer refused the model: %s", r.Reason)
	}
	return verdict.Failed(nil, "the tokenizer cannot be built: %v", err)
}

func countID(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// Conversation is what the template gate renders: a system prompt and two
// user turns with an assistant answer between them. Each content carries a
// marker so that its presence in the output is unambiguous.
var Conversation = []map[string]any{
	{"role": "system", "content": "You are a careful assistant. [sys-7f3a]"},
	{"role": "user", "content": "What is the capital of France? [u1-2c9d]"},
	{"role": "assistant", "content": "The capital of France is Paris. [a1-5e61]"},
	{"role": "user", "content": "And of Germany? [u2-90b4]"},
}

// chatTemplate: the model's own chat template renders Conversation with
// every message's content in the output, and the output tokenizes with
// every control token intact and decodes back to itself.
func chatTemplate(ctx context.Context, fz schema.Falsifier, m *loaded.Model) verdict.Outcome {
	tmpl, err := chat.FromGGUF(m.File)
	if err != nil {
		if _, ok := m.File.Get(chat.KeyTemplate); !ok {
			return verdict.RefusedBy(RefusalNoTemplate, chat.Refuser, nil, "the model carries no %s (a base model); there is no chat template to gate", chat.KeyTemplate)
		}
		return verdict.FromError(RefusalModel, err, "the chat template cannot be parsed")
	}
	t, err := m.Tokenizer()
	if err != nil {
		return TokenizerOutcome(err)
	}
	out, err := tmpl.Render(ctx, chat.Input{Messages: Conversation, AddGenerationPrompt: true})
	if err != nil {
		var te *chat.TemplateError
		if errors.As(err, &te) {
			return verdict.Failed(nil, "the template rejects a system + two-turn conversation: %v", err)
		}
		return verdict.FromError(RefusalModel, err, "rendering the conversation")
	}
	c := verdict.NewJudge(fz.ID, fz.Thresholds)
	var missing []string
	for _, msg := range Conversation {
		if s := msg["content"].(string); !strings.Contains(out, s) {
			missing = append(missing, fmt.Sprintf("the %s message %q is not in the rendered prompt", msg["role"], s))
		}
	}
	// The text as written, control tokens parsed; the BOS or EOS a
	// tokenizer adds around it is generate's business, not the template's.
	ids, err := t.Encode(out, tokenizer.Options{ParseSpecial: true})
	if err != nil {
		return verdict.Failed(nil, "the rendered prompt cannot be tokenized: %v", err)
	}
	markers := chatMarkers(t)
	want := specialOccurrences(markers, out)
	isMarker := map[int32]bool{}
	for _, mk := range markers {
		isMarker[mk.id] = true
	}
	got := map[int32]int{}
	for _, id := range ids {
		if isMarker[id] {
			got[id]++
		}
	}
	var split []string
	for _, id := range unionKeys(want, got) {
		if want[id] != got[id] {
			s, _ := t.Text(id)
			split = append(split, fmt.Sprintf("%q occurs %d times in the text but is %d tokens", s, want[id], got[id]))
		}
	}
	dec, err := t.Decode(ids)
	roundtrip := 0
	var rt []string
	if err != nil || string(dec) != out {
		roundtrip = 1
		rt = append(rt, fmt.Sprintf("the rendered prompt does not decode back to itself (first difference at byte %d)", firstByteDiff(string(dec), out)))
	}
	c.Note("rendered_bytes", float64(len(out)), "bytes")
	c.Note("prompt_tokens", float64(len(ids)), "tokens")
	c.Note("markers", float64(sumCounts(got)), "count")
	c.Hold("missing_messages", float64(len(missing)), "count")
	c.Hold("split_control_tokens", float64(len(split)), "count")
	c.HoldIf("roundtrip_mismatches", float64(roundtrip), "count")
	return c.Outcome(verdict.FirstN(append(append(missing, split...), rt...)))
}

// specialOccurrences counts, scanning text left to right and taking the
// longest marker text at each position, how often each marker occurs.
func specialOccurrences(markers []marker, text string) map[int32]int {
	var present []marker
	for _, mk := range markers {
		if strings.Contains(text, mk.text) {
			present = append(present, mk)
		}
	}
	sort.Slice(present, func(i, j int) bool { return len(present[i].text) > len(present[j].text) })
	out := map[int32]int{}
	for i := 0; i < len(text); {
		matched := false
		for _, mk := range present {
			if strings.HasPrefix(text[i:], mk.text) {
				out[mk.id]++
				i += len(mk.text)
				matched = true
				break
			}
		}
		if !matched {
			i++
		}
	}
	return out
}

func unionKeys(a, b map[int32]int) []int32 {
	seen := map[int32]bool{}
	var out []int32
	for _, m := range []map[int32]int{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sumCounts(m map[int32]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func firstByteDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// paramIntOr reads integer param name of f, or def.
func paramIntOr(f schema.Falsifier, name string, def int) int {
	if v, ok := toFloat(f.Params[name]); ok {
		return int(v)
	}
	return def
}
