package tokenizer_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/testutil"
)

var (
	benchEnglish = strings.Fields(`the of and to in is was that for it with as on be at by this had not are but from or have
		an they which one you were her all she there would their we him been has when who will more no if out so said what up
		its about into than them can only other new some could time these two may then do first any my now such like our over
		man me even most made after also did many before must through back years where much your way well down should because
		each just those people how too little state good very make world still own see men work long get here between both life
		being under never day same another know while last might us great old year off come since against go came right used take
		three model token engine release falsify contract reference quantized kernel logits prompt`)
	benchChinese = []rune("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严")
	benchCode    = []string{
		"func %s(x int) int {\n\treturn x*%d + %d\n}\n",
		"for (int i = 0; i < %d; ++i) { %s[i] = %d; }\n",
		"def %s(self, n=%d):\n    return [k ** 2 for k in range(n)] + [%d]\n",
		"if err := %s(ctx); err != nil {\n\treturn fmt.Errorf(\"step %d: %%w\", err) // %d\n}\n",
		"const %s = {\"id\": %d, \"ok\": true, \"score\": %d.5};\n",
	}
	benchEmoji = []string{"🦙", "🚀", "😀", "😶‍🌫️", "👍🏽", "🎉", "❤️", "🤖", "🔥", "✅"}
)

// benchText returns a deterministic text of about n bytes mixing English,
// Chinese, code, emoji and numbers; seed picks which.
func benchText(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(42, seed))
	var b strings.Builder
	ident := func() string {
		return benchEnglish[r.IntN(len(benchEnglish))] + "_" + benchEnglish[r.IntN(len(benchEnglish))]
	}
	for b.Len() < n {
		switch r.IntN(10) {
		case 0, 1, 2, 3: // English sentence
			w := 5 + r.IntN(15)
			for i := range w {
				word := benchEnglish[r.IntN(len(benchEnglish))]
				if i == 0 {
					word = strings.ToUpper(word[:1]) + word[1:]
				} else {
					b.WriteByte(' ')
				}
				b.WriteString(word)
				if r.IntN(12) == 0 {
					b.WriteByte(',')
				}
			}
			b.WriteString(". ")
		case 4, 5: // Chinese
			w := 10 + r.IntN(30)
			for i := range w {
				b.WriteRune(benchChinese[r.IntN(len(benchChinese))])
				if i%9 == 8 {
					b.WriteRune('，')
				}
			}
			b.WriteString("。\n")
		case 6, 7: // code
			fmt.Fprintf(&b, benchCode[r.IntN(len(benchCode))], ident(), r.IntN(1000), r.IntN(100000))
		case 8: // emoji
			for range 1 + r.IntN(4) {
				b.WriteString(benchEmoji[r.IntN(len(benchEmoji))])
			}
			b.WriteByte(' ')
		case 9: // numbers
			fmt.Fprintf(&b, "%d %.4f %d-%02d-%02d %d%% ", r.IntN(1e9), r.Float64()*1000, 1900+r.IntN(200), 1+r.IntN(12), 1+r.IntN(28), r.IntN(100))
		}
	}
	return b.String()
}

// BenchmarkEncode measures encode throughput (MB/s) on a ~1 MB mixed text.
// text=same encodes one text again and again, so after the first pass every
// word is in the encoder's word cache (the steady state of re-encoding known
// text); text=new encodes a text with another seed each time, so most words
// are new to the cache (closer to a first encode).
func BenchmarkEncode(b *testing.B) {
	same := benchText(1<<20, 7)
	for _, name := range []string{"qwen3-tokenizer.gguf", "ggml-vocab-llama-spm.gguf"} {
		tok := fixtureTokenizer(b, name)
		for _, mode := range []string{"same", "new"} {
			b.Run("vocab="+strings.TrimSuffix(name, ".gguf")+"/text="+mode, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(same)))
				var n int
				seed := uint64(100)
				for b.Loop() {
					text := same
					if mode == "new" {
						b.StopTimer()
						seed++
						text = benchText(1<<20, seed)
						b.StartTimer()
					}
					ids, err := tok.Encode(text, tokenizer.Options{})
					if err != nil {
						b.Fatal(err)
					}
					n = len(ids)
				}
				b.ReportMetric(float64(n), "tokens")
			})
		}
	}
}

// BenchmarkDecode measures decode throughput (MB/s of text produced).
func BenchmarkDecode(b *testing.B) {
	text := benchText(1<<20, 7)
	tok := fixtureTokenizer(b, "qwen3-tokenizer.gguf")
	ids, err := tok.Encode(text, tokenizer.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := tok.Decode(ids); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNew measures building the tokenizer from an opened GGUF.
func BenchmarkNew(b *testing.B) {
	path := filepath.Join(testutil.Fixtures(b), "vocab", "qwen3-tokenizer.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tokenizer.New(f); err != nil {
			b.Fatal(err)
		}
	}
}
