package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/server/constrain"
	"github.com/ingot-llm/ingot/tokenize"
)

// Config configures a [Server]. The zero value serves the built-in demo
// model on 4 sessions of min(max_position_embeddings, 4096) tokens.
type Config struct {
	// Model is a loaded model to serve; the server does not close it. Nil:
	// the server loads ModelDir with Load.
	Model       *ingot.Model
	ModelDir    string        // model directory; "": the built-in demo model
	LoadOptions ingot.Options // backend, threads, quantization for loading ModelDir
	// ModelName is the id /v1/models lists and responses carry; "": the
	// directory's base name ("tinycode-llama" for the demo). Without
	// Adapters, requests may name any model: there is one.
	ModelName string
	// Adapters are LoRA adapters served beside the base model, loaded
	// once and applied unfused, so they share its weights. A request runs
	// with the adapter its "model" field names (the convention of vLLM's
	// and LoRAX's per-request LoRA); ModelName (or no name) runs the base;
	// with adapters, any other name is a 404 model_not_found. /v1/models
	// lists them after the base.
	Adapters []AdapterDir

	Parallel int                  // sessions, so requests run at once; 0: 4
	Session  ingot.SessionOptions // each session's context window and KV cache type
	MaxQueue int                  // requests waiting for a session before 429; 0: 64, -1: none wait
	// NoPrefixCache empties a session's cache when its request ends, so
	// every request is prefilled from nothing. By default a session keeps
	// its cache and the next request sharing a prefix with it (a chat's
	// next turn, a shared system prompt) prefills only the rest; its
	// logprobs may then differ from a cold run's in the last bits (the
	// cached rows were computed in other prefill chunks), and a request's
	// usage.prompt_tokens_details.cached_tokens tells that another request
	// (of any client) shared its prefix.
	NoPrefixCache bool
	// NoBatch decodes each session's sequences on their own. By default
	// the sequences of all sessions decode together, one forward a step
	// (continuous batching), where the model allows (not with linear
	// attention or a mixture of experts) and the request does (not with a
	// LoRA adapter or speculative decoding). On the CPU a request's tokens
	// and logprobs are the same either way and whatever runs beside it.
	NoBatch bool

	// Speculative decoding, for the requests it leaves unchanged: greedy
	// ones (the same output, up to exact ties) and unseeded sampling (the
	// same distribution); seeded, logprobs, constrained and echo requests
	// decode plainly. Lookup > 0 drafts up to Lookup tokens a round by
	// prompt lookup; DraftDir drafts with that model (the same tokenizer;
	// loaded with LoadOptions, a session of it per session), DraftTokens
	// a round (0: 4). Not both.
	Lookup      int
	DraftDir    string
	DraftTokens int

	APIKey         string        // if set, requests need "Authorization: Bearer KEY" or "x-api-key: KEY"
	MaxBodyBytes   int64         // request body limit (413 beyond); 0: 8 MiB
	RequestTimeout time.Duration // a request's whole run; 0: 10 minutes
	ShutdownGrace  time.Duration // how long Run lets in-flight requests finish; 0: 30 s
	Logger         *slog.Logger  // request and lifecycle logs; nil: none
}

// AdapterDir names a LoRA adapter's directory (PEFT or mlx-lm files) for
// [Config.Adapters].
type AdapterDir struct {
	Name string // the model id requests select it by
	Dir  string
}

