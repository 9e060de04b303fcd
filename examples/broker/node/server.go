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
	// DefaultMaxRecord bounds one record's bytes (a produce's body).
	DefaultMaxRecord = 1 << 20
	maxProducerLen   = 128
	defaultLimit     = 100
	maxLimit         = 1000
	// DefaultMaxReadBytes bounds the bytes of one read's answer, and
	// defaultMaxReads the reads served at once.
	DefaultMaxReadBytes = 8 << 20
	defaultMaxReads     = 16
	// produceTimeout bounds a produce: the open of its stream and its
	// acknowledgement.
	produceTimeout = 30 * time.Second
)

// ServerOptions configures the API.
type ServerOptions struct {
	// Token is the bearer token every /v1 request and /metrics must
	// carry; nil serves them without authentication (-insecure).
	Token []byte
	// MaxRecord bounds a produce's body; 0 means DefaultMaxRecord.
	MaxRecord int64
	// MaxReadBytes bounds the bytes of a read's answer (it stops before
	// the record that would pass it, but holds one record at least);
	// MaxReads bounds the reads served at once (503 past it). 0 means
	// DefaultMaxReadBytes and defaultMaxReads.
	MaxReadBytes int64
	MaxReads     int
	Logger       *slog.Logger
}

// server is the broker's HTTP API over one node, and its metrics.
type server struct {
	n     *Node
	opts  ServerOptions
	log   *slog.Logger
	mux   *http.ServeMux
	want  [sha256.Size]byte // the token's digest
	reads chan struct{}     // a place per read served
}

func NewServer(n *Node, opts ServerOptions) *server {
	if opts.MaxRecord == 0 {
		opts.MaxRecord = DefaultMaxRecord
	}
	if opts.MaxReadBytes == 0 {
		opts.MaxReadBytes = DefaultMaxReadBytes
	}
	if opts.MaxReads == 0 {
		opts.MaxReads = defaultMaxReads
	}
	s := &server{n: n, opts: opts, log: opts.Logger, mux: http.NewServeMux(), want: sha256.Sum256(opts.Token),
		reads: make(chan struct{}, opts.MaxReads)}
	s.mux.Handle("POST /v1/streams/{stream}/records", s.auth(s.produce))
	s.mux.Handle("GET /v1/streams/{stream}/records", s.auth(s.consume))
	s.mux.Handle("PUT /v1/streams/{stream}/token", s.auth(s.installToken))
	s.mux.Handle("GET /v1/streams", s.auth(s.list))
	// The metrics name the zones and show the traffic: behind the token
	// here; -metrics-listen serves them without it on a listener of
	// their own.
	s.mux.Handle("GET /metrics", s.auth(metricsHandler(n).ServeHTTP))
	// The peers' pings: authenticated by their node certificates (mutual
	// TLS), not by the bearer token.
	s.mux.Handle("POST "+authhttp.RouteHealth, n.health)
	return s
}

// metricsHandler serves the node's metrics page.
func metricsHandler(n *Node) http.Handler {
	return promhttp.HandlerFor(n.Metrics.Registry, promhttp.HandlerOpts{})
}

// ServeHTTP routes a request. What matches no route is answered in JSON,
// as every other error is: 404, or 405 with Allow. A path that is not
// clean (//records, /v1/../metrics) is a 404 too, never a redirect: a
// client that followed one would send its request, and its token, to a
// path it did not name.
func (s *server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := s.n.clk.Now()
	w := &statusRecorder{ResponseWriter: rw, code: http.StatusOK}
	_, route := s.mux.Handler(r)
	if r.URL.Path != path.Clean(r.URL.Path) {
		route = ""
	}
	defer func() {
		s.n.Metrics.httpRequests.WithLabelValues(cmp.Or(route, "none"), strconv.Itoa(w.code)).Inc()
		s.n.Metrics.httpSeconds.WithLabelValues(cmp.Or(route, "none")).Observe(s.n.clk.Now().Sub(start).Seconds())
	}()
	if route != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// The mux's own answer tells a wrong method (405, with Allow) from a
	// wrong path; its plain-text body is replaced.
	probe := &statusProbe{header: http.Header{}}
	if r.URL.Path == path.Clean(r.URL.Path) {
		s.mux.ServeHTTP(probe, r)
	}
	if allow := probe.header.Get("Allow"); probe.code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "method %s is not allowed here; allowed: %s", r.Method, allow)
		return
	}
	writeError(w, http.StatusNotFound, "no such route: %s %s", r.Method, r.URL.Path)
}

// statusRecorder passes an answer on and keeps its status code for the
// request metrics. It unwraps for http.ResponseController, which flushes
// the records of a read as they are written.
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
			// Nothing more is served on this connection: a client
			// without the token holds no descriptor past its answer.
			w.Header().Set("Connection", "close")
			w.Header().Set("WWW-Authenticate", `Bearer realm="cutline"`)
			writeError(w, http.StatusUnauthorized, "a valid bearer token is required")
			return
		}
		h(w, r)
	})
}

