package cli

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/tokenizer"
)

func init() {
	register(20, newTokenizeCmd)
	register(21, newDetokenizeCmd)
}

type tokenizeOptions struct {
	Model        string
	Text         string
	JSON         bool
	NoBOS        bool
	ParseSpecial bool
}

// TokenizeReport is what `apr tokenize --json` prints.
type TokenizeReport struct {
	IDs     []int32  `json:"ids"`
	Pieces  []string `json:"pieces"`
	NTokens int      `json:"n_tokens"`
}

func newTokenizeCmd(env *Env) *cobra.Command {
	var opts tokenizeOptions
	c := &cobra.Command{
		Use:   "tokenize MODEL TEXT",
		Short: "Turn text into token ids with a GGUF's tokenizer",
		Long: `tokenize encodes TEXT ("-" reads it from standard input) with the tokenizer
built from MODEL's tokenizer.ggml.* keys, exactly as llama.cpp's llama_tokenize.
BOS and EOS are added as the model's add_bos/add_eos flags say (--no-bos
leaves BOS out). --parse-special turns the text of control tokens
(<|im_start|>, </s>, ...) into those tokens; without it they are plain text,
while user-defined tokens are matched either way, as in llama.cpp.

stdout gets one line per token: the id, a tab and the piece (quoted, exact
bytes escaped); --json gives {"ids", "pieces", "n_tokens"}, where a piece that
is not valid UTF-8 on its own (a byte token) has its bad bytes replaced by
U+FFFD: the ids are the exact result.`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model, opts.Text = args[0], args[1]
			return runTokenize(env, opts)
		},
	}
	jsonFlag(c, &opts.JSON)
	c.Flags().BoolVar(&opts.NoBOS, "no-bos", false, "do not add BOS even if the model's add_bos flag says so")
	c.Flags().BoolVar(&opts.ParseSpecial, "parse-special", false, "match control-token text in TEXT (llama.cpp's parse_special)")
	return c
}

// openTokenizer opens a GGUF and builds its tokenizer, logging what llama.cpp
// would warn about. The caller closes the file.
func openTokenizer(env *Env, path string) (*gguf.File, *tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	tok, err := tokenizer.New(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	for _, w := range tok.Warnings() {
		env.Log.Warn("tokenizer", "model", path, "warning", w)
	}
	return f, tok, nil
}

func runTokenize(env *Env, opts tokenizeOptions) error {
	text := opts.Text
	if text == "-" {
		b, err := io.ReadAll(env.Stdin)
		if err != nil {
			return badInputf("reading TEXT from standard input: %v", err)
		}
		text = string(b)
	}
	f, tok, err := openTokenizer(env, opts.Model)
	if err != nil {
		return err
	}
	defer f.Close()
	ids, err := tok.Encode(text, tokenizer.Options{AddSpecial: true, SkipBOS: opts.NoBOS, ParseSpecial: opts.ParseSpecial})
	if err != nil {
		return badInput(err)
	}
	rep := TokenizeReport{IDs: ids, Pieces: make([]string, len(ids)), NTokens: len(ids)}
	for i, id := range ids {
		if rep.Pieces[i], err = tok.Piece(id); err != nil {
			return err
		}
	}
	if opts.JSON {
		return writeJSON(env.Stdout, rep)
	}
	for i, id := range ids {
		fmt.Fprintf(env.Stdout, "%d\t%s\n", id, strconv.Quote(rep.Pieces[i]))
	}
	fmt.Fprintf(env.Stderr, "%d tokens\n", len(ids))
	return nil
}

type detokenizeOptions struct {
	Model string
	IDs   []int32
	JSON  bool
}

// DetokenizeReport is what `apr detokenize --json` prints.
type DetokenizeReport struct {
	IDs       []int32 `json:"ids"`
	NTokens   int     `json:"n_tokens"`
	Text      string  `json:"text"`
	NBytes    int     `json:"n_bytes"`
	ValidUTF8 bool    `json:"valid_utf8"`
	Hex       string  `json:"hex"`
}

func newDetokenizeCmd(env *Env) *cobra.Command {
	var opts detokenizeOptions
	c := &cobra.Command{
		Use:   "detokenize MODEL IDS...",
		Short: "Turn token ids back into text with a GGUF's tokenizer",
		Long: `detokenize decodes token ids (separated by spaces or commas) with the
tokenizer built from MODEL's tokenizer.ggml.* keys and writes the exact bytes
to stdout, with nothing added: special tokens appear as their text, and a
SentencePiece vocabulary drops the one leading space that tokenize added
(llama.cpp's llama_detokenize without its space clean-up).
--json gives {"ids", "n_tokens", "text", "n_bytes", "valid_utf8", "hex"}; "hex"
holds the exact bytes where "text" cannot (invalid UTF-8 becomes U+FFFD).`,
		// Flags are parsed here, not by cobra: a negative id ("-1") is an id
		// to refuse like any other bad id, not an unknown shorthand flag.
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			args, help, err := detokenizeArgs(args, &opts.JSON)
			if err != nil || help {
				if help {
					return c.Help()
				}
				return err
			}
			if len(args) < 2 {
				return badInputf("detokenize: want MODEL and at least one id, got %d argument(s)", len(args))
			}
			opts.Model = args[0]
			ids, err := parseIDs(args[1:])
			if err != nil {
				return err
			}
			opts.IDs = ids
			return runDetokenize(env, opts)
		},
	}
	jsonFlag(c, &opts.JSON)
	return c
}

// detokenizeArgs separates detokenize's flags (--json, --help) from its
// arguments; a negative number is an argument.
func detokenizeArgs(in []string, asJSON *bool) (args []string, help bool, err error) {
	for i, a := range in {
		switch {
		case a == "--":
			return append(args, in[i+1:]...), false, nil
		case a == "--json" || a == "--json=true":
			*asJSON = true
		case a == "--json=false":
			*asJSON = false
		case a == "-h" || a == "--help":
			return nil, true, nil
		case strings.HasPrefix(a, "-") && len(a) > 1 && (a[1] < '0' || a[1] > '9'):
			return nil, false, badInputf("unknown flag: %s", a)
		default:
			args = append(args, a)
		}
	}
	return args, false, nil
}

// parseIDs reads token ids from arguments, each holding one or more ids
// separated by commas or whitespace.
func parseIDs(args []string) ([]int32, error) {
	var ids []int32
	for _, a := range args {
		for _, f := range strings.FieldsFunc(a, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return nil, badInputf("token id %q: not a 32-bit integer", f)
			}
			ids = append(ids, int32(n))
		}
	}
	if len(ids) == 0 {
		return nil, badInputf("no token ids given")
	}
	return ids, nil
}

func runDetokenize(env *Env, opts detokenizeOptions) error {
	f, tok, err := openTokenizer(env, opts.Model)
	if err != nil {
		return err
	}
	defer f.Close()
	text, err := tok.Decode(opts.IDs)
	if err != nil {
		return badInput(err)
	}
	if opts.JSON {
		return writeJSON(env.Stdout, DetokenizeReport{
			IDs: opts.IDs, NTokens: len(opts.IDs), Text: string(text), NBytes: len(text),
			ValidUTF8: utf8.Valid(text), Hex: hex.EncodeToString(text),
		})
	}
	_, err = env.Stdout.Write(text)
	return err
}