// applyDefaults fills the zero fields and validates, naming every bad field.
func (c *Config) applyDefaults() error {
	var errs []error
	if c.Parallel < 0 {
		errs = append(errs, fmt.Errorf("server: parallel (%d) must be ≥ 0 (0: 4)", c.Parallel))
	}
	if c.MaxQueue < -1 {
		errs = append(errs, fmt.Errorf("server: max_queue (%d) must be ≥ -1 (0: 64, -1: no queue)", c.MaxQueue))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("server: max_body_bytes (%d) must be ≥ 0 (0: 8 MiB)", c.MaxBodyBytes))
	}
	if c.RequestTimeout < 0 || c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("server: request_timeout (%v) and shutdown_grace (%v) must be ≥ 0", c.RequestTimeout, c.ShutdownGrace))
	}
	if c.Lookup < 0 || c.DraftTokens < 0 {
		errs = append(errs, fmt.Errorf("server: lookup (%d) and draft_tokens (%d) must be ≥ 0", c.Lookup, c.DraftTokens))
	}
	if c.Lookup > 0 && c.DraftDir != "" {
		errs = append(errs, errors.New("server: speculative decoding by lookup or by a draft model, not both"))
	}
	if c.Parallel == 0 {
		c.Parallel = 4
	}
	switch c.MaxQueue {
	case 0:
		c.MaxQueue = 64
	case -1:
		c.MaxQueue = 0
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Minute
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ModelName == "" {
		c.ModelName = "tinycode-llama"
		if c.ModelDir != "" {
			c.ModelName = filepath.Base(filepath.Clean(c.ModelDir))
		}
	}
	seen := map[string]bool{c.ModelName: true}
	for i, a := range c.Adapters {
		switch {
		case a.Name == "" || a.Dir == "":
			errs = append(errs, fmt.Errorf("server: adapters[%d]: want a name and a directory, got %q=%q", i, a.Name, a.Dir))
		case seen[a.Name]:
			errs = append(errs, fmt.Errorf("server: adapters[%d]: the name %q is taken (by the base model or another adapter)", i, a.Name))
		}
		seen[a.Name] = true
	}
	return errors.Join(errs...)
}

// A Server serves one model over HTTP. Make it with [New], then either call
// [Server.Run] (listen, load, serve, drain on shutdown) or [Server.Load] and
// mount [Server.Handler] yourself.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	ready   atomic.Pointer[loaded] // nil while loading
	reqs    atomic.Uint64          // request ids
	stop    context.CancelFunc     // cancels every request's context (after the grace period)
	base    context.Context
	wg      sync.WaitGroup // requests in flight

	// test hooks; nil in production
	onToken    func(ctx context.Context) // before each token is sent
	onShutdown func()                    // Run began to shut down
}

// loaded is what Load made.
type loaded struct {
	model   *ingot.Model
	ownM    bool
	tok     *tokenize.Tokenizer
	tmpl    *tokenize.ChatTemplate
	plain   bool // tmpl is the fallback: the model has no chat template
	sched   scheduler
	created int64 // unix seconds the model was ready
	ctxSize int   // each session's context window in tokens
	vocabs  vocab // for constrained decoding
	// toolFormat is how the model writes tool calls, chosen by its
	// vocabulary: the format a forced call is constrained to.
	toolFormat toolFormat
	name       string                    // the base model's id (Config.ModelName)
	adapters   map[string]*ingot.Adapter // by name (Config.Adapters)
	draft      *ingot.Model              // Config.DraftDir's model; nil without
}

// vocab returns the model's vocabulary for constrained decoding.
func (l *loaded) vocab() *constrain.Vocab {
	return l.vocabs.get(l.tok, l.model.Raw().Config.VocabSize, l.model.Raw().EOS)
}

// New validates cfg and returns a server that is not yet serving.
func New(cfg Config) (*Server, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, metrics: newMetrics(), mux: http.NewServeMux()}
	s.base, s.stop = context.WithCancel(context.Background())
	s.routes()
	return s, nil
}

// plainTemplate renders a conversation for a model without a chat template,
// as "# role:" headed turns (a comment in the demo model's Python), the
// tools first and an assistant's tool calls as JSON.
const plainTemplate = "{{ bos_token }}{% if tools %}# tools:\n{{ tools | tojson }}\n{% endif %}" +
	"{% for m in messages %}# {{ m.role }}:\n{{ m.content }}\n{% if m.tool_calls %}{{ m.tool_calls | tojson }}\n{% endif %}{% endfor %}" +
	"{% if add_generation_prompt %}# assistant:\n{% endif %}"

