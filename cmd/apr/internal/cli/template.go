package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/gguf"
)

func init() { register(22, newTemplateCmd) }

type templateOptions struct {
	Model               string
	TemplateFile        string
	MessagesFile        string
	ToolsFile           string
	Kwargs              string
	AddGenerationPrompt bool
	Timeout             time.Duration
	JSON                bool
}

// TemplateReport is what `apr template --json` prints.
type TemplateReport struct {
	Template string `json:"template"`
	Prompt   string `json:"prompt"`
}

func newTemplateCmd(env *Env) *cobra.Command {
	var opts templateOptions
	c := &cobra.Command{
		Use:   "template (MODEL | --template FILE.jinja) --messages FILE.json",
		Short: "Render the model's own chat template for a conversation",
		Long: `template renders a chat template exactly as Hugging Face's
apply_chat_template(tokenize=False) does and prints the prompt on stdout, with
no newline added.

The template is the model's own tokenizer.chat_template, with bos_token,
eos_token, pad_token, unk_token (as the model declares them) as variables; or,
with --template, a bare Jinja file whose variables come from --kwargs. A model
without a template, or a template apr cannot render, is refused (exit 3); a
template that raises (raise_exception) on the given messages exits 2.

--messages and --tools are JSON files ("-" reads stdin); --kwargs is a JSON
object of extra variables (enable_thinking, ...), or @FILE.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Model = args[0]
			}
			return runTemplate(c.Context(), env, opts)
		},
	}
	f := c.Flags()
	f.StringVar(&opts.TemplateFile, "template", "", "render this Jinja file instead of a model's template")
	f.StringVar(&opts.MessagesFile, "messages", "", "JSON file with the list of messages (required; - for stdin)")
	f.StringVar(&opts.ToolsFile, "tools", "", "JSON file with the list of tools")
	f.StringVar(&opts.Kwargs, "kwargs", "", "JSON object of extra template variables, or @FILE")
	f.BoolVar(&opts.AddGenerationPrompt, "add-generation-prompt", false, "end with the prompt that starts the assistant's turn")
	f.DurationVar(&opts.Timeout, "timeout", 30*time.Second, "stop a render that runs longer")
	jsonFlag(c, &opts.JSON)
	return c
}

func runTemplate(ctx context.Context, env *Env, opts templateOptions) error {
	switch {
	case opts.Model == "" && opts.TemplateFile == "":
		return badInputf("template: give a MODEL or --template FILE.jinja")
	case opts.Model != "" && opts.TemplateFile != "":
		return badInputf("template: give a MODEL or --template, not both")
	case opts.MessagesFile == "":
		return badInputf("template: --messages FILE.json is required")
	}
	if opts.MessagesFile == "-" && opts.ToolsFile == "-" {
		return badInputf("template: only one of --messages and --tools can read stdin")
	}
	messages, err := readInput(env, opts.MessagesFile)
	if err != nil {
		return badInputf("template: --messages: %w", err)
	}
	var tools, kwargs []byte
	if opts.ToolsFile != "" {
		if tools, err = readInput(env, opts.ToolsFile); err != nil {
			return badInputf("template: --tools: %w", err)
		}
	}
	if strings.HasPrefix(opts.Kwargs, "@") {
		if kwargs, err = os.ReadFile(opts.Kwargs[1:]); err != nil {
			return badInputf("template: --kwargs: %w", err)
		}
	} else {
		kwargs = []byte(opts.Kwargs)
	}
	in, err := chat.DecodeInput(messages, tools, kwargs, opts.AddGenerationPrompt)
	if err != nil {
		return badInputf("template: %w", err)
	}

	var tmpl *chat.Template
	if opts.Model != "" {
		f, err := gguf.Open(opts.Model)
		if err != nil {
			return err
		}
		defer f.Close()
		if tmpl, err = chat.FromGGUF(f); err != nil {
			return err
		}
	} else {
		src, err := os.ReadFile(opts.TemplateFile)
		if err != nil {
			return badInputf("template: %w", err)
		}
		// A bare file has no model: its variables (bos_token, ...) come
		// from --kwargs, which Render passes on.
		if tmpl, err = chat.Parse(opts.TemplateFile, string(src), nil); err != nil {
			return err
		}
	}

	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	prompt, err := tmpl.Render(ctx, in)
	if err != nil {
		var te *chat.TemplateError
		if errors.As(err, &te) {
			return badInput(err)
		}
		return err
	}
	if opts.JSON {
		return writeJSON(env.Stdout, TemplateReport{Template: tmpl.Name, Prompt: prompt})
	}
	_, err = io.WriteString(env.Stdout, prompt)
	return err
}

// readInput reads a file, or stdin for "-".
func readInput(env *Env, path string) ([]byte, error) {
	if path == "-" {
		if env.Stdin == nil {
			return nil, fmt.Errorf("no stdin")
		}
		return io.ReadAll(env.Stdin)
	}
	return os.ReadFile(path)
}
