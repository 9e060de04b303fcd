package authhttp_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/internal/testlog"
	"github.com/cutline/cutline/internal/testpki"
)

func kind(k authority.MsgKind, tok authority.Token) func(authority.Msg) bool {
	return func(m authority.Msg) bool { return m.Kind() == k && msgToken(m) == tok }
}

// msgToken is the token m is bound to.
func msgToken(m authority.Msg) authority.Token {
	switch m := m.(type) {
	case authority.GrantMsg:
		return m.Token
	case authority.RevokeMsg:
		return m.Token
	case authority.RequiredMsg:
		return m.Token
	case authority.RecoverMsg:
		return m.Token
	case authority.ReleaseMsg:
		return m.Token
	case authority.TopologyMsg:
		return m.Token
	case authority.HeartbeatNowMsg:
		return m.Token
	case authority.ConcernAnswerMsg:
		return m.Token
	}
	return 0
}

// Two agents dial in over mutual TLS; node-a gets the grant over the
// wire, node-b does not; an operator's handoff moves the grant to node-b
// under the next token, through node-a's release.
func TestEndToEndGrantAndHandoff(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			testEndToEnd(t, newEnvProto(t, authhttp.ServerOptions{}, h2))
		})
	}
}

func testEndToEnd(t *testing.T, e *env) {
	a := e.startAgent("node-a", promotable, true)
	b := e.startAgent("node-b", promotable, false) // not usable: never offers
	recvMsg(t, a.tap.seen, kind(authority.MsgRequired, 0))
	recvMsg(t, b.tap.seen, kind(authority.MsgRequired, 0))
	require.ErrorIs(t, a.agent.Admit(), authority.ErrNotAdmitted)

	// Past its decision delay node-a offers; the controller takes it.
	e.clock.Advance(time.Second)
	a.tap.poke(t)
	require.NoError(t, waitSent(t, a.tap, func(ev authority.Event) bool { _, ok := ev.(authority.Offer); return ok }))
	st := e.d.State()
	require.Equal(t, authority.Recovering, st.Phase)
	require.Equal(t, "node-a", st.Candidate)

	// Past the new controller's fence, the first token goes to node-a.
	e.tick(lease)
	g := recvMsg(t, a.tap.seen, kind(authority.MsgGrant, 1)).(authority.GrantMsg).Grant
	require.Equal(t, authority.Grant{Domain: domain, Holder: "node-a", Token: 1, Deadline: e.clock.Now().Add(lease), Revision: e.d.State().TokenRevision},
		authority.Grant{Domain: g.Domain, Holder: g.Holder, Token: g.Token, Deadline: g.Deadline.UTC(), Revision: g.Revision}, "the grant survives the wire")
	require.NoError(t, a.agent.Admit())
	require.ErrorIs(t, b.agent.Admit(), authority.ErrNotAdmitted)

	// A heartbeat over the wire renews the grant.
	e.clock.Advance(time.Second)
	a.tap.poke(t)
	require.NoError(t, waitSent(t, a.tap, func(ev authority.Event) bool { _, ok := ev.(authority.Heartbeat); return ok }))

	// The operator moves the grant to node-b.
	require.NoError(t, authhttp.Post(e.ctx, e.ts.URL, authority.HandoffRequest{Target: "node-b"}, e.client("ops").hc))
	require.NoError(t, waitSent(t, a.tap, func(ev authority.Event) bool { _, ok := ev.(authority.Released); return ok }))
	recvMsg(t, b.tap.seen, kind(authority.MsgGrant, 2))
	recvMsg(t, a.tap.seen, kind(authority.MsgRevoke, 1))
	require.NoError(t, b.agent.Admit())
	require.ErrorIs(t, a.agent.Admit(), authority.ErrNotAdmitted)
	st = e.d.State()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, "node-b", st.Holder)
	require.Equal(t, authority.Token(2), st.Token)
	require.Equal(t, authority.Required{Star: "node-a", Pos: a.host.progress}, st.Required)
	durable, err := authority.Read(e.ctx, e.store, "", domain)
	require.NoError(t, err)
	require.Equal(t, "node-b", durable.Holder)
	require.Equal(t, authority.Token(2), durable.Token)
}

