package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
)

// insecureAPI starts the embedded default without TLS or token and
// returns a client of its API.
func insecureAPI(t *testing.T) (*process, *apiClient) {
	t.Helper()
	p, err := start(t.Context(), testSettings(t, "-insecure"), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.shutdown(shutdownCtx(t)) })
	waitHolding(t, p.node)
	srv := httptest.NewServer(p.api)
	t.Cleanup(srv.Close)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(hc.CloseIdleConnections)
	return p, &apiClient{t: t, base: srv.URL, hc: hc}
}

// rawDo sends a request and returns its status, headers and body.
func rawDo(t *testing.T, c *apiClient, method, path string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, c.base+path, nil)
	require.NoError(t, err)
	resp, err := c.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, body
}

// Every error the API answers is a JSON {"error": ...}, the routing
// errors included, and says what was wrong in the API's own words.
func TestAPIErrorsAreJSON(t *testing.T) {
	_, c := insecureAPI(t)
	cases := []struct {
		method, path string
		code         int
		says         string
	}{
		{"GET", "/v1/nothing", http.StatusNotFound, "no such route"},
		{"GET", "/", http.StatusNotFound, "no such route"},
		{"DELETE", "/v1/streams", http.StatusMethodNotAllowed, "not allowed"},
		{"PUT", "/v1/streams/orders/records", http.StatusMethodNotAllowed, "not allowed"},
		{"GET", "//records", http.StatusNotFound, "no such route"},
		{"GET", "/v1//streams", http.StatusNotFound, "no such route"},
		{"GET", "/v1/streams/orders/records?offset=-1", http.StatusBadRequest, "offset: an unsigned decimal integer"},
		{"GET", "/v1/streams/orders/records?offset=x", http.StatusBadRequest, "offset: an unsigned decimal integer"},
		{"GET", "/v1/streams/orders/records?offset=99999999999999999999", http.StatusBadRequest, "offset: an unsigned decimal integer"},
		{"GET", "/v1/streams/orders/records?limit=0", http.StatusBadRequest, "limit: 1 to 1000"},
		{"GET", "/v1/streams/orders/token", http.StatusMethodNotAllowed, "not allowed"},
		{"PUT", "/v1/streams/orders/token?mode=strict", http.StatusBadRequest, "must be any or fenced"},
		{"PUT", "/v1/streams/orders/token", http.StatusBadRequest, "a fenced stream needs a token"},
		{"PUT", "/v1/streams/orders/token/x", http.StatusNotFound, "no such route"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, hdr, body := rawDo(t, c, tc.method, tc.path)
			require.Equal(t, tc.code, code, "%s", body)
			require.Equal(t, "application/json", hdr.Get("Content-Type"))
			require.Empty(t, hdr.Get("Location"), "never a redirect")
			var e ErrorBody
			require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			require.Contains(t, e.Error, tc.says)
			require.NotContains(t, e.Error, "strconv")
			if code == http.StatusMethodNotAllowed {
				require.NotEmpty(t, hdr.Get("Allow"))
			}
		})
	}
}

// Every 503 says when to retry, whichever refusal it answers.
func TestAPIServiceUnavailableRetryAfter(t *testing.T) {
	p, _ := insecureAPI(t)
	for _, err := range []error{authority.ErrNotAdmitted, authority.ErrStaleGrant, lease.ErrDeferred,
		lease.ErrNotHeld, metastore.ErrUnavailable, errStarting, batch.ErrFailed} {
		t.Run(err.Error(), func(t *testing.T) {
			w := httptest.NewRecorder()
			p.api.fail(w, httptest.NewRequestWithContext(t.Context(), "POST", "/v1/streams/orders/records", nil), fmt.Errorf("wrapped: %w", err))
			require.Equal(t, http.StatusServiceUnavailable, w.Code)
			require.Equal(t, "1", w.Header().Get("Retry-After"))
		})
	}
}

