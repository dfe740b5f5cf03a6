package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/serve"
)

func init() { register(35, newServeCmd) }

type serveOptions struct {
	Model    string
	Backend  string
	Host     string
	Port     int
	Parallel int
	Ctx      int
	APIKey   string
	Name     string
	Threads  int
	Grace    time.Duration
	MaxQueue int
	// CORSOrigins: --cors-origin, repeatable.
	CORSOrigins []string
}

func newServeCmd(env *Env) *cobra.Command {
	var opts serveOptions
	c := &cobra.Command{
		Use:   "serve MODEL",
		Short: "Serve MODEL behind an OpenAI-compatible HTTP API",
		Long: `serve loads MODEL once and answers OpenAI-compatible requests on
http://HOST:PORT: POST /v1/chat/completions and /v1/completions (streaming as
server-sent events, or not; /v1/completions also scores its prompt with echo
and logprobs), GET /v1/models and /v1/models/{model}, GET
/health (503 with the reason while loading, 200 when ready) and GET /metrics
(Prometheus text format).

Up to --parallel sequences share the scheduler's steps, each on its own KV
cache; every stream's token ids equal apr run's for the same prompt, backend
and sampling parameters. A request whose prompt extends a sequence still
cached in a slot (the next turn of a chat) prefills only its new tokens
(usage.prompt_tokens_details.cached_tokens says how many were reused). A
client that disconnects stops its sequence before the next forward pass.

Bad requests get 400 naming the field or JSON position, 401 without the
--api-key, 404 for another model name, 413 for a body over 4 MiB, 503 with
Retry-After when --max-queue requests already wait for a slot. SIGINT or
SIGTERM stops accepting, lets in-flight requests finish within --grace,
cancels the rest and exits 0. An unknown or unavailable backend is refused
(exit 3), never replaced.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model = args[0]
			return runServe(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Backend, "backend", "cpu", "backend to run on (a registered backend name)")
	fl.StringVar(&opts.Host, "host", "127.0.0.1", "address to listen on")
	fl.IntVar(&opts.Port, "port", 8080, "port to listen on (0: any free port, printed on stderr)")
	fl.IntVar(&opts.Parallel, "parallel", serve.DefaultParallel, "sequences served at once (slots, each with its own KV cache)")
	fl.IntVar(&opts.Ctx, "ctx", 0, fmt.Sprintf("positions per slot (0: %d or the model's context_length if smaller)", serve.DefaultCtx))
	fl.StringVar(&opts.APIKey, "api-key", "", "require Authorization: Bearer KEY on /v1 routes")
	fl.StringVar(&opts.Name, "name", "", "the model's id in /v1/models (default: the file's base name)")
	fl.StringArrayVar(&opts.CORSOrigins, "cors-origin", nil, "let pages of ORIGIN (scheme://host[:port], or * for any) call the API from a browser: CORS headers and preflights (repeatable)")
	fl.IntVar(&opts.Threads, "threads", 0, "threads for the backend (0: its choice)")
	fl.DurationVar(&opts.Grace, "grace", serve.DefaultGrace, "how long in-flight requests may run on after SIGINT/SIGTERM")
	fl.IntVar(&opts.MaxQueue, "max-queue", serve.DefaultMaxQueue, "requests that may wait for a slot; more get 503 with Retry-After")
	return c
}

func runServe(ctx context.Context, env *Env, opts serveOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return badInputf("serve: --port %d is not a port", opts.Port)
	}
	s, err := serve.New(serve.Options{Model: opts.Model, Backend: opts.Backend, Threads: opts.Threads, Parallel: opts.Parallel,
		Ctx: opts.Ctx, APIKey: opts.APIKey, Name: opts.Name, Grace: opts.Grace, MaxQueue: opts.MaxQueue, CORSOrigins: opts.CORSOrigins, Log: env.Log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(env.Stderr, "apr serve: listening on http://%s (loading %s on %s)\n", ln.Addr(), opts.Model, opts.Backend)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		start := time.Now()
		if err := s.Load(ctx); err != nil {
			fmt.Fprintf(env.Stderr, "apr serve: not serving: %v (/health answers 503 with this reason)\n", err)
			return
		}
		fmt.Fprintf(env.Stderr, "apr serve: ready in %.1f s\n", time.Since(start).Seconds())
	}()
	err = s.Serve(ctx, ln)
	fmt.Fprintln(env.Stderr, "apr serve: stopped")
	return err
}