// A valid certificate speaks only for its own identity: every event kind
// claiming another node is refused with 403 and never stepped; a node
// cannot request a handoff; an operator cannot speak as a node.
func TestImpostors(t *testing.T) {
	var logs testlog.Buffer
	e := newEnv(t, authhttp.ServerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a := e.dial("node-a", promotable, 0)
	b := e.dial("node-b", promotable, 0)
	x := e.dial("node-x", promotable, 0)
	e.grant(a, "node-a")
	recvMsg(t, b.Msgs(), kind(authority.MsgRequired, 0))
	// A handoff is under way: node-a is asked to release. A Released in
	// node-a's name would complete it if it were stepped.
	require.NoError(t, authhttp.Post(e.ctx, e.ts.URL, authority.HandoffRequest{Target: "node-b"}, e.client("ops").hc))
	recvMsg(t, a.Msgs(), kind(authority.MsgRelease, 1))
	before := e.d.State()
	require.Equal(t, authority.Handoff, before.Phase)

	claims := []authority.Event{
		authority.Heartbeat{Node: "node-a", Token: 1, Progress: chain.Position{Epoch: 9, Slot: 9}},
		authority.Offer{Node: "node-a", Token: 1, Star: "node-a", Usable: true},
		authority.Recovered{Node: "node-a", Token: 1, Star: "node-a"},
		authority.Released{Node: "node-a", Token: 1, Progress: chain.Position{Epoch: 9, Slot: 9}},
		authority.Concern{Node: "node-a", Token: 1, Topology: 1, RoundTrip: true},
		authority.ConcernCleared{Node: "node-a", Token: 1},
		authority.Advisory{Node: "node-a", Token: 1},
		authority.Challenge{Node: "node-a", Token: 1, Topology: 1},
		authority.Heartbeat{Token: 1}, // no node at all
	}
	for _, ev := range claims {
		require.ErrorIs(t, x.Send(e.ctx, ev), authhttp.ErrForbidden, "%T over node-x's connection", ev)
		require.ErrorIs(t, authhttp.Post(e.ctx, e.ts.URL, ev, e.client("node-x").hc), authhttp.ErrForbidden, "%T posted by node-x", ev)
		require.ErrorIs(t, authhttp.Post(e.ctx, e.ts.URL, ev, e.client("ops").hc), authhttp.ErrForbidden, "%T posted by the operator", ev)
	}
	require.Equal(t, before, e.d.State(), "nothing was stepped")
	require.Contains(t, logs.String(), `msg="authhttp: event for another node refused" identity=node-x claimed=node-a kind=released`)
	require.NotContains(t, logs.String(), `"progress"`, "no body is logged")

	// Nodes do not request handoffs; a node cannot open another's stream.
	for _, who := range []string{"node-x", "node-b", "node-a"} {
		err := authhttp.Post(e.ctx, e.ts.URL, authority.HandoffRequest{Target: "node-x"}, e.client(who).hc)
		require.ErrorIs(t, err, authhttp.ErrForbidden, who)
	}
	_, err := authhttp.Dial(e.ctx, e.ts.URL, "node-a", promotable, 1, e.client("node-x").hc)
	require.ErrorIs(t, err, authhttp.ErrForbidden)
	// The operator is not a node.
	_, err = authhttp.Dial(e.ctx, e.ts.URL, "ops", promotable, 0, e.client("ops").hc)
	require.ErrorIs(t, err, authhttp.ErrForbidden)
	require.Equal(t, before, e.d.State(), "nothing was stepped")

	// node-a's own release completes the handoff.
	require.NoError(t, a.Send(e.ctx, authority.Released{Node: "node-a", Token: 1, Progress: chain.Position{Epoch: 1, Slot: 3}}))
	recvMsg(t, b.Msgs(), kind(authority.MsgGrant, 2))
	recvMsg(t, a.Msgs(), kind(authority.MsgRevoke, 1))
	require.Equal(t, "node-b", e.d.State().Holder)
}

// Only certificates from the CA reach the handler, and only those that
// name a node or an operator get further.
func TestTransportSecurity(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	hb := authority.Heartbeat{Node: "node-a", Token: 1}
	other := testpki.New(t, "another CA")
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"no certificate", authhttp.ClientTLS(e.ca.Pool, tls.Certificate{})},
		{"a certificate from another CA", authhttp.ClientTLS(e.ca.Pool, other.Client("node-a", "cutline://node/node-a"))},
		{"a server certificate", authhttp.ClientTLS(e.ca.Pool, e.ca.Server("node-a", "cutline://node/node-a"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.clientWith(tc.cfg)
			reached := e.reached.Load()
			err := authhttp.Post(e.ctx, e.ts.URL, hb, c.hc)
			require.ErrorIs(t, err, cutline.ErrUnavailable)
			var re *authhttp.RequestError
			require.ErrorAs(t, err, &re)
			require.Contains(t, err.Error(), "remote error: tls:", "the server refused the handshake")
			_, err = authhttp.Dial(e.ctx, e.ts.URL, "node-a", promotable, 0, c.hc)
			require.ErrorIs(t, err, cutline.ErrUnavailable)
			require.Contains(t, err.Error(), "remote error: tls:")
			require.Equal(t, reached, e.reached.Load(), "no request reached the handler")
		})
	}
	// The client does not trust a server outside its CA either.
	c := e.clientWith(authhttp.ClientTLS(other.Pool, e.ca.Client("node-a", "cutline://node/node-a")))
	err := authhttp.Post(e.ctx, e.ts.URL, hb, c.hc)
	require.ErrorIs(t, err, cutline.ErrUnavailable)
	var verr *tls.CertificateVerificationError
	require.ErrorAs(t, err, &verr)

	// From the CA, but naming no node: the handshake passes, the request
	// is refused before any route.
	for _, uris := range [][]string{
		nil,
		{"cutline://node/node-a", "cutline://node/node-b"},
		{"cutline://operator/node-a"},
		{"https://node/node-a"},
		{"cutline://node/node-a/x"},
		{"cutline://node/.hidden"},
	} {
		c := e.clientWith(authhttp.ClientTLS(e.ca.Pool, e.ca.Client("node-a", uris...)))
		require.ErrorIs(t, authhttp.Post(e.ctx, e.ts.URL, hb, c.hc), authhttp.ErrForbidden, "%v", uris)
		_, err := authhttp.Dial(e.ctx, e.ts.URL, "node-a", promotable, 0, c.hc)
		require.ErrorIs(t, err, authhttp.ErrForbidden, "%v", uris)
	}
	require.Equal(t, authority.Vacant, e.d.State().Phase)
}

