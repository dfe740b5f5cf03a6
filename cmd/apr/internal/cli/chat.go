package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/sample"
	"github.com/aprqa/apr/refuse"
)

func init() { register(36, newChatCmd) }

type chatOptions struct {
	Model    string
	Backend  string
	Ctx      int
	N        int
	System   string
	Sampling sample.Params
	Threads  int
	JSON     bool
}

func newChatCmd(env *Env) *cobra.Command {
	var opts chatOptions
	c := &cobra.Command{
		Use:   "chat MODEL",
		Short: "Chat with MODEL in the terminal, keeping its KV cache between turns",
		Long: `chat is an interactive multi-turn conversation with MODEL through its own
chat template. Each line on stdin is a user turn; the answer streams to
stdout. The KV cache is kept between turns: a turn whose rendered
conversation extends what was fed before prefills only its new tokens (the
prefill count, cached count and speed of each turn go to stderr).

Commands: /reset forgets the conversation, /system TEXT sets the system
message (and resets). Ctrl-C stops the current answer; Ctrl-D (end of input)
exits.

With --json (for scripts) nothing streams: after end of input stdout carries
one JSON document, the transcript: every turn's user text, answer, token ids,
prompt tokens, cached tokens, prefill and decode times, finish reason.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model = args[0]
			return runChat(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Backend, "backend", "cpu", "backend to run on (a registered backend name)")
	fl.IntVar(&opts.Ctx, "ctx", 0, "positions of the conversation's KV cache (0: 4096 or the model's context_length if smaller)")
	fl.IntVarP(&opts.N, "n", "n", 512, "tokens per answer (at most)")
	fl.StringVar(&opts.System, "system", "", "system message")
	samplingFlags(fl, &opts.Sampling)
	fl.IntVar(&opts.Threads, "threads", 0, "threads for the backend (0: its choice)")
	jsonFlag(c, &opts.JSON)
	return c
}

// chatTurn is one turn of the --json transcript.
type chatTurn struct {
	User             string  `json:"user"`
	Assistant        string  `json:"assistant"`
	TokenIDs         []int32 `json:"token_ids"`
	PromptTokens     int     `json:"prompt_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	PrefillTokens    int     `json:"prefill_tokens"`
	PrefillMS        float64 `json:"prefill_ms"`
	CompletionTokens int     `json:"completion_tokens"`
	DecodeMS         float64 `json:"decode_ms"`
	FinishReason     string  `json:"finish_reason"`
}

type chatTranscript struct {
	Model       string     `json:"model"`
	ModelSHA256 string     `json:"model_sha256"`
	Backend     string     `json:"backend"`
	System      string     `json:"system"`
	Turns       []chatTurn `json:"turns"`
}

func runChat(ctx context.Context, env *Env, opts chatOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.N < 1 {
		return badInputf("chat: -n %d must be at least 1", opts.N)
	}
	if err := opts.Sampling.Validate(); err != nil {
		return badInput(err)
	}
	m, err := generate.Load(ctx, generate.LoadOptions{Model: opts.Model, Backend: opts.Backend, Threads: opts.Threads, Log: env.Log})
	if err != nil {
		return err
	}
	defer m.Close()
	if m.Tmpl == nil {
		return refuse.New("chat", "%s has no usable chat template: %v", opts.Model, m.TmplErr)
	}
	if _, err := m.Upload(); err != nil {
		return err
	}
	if opts.Ctx == 0 {
		opts.Ctx = min(4096, m.Spec.NCtxTrain)
	}
	if opts.Ctx < 1 || opts.Ctx > m.Spec.NCtxTrain {
		return badInputf("chat: --ctx %d must be in [1, %d] (the model's context_length)", opts.Ctx, m.Spec.NCtxTrain)
	}
	slot := m.NewSlot(opts.Ctx)
	defer slot.Close()
	tr := chatTranscript{Model: opts.Model, ModelSHA256: m.SHA256, Backend: opts.Backend, System: opts.System, Turns: []chatTurn{}}
	var msgs []map[string]any
	reset := func() {
		msgs = msgs[:0]
		if tr.System != "" {
			msgs = append(msgs, map[string]any{"role": "system", "content": tr.System})
		}
	}
	reset()

	// Ctrl-C stops the answer being generated; at the prompt it exits.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(env.Stdin)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		if !opts.JSON {
			fmt.Fprint(env.Stderr, "> ")
		}
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-sigs:
			ok = false
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			break
		}
		switch {
		case strings.TrimSpace(line) == "":
			continue
		case line == "/reset":
			reset()
			fmt.Fprintln(env.Stderr, "(conversation reset)")
			continue
		case strings.HasPrefix(line, "/system"):
			tr.System = strings.TrimSpace(strings.TrimPrefix(line, "/system"))
			reset()
			fmt.Fprintln(env.Stderr, "(system message set; conversation reset)")
			continue
		case strings.HasPrefix(line, "/"):
			fmt.Fprintf(env.Stderr, "unknown command %q (commands: /reset, /system TEXT; Ctrl-D exits)\n", line)
			continue
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": line})
		turn, err := chatAnswer(ctx, env, m, slot, msgs, opts, sigs)
		if err != nil {
			return err
		}
		turn.User = line
		msgs = append(msgs, map[string]any{"role": "assistant", "content": turn.Assistant})
		tr.Turns = append(tr.Turns, turn)
	}
	if !opts.JSON {
		fmt.Fprintln(env.Stderr)
		return nil
	}
	return writeJSON(env.Stdout, tr)
}

