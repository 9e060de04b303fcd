package node

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// The API's headers.
const (
	HeaderProducer  = "Cutline-Producer"
	HeaderSequence  = "Cutline-Sequence"
	headerToken     = "Cutline-Fencing-Token"
	HeaderNext      = "Cutline-Next-Offset"
	HeaderContinue  = "Cutline-Continue-Offset"
	headerStart     = "Cutline-Start-Offset"
	headerRequestID = "Cutline-Request-Id"
)

// Bounds of the API.
const (
	DefaultMaxRecord    = 1 << 20 // a produce's body
	DefaultMaxReadBytes = 8 << 20 // one read's answer
	defaultMaxReads     = 16      // reads served at once
	maxProducerLen      = 128
	defaultLimit        = 100
	maxLimit            = 1000
	produceTimeout      = 30 * time.Second // a produce: its stream's open and its acknowledgement
)

// ServerOptions configures the API; a zero bound is its default.
type ServerOptions struct {
	Token                   []byte // the bearer token of /v1 and /metrics; nil: none (-insecure)
	MaxRecord, MaxReadBytes int64
	MaxReads                int
	Logger                  *slog.Logger
}

// server is the broker's HTTP API over one node.
type server struct {
	n     *Node
	opts  ServerOptions
	log   *slog.Logger
	mux   *http.ServeMux
	want  [sha256.Size]byte // the token's digest
	reads chan struct{}     // a place per read served
}

func NewServer(n *Node, opts ServerOptions) *server {
	opts.MaxRecord = cmp.Or(opts.MaxRecord, DefaultMaxRecord)
	opts.MaxReadBytes = cmp.Or(opts.MaxReadBytes, DefaultMaxReadBytes)
	opts.MaxReads = cmp.Or(opts.MaxReads, defaultMaxReads)
	s := &server{n: n, opts: opts, log: opts.Logger, mux: http.NewServeMux(), want: sha256.Sum256(opts.Token),
		reads: make(chan struct{}, opts.MaxReads)}
	s.mux.Handle("POST /v1/streams/{stream}/records", s.api(s.produce))
	s.mux.Handle("GET /v1/streams/{stream}/records", s.api(s.consume))
	s.mux.Handle("PUT /v1/streams/{stream}/token", s.api(s.installToken))
	s.mux.Handle("GET /v1/streams", s.api(s.list))
	// The metrics name the zones and show the traffic: behind the token
	// here; -metrics-listen serves them without it on a listener of
	// their own.
	s.mux.Handle("GET /metrics", s.auth(metricsHandler(n).ServeHTTP))
	// The peers' pings are authenticated by their node certificates
	// (mutual TLS), not by the bearer token.
	s.mux.Handle("POST "+authhttp.RouteHealth, n.health)
	return s
}

func metricsHandler(n *Node) http.Handler {
	return promhttp.HandlerFor(n.Metrics.Registry, promhttp.HandlerOpts{})
}

// ServeHTTP routes a request and counts it. What matches no route is
// answered in JSON, as every other error is: 404, or 405 with Allow. A
// path that is not clean (//records, /v1/../metrics) is a 404 too, never
// a redirect: a client that followed one would send its request, and its
// token, to a path it did not name.
func (s *server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := s.n.clk.Now()
	w := &statusRecorder{ResponseWriter: rw, code: http.StatusOK}
	h, route := s.mux.Handler(r)
	if r.URL.Path != path.Clean(r.URL.Path) {
		route = ""
	}
	defer func() {
		route := cmp.Or(route, "none")
		s.n.Metrics.httpRequests.WithLabelValues(route, strconv.Itoa(w.code)).Inc()
		s.n.Metrics.httpSeconds.WithLabelValues(route).Observe(s.n.clk.Now().Sub(start).Seconds())
	}()
	if route != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// The mux's own answer tells a wrong method (405, with Allow) from a
	// wrong path; its plain-text body is replaced.
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); probe.code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "method %s is not allowed here; allowed: %s", r.Method, allow)
		return
	}
	writeError(w, http.StatusNotFound, "no such route: %s %s", r.Method, r.URL.Path)
}