// Killing a node's stream steps an unexpected Disconnect: the holder's
// grant is held for the reconnect reservation, resumed by a stream that
// comes back in time, and ended once one does not.
func TestStreamDrop(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			testStreamDrop(t, newEnvProto(t, authhttp.ServerOptions{}, h2))
		})
	}
}

func testStreamDrop(t *testing.T, e *env) {
	a := e.dial("node-a", promotable, 0)
	b := e.dial("node-b", promotable, 0)
	e.grant(a, "node-a")
	recvMsg(t, b.Msgs(), kind(authority.MsgRequired, 0))

	e.client("node-a").kill()
	e.waitEnded("node-a")
	recvClosed(t, a.Msgs())
	e.tick(time.Second)
	st := e.d.State()
	require.Equal(t, authority.Granted, st.Phase, "an unexpected close reserves the grant")
	require.Equal(t, "node-a", st.Holder)

	// Back within the reservation: the grant resumes.
	a2 := e.dial("node-a", promotable, 1)
	recvMsg(t, a2.Msgs(), kind(authority.MsgGrant, 1))
	e.tick(3 * time.Second)
	require.Equal(t, authority.Granted, e.d.State().Phase)
	require.NoError(t, a.Close(), "the goodbye of a dead stream does not close the new one")
	e.tick(3 * time.Second)
	require.Equal(t, authority.Granted, e.d.State().Phase)

	// Dropped again, and not back in time: the grant ends.
	e.client("node-a").kill()
	e.waitEnded("node-a")
	e.tick(time.Second)
	require.Equal(t, authority.Granted, e.d.State().Phase)
	e.tick(time.Second + time.Millisecond)
	st = e.d.State()
	require.Equal(t, authority.Vacant, st.Phase, "the reservation ran out")
	require.Equal(t, authority.Token(1), st.Token)
	require.Equal(t, "node-a", st.Required.Star)
	recvMsg(t, b.Msgs(), kind(authority.MsgRequired, 1))
}