type ErrorBody struct {
	Error string `json:"error"`
	// Holder is the node holding the grant, for a 503 from another node.
	Holder string `json:"holder,omitempty"`
	// RequestID names a 500 in the broker's log, which holds its cause.
	RequestID string `json:"request_id,omitempty"`
	// Start is where a stream now starts, for a read below its retention
	// point (410).
	Start *uint64 `json:"start,omitempty"`
}

// startJSON starts a JSON answer with its status code.
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

// stream reads and checks the path's stream name.
func stream(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("stream")
	if err := epoch.ValidateName("stream", name); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return "", false
	}
	return name, true
}

// body reads a request's body, at most limit bytes; past it the answer
// is code, saying tooBig.
func body(w http.ResponseWriter, r *http.Request, limit int64, code int, tooBig string) ([]byte, bool) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeError(w, code, "%s", tooBig)
		return nil, false
	} else if err != nil {
		writeError(w, http.StatusBadRequest, "reading the body: %v", err)
		return nil, false
	}
	return data, true
}

// produce: POST /v1/streams/{stream}/records.
func (s *server) produce(w http.ResponseWriter, r *http.Request) {
	name, ok := stream(w, r)
	if !ok {
		return
	}
	p := produceReq{stream: name, producer: r.Header.Get(HeaderProducer), token: r.Header.Get(headerToken)}
	seq := r.Header.Get(HeaderSequence)
	var err error
	switch {
	case !validToken(w, headerToken, p.token):
		return
	case (p.producer == "") != (seq == ""):
		writeError(w, http.StatusBadRequest, "%s and %s go together", HeaderProducer, HeaderSequence)
		return
	case len(p.producer) > maxProducerLen || !utf8.ValidString(p.producer) || strings.ContainsFunc(p.producer, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		writeError(w, http.StatusBadRequest, "%s: at most %d bytes of UTF-8 without control characters", HeaderProducer, maxProducerLen)
		return
	case seq != "":
		if p.seq, err = strconv.ParseUint(seq, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, "%s: an unsigned decimal integer", HeaderSequence)
			return
		}
	}
	if p.data, ok = body(w, r, s.opts.MaxRecord, http.StatusRequestEntityTooLarge, fmt.Sprintf("a record is at most %d bytes", s.opts.MaxRecord)); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), produceTimeout)
	defer cancel()
	if a, err := s.n.produce(ctx, p); err != nil {
		s.fail(w, r, err)
	} else {
		writeJSON(w, http.StatusOK, a)
	}
}

// consume: GET /v1/streams/{stream}/records?offset=N&limit=M. The
// answer is written record by record, as each is read, so that a read
// holds one record in memory; it stops before the record that would take
// it past MaxReadBytes, and Cutline-Continue-Offset says where to go on.
func (s *server) consume(w http.ResponseWriter, r *http.Request) {
	name, ok := stream(w, r)
	if !ok {
		return
	}
	from, err := strconv.ParseUint(cmp.Or(r.URL.Query().Get("offset"), "0"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "offset: an unsigned decimal integer (0 to 18446744073709551615) is required")
		return
	}
	limit, ok := limitParam(w, r)
	if !ok {
		return
	}
	select {
	case s.reads <- struct{}{}:
		defer func() { <-s.reads }()
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "this broker serves %d reads at once; retry", s.opts.MaxReads)
		return
	}
	refs, next, err := s.n.planRead(r.Context(), name, from, limit, s.opts.MaxReadBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	} else if next == 0 {
		// Nothing was ever covered: the stream is unknown (or its first
		// records are not covered yet), which a read past a stream's end
		// (200, an empty list) must not look like.
		writeError(w, http.StatusNotFound, "stream %q holds no records", name)
		return
	}
	readNext, stop := s.n.records(r.Context(), name, from)
	defer stop()
	read := func(want uint64) (Record, error) {
		rec, _, err := readNext()
		if err == nil && rec.Offset != want {
			err = fmt.Errorf("read %s: offset %d where the plan had %d", name, rec.Offset, want)
		}
		return rec, err
	}
	var first Record
	if len(refs) > 0 {
		// The first record is read before the answer starts: what fails
		// there (a retention point that passed it meanwhile) still gets
		// its status.
		if first, err = read(refs[0].Offset); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	w.Header().Set(HeaderNext, strconv.FormatUint(next, 10))
	w.Header().Set(HeaderContinue, strconv.FormatUint(from+uint64(len(refs)), 10))
	startJSON(w, http.StatusOK)
	_, _ = io.WriteString(w, "[")
	for i, ref := range refs {
		rec := first
		if i > 0 {
			if rec, err = read(ref.Offset); err != nil {
				// The answer has begun: all that is left is to cut it, so
				// that the client sees a failed read, not a short one.
				if r.Context().Err() == nil {
					s.log.Error("read failed after its answer began", "stream", name, "offset", ref.Offset, "err", err)
				}
				panic(http.ErrAbortHandler)
			}
			_, _ = io.WriteString(w, ",")
		}
		if err := writeRecord(w, ref.Offset, rec.Data); err != nil {
			return // the client went away
		}
	}
	_, _ = io.WriteString(w, "]\n")
}

