package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/lease"
)

// putToken installs token on stream through the API, in mode (the
// default when empty), and returns the status and the answer.
func putToken(c *apiClient, stream, token, mode string) (int, tokenAnswer, ErrorBody, http.Header) {
	c.t.Helper()
	path := "/v1/streams/" + stream + "/token"
	if mode != "" {
		path += "?mode=" + mode
	}
	var raw json.RawMessage
	code, hdr := c.do(http.MethodPut, path, []byte(token), nil, &raw)
	var a tokenAnswer
	var e ErrorBody
	if code == http.StatusOK {
		require.NoError(c.t, json.Unmarshal(raw, &a))
	} else {
		require.NoError(c.t, json.Unmarshal(raw, &e), "%s", raw)
	}
	return code, a, e, hdr
}

// produceWithToken produces data with the fencing token tok and returns
// the status and the JSON answer's error.
func produceWithToken(c *apiClient, stream, data, tok string) (int, ErrorBody) {
	c.t.Helper()
	var raw json.RawMessage
	code, hdr := c.do(http.MethodPost, "/v1/streams/"+stream+"/records", []byte(data), map[string]string{headerToken: tok}, &raw)
	require.Equal(c.t, "application/json", hdr.Get("Content-Type"))
	var e ErrorBody
	if code != http.StatusOK {
		require.NoError(c.t, json.Unmarshal(raw, &e), "%s", raw)
		require.NotEmpty(c.t, e.Error)
	}
	return code, e
}

// A producer installs its fencing token with PUT .../token, answered with
// the installed token; from then on a produce passes with exactly that
// token: a wrong, truncated or extended one is 409, a malformed one
// (control characters, not UTF-8, too long) 400, none 409 on a fenced
// stream. Nothing refused is appended. Installing another token fences
// the first; mode any lets a produce without a token pass; an empty
// token in mode any removes it.
func TestInstallTokenEndpoint(t *testing.T) {
	_, c := insecureAPI(t)
	const tok = "producer-7f3a9c"
	// The stream is open on the holder before the install: the install
	// leaves it and opens it again under the token.
	code, _, e := c.produce("orders", []byte("before"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)

	code, a, e, _ := putToken(c, "orders", tok+"\n", "")
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, tokenAnswer{Stream: "orders", Mode: lease.Fenced, Token: tok}, a, "one trailing newline is not the token's")

	for _, tc := range []struct {
		name, tok string
		code      int
	}{
		{"right", tok, http.StatusOK},
		{"wrong", "producer-000000", http.StatusConflict},
		{"malformed: a tab", "producer\t7f3a9c", http.StatusBadRequest},
		{"malformed: not UTF-8", "producer-\xff", http.StatusBadRequest},
		{"malformed: too long", strings.Repeat("p", lease.MaxTokenLen+1), http.StatusBadRequest},
		{"truncated", tok[:len(tok)-1], http.StatusConflict},
		{"extended", tok + "0", http.StatusConflict},
		{"none, on a fenced stream", "", http.StatusConflict},
	} {
		code, e := produceWithToken(c, "orders", tc.name, tc.tok)
		require.Equal(t, tc.code, code, "%s: %s", tc.name, e.Error)
		if tc.code == http.StatusBadRequest {
			require.Contains(t, e.Error, headerToken+": not a fencing token")
		}
		require.NotContains(t, e.Error, tok, "no answer shows the token")
	}
	got := c.consume("orders")
	require.Len(t, got, 2, "only the right token's record was appended")
	require.Equal(t, "right", string(got[1].Data))

	// Another producer takes over: the first one's token is fenced.
	code, a, e, _ = putToken(c, "orders", "producer-2", "any")
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, tokenAnswer{Stream: "orders", Mode: lease.Any, Token: "producer-2"}, a)
	code, _ = produceWithToken(c, "orders", "old", tok)
	require.Equal(t, http.StatusConflict, code)
	code, e = produceWithToken(c, "orders", "none", "")
	require.Equal(t, http.StatusOK, code, "mode any: %s", e.Error)
	code, e = produceWithToken(c, "orders", "new", "producer-2")
	require.Equal(t, http.StatusOK, code, e.Error)

	code, a, e, _ = putToken(c, "orders", "", "any")
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, tokenAnswer{Stream: "orders", Mode: lease.Any}, a, "removed")
	code, _ = produceWithToken(c, "orders", "stale", "producer-2")
	require.Equal(t, http.StatusConflict, code, "a token presented must be the installed one, even none")
	require.Len(t, c.consume("orders"), 4)
}

// What the token route refuses, in JSON: a malformed token (400), an
// unknown mode (400), a fenced stream without a token (400), another
// method (405, with Allow).
func TestInstallTokenRefusals(t *testing.T) {
	_, c := insecureAPI(t)
	for _, tc := range []struct {
		name, token, mode, says string
	}{
		{"a control character", "a\x01b", "", "not a fencing token"},
		{"not UTF-8", "\xfe", "", "not a fencing token"},
		{"too long", strings.Repeat("t", lease.MaxTokenLen+1), "", "not a fencing token"},
		{"far too long", strings.Repeat("t", 1<<20), "", "at most 256 bytes"},
		{"two lines", "a\nb", "", "not a fencing token"},
		{"an unknown mode", "t", "strict", "must be any or fenced"},
		{"fenced without a token", "", "fenced", "needs a token"},
	} {
		code, _, e, _ := putToken(c, "orders", tc.token, tc.mode)
		require.Equal(t, http.StatusBadRequest, code, tc.name)
		require.Contains(t, e.Error, tc.says, tc.name)
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		code, hdr, body := rawDo(t, c, m, "/v1/streams/orders/token")
		require.Equal(t, http.StatusMethodNotAllowed, code, m)
		require.Equal(t, "application/json", hdr.Get("Content-Type"))
		require.Equal(t, "PUT", hdr.Get("Allow"))
		var e ErrorBody
		require.NoError(t, json.Unmarshal(body, &e), "%s", body)
		require.Contains(t, e.Error, "not allowed")
	}
	code, hdr, body := rawDo(t, c, http.MethodPut, "/v1/streams/a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.0.1.2.3.4.5.6.7.8.9/token")
	require.Equal(t, http.StatusBadRequest, code, "%s", body)
	require.Equal(t, "application/json", hdr.Get("Content-Type"))
}

// Only the holder installs a token: another broker answers 503 with
// Retry-After, naming the holder, as it does a produce.
func TestInstallTokenOnlyTheHolder(t *testing.T) {
	c := newCluster(t)
	a := c.join("node-a")
	waitHolding(t, a.Node)
	b := c.join("node-b")
	code, _, e, hdr := putToken(b.api, "orders", "tok", "")
	require.Equal(t, http.StatusServiceUnavailable, code, e.Error)
	require.Equal(t, "1", hdr.Get("Retry-After"))
	require.Equal(t, "node-a", e.Holder)
	code, ans, e, _ := putToken(a.api, "orders", "tok", "")
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, "tok", ans.Token)
}