// A second stream of a node replaces the first without a Disconnect.
func TestStreamReplaced(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	a := e.dial("node-a", promotable, 0)
	e.grant(a, "node-a")
	a2 := e.dial("node-a", promotable, 1)
	recvMsg(t, a2.Msgs(), kind(authority.MsgGrant, 1))
	recvClosed(t, a.Msgs())
	e.waitEnded("node-a")
	e.tick(3 * time.Second) // past the reservation an unexpected close would have started
	require.Equal(t, authority.Granted, e.d.State().Phase)
	require.NoError(t, a2.Send(e.ctx, authority.Heartbeat{Node: "node-a", Token: 1}))
	recvMsg(t, a2.Msgs(), kind(authority.MsgGrant, 1))
}

// Close says goodbye: the holder's grant ends at once.
func TestGoodbye(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	a := e.dial("node-a", promotable, 0)
	b := e.dial("node-b", promotable, 0)
	e.grant(a, "node-a")
	recvMsg(t, b.Msgs(), kind(authority.MsgRequired, 0))
	require.NoError(t, a.Close())
	recvClosed(t, a.Msgs())
	st := e.d.State()
	require.Equal(t, authority.Vacant, st.Phase, "a goodbye ends the grant without a reservation")
	recvMsg(t, b.Msgs(), kind(authority.MsgRequired, 1))
	require.ErrorIs(t, a.Send(e.ctx, authority.Heartbeat{Node: "node-a", Token: 1}), cutline.ErrClosed)
	require.NoError(t, a.Close(), "Close is idempotent")
}

// The client maps the controller's answers back: a refusal to
// *authority.RefusedError, a failed driver to ErrUnavailable; Connect is
// carried by Dial.
func TestAnswers(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	a := e.dial("node-a", promotable, 0)
	recvMsg(t, a.Msgs(), kind(authority.MsgRequired, 0))

	err := a.Send(e.ctx, authority.Offer{Node: "node-a", Token: 7, Usable: true})
	require.ErrorIs(t, err, authority.ErrRefused)
	var re *authority.RefusedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "node-a", re.Node)
	require.Equal(t, "offer", re.Event)
	require.Contains(t, re.Reason, "for token 7")

	require.NoError(t, a.Send(e.ctx, authority.Connect{Node: "node-a", Caps: promotable}), "the stream carried this Connect")
	require.ErrorIs(t, a.Send(e.ctx, authority.Connect{Node: "node-a", Caps: promotable, Token: 3}), cutline.ErrInvalid)
	require.ErrorIs(t, a.Send(e.ctx, authority.Disconnect{Node: "node-a"}), cutline.ErrInvalid)
	require.ErrorIs(t, a.Send(e.ctx, authority.Tick{}), cutline.ErrInvalid)

	// The controller's election is lost: its driver fails.
	e.store.Expire(e.sess)
	err = a.Send(e.ctx, authority.Offer{Node: "node-a", Token: 0, Usable: true})
	require.ErrorIs(t, err, cutline.ErrUnavailable)
	var se *authhttp.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusServiceUnavailable, se.Code)
	require.Contains(t, se.Message, "deposed")
}