// statusRecorder keeps an answer's status code for the metrics. It
// unwraps for http.ResponseController, which flushes a read's records.
type statusRecorder struct {
	http.ResponseWriter
	code    int
	written bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.written {
		r.code, r.written = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// statusProbe keeps the status and headers of an answer and drops its body.
type statusProbe struct {
	header http.Header
	code   int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.code = code }

// auth requires the bearer token, compared in constant time (of digests,
// so that not even its length shows).
func (s *server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if d := sha256.Sum256([]byte(got)); s.opts.Token != nil && (subtle.ConstantTimeCompare(d[:], s.want[:]) != 1 || !ok) {
			// A client without the token holds no descriptor past its
			// answer.
			w.Header().Set("Connection", "close")
			w.Header().Set("WWW-Authenticate", `Bearer realm="cutline"`)
			writeError(w, http.StatusUnauthorized, "a valid bearer token is required")
			return
		}
		h(w, r)
	})
}

// api serves one route of the API behind auth: the path's stream name,
// when the route has one, is checked first; the handler's error is
// answered by fail, a value it returns as 200 in JSON. (A handler that
// answers itself returns neither.)
func (s *server) api(h func(w http.ResponseWriter, r *http.Request) (any, error)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request) {
		var v any
		err := epoch.ValidateName("stream", r.PathValue("stream"))
		if err != nil && strings.Contains(r.Pattern, "{stream}") {
			err = badRequest("%v", err)
		} else {
			v, err = h(w, r)
		}
		if err != nil {
			s.fail(w, r, err)
		} else if v != nil {
			writeJSON(w, http.StatusOK, v)
		}
	})
}

// httpError is a request a handler refuses, with its status.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

type ErrorBody struct {
	Error     string  `json:"error"`
	Holder    string  `json:"holder,omitempty"`     // the node holding the grant, for a 503
	RequestID string  `json:"request_id,omitempty"` // names a 500's cause in the broker's log
	Start     *uint64 `json:"start,omitempty"`      // where the stream now starts, for a 410
}

func startJSON(w http.ResponseWriter, code int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	startJSON(w, code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, ErrorBody{Error: fmt.Sprintf(format, args...)})
}

// body reads a request's body, at most limit bytes; past it the answer
// is code, saying tooBig.
func body(w http.ResponseWriter, r *http.Request, limit int64, code int, tooBig string) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, &httpError{code, tooBig}
	} else if err != nil {
		return nil, badRequest("reading the body: %v", err)
	}
	return data, nil
}

// produce: POST /v1/streams/{stream}/records.
func (s *server) produce(w http.ResponseWriter, r *http.Request) (any, error) {
	p := batch.Submission{Stream: r.PathValue("stream"), Producer: r.Header.Get(HeaderProducer), Token: r.Header.Get(headerToken)}
	seq := r.Header.Get(HeaderSequence)
	var err error
	switch {
	case lease.ValidateToken(p.Token) != nil:
		return nil, badToken(headerToken, p.Token)
	case (p.Producer == "") != (seq == ""):
		return nil, badRequest("%s and %s go together", HeaderProducer, HeaderSequence)
	case len(p.Producer) > maxProducerLen || !utf8.ValidString(p.Producer) || strings.ContainsFunc(p.Producer, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		return nil, badRequest("%s: at most %d bytes of UTF-8 without control characters", HeaderProducer, maxProducerLen)
	case seq != "":
		if p.Seq, err = strconv.ParseUint(seq, 10, 64); err != nil {
			return nil, badRequest("%s: an unsigned decimal integer", HeaderSequence)
		}
	}
	if p.Data, err = body(w, r, s.opts.MaxRecord, http.StatusRequestEntityTooLarge, fmt.Sprintf("a record is at most %d bytes", s.opts.MaxRecord)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), produceTimeout)
	defer cancel()
	a, err := s.n.produce(ctx, p)
	return a, err
}

