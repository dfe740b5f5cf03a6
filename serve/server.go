package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/falsify"
)

// Defaults.
const (
	DefaultParallel     = 4
	DefaultCtx          = 4096
	DefaultMaxBody      = 4 << 20 // bytes of a request body
	DefaultPrefillChunk = 512     // prompt tokens (all prompts together) per forward pass while others decode
	DefaultGrace        = 10 * time.Second
	DefaultMaxQueue     = 256 // requests waiting for a slot; more get 503
)

// Options configure a server.
type Options struct {
	Model    string // path of the GGUF file
	Backend  string // a registered backend; others are refused by name
	Threads  int
	Parallel int    // sequences sharing the scheduler's steps (slots)
	Ctx      int    // positions per slot (0: DefaultCtx, at most the model's context_length)
	APIKey   string // "": no authentication
	Name     string // the model's id in /v1/models ("": the file's base name without .gguf)
	MaxBody  int64  // 0: DefaultMaxBody
	Chunk    int    // prefill tokens per step (0: DefaultPrefillChunk)
	Grace    time.Duration
	MaxQueue int // 0: DefaultMaxQueue
	// CORSOrigins are the browser origins (scheme://host[:port], or "*"
	// for any) whose pages may call the API: their requests get
	// Access-Control-Allow-Origin and preflights (OPTIONS) are answered
	// 204 before authentication, as browsers send them without the key.
	// Empty: none (no CORS headers; OPTIONS is 404).
	CORSOrigins []string
	Log         *slog.Logger
}

// Server is apr serve. New checks the options; Load loads the model (while
// /health answers 503 with the reason); Serve answers HTTP until its
// context ends, then shuts down gracefully.
type Server struct {
	o       Options
	met     *metrics
	mux     *http.ServeMux
	handler http.Handler // mux, behind CORS when Options.CORSOrigins

	mu      sync.RWMutex
	m       *generate.Model
	sch     *sched
	ctxLen  int
	status  string // why /health is 503; "" when ready
	created int64
}

// New checks o and returns a server that is not ready yet. A backend that
// is not registered or cannot run here is refused by name; a missing model
// file is an error.
func New(o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel
	}
	if o.Parallel < 1 || o.Parallel > 256 {
		return nil, fmt.Errorf("serve: --parallel %d must be in [1, 256]", o.Parallel)
	}
	if o.Ctx < 0 {
		return nil, fmt.Errorf("serve: --ctx %d must be positive", o.Ctx)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultPrefillChunk
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = DefaultMaxQueue
	}
	// A backend this build lacks, or one that cannot run on this machine
	// (cuda without a driver or device), is refused before listening.
	if err := model.Available(o.Backend); err != nil {
		return nil, err
	}
	if _, err := os.Stat(o.Model); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if o.Name == "" {
		o.Name = strings.TrimSuffix(filepath.Base(o.Model), ".gguf")
	}
	origins := make([]string, len(o.CORSOrigins)) // the caller's slice is left as it is
	for i, c := range o.CORSOrigins {
		if u, err := url.Parse(c); c != "*" && (err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "") {
			return nil, fmt.Errorf("serve: CORS origin %q: want scheme://host[:port] (as a browser sends Origin) or *", c)
		}
		origins[i] = strings.TrimSuffix(c, "/")
	}
	o.CORSOrigins = origins
	s := &Server{o: o, met: newMetrics(o.Parallel), status: "loading " + o.Model, created: time.Now().Unix()}
	s.routes()
	return s, nil
}

// Load loads the model and starts the scheduler; on failure /health keeps
// answering 503 with the reason, which Load also returns.
func (s *Server) Load(ctx context.Context) error {
	m, err := generate.Load(ctx, generate.LoadOptions{Model: s.o.Model, Backend: s.o.Backend, Threads: s.o.Threads, Log: s.o.Log})
	if err == nil {
		s.setStatus("validating: uploading the weights to " + s.o.Backend)
		if _, err = m.Upload(); err != nil {
			m.Close()
		} else if err = s.f2(ctx, m); err != nil {
			m.Close()
		}
	}
	if err != nil {
		s.setStatus("not serving: " + err.Error())
		return err
	}
	ctxLen := s.o.Ctx
	if ctxLen == 0 {
		ctxLen = min(DefaultCtx, m.Spec.NCtxTrain)
	}
	if ctxLen > m.Spec.NCtxTrain {
		m.Close()
		err := fmt.Errorf("serve: --ctx %d exceeds the model's context_length %d", ctxLen, m.Spec.NCtxTrain)
		s.setStatus("not serving: " + err.Error())
		return err
	}
	s.mu.Lock()
	s.m, s.ctxLen = m, ctxLen
	s.sch = newSched(m, s.met, s.o.Parallel, ctxLen, s.o.Chunk, s.o.MaxQueue)
	s.status = ""
	s.mu.Unlock()
	s.o.Log.Info("serving", "model", s.o.Model, "backend", s.o.Backend, "parallel", s.o.Parallel, "ctx", ctxLen)
	return nil
}