// writeRecord writes one record of a read's answer, {"offset": N, "data":
// "<base64>"}, encoding its data as it goes.
func writeRecord(w io.Writer, offset uint64, data []byte) error {
	if _, err := fmt.Fprintf(w, `{"offset":%d,"data":"`, offset); err != nil {
		return err
	}
	enc := base64.NewEncoder(base64.StdEncoding, w)
	if _, err := enc.Write(data); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, `"}`)
	return err
}

// answerBytes is at most what one record of size bytes (its data and
// what the flight holds with it) takes in a read's answer.
func answerBytes(size uint64) int64 {
	return int64(len(`{"offset":18446744073709551615,"data":""},`)) + int64(base64.StdEncoding.EncodedLen(int(size)))
}

// limitParam reads ?limit=, 1 to maxLimit (defaultLimit when absent).
func limitParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	limit, err := strconv.ParseUint(cmp.Or(r.URL.Query().Get("limit"), strconv.Itoa(defaultLimit)), 10, 64)
	if err != nil || limit < 1 || limit > maxLimit {
		writeError(w, http.StatusBadRequest, "limit: 1 to %d", maxLimit)
		return 0, false
	}
	return int(limit), true
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
func (s *server) list(w http.ResponseWriter, r *http.Request) {
	limit, ok := limitParam(w, r)
	if !ok {
		return
	}
	after := r.URL.Query().Get("after")
	if err := epoch.ValidateName("after", after); after != "" && err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
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
		s.fail(w, r, err)
		return
	}
	page := streamPage{Holder: s.n.holderName(r.Context()), Streams: infos}
	if more {
		page.Next = infos[len(infos)-1].Stream
	}
	writeJSON(w, http.StatusOK, page)
}

// Errors by status: fail answers an error with the first status whose
// list holds it.
var (
	errsConflict    = []error{lease.ErrStaleToken, errSequenceTooOld, errPayloadConflict}
	errsUnavailable = []error{lease.ErrDeferred, errStarting, errShuttingDown, errUnknownOutcome, cutline.ErrClosed,
		lease.ErrSessionLost, lease.ErrTenureLost, lease.ErrDeparting, lease.ErrNotHeld, lease.ErrLimbo,
		metastore.ErrUnavailable, context.DeadlineExceeded}
)

func isAny(err error, targets []error) bool {
	return slices.ContainsFunc(targets, func(t error) bool { return errors.Is(err, t) })
}

// fail answers an error: 410 for a read below a stream's retention point
// (saying where the stream now starts), 503 when another node holds the
// grant (naming it) or this one cannot take the request now, 409 for a
// stale fencing token or a producer sequence refused, 429 past the quota
// of streams, 400 for a refused value, 500 otherwise. The library's
// errors never show a token. A 500 says only that it happened, and names
// it by a request id under which the broker logs its cause: the cause
// may name keys, paths and servers that are none of the client's
// business.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	te, trimmed := errors.AsType[*settle.TrimmedError](err)
	switch {
	case trimmed:
		w.Header().Set(headerStart, strconv.FormatUint(te.Start, 10))
		writeJSON(w, http.StatusGone, ErrorBody{Error: fmt.Sprintf("offset %d of stream %q is below its retention point: its records are gone; the stream now starts at %d", te.Offset, te.Stream, te.Start), Start: &te.Start})
	case errors.Is(err, authority.ErrNotAdmitted), errors.Is(err, authority.ErrStaleGrant):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: "this node does not hold the authority grant", Holder: s.n.holderName(r.Context())})
	case isAny(err, errsConflict):
		writeError(w, http.StatusConflict, "%v", err)
	case errors.Is(err, errStreamQuota):
		writeError(w, http.StatusTooManyRequests, "%v", err)
	case errors.Is(err, cutline.ErrInvalid):
		writeError(w, http.StatusBadRequest, "%v", err)
	case isAny(err, errsUnavailable):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: err.Error(), Holder: s.n.holderName(r.Context())})
	case r.Context().Err() != nil:
		// The client went away: nobody reads the answer.
	default:
		var b [8]byte // 64 random bits
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		s.log.Error("request failed", "request_id", id, "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set(headerRequestID, id)
		writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: "internal error: the broker logged its cause under request id " + id, RequestID: id})
	}
}