// consume: GET /v1/streams/{stream}/records?offset=N&limit=M. The
// answer is written record by record, as each is read, so that a read
// holds one record in memory; it stops before the record that would take
// it past MaxReadBytes, and Cutline-Continue-Offset says where to go on.
func (s *server) consume(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("stream")
	from, err := strconv.ParseUint(cmp.Or(r.URL.Query().Get("offset"), "0"), 10, 64)
	if err != nil {
		return nil, badRequest("offset: an unsigned decimal integer (0 to 18446744073709551615) is required")
	}
	limit, err := limitParam(r)
	if err != nil {
		return nil, err
	}
	select {
	case s.reads <- struct{}{}:
		defer func() { <-s.reads }()
	default:
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("this broker serves %d reads at once; retry", s.opts.MaxReads)}
	}
	page, err := s.n.planRead(r.Context(), name, from, limit, s.opts.MaxReadBytes)
	if err != nil {
		return nil, err
	} else if page.Next == 0 {
		// Nothing was ever covered: the stream is unknown, which a read
		// past a stream's end (200, an empty list) must not look like.
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("stream %q holds no records", name)}
	}
	begin := func() {
		w.Header().Set(HeaderNext, strconv.FormatUint(page.Next, 10))
		w.Header().Set(HeaderContinue, strconv.FormatUint(page.Continue, 10))
		startJSON(w, http.StatusOK)
		_, _ = io.WriteString(w, "[")
	}
	i := 0
	for c, err := range s.n.chunks.ReadPage(r.Context(), page) {
		var rec Record
		if err == nil {
			rec, err = recordOf(name, c)
		}
		switch {
		case err != nil && i == 0:
			// The answer has not begun: what fails here (a retention
			// point that passed the record meanwhile) gets its status.
			return nil, err
		case err != nil:
			// The answer has begun: it is cut, so that the client sees a
			// failed read, not a short one.
			if r.Context().Err() == nil {
				s.log.Error("read failed after its answer began", "stream", name, "offset", c.Offset, "err", err)
			}
			panic(http.ErrAbortHandler)
		case i == 0:
			begin()
		default:
			_, _ = io.WriteString(w, ",")
		}
		if err := writeRecord(w, rec.Offset, rec.Data); err != nil {
			return nil, nil // the client went away
		}
		i++
	}
	if i == 0 {
		begin()
	}
	_, _ = io.WriteString(w, "]\n")
	return nil, nil
}

// writeRecord writes {"offset": N, "data": "<base64>"}, encoding the
// data as it goes. A failed write fails every later one.
func writeRecord(w io.Writer, offset uint64, data []byte) error {
	_, _ = fmt.Fprintf(w, `{"offset":%d,"data":"`, offset)
	enc := base64.NewEncoder(base64.StdEncoding, w)
	_, _ = enc.Write(data)
	_ = enc.Close()
	_, err := io.WriteString(w, `"}`)
	return err
}

// answerBytes is at most what one record of size bytes takes in a
// read's answer.
func answerBytes(size uint64) int64 {
	return int64(len(`{"offset":18446744073709551615,"data":""},`)) + int64(base64.StdEncoding.EncodedLen(int(size)))
}

// limitParam reads ?limit=, 1 to maxLimit (defaultLimit when absent).
func limitParam(r *http.Request) (int, error) {
	limit, err := strconv.ParseUint(cmp.Or(r.URL.Query().Get("limit"), strconv.Itoa(defaultLimit)), 10, 64)
	if err != nil || limit < 1 || limit > maxLimit {
		return 0, badRequest("limit: 1 to %d", maxLimit)
	}
	return int(limit), nil
}

// streamPage is an answer of GET /v1/streams: Next, when there are more
// streams, is what to pass as after for the next page.
type streamPage struct {
	Holder  string       `json:"holder"`
	Streams []streamInfo `json:"streams"`
	Next    string       `json:"next,omitempty"`
}