// Requests the server cannot read are 400 (413 when too large) and never
// reach the controller; well-formed ones are answered by it.
func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	hc := e.client("node-a").hc
	post := func(path, body string) int {
		resp, err := hc.Post(e.ts.URL+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}
	get := func(path string) int {
		resp, err := hc.Get(e.ts.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		body string
		code int
	}{
		{`not json`, http.StatusBadRequest},
		{`{"kind":"connect","event":{"node":"node-a"}}`, http.StatusBadRequest},
		{`{"kind":"tick","event":{}}`, http.StatusBadRequest},
		{`{"kind":"heartbeat"}`, http.StatusBadRequest},
		{`{"kind":"heartbeat","event":{"node":"node-a","tokn":1}}`, http.StatusBadRequest},
		{`{"kind":"heartbeat","event":{"node":"node-a"},"extra":1}`, http.StatusBadRequest},
		{`{"kind":"heartbeat","event":{"node":"node-a"}} {"kind":"x"}`, http.StatusBadRequest},
		{`{"kind":"heartbeat","event":{"node":"node-a","token":"one"}}`, http.StatusBadRequest},
		{`{"kind":"heartbeat","event":{"node":"node-a","token":1}}`, http.StatusConflict}, // well-formed: the controller refuses it
		{`{"kind":"handoff","event":{"target":"node-a"}}`, http.StatusForbidden},
		{`{"kind":"offer","event":{"node":"node-b","token":0}}`, http.StatusForbidden},
		{`{"kind":"released","event":{"node":"node-a","token":1}}    ` + "\n", http.StatusConflict},
	} {
		require.Equal(t, tc.code, post(authhttp.RouteEvent, tc.body), tc.body)
	}
	big := `{"kind":"heartbeat","event":{"node":"` + strings.Repeat("a", authhttp.MaxBody) + `"}}`
	require.Equal(t, http.StatusRequestEntityTooLarge, post(authhttp.RouteEvent, big))
	require.Equal(t, http.StatusMethodNotAllowed, get(authhttp.RouteEvent))
	require.Equal(t, http.StatusMethodNotAllowed, post(authhttp.RouteStream, ""))
	require.Equal(t, http.StatusNotFound, get("/v2/stream"))
	for _, q := range []string{"caps=vote,wings", "token=one", "token=-1", "cap=vote", "caps=vote&caps=storage", "node=node-b"} {
		code := get(authhttp.RouteStream + "?" + q)
		require.Contains(t, []int{http.StatusBadRequest, http.StatusForbidden}, code, q)
	}
	require.Equal(t, http.StatusBadRequest, post(authhttp.RouteBye+"?strem=1", ""))
	require.Equal(t, authority.Vacant, e.d.State().Phase)
}

// A server without a driver, or closed, answers 503.
func TestServerWithoutDriver(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	a := e.dial("node-a", promotable, 0)
	recvMsg(t, a.Msgs(), kind(authority.MsgRequired, 0))
	e.srv.Close()
	recvClosed(t, a.Msgs())
	_, err := authhttp.Dial(e.ctx, e.ts.URL, "node-b", promotable, 0, e.client("node-b").hc)
	require.ErrorIs(t, err, cutline.ErrUnavailable)
	require.ErrorIs(t, authhttp.Post(e.ctx, e.ts.URL, authority.Heartbeat{Node: "node-b"}, e.client("node-b").hc), cutline.ErrUnavailable)

	srv, err := authhttp.NewServer(authhttp.ServerOptions{})
	require.NoError(t, err)
	leaf := e.ca.Client("node-a", "cutline://node/node-a").Leaf
	verified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf, e.ca.Cert}}}
	for _, tc := range []struct {
		method, path, body string
		state              *tls.ConnectionState
		code               int
	}{
		{http.MethodGet, authhttp.RouteStream, "", verified, http.StatusServiceUnavailable},
		{http.MethodPost, authhttp.RouteEvent, `{"kind":"heartbeat","event":{"node":"node-a","token":1}}`, verified, http.StatusServiceUnavailable},
		{http.MethodPost, authhttp.RouteBye, "", verified, http.StatusServiceUnavailable},
		// Served without TLS, or with an unverified certificate: refused
		// before any route.
		{http.MethodGet, authhttp.RouteStream, "", nil, http.StatusForbidden},
		{http.MethodGet, authhttp.RouteStream, "", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}, http.StatusForbidden},
	} {
		r := httptest.NewRequest(tc.method, "https://ctl"+tc.path, strings.NewReader(tc.body))
		r.TLS = tc.state
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		require.Equal(t, tc.code, w.Code, "%s %s", tc.method, tc.path)
	}
}

func TestServerOptions(t *testing.T) {
	for _, opts := range []authhttp.ServerOptions{
		{Buffer: -1},
		{Buffer: 4097},
		{Operators: []string{"ops", ""}},
	} {
		_, err := authhttp.NewServer(opts)
		require.ErrorIs(t, err, cutline.ErrInvalid, "%+v", opts)
	}
	srv, err := authhttp.NewServer(authhttp.ServerOptions{})
	require.NoError(t, err)
	var _ http.Handler = srv
	for _, base := range []string{"http://ctl:80", "ctl:443", "https://user@ctl", "https://ctl/?q=1", "://"} {
		_, err := authhttp.Dial(t.Context(), base, "node-a", promotable, 0, http.DefaultClient)
		require.ErrorIs(t, err, cutline.ErrInvalid, base)
	}
	_, err = authhttp.Dial(t.Context(), "https://ctl", "../a", promotable, 0, http.DefaultClient)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = authhttp.Dial(t.Context(), "https://ctl", "node-a", promotable, 0, nil)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	require.ErrorIs(t, authhttp.Post(t.Context(), "https://ctl", authority.Connect{Node: "node-a"}, http.DefaultClient), cutline.ErrInvalid)
}