// chatAnswer generates one answer on the conversation's slot.
func chatAnswer(ctx context.Context, env *Env, m *generate.Model, slot *generate.Slot, msgs []map[string]any, opts chatOptions, sigs <-chan os.Signal) (chatTurn, error) {
	var t chatTurn
	start := time.Now()
	prompt, err := generate.MessagesTokens(ctx, m.Tok, m.Tmpl, chat.Input{Messages: msgs})
	if err != nil {
		return t, err
	}
	room := slot.MaxCtx() - len(prompt) + 1
	if room < 1 {
		return t, refuse.New("chat", "the conversation has %d tokens, more than the --ctx of %d: /reset or a larger --ctx", len(prompt), slot.MaxCtx())
	}
	q, cached, err := slot.Start(prompt, generate.SeqOptions{MaxTokens: min(opts.N, room), Sampling: opts.Sampling, SkipControl: true})
	if err != nil {
		return t, err
	}
	t.PromptTokens, t.CachedTokens, t.PrefillTokens = len(prompt), cached, len(prompt)-cached
	var text []byte
	interrupted := func() bool {
		select {
		case <-sigs:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	for sampled := false; !sampled; {
		if sampled, err = q.Advance(0); err != nil {
			return t, err
		}
	}
	t.PrefillMS = ms(time.Since(start))
	dec := time.Now()
	for {
		_, b, _ := q.Last()
		text = append(text, b...)
		if !opts.JSON && len(b) > 0 {
			env.Stdout.Write(b)
		}
		if q.Done() {
			break
		}
		if interrupted() {
			q.Stop("interrupted")
			break
		}
		if _, err = q.Advance(0); err != nil {
			return t, err
		}
	}
	t.DecodeMS = ms(time.Since(dec))
	t.Assistant, t.TokenIDs, t.CompletionTokens, t.FinishReason = string(text), append([]int32{}, q.Tokens()...), len(q.Tokens()), q.Finish()
	if !opts.JSON {
		fmt.Fprintln(env.Stdout)
	}
	rate := func(n int, msv float64) float64 {
		if msv <= 0 {
			return 0
		}
		return float64(n) / (msv / 1e3)
	}
	fmt.Fprintf(env.Stderr, "(prefill %d new tokens, %d cached, %.1f ms, %.1f tok/s; %d tokens out, %.1f tok/s; %s)\n",
		t.PrefillTokens, t.CachedTokens, t.PrefillMS, rate(t.PrefillTokens, t.PrefillMS), t.CompletionTokens, rate(t.CompletionTokens-1, t.DecodeMS), t.FinishReason)
	return t, nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
