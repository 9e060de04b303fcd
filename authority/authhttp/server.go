package authhttp

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/epoch"
)

// ServerOptions tunes a Server. The zero value works.
type ServerOptions struct {
	// Identity maps a verified client certificate to the identity it
	// authenticates: a node's name, or one of Operators. An error refuses
	// the request (403). Nil means NodeIdentity.
	Identity func(*x509.Certificate) (string, error)
	// Operators are the identities allowed to request a handoff. They are
	// not nodes: they may neither open a stream nor post a node's event.
	Operators []string
	// Logger receives refused requests (warn) and streams opened and
	// closed (debug). It never receives a request body. Nil discards.
	Logger *slog.Logger
	// Buffer is how many messages a stream queues while they are written
	// out. 0 means 64; at most 4096. A stream whose queue overflows is
	// closed (the node reconnects and learns the state again): the driver
	// never waits on a slow node.
	Buffer int
}

// DefaultBuffer is ServerOptions.Buffer's default.
const DefaultBuffer = 64

// Server is the controller's side of the transport: an http.Handler
// serving the routes of the protocol (see the package documentation) for
// one authority.Driver. Serve it over TLS with ServerTLS's configuration.
//
// The driver is built after the server, because the driver sends
// through the server's Send:
//
//	srv, err := authhttp.NewServer(authhttp.ServerOptions{Operators: ops})
//	d, err := authority.NewDriver(el, ctl, srv.Send, authority.DriverOptions{})
//	srv.SetDriver(d)
//	go d.Run(ctx)
//	httpServer.RegisterOnShutdown(srv.Close)
//
// Until SetDriver, every route answers 503. The http.Server's read and
// write timeouts bound the events; a stream clears them for itself, since
// it lasts as long as the node is connected. Its methods are safe for
// concurrent use.
type Server struct {
	ident func(*x509.Certificate) (string, error)
	ops   map[string]bool
	log   *slog.Logger
	buf   int

	// connMu orders every Connect and Disconnect step with the stream
	// table, so that the controller sees a node's connections in the
	// order the table holds them. It is taken before mu, and never by
	// Send (which the driver calls holding its own lock).
	connMu sync.Mutex
	mu     sync.Mutex // guards drv, streams, seq, closed
	drv    *authority.Driver
	// streams holds the current stream of every node; a stream still in
	// it when its request ends steps an unexpected Disconnect.
	streams map[string]*stream
	seq     uint64
	closed  bool
	active  sync.WaitGroup // stream handlers running
}

// stream is one node's control channel.
type stream struct {
	node string
	id   string
	drv  *authority.Driver // the driver it connected to
	q    chan authority.Msg
	done chan struct{} // closed by end
	once sync.Once

	// wmu guards writing and rc, which is not used once the handler
	// returned.
	wmu     sync.Mutex
	rc      *http.ResponseController
	writing bool
	exited  bool
}

// end closes the stream: its handler stops writing, even one blocked on
// a peer that reads nothing.
func (s *stream) end() {
	s.once.Do(func() {
		close(s.done)
		s.wmu.Lock()
		defer s.wmu.Unlock()
		if s.writing && !s.exited {
			// A deadline in the past fails the write in progress at once.
			// An idle stream just returns, ending its response cleanly.
			_ = s.rc.SetWriteDeadline(time.Unix(1, 0))
		}
	})
}

// write sends one message, unless the stream was ended: a write that
// starts after end is not started, one in progress is cut short.
func (s *stream) write(enc *json.Encoder, m authority.Msg) error {
	s.wmu.Lock()
	s.writing = true
	s.wmu.Unlock()
	defer func() {
		s.wmu.Lock()
		s.writing = false
		s.wmu.Unlock()
	}()
	select {
	case <-s.done:
		return errClosed
	default:
	}
	if err := enc.Encode(toWireMsg(m)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// NewServer returns a server without a driver; attach it with SetDriver.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Buffer == 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Buffer < 1 || opts.Buffer > 4096 {
		return nil, &cutline.ConfigError{Field: "Buffer", Value: opts.Buffer, Reason: "must lie in [1, 4096] (0 means the default)"}
	}
	if opts.Identity == nil {
		opts.Identity = NodeIdentity
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ops := map[string]bool{}
	for _, o := range opts.Operators {
		if o == "" {
			return nil, &cutline.ConfigError{Field: "Operators", Value: `""`, Reason: "an operator identity is empty"}
		}
		ops[o] = true
	}
	return &Server{ident: opts.Identity, ops: ops, log: opts.Logger, buf: opts.Buffer, streams: map[string]*stream{}}, nil
}

// SetDriver attaches the driver the server steps. Replacing a driver (a
// new election) closes every open stream without stepping anything: the
// nodes reconnect and declare themselves to the new controller.
func (s *Server) SetDriver(d *authority.Driver) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	old := s.drv
	s.drv = d
	var ended []*stream
	if old != nil && old != d {
		ended = s.clearLocked()
	}
	s.mu.Unlock()
	for _, st := range ended {
		st.end()
	}
}

