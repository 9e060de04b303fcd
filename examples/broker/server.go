package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/lease/authority"
	"github.com/cutline/cutline/lease/authority/authhttp"
	"github.com/cutline/cutline/metastore"
)

// The API's headers.
const (
	headerProducer = "Cutline-Producer"
	headerSequence = "Cutline-Sequence"
	headerToken    = "Cutline-Fencing-Token"
	headerNext     = "Cutline-Next-Offset"
)

// Bounds of the API.
const (
	// DefaultMaxRecord bounds one record's bytes (a produce's body).
	DefaultMaxRecord = 1 << 20
	maxProducerLen   = 128
	defaultLimit     = 100
	maxLimit         = 1000
	// produceTimeout bounds a produce: the open of its stream and its
	// acknowledgement.
	produceTimeout = 30 * time.Second
)

// serverOptions configures the API.
type serverOptions struct {
	// Token is the bearer token every /v1 request must carry; nil serves
	// them without authentication (-insecure).
	Token []byte
	// MaxRecord bounds a produce's body; 0 means DefaultMaxRecord.
	MaxRecord int64
	Logger    *slog.Logger
}

// server is the broker's HTTP API over one node, and its metrics.
type server struct {
	n    *node
	opts serverOptions
	log  *slog.Logger
	mux  *http.ServeMux
	want [sha256.Size]byte // the token's digest
}

func newServer(n *node, opts serverOptions) *server {
	if opts.MaxRecord == 0 {
		opts.MaxRecord = DefaultMaxRecord
	}
	s := &server{n: n, opts: opts, log: opts.Logger, mux: http.NewServeMux(), want: sha256.Sum256(opts.Token)}
	s.mux.Handle("POST /v1/streams/{stream}/records", s.auth(s.produce))
	s.mux.Handle("GET /v1/streams/{stream}/records", s.auth(s.consume))
	s.mux.Handle("GET /v1/streams", s.auth(s.list))
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(n.met.reg, promhttp.HandlerOpts{}))
	// The peers' pings: authenticated by their node certificates (mutual
	// TLS), not by the bearer token.
	s.mux.Handle("POST "+authhttp.RouteHealth, n.health)
	return s
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// auth requires the bearer token, compared in constant time (of digests,
// so that not even its length shows).
func (s *server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token != nil {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			d := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(d[:], s.want[:]) != 1 || !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cutline"`)
				writeJSON(w, http.StatusUnauthorized, errorBody{Error: "a valid bearer token is required"})
				return
			}
		}
		h(w, r)
	})
}

type errorBody struct {
	Error string `json:"error"`
	// Holder is the node holding the grant, for a 503 from another node.
	Holder string `json:"holder,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// stream reads and checks the path's stream name.
func stream(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("stream")
	if err := epoch.ValidateName("stream", name); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return "", false
	}
	return name, true
}

// produce: POST /v1/streams/{stream}/records.
func (s *server) produce(w http.ResponseWriter, r *http.Request) {
	name, ok := stream(w, r)
	if !ok {
		return
	}
	p := produceReq{stream: name, producer: r.Header.Get(headerProducer), token: r.Header.Get(headerToken)}
	seq := r.Header.Get(headerSequence)
	switch {
	case (p.producer == "") != (seq == ""):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: headerProducer + " and " + headerSequence + " go together"})
		return
	case len(p.producer) > maxProducerLen || !utf8.ValidString(p.producer) || strings.ContainsFunc(p.producer, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("%s: at most %d bytes of UTF-8 without control characters", headerProducer, maxProducerLen)})
		return
	case seq != "":
		var err error
		if p.seq, err = strconv.ParseUint(seq, 10, 64); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: headerSequence + ": an unsigned decimal integer"})
			return
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRecord))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("a record is at most %d bytes", s.opts.MaxRecord)})
			return
		}
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "reading the body: " + err.Error()})
		return
	}
	p.data = data
	ctx, cancel := context.WithTimeout(r.Context(), produceTimeout)
	defer cancel()
	a, err := s.n.produce(ctx, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// consume: GET /v1/streams/{stream}/records?offset=N&limit=M.
func (s *server) consume(w http.ResponseWriter, r *http.Request) {
	name, ok := stream(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	from, err := uintParam(q.Get("offset"), 0)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "offset: " + err.Error()})
		return
	}
	limit, err := uintParam(q.Get("limit"), defaultLimit)
	if err != nil || limit < 1 || limit > maxLimit {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("limit: 1 to %d", maxLimit)})
		return
	}
	recs, next, err := s.n.read(r.Context(), name, from, int(limit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set(headerNext, strconv.FormatUint(next, 10))
	writeJSON(w, http.StatusOK, recs)
}

func uintParam(v string, def uint64) (uint64, error) {
	if v == "" {
		return def, nil
	}
	return strconv.ParseUint(v, 10, 64)
}

// list: GET /v1/streams.
func (s *server) list(w http.ResponseWriter, r *http.Request) {
	infos, err := s.n.streams(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Holder  string       `json:"holder"`
		Streams []streamInfo `json:"streams"`
	}{s.n.holderName(r.Context()), infos})
}

// fail answers an error: 503 when another node holds the grant (naming
// it) or this one cannot take the request now, 409 for a stale fencing
// token, 400 for a refused value, 500 otherwise. The error's text never
// holds a token: the library's errors never show one.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, authority.ErrNotAdmitted), errors.Is(err, authority.ErrStaleToken):
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "this node does not hold the authority grant", Holder: s.n.holderName(r.Context())})
	case errors.Is(err, lease.ErrStaleToken), errors.Is(err, errSequenceTooOld):
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
	case errors.Is(err, config.ErrInvalid):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	case errors.Is(err, lease.ErrDeferred), errors.Is(err, errStarting), errors.Is(err, errShuttingDown), errors.Is(err, errUnknownOutcome),
		errors.Is(err, lease.ErrClosed), errors.Is(err, lease.ErrSessionLost), errors.Is(err, lease.ErrTenureLost),
		errors.Is(err, lease.ErrDeparting), errors.Is(err, lease.ErrNotHeld), errors.Is(err, lease.ErrLimbo),
		errors.Is(err, metastore.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error(), Holder: s.n.holderName(r.Context())})
	case r.Context().Err() != nil:
		// The client went away: nobody reads the answer.
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
	}
}