// f2 runs F2 once before a device engine serves (the CUDA engine against
// the reference over a probe prompt): /health stays 503 while it runs, and
// a failed or refused F2 keeps the server from serving, with the reason.
// Engines on the host are not gated by it.
func (s *Server) f2(ctx context.Context, m *generate.Model) error {
	if _, device := m.Eng.(model.Uploader); !device {
		return nil // F2 gates device engines only; no probe prompt is needed
	}
	s.setStatus("validating: F2 on " + s.o.Backend)
	prompt, err := falsify.F2ProbePrompt(m.Spec.Arch)
	if err != nil {
		return fmt.Errorf("serve: F2's probe: %w", err)
	}
	toks, err := generate.PromptTokens(ctx, m.Tok, nil, prompt, true)
	if err != nil {
		return fmt.Errorf("serve: F2's probe prompt: %w", err)
	}
	verdict, err := falsify.F2Validate(s.o.Model, s.o.Log)(ctx, m.Eng, m.SHA256, toks)
	if err != nil {
		return fmt.Errorf("serve: F2 %s: %w", verdict, err)
	}
	s.o.Log.Info("F2", "backend", s.o.Backend, "verdict", verdict)
	return nil
}

func (s *Server) setStatus(st string) {
	s.mu.Lock()
	s.status = st
	s.mu.Unlock()
}

// ready returns the model and scheduler, or why there are none.
func (s *Server) ready() (*generate.Model, *sched, int, string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m, s.sch, s.ctxLen, s.status
}

// Handler is the server's HTTP handler (tests serve it on loopback).
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers on ln until ctx ends; then it stops accepting, lets
// in-flight requests finish within the grace period, cancels the rest,
// releases the model and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 30 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	s.o.Log.Info("shutting down", "grace", s.o.Grace)
	sctx, scancel := context.WithTimeout(context.Background(), s.o.Grace)
	defer scancel()
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		cancel() // in-flight requests' contexts end: their sequences stop
		hs.Close()
		err = nil
	}
	s.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close stops the scheduler (cancelling what runs) and releases the model.
func (s *Server) Close() {
	s.mu.Lock()
	sch, m := s.sch, s.m
	s.sch, s.m = nil, nil
	if s.status == "" {
		s.status = "shut down"
	}
	s.mu.Unlock()
	if sch != nil {
		sch.close()
	}
	if m != nil {
		m.Close()
	}
}

func (s *Server) routes() {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.met.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", s.count("/health", s.health))
	mux.HandleFunc("GET /v1/models", s.count("/v1/models", s.auth(s.models)))
	mux.HandleFunc("GET /v1/models/{model...}", s.count("/v1/models/{model}", s.auth(s.model)))
	mux.HandleFunc("POST /v1/chat/completions", s.count("/v1/chat/completions", s.auth(s.completion(true))))
	mux.HandleFunc("POST /v1/completions", s.count("/v1/completions", s.auth(s.completion(false))))
	mux.HandleFunc("/", s.count("other", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "not_found_error",
			Message: fmt.Sprintf("no route %s %s (routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /v1/models/{model}, GET /health, GET /metrics)", r.Method, r.URL.Path)})
	}))
	s.mux = mux
	s.handler = mux
	if len(s.o.CORSOrigins) > 0 {
		s.handler = s.cors(mux)
	}
}

// statusWriter records the status code for the request counter.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) count(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				s.o.Log.Error("panic in handler", "route", route, "panic", p)
				if sw.code == 0 {
					writeError(sw, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("internal error: %v", p)})
				}
			}
			s.met.requests.WithLabelValues(route, fmt.Sprint(sw.code)).Inc()
		}()
		h(sw, r)
	}
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.o.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.o.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			msg := "wrong API key"
			if len(got) == 0 {
				msg = "missing API key: send Authorization: Bearer KEY"
			}
			writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key", Message: msg})
			return
		}
		h(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	_, _, _, status := s.ready()
	if status != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "reason": status})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelObject()}})
}

// model answers GET /v1/models/{model} (OpenAI's "retrieve model"): the
// served model's object, or 404 model_not_found for any other id, as a
// completion request naming it gets. {model...} takes ids with slashes.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("model"); id != s.o.Name {
		writeError(w, s.modelNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// modelNotFound is the 404 for a model id this server does not serve.
func (s *Server) modelNotFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("model %q does not exist (this server serves %q)", id, s.o.Name)}
}

func (s *Server) modelObject() map[string]any {
	return map[string]any{"id": s.o.Name, "object": "model", "created": s.created, "owned_by": "apr"}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Type == "" {
		e.Type = "invalid_request_error"
	}
	writeJSON(w, e.Status, map[string]any{"error": e})
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// readBody reads at most MaxBody bytes; a longer body is a 413.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Message: fmt.Sprintf("the request body is over the limit of %d bytes", mbe.Limit)}
		}
		return nil, badRequest("", "reading the request body: %v", err)
	}
	return body, nil
}

// cors lets the pages of Options.CORSOrigins call the API from a browser:
// a request whose Origin is allowed gets Access-Control-Allow-Origin (and
// Vary: Origin), and its preflight (OPTIONS with
// Access-Control-Request-Method) is answered 204 here, before the key is
// checked. Other origins get no CORS headers, so their browsers refuse the
// response; the request itself is served as any other.
func (s *Server) cors(next http.Handler) http.Handler {
	all := slices.Contains(s.o.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !(all || slices.Contains(s.o.CORSOrigins, origin)) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		if all {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