// A stream nothing was ever written to is a 404; a read at or past the
// end of a stream that has records is 200 with an empty list and
// Cutline-Next-Offset saying where the stream ends.
func TestAPIUnknownStreamAndPastEnd(t *testing.T) {
	_, c := insecureAPI(t)
	code, hdr, body := rawDo(t, c, "GET", "/v1/streams/nothing/records")
	require.Equal(t, http.StatusNotFound, code, "%s", body)
	require.Equal(t, "application/json", hdr.Get("Content-Type"))
	require.Contains(t, string(body), "holds no records")

	for i := range 2 {
		code, _, e := c.produce("orders", []byte(strconv.Itoa(i)), "", 0)
		require.Equal(t, http.StatusOK, code, e.Error)
	}
	for _, off := range []int{2, 5} {
		code, hdr, body = rawDo(t, c, "GET", fmt.Sprintf("/v1/streams/orders/records?offset=%d", off))
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "[]\n", string(body))
		require.Equal(t, "2", hdr.Get(HeaderNext))
	}
}

// The listing shows where each stream ends as soon as its records are
// acknowledged, before anything reads it.
func TestAPIListShowsNextBeforeARead(t *testing.T) {
	_, c := insecureAPI(t)
	for i := range 20 {
		code, _, e := c.produce("orders", []byte(strconv.Itoa(i)), "", 0)
		require.Equal(t, http.StatusOK, code, e.Error)
	}
	var page streamPage
	code, _ := c.do(http.MethodGet, "/v1/streams", nil, nil, &page)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, page.Streams, 1)
	require.Equal(t, uint64(20), page.Streams[0].Next)
}

// A producer sequence names one record: sent again with the same bytes it
// is a duplicate, with other bytes a conflict (409), never appended.
func TestAPIProducerSequencePayloadConflict(t *testing.T) {
	_, c := insecureAPI(t)
	code, first, _ := c.produce("orders", []byte("a"), "p1", 1)
	require.Equal(t, http.StatusOK, code)
	code, _, e := c.produce("orders", []byte("b"), "p1", 1)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, e.Error, "another payload")
	code, again, _ := c.produce("orders", []byte("a"), "p1", 1)
	require.Equal(t, http.StatusOK, code)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Offset, again.Offset)
	got := c.consume("orders")
	require.Len(t, got, 1)
	require.Equal(t, []byte("a"), got[0].Data)
}

// Sequences need not be contiguous: a gap is accepted, and a sequence
// inside a gap, sent later, is a new record; each sequence is judged only
// by whether the stream holds it.
func TestAPIProducerSequenceGaps(t *testing.T) {
	_, c := insecureAPI(t)
	for i, seq := range []uint64{1, 5, 3} {
		code, a, e := c.produce("orders", []byte(strconv.FormatUint(seq, 10)), "p1", seq)
		require.Equal(t, http.StatusOK, code, e.Error)
		require.False(t, a.Duplicate)
		require.Equal(t, uint64(i), a.Offset)
	}
	code, a, _ := c.produce("orders", []byte("3"), "p1", 3)
	require.Equal(t, http.StatusOK, code)
	require.True(t, a.Duplicate)
	require.Equal(t, uint64(2), a.Offset)
}

// A listener that cannot bind is an error naming it, and nothing logs
// that it listens.
func TestServeBindFailure(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	p, err := start(t.Context(), testSettings(t, "-insecure", "-listen", taken.Addr().String()), log)
	require.NoError(t, err)
	defer func() { _ = p.shutdown(shutdownCtx(t)) }()
	err = <-p.serve()
	le, ok := errors.AsType[*listenError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "api", le.Name)
	require.Contains(t, err.Error(), "cannot listen on "+taken.Addr().String())
	require.NotContains(t, logs.String(), "API listening")
}

// A controller elected over a domain that was granted before waits a
// whole lease before granting, and says so: the wait is not a hang.
func TestControllerLogsWaitForFormerGrant(t *testing.T) {
	c := newCluster(t)
	b := c.join("b1")
	waitHolding(t, b.Node)
	c.ctl.Stop()
	var logs lockedBuffer
	ctl, err := StartController(ControllerConfig{Name: "ctl2", Domain: c.cfg.domain, Store: c.be.Store, Lease: c.cfg.lease,
		SessionTTL: c.cfg.sessionTTL, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer ctl.Stop()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "waiting out the former grant") }, 20*time.Second, 10*time.Millisecond)
}
