package authhttp_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
)

// serveAs serves h over TLS under cert, asking clients for a certificate
// from the test's CA.
func (e *env) serveAs(h http.Handler, cert tls.Certificate) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = authhttp.ServerTLS(e.ca.Pool, cert)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	e.t.Cleanup(srv.Close)
	return srv
}

// A node takes orders only from the controller it names: a broker's node
// certificate served at the controller's address is refused as the
// controller, before the node reads any message or trusts any answer;
// so are a certificate that names no identity and an answer the client
// did not verify.
func TestDialVerifiesTheController(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	ctl := e.serveAs(e.srv, e.ca.Node("ctl"))
	impostor := e.serveAs(e.srv, e.ca.Node("broker-3")) // a broker's own certificate
	hc := e.client("node-a").hc

	d := &authhttp.Dialer{Base: ctl.URL, Client: hc, Controller: "ctl"}
	conn, err := d.Dial(e.ctx, "node-a", promotable, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	recvMsg(t, conn.Msgs(), kind(authority.MsgRequired, 0))
	require.ErrorIs(t, conn.Send(e.ctx, authority.Offer{Node: "node-a", Token: 7, Usable: true}), authority.ErrRefused, "the controller's answers pass")

	for name, base := range map[string]string{
		"a broker's node certificate": impostor.URL,
		"a certificate with no node":  e.ts.URL, // the harness's "controller" server certificate
	} {
		d := &authhttp.Dialer{Base: base, Client: hc, Controller: "ctl"}
		_, err := d.Dial(e.ctx, "node-b", promotable, 0)
		require.ErrorIs(t, err, authhttp.ErrIdentity, name)
		var ie *authhttp.IdentityError
		require.ErrorAs(t, err, &ie, name)
		require.Contains(t, ie.Reason, `not the controller "ctl"`, name)
		require.ErrorIs(t, d.Post(e.ctx, authority.Heartbeat{Node: "node-b", Token: 1}), authhttp.ErrIdentity, name)
	}
	// A rule of the host's names the controller otherwise: here by its
	// certificate's common name.
	byCN := &authhttp.Dialer{Base: e.ts.URL, Client: e.client("node-c").hc, Controller: "controller",
		Identity: func(c *x509.Certificate) (string, error) { return c.Subject.CommonName, nil }}
	conn2, err := byCN.Dial(e.ctx, "node-c", promotable, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn2.Close() })

	// A client that verifies nothing gets nothing, named controller or not.
	blind := authhttp.ClientTLS(e.ca.Pool, e.ca.Node("node-d"))
	blind.InsecureSkipVerify = true
	c := e.clientWith(blind)
	_, err = authhttp.Dial(e.ctx, ctl.URL, "node-d", promotable, 0, c.hc)
	require.ErrorIs(t, err, authhttp.ErrIdentity)
	require.ErrorIs(t, authhttp.Post(e.ctx, ctl.URL, authority.Heartbeat{Node: "node-d"}, c.hc), authhttp.ErrIdentity)
}

func TestDialerOptions(t *testing.T) {
	hc := &http.Client{}
	for field, d := range map[string]*authhttp.Dialer{
		"Client":     {Base: "https://ctl"},
		"MaxMessage": {Base: "https://ctl", Client: hc, MaxMessage: 100},
		"base":       {Base: "http://ctl", Client: hc},
	} {
		_, err := d.Dial(t.Context(), "node-a", promotable, 0)
		require.ErrorIs(t, err, cutline.ErrInvalid, field)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, field, ce.Field)
		require.ErrorIs(t, d.Post(t.Context(), authority.Heartbeat{Node: "node-a"}), cutline.ErrInvalid, field)
	}
}

// fakeStream is a controller's stream as an impostor or a faulty server
// would write it: the lines given, then whatever body writes, counting
// the bytes it got out.
type fakeStream struct {
	lines   []string
	body    func(w io.Writer) error
	written atomic.Int64
	ended   chan struct{}
}

func (f *fakeStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != authhttp.RouteStream {
		w.WriteHeader(http.StatusOK) // the goodbye
		return
	}
	defer close(f.ended)
	w.Header().Set(authhttp.HeaderNode, "node-a")
	w.Header().Set(authhttp.HeaderStream, "1")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, l := range f.lines {
		n, err := io.WriteString(w, l+"\n")
		f.written.Add(int64(n))
		if err != nil {
			return
		}
	}
	_ = rc.Flush()
	if f.body != nil {
		_ = f.body(countWriter{w, &f.written})
	}
}

type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func line(to string, tok authority.Token, pad int) string {
	s := fmt.Sprintf(`{"to":%q,"kind":"revoke","token":%d}`, to, tok)
	return s + strings.Repeat(" ", max(pad-len(s), 0))
}

// The node bounds each message of the stream: a message of exactly the
// bound is delivered, a longer one ends the stream before anything after
// it, and an endless one is not read into memory.
func TestStreamMessageBound(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	hc := e.client("node-a").hc
	const bound = 1 << 10
	f := &fakeStream{ended: make(chan struct{}), lines: []string{
		line("node-a", 1, 0),
		line("node-a", 2, bound),   // exactly the bound
		line("node-a", 3, bound+1), // one byte over
		line("node-a", 4, 0),
	}}
	srv := e.serveAs(f, e.ca.Node("ctl"))
	conn, err := (&authhttp.Dialer{Base: srv.URL, Client: hc, Controller: "ctl", MaxMessage: bound}).Dial(e.ctx, "node-a", promotable, 0)
	require.NoError(t, err)
	defer conn.Close()
	var got []authority.Token
	for m := range conn.Msgs() {
		got = append(got, msgToken(m))
	}
	require.Equal(t, []authority.Token{1, 2}, got, "the message over the bound ended the stream")

	// A message that never ends: the node stops reading at the bound
	// (plus what the network buffers), and the stream ends.
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	endless := &fakeStream{ended: make(chan struct{}), lines: []string{line("node-a", 1, 0)}, body: func(w io.Writer) error {
		if _, err := io.WriteString(w, `{"to":"node-a","kind":"revoke","pad":"`); err != nil {
			return err
		}
		for {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
	}}
	srv = e.serveAs(endless, e.ca.Node("ctl"))
	conn, err = (&authhttp.Dialer{Base: srv.URL, Client: hc, Controller: "ctl"}).Dial(e.ctx, "node-a", promotable, 0)
	require.NoError(t, err)
	recvMsg(t, conn.Msgs(), kind(authority.MsgRevoke, 1))
	recvClosed(t, conn.Msgs())
	require.NoError(t, conn.Close())
	select {
	case <-endless.ended:
	case <-time.After(patience):
		t.Fatal("the endless message is still being read")
	}
	require.Less(t, endless.written.Load(), int64(authhttp.DefaultMaxMessage+16<<20), "the node read far past its bound")
	t.Logf("an endless message: the server got %d bytes out before the node closed the stream (bound %d)", endless.written.Load(), authhttp.DefaultMaxMessage)
}