// Load loads the model (unless Config.Model is set), opens the sessions and
// marks the server ready: /health turns 200.
func (s *Server) Load(ctx context.Context) error {
	l := &loaded{model: s.cfg.Model}
	if l.model == nil {
		o := s.cfg.LoadOptions
		if o.Logger == nil {
			o.Logger = s.log
		}
		m, err := ingot.Load(ctx, s.cfg.ModelDir, o)
		if err != nil {
			return err
		}
		l.model, l.ownM = m, true
	}
	fail := func(err error) error {
		if l.ownM {
			l.model.Close()
		}
		return err
	}
	if l.tok = l.model.Tokenizer(); l.tok == nil {
		return fail(errors.New("server: the model directory has no tokenizer.json"))
	}
	var err error
	if l.tmpl, err = l.tok.ChatTemplate(); errors.Is(err, tokenize.ErrNoChatTemplate) {
		special := map[string]string{}
		if id, ok := l.tok.BOS(); ok {
			special["bos_token"] = l.tok.Token(id)
		}
		l.tmpl, l.plain = tokenize.NewChatTemplate(plainTemplate, special), true
		s.log.Warn("the model has no chat template: chat requests use a plain one", "template", plainTemplate)
	} else if err != nil {
		return fail(err)
	}
	l.toolFormat = modelToolFormat(l.tok)
	l.name, l.adapters = s.cfg.ModelName, map[string]*ingot.Adapter{}
	for _, a := range s.cfg.Adapters {
		ad, err := l.model.LoadAdapter(a.Dir)
		if err != nil {
			return fail(fmt.Errorf("server: adapter %q: %w", a.Name, err))
		}
		l.adapters[a.Name] = ad
		s.log.Info("adapter loaded", "name", a.Name, "dir", a.Dir, "bytes", ad.Bytes())
	}
	p, err := newPool(l.model, s.cfg.Parallel, s.cfg.MaxQueue, s.cfg.Session)
	if err != nil {
		return fail(err)
	}
	p.noReuse = s.cfg.NoPrefixCache
	batching := "off"
	if !s.cfg.NoBatch {
		batching = "on"
		if err := p.startBatching(l.model); err != nil {
			batching = err.Error()
		}
	}
	if err := s.speculation(ctx, l, p); err != nil {
		p.close()
		return fail(err)
	}
	l.sched, l.ctxSize = p, p.all[0].contextSize()
	l.created = time.Now().Unix()
	s.ready.Store(l)
	s.log.Info("server ready", "model", s.cfg.ModelName, "backend", l.model.Backend(), "sessions", s.cfg.Parallel,
		"context", p.all[0].contextSize(), "max_queue", s.cfg.MaxQueue, "batching", batching)
	return nil
}

// speculation sets up Config.Lookup or Config.DraftDir on p.
func (s *Server) speculation(ctx context.Context, l *loaded, p *pool) error {
	switch {
	case s.cfg.Lookup > 0:
		p.spec = &model.Speculation{Tokens: s.cfg.Lookup}
		return nil
	case s.cfg.DraftDir == "":
		return nil
	}
	o := s.cfg.LoadOptions
	o.Fuse = ""
	if o.Logger == nil {
		o.Logger = s.log
	}
	dm, err := ingot.Load(ctx, s.cfg.DraftDir, o)
	if err != nil {
		return fmt.Errorf("server: draft model: %w", err)
	}
	p.spec = &model.Speculation{Tokens: s.cfg.DraftTokens}
	for _, sl := range p.all {
		if sl.draft, err = dm.NewSession(ingot.SessionOptions{Context: sl.contextSize(), KV: s.cfg.Session.KV}); err != nil {
			break
		}
		sp := *p.spec
		sp.Draft = sl.draft.Raw()
		if err = sp.Validate(sl.s.Raw()); err != nil {
			break
		}
	}
	if err != nil {
		for _, sl := range p.all {
			if sl.draft != nil {
				sl.draft.Close()
				sl.draft = nil
			}
		}
		dm.Close()
		return fmt.Errorf("server: draft model %s: %w", s.cfg.DraftDir, err)
	}
	l.draft = dm
	s.log.Info("draft model loaded", "dir", s.cfg.DraftDir, "backend", dm.Backend(), "tokens", p.spec.Tokens)
	return nil
}