// Close closes every stream without stepping anything (the controller is
// going away; its successor learns from the nodes' reconnects), waits for
// their handlers to return, and makes every later request answer 503.
// Register it with http.Server.RegisterOnShutdown: Shutdown does not end
// streaming requests by itself.
func (s *Server) Close() {
	s.connMu.Lock()
	s.mu.Lock()
	s.closed = true
	ended := s.clearLocked()
	s.mu.Unlock()
	s.connMu.Unlock()
	for _, st := range ended {
		st.end()
	}
	s.active.Wait()
}

func (s *Server) clearLocked() []*stream {
	out := make([]*stream, 0, len(s.streams))
	for n, st := range s.streams {
		out = append(out, st)
		delete(s.streams, n)
	}
	return out
}

// Send delivers a controller message to its node's stream: pass it as
// NewDriver's send. It never blocks: a message for a node without a
// stream is dropped (the node learns the state when it connects), and a
// stream whose queue is full is closed.
func (s *Server) Send(m authority.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[m.Recipient()]
	if st == nil {
		s.log.Debug("authhttp: message for a node without a stream dropped", "node", m.Recipient(), "kind", m.Kind())
		return
	}
	select {
	case st.q <- m:
	default:
		s.log.Warn("authhttp: stream queue full; closing the stream", "node", m.Recipient(), "stream", st.id, "kind", m.Kind())
		st.end()
	}
}

func (s *Server) driver() *authority.Driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.drv
}

// ServeHTTP authenticates the request by its verified client certificate
// and serves the protocol's routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		s.log.Warn("authhttp: request without a verified client certificate", "remote", r.RemoteAddr, "path", clip(r.URL.Path))
		writeError(w, http.StatusForbidden, "a verified client certificate is required", nil)
		return
	}
	id, err := s.ident(r.TLS.PeerCertificates[0])
	if err != nil {
		s.log.Warn("authhttp: certificate refused", "remote", r.RemoteAddr, "err", err)
		writeError(w, http.StatusForbidden, "the client certificate names no acceptable identity", nil)
		return
	}
	method := http.MethodPost
	switch r.URL.Path {
	case RouteStream:
		method = http.MethodGet
	case RouteEvent, RouteBye:
	default:
		writeError(w, http.StatusNotFound, "no such route", nil)
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, r.URL.Path+" takes "+method, nil)
		return
	}
	if r.URL.Path != RouteEvent && s.ops[id] {
		s.log.Warn("authhttp: an operator identity spoke as a node", "identity", id, "path", r.URL.Path, "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "an operator identity is not a node", nil)
		return
	}
	switch r.URL.Path {
	case RouteStream:
		s.serveStream(w, r, id)
	case RouteEvent:
		s.serveEvent(w, r, id)
	case RouteBye:
		s.serveBye(w, r, id)
	}
}

func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, id string) {
	want, caps, token, err := parseStreamQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	if err := epoch.ValidateName("node", id); err != nil {
		s.log.Warn("authhttp: the identity is not a node name", "identity", clip(id), "err", err)
		writeError(w, http.StatusForbidden, "the identity is not a node name", nil)
		return
	}
	if want != "" && want != id {
		s.log.Warn("authhttp: stream for another node refused", "identity", id, "claimed", clip(want), "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, fmt.Sprintf("the certificate authenticates %s", id), nil)
		return
	}
	// Steps are not cancelled by the client going away: a durable
	// decision is never abandoned half-way.
	ctx := context.WithoutCancel(r.Context())

	s.connMu.Lock()
	s.mu.Lock()
	if s.closed || s.drv == nil {
		s.mu.Unlock()
		s.connMu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "no controller", nil)
		return
	}
	s.seq++
	st := &stream{node: id, id: strconv.FormatUint(s.seq, 10), drv: s.drv, q: make(chan authority.Msg, s.buf),
		done: make(chan struct{}), rc: http.NewResponseController(w)}
	old := s.streams[id]
	s.streams[id] = st
	s.active.Add(1)
	s.mu.Unlock()
	defer s.active.Done()
	if old != nil {
		// Replaced: the old stream leaves the table, so its handler steps
		// no Disconnect; the controller sees this Connect instead.
		s.log.Debug("authhttp: stream replaced", "node", id, "stream", old.id)
		old.end()
	}
	err = st.drv.Step(ctx, authority.Connect{Node: id, Caps: caps, Token: token})
	if err != nil {
		s.mu.Lock()
		current := s.streams[id] == st
		if current {
			delete(s.streams, id)
		}
		s.mu.Unlock()
		if current {
			_ = st.drv.Step(ctx, authority.Disconnect{Node: id, Unexpected: true})
		}
	}
	s.connMu.Unlock()
	defer s.streamEnded(ctx, st)
	if err != nil {
		s.stepError(w, r, id, "connect", err)
		return
	}
	s.log.Debug("authhttp: stream opened", "node", id, "stream", st.id, "caps", formatCaps(caps), "token", token)

	// A stream lives as long as the node is connected: the host's
	// http.Server timeouts, meant for requests, do not apply to it.
	_ = st.rc.SetReadDeadline(time.Time{})
	_ = st.rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(HeaderNode, id)
	h.Set(HeaderStream, st.id)
	w.WriteHeader(http.StatusOK)
	if err := st.rc.Flush(); err != nil {
		return
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-st.done:
			return
		case m := <-st.q:
			if err := st.write(enc, m); err != nil {
				return
			}
		}
	}
}