// list: GET /v1/streams?after=NAME&limit=N, the streams after NAME (from
// the first by default), N at most, in name order.
func (s *server) list(w http.ResponseWriter, r *http.Request) (any, error) {
	limit, err := limitParam(r)
	if err != nil {
		return nil, err
	}
	after := r.URL.Query().Get("after")
	if err := epoch.ValidateName("after", after); after != "" && err != nil {
		return nil, badRequest("%v", err)
	}
	// The holder covers what it acknowledged first, so that next is the
	// stream's real end, as a read would see it.
	if h := s.n.Current(); h != nil {
		if err := h.Star.Absorb(r.Context()); err != nil {
			s.log.Warn("absorb before a listing", "err", err)
		}
	}
	infos, more, err := s.n.streams(r.Context(), after, limit)
	if err != nil {
		return nil, err
	}
	page := streamPage{Holder: s.n.holderName(r.Context()), Streams: infos}
	if more {
		page.Next = infos[len(infos)-1].Stream
	}
	return page, nil
}

// statusOf maps errors to statuses: the first entry that holds an error
// gives its status; 500 otherwise.
var statusOf = []struct {
	code int
	errs []error
}{
	{http.StatusServiceUnavailable, []error{authority.ErrNotAdmitted, authority.ErrStaleGrant}},
	{http.StatusConflict, []error{lease.ErrStaleToken, batch.ErrSequenceTooOld, batch.ErrPayloadConflict}},
	{http.StatusTooManyRequests, []error{batch.ErrTooManyStreams}},
	{http.StatusBadRequest, []error{cutline.ErrInvalid}},
	{http.StatusServiceUnavailable, []error{lease.ErrDeferred, errStarting, errShuttingDown, batch.ErrFailed, cutline.ErrClosed,
		lease.ErrSessionLost, lease.ErrTenureLost, lease.ErrDeparting, lease.ErrNotHeld, lease.ErrLimbo,
		metastore.ErrUnavailable, context.DeadlineExceeded}},
}

// fail answers an error: 410 for a read below a stream's retention point
// (saying where the stream now starts), 503 when another node holds the
// grant (naming it) or this one cannot take the request now, 409, 429 or
// 400 for what the client can mend, 500 otherwise. The library's errors
// never show a token. A 500 says only that it happened, under a request
// id with which the broker logs its cause: the cause may name keys,
// paths and servers that are none of the client's business.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if he, ok := errors.AsType[*httpError](err); ok {
		if he.code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, he.code, "%s", he.msg)
		return
	}
	code, body := http.StatusInternalServerError, ErrorBody{Error: err.Error()}
	for _, st := range statusOf {
		if slices.ContainsFunc(st.errs, func(t error) bool { return errors.Is(err, t) }) {
			code = st.code
			break
		}
	}
	te, trimmed := errors.AsType[*settle.TrimmedError](err)
	switch {
	case trimmed:
		code, body.Start = http.StatusGone, &te.Start
		w.Header().Set(headerStart, strconv.FormatUint(te.Start, 10))
		body.Error = fmt.Sprintf("offset %d of stream %q is below its retention point: its records are gone; the stream now starts at %d", te.Offset, te.Stream, te.Start)
	case code == http.StatusServiceUnavailable:
		if errors.Is(err, authority.ErrNotAdmitted) || errors.Is(err, authority.ErrStaleGrant) {
			body.Error = "this node does not hold the authority grant"
		}
		w.Header().Set("Retry-After", "1")
		body.Holder = s.n.holderName(r.Context())
	case code != http.StatusInternalServerError:
	case r.Context().Err() != nil:
		return // the client went away: nobody reads the answer
	default:
		var b [8]byte
		_, _ = rand.Read(b[:])
		body.RequestID = hex.EncodeToString(b[:])
		s.log.Error("request failed", "request_id", body.RequestID, "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set(headerRequestID, body.RequestID)
		body.Error = "internal error: the broker logged its cause under request id " + body.RequestID
	}
	writeJSON(w, code, body)
}