// Close closes the sessions and, if the server loaded it, the model. Call it
// after the requests have ended.
func (s *Server) Close() error {
	s.stop()
	l := s.ready.Load()
	if l == nil {
		return nil
	}
	err := l.sched.close()
	if l.draft != nil {
		err = errors.Join(err, l.draft.Close())
	}
	if l.ownM {
		err = errors.Join(err, l.model.Close())
	}
	return err
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Run serves on ln: it starts listening at once (/health says 503 while the
// model loads), loads the model, and serves until ctx is done. Then it stops
// accepting connections, lets the requests in flight finish for
// Config.ShutdownGrace, cancels those still running, closes the server and
// returns nil. A failed load is returned as an error.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	loadErr := make(chan error, 1)
	go func() { loadErr <- s.Load(loadCtx) }()
	var err error
	loadDone := false
	select {
	case <-ctx.Done():
	case err = <-served:
	case err = <-loadErr:
		loadDone = true
		if err == nil {
			select {
			case <-ctx.Done():
			case err = <-served:
			}
		}
	}
	if s.onShutdown != nil {
		s.onShutdown()
	}
	s.log.Info("shutting down", "grace", s.cfg.ShutdownGrace)
	cancelLoad()
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if hs.Shutdown(grace) != nil {
		s.log.Warn("grace period over: cancelling the requests in flight")
		s.stop()
		hs.Close()
	}
	s.wg.Wait()
	if !loadDone {
		if e := <-loadErr; err == nil && e != nil && ctx.Err() == nil {
			err = e
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, s.Close())
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.Handle("GET /metrics", s.wrap(apiMetrics, s.serveMetrics))
	s.mux.Handle("GET /v1/models", s.wrap(apiOpenAI, s.models))
	s.mux.Handle("GET /v1/models/{id...}", s.wrap(apiOpenAI, s.model))
	s.mux.Handle("POST /v1/chat/completions", s.wrap(apiOpenAI, s.chatCompletions))
	s.mux.Handle("POST /v1/completions", s.wrap(apiOpenAI, s.completions))
	s.mux.Handle("POST /v1/messages", s.wrap(apiAnthropic, s.messages))
	s.mux.Handle("POST /v1/responses", s.wrap(apiOpenAI, s.responses))
	s.mux.Handle("POST /v1/embeddings", s.wrap(apiOpenAI, s.embeddings))
	s.mux.Handle("/", s.wrap(apiOpenAI, func(w http.ResponseWriter, r *http.Request) error {
		return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
			message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)}
	}))
}

// api says which error shape an endpoint answers with.
type api int

const (
	apiOpenAI api = iota
	apiAnthropic
	apiMetrics // OpenAI errors; answers while the model loads
)

// A request is one HTTP request's state, for its handler, logs and metrics.
type request struct {
	id        string
	start     time.Time
	log       *slog.Logger
	l         *loaded
	prompt    int // prompt tokens
	generated int // generated tokens
	firstTok  time.Time
	lastTok   time.Time
	model     string         // the model id the response carries: the base's or an adapter's (loaded.pick)
	adapter   *ingot.Adapter // the adapter the request named; nil: the base
}

type ctxKey struct{}

func reqOf(ctx context.Context) *request { r, _ := ctx.Value(ctxKey{}).(*request); return r }

// pick sets r's request to run the model its body's "model" field names:
// an adapter by its name, else the base (ModelName, "", or without
// adapters any name). An unknown name with adapters is a 404
// model_not_found, as OpenAI answers.
func (l *loaded) pick(r *http.Request, name string) error {
	rq := reqOf(r.Context())
	if rq == nil { // a handler's parser called alone (tests)
		rq = &request{}
	}
	rq.model, rq.adapter = l.name, nil
	if a, ok := l.adapters[name]; ok {
		rq.model, rq.adapter = name, a
		return nil
	}
	if name == "" || name == l.name || len(l.adapters) == 0 {
		return nil
	}
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found", param: "model",
		message: fmt.Sprintf("no model %q: this server serves %q and the adapters %q", name, l.name, slices.Sorted(maps.Keys(l.adapters)))}
}