// streamEnded ends a stream's handler: a stream still current lost its
// channel without a goodbye, and the controller is told so.
func (s *Server) streamEnded(ctx context.Context, st *stream) {
	st.wmu.Lock()
	st.exited = true
	st.wmu.Unlock()
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	current := s.streams[st.node] == st
	if current {
		delete(s.streams, st.node)
	}
	s.mu.Unlock()
	if !current {
		s.log.Debug("authhttp: stream closed", "node", st.node, "stream", st.id)
		return
	}
	s.log.Debug("authhttp: stream dropped", "node", st.node, "stream", st.id)
	if err := st.drv.Step(ctx, authority.Disconnect{Node: st.node, Unexpected: true}); err != nil {
		s.log.Warn("authhttp: disconnect", "node", st.node, "err", err)
	}
}

func (s *Server) serveEvent(w http.ResponseWriter, r *http.Request, id string) {
	ev, claimed, kind, err := decodeEvent(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body exceeds %d bytes", MaxBody), nil)
			return
		}
		writeError(w, http.StatusBadRequest, "malformed event: "+err.Error(), nil)
		return
	}
	if _, ok := ev.(authority.HandoffRequest); ok {
		if !s.ops[id] {
			s.log.Warn("authhttp: handoff requested by an identity that is not an operator", "identity", id, "remote", r.RemoteAddr)
			writeError(w, http.StatusForbidden, "only an operator may request a handoff", nil)
			return
		}
	} else if s.ops[id] || claimed != id {
		s.log.Warn("authhttp: event for another node refused", "identity", id, "claimed", clip(claimed), "kind", kind, "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, fmt.Sprintf("the certificate authenticates %s, not the event's node", id), nil)
		return
	}
	d := s.driver()
	if d == nil {
		writeError(w, http.StatusServiceUnavailable, "no controller", nil)
		return
	}
	if err := d.Step(context.WithoutCancel(r.Context()), ev); err != nil {
		s.stepError(w, r, id, kind, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) serveBye(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	for k := range q {
		if k != "stream" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown parameter %.40q", k), nil)
			return
		}
	}
	want := q.Get("stream")
	ctx := context.WithoutCancel(r.Context())
	s.connMu.Lock()
	s.mu.Lock()
	st := s.streams[id]
	d := s.drv
	switch {
	case s.closed || d == nil:
		s.mu.Unlock()
		s.connMu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "no controller", nil)
		return
	case want != "" && (st == nil || st.id != want):
		// The goodbye of a stream already gone: a newer stream of the
		// node is not closed by it.
		s.mu.Unlock()
		s.connMu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	if st != nil {
		delete(s.streams, id)
		d = st.drv
	}
	s.mu.Unlock()
	err := d.Step(ctx, authority.Disconnect{Node: id})
	s.connMu.Unlock()
	if st != nil {
		st.end()
	}
	if err != nil {
		s.stepError(w, r, id, "bye", err)
		return
	}
	s.log.Debug("authhttp: goodbye", "node", id)
	w.WriteHeader(http.StatusOK)
}

// stepError answers a driver's error: 409 for a refused event, 400 for an
// invalid one, 503 for a driver that failed.
func (s *Server) stepError(w http.ResponseWriter, r *http.Request, id, kind string, err error) {
	if re, ok := errors.AsType[*authority.RefusedError](err); ok {
		writeError(w, http.StatusConflict, re.Error(), &wireRefused{Node: re.Node, Event: re.Event, Reason: re.Reason})
		return
	}
	if errors.Is(err, cutline.ErrInvalid) {
		writeError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	s.log.Warn("authhttp: the controller failed", "identity", id, "kind", kind, "remote", r.RemoteAddr, "err", err)
	writeError(w, http.StatusServiceUnavailable, err.Error(), nil)
}

func writeError(w http.ResponseWriter, code int, msg string, refused *wireRefused) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorBody{Error: msg, Refused: refused})
}

// clip bounds a string taken from a request before it is logged.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