// stuckWriter is a stream's response writer whose peer reads nothing: a
// write blocks until a write deadline is set.
type stuckWriter struct {
	header   http.Header
	writing  chan struct{}
	deadline chan struct{}
	once     sync.Once
	wrote    bool
}

func newStuckWriter() *stuckWriter {
	return &stuckWriter{header: http.Header{}, writing: make(chan struct{}), deadline: make(chan struct{})}
}

func (w *stuckWriter) Header() http.Header { return w.header }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) FlushError() error   { return nil }

func (w *stuckWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		close(w.writing)
	}
	<-w.deadline
	return 0, errors.New("write deadline exceeded")
}

func (w *stuckWriter) SetWriteDeadline(d time.Time) error {
	if !d.IsZero() {
		w.once.Do(func() { close(w.deadline) })
	}
	return nil
}

// A stream whose node reads nothing is closed once its queue overflows,
// without the driver waiting: the node lost its channel.
func TestStuckStreamClosed(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{Buffer: 4})
	a := e.dial("node-a", promotable, 0)
	e.grant(a, "node-a")

	// node-a comes back on a stream it does not read.
	leaf := e.client("node-a").tr.TLSClientConfig.Certificates[0].Leaf
	r := httptest.NewRequestWithContext(e.ctx, http.MethodGet, "https://ctl"+authhttp.RouteStream+"?node=node-a&caps=vote,storage,promotable&token=1", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf, e.ca.Cert}}}
	w := newStuckWriter()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.srv.ServeHTTP(w, r)
	}()
	recvClosed(t, a.Msgs()) // replaced
	select {
	case <-w.writing: // the resumed grant is being written
	case <-time.After(patience):
		t.Fatal("the stream wrote nothing")
	}
	// Each heartbeat queues a renewal: the queue (4) overflows.
	closed := false
	for range 16 {
		if err := e.d.Step(e.ctx, authority.Heartbeat{Node: "node-a", Token: 1}); err != nil {
			// The overflow closed the stream: the node is disconnected.
			require.ErrorIs(t, err, authority.ErrRefused)
			break
		}
		select {
		case <-done:
			closed = true
		default:
		}
		if closed {
			break
		}
	}
	if !closed {
		select {
		case <-done:
		case <-time.After(patience):
			t.Fatal("the stuck stream was not closed")
		}
	}
	e.tick(time.Second)
	require.Equal(t, authority.Granted, e.d.State().Phase, "an unexpected close: the reservation holds")
	e.tick(time.Second + time.Millisecond)
	require.Equal(t, authority.Vacant, e.d.State().Phase)
}

// A new controller's driver replaces the old one: every stream is
// closed, and the nodes declare themselves to the new controller.
func TestNewController(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	a := e.dial("node-a", promotable, 0)
	e.grant(a, "node-a")

	e.store.Expire(e.sess)
	sess, err := e.store.NewSession(e.ctx, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	el, err := authority.Campaign(e.ctx, e.store, "", domain, "ctl-2", sess)
	require.NoError(t, err)
	st, err := el.Load(e.ctx)
	require.NoError(t, err)
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: domain, Lease: lease}, st, e.clock.Now())
	require.NoError(t, err)
	d2, err := authority.NewDriver(el, ctl, e.srv.Send, authority.DriverOptions{Clock: e.clock})
	require.NoError(t, err)
	e.srv.SetDriver(d2)
	recvClosed(t, a.Msgs())
	e.waitEnded("node-a")

	a2 := e.dial("node-a", promotable, 1)
	recvMsg(t, a2.Msgs(), kind(authority.MsgGrant, 1))
	require.NoError(t, a2.Send(e.ctx, authority.Heartbeat{Node: "node-a", Token: 1}))
	st = d2.State()
	require.Equal(t, uint64(2), st.Term)
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, "node-a", st.Holder)
}