// statusWriter records the status for logs and metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// wrap runs h with what every endpoint needs: a request id, the API key, the
// body limit, the timeout, readiness, error bodies, a log line and metrics.
func (s *Server) wrap(kind api, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.wg.Add(1)
		defer s.wg.Done()
		rq := &request{id: s.newID(), start: time.Now(), model: s.cfg.ModelName}
		rq.log = s.log.With("request_id", rq.id)
		sw := &statusWriter{ResponseWriter: w}
		w = sw
		w.Header().Set("X-Request-Id", rq.id)
		endpoint := r.Pattern
		if endpoint == "/" {
			endpoint = "other"
		} else if _, p, ok := strings.Cut(endpoint, " "); ok {
			endpoint = p
		}
		defer func() {
			s.metrics.request(endpoint, sw.status, rq.prompt, rq.generated)
			rq.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"prompt_tokens", rq.prompt, "completion_tokens", rq.generated, "took", time.Since(rq.start))
		}()
		err := func() error {
			if !s.authorized(r) {
				return &apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key",
					message: "missing or wrong API key (send Authorization: Bearer KEY or x-api-key: KEY)"}
			}
			if rq.l = s.ready.Load(); rq.l == nil && kind != apiMetrics {
				w.Header().Set("Retry-After", "1")
				return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "model_loading", message: "the model is loading"}
			}
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
			defer cancel()
			stop := context.AfterFunc(s.base, cancel) // shutdown past the grace period
			defer stop()
			return h(w, r.WithContext(context.WithValue(ctx, ctxKey{}, rq)))
		}()
		if err != nil {
			s.writeError(w, r, kind, rq, err)
		}
	})
}

// writeError answers err, unless the response has begun (then it is only
// logged: a stream reports its own errors).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, kind api, rq *request, err error) {
	ae := asAPIError(r.Context(), err)
	if ae.status >= 500 {
		rq.log.Error("request failed", "err", err)
	}
	if w.(*statusWriter).status != 0 {
		return
	}
	if ae.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	var body any = ae.openAI()
	if kind == apiAnthropic {
		body = ae.anthropic()
	}
	writeJSON(w, ae.status, body)
}

// asAPIError classifies err for the client.
func asAPIError(ctx context.Context, err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, errQueueFull):
		return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded",
			message: "all sessions are busy and the queue is full; retry later"}
	case errors.Is(err, errShutdown):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "shutting_down", message: "the server is shutting down"}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusGatewayTimeout, typ: "server_error", code: "timeout", message: "the request ran past the server's timeout"}
	case errors.Is(err, context.Canceled):
		return &apiError{status: 499, typ: "server_error", code: "cancelled", message: "the request was cancelled"}
	}
	return &apiError{status: http.StatusInternalServerError, typ: "server_error", message: err.Error()}
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key := r.Header.Get("x-api-key")
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = strings.TrimSpace(b)
	}
	return subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

// newID returns a request id: a counter and random bits.
func (s *Server) newID() string {
	var b [6]byte
	rand.Read(b[:])
	return strconv.FormatUint(s.reqs.Add(1), 36) + hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.ready.Load() == nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "loading"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// modelObject is an entry of /v1/models.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Parent  string `json:"parent,omitempty"` // an adapter's base model (vLLM's field)
	Root    string `json:"root,omitempty"`   // an adapter's directory
}

// modelObjects returns the base model's entry, then each adapter's.
func (s *Server) modelObjects() []modelObject {
	created := s.ready.Load().created
	out := []modelObject{{ID: s.cfg.ModelName, Object: "model", Created: created, OwnedBy: "ingot"}}
	for _, a := range s.cfg.Adapters {
		out = append(out, modelObject{ID: a.Name, Object: "model", Created: created, OwnedBy: "ingot", Parent: s.cfg.ModelName, Root: a.Dir})
	}
	return out
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": s.modelObjects()})
	return nil
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	for _, m := range s.modelObjects() {
		if m.ID == id {
			writeJSON(w, http.StatusOK, m)
			return nil
		}
	}
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found", param: "model",
		message: fmt.Sprintf("no model %q (this server serves %q)", id, s.cfg.ModelName)}
}
