package authhttp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/testpki"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

const (
	domain = "orders"
	// patience bounds every wait for something the system under test
	// does; nothing waits for it to elapse.
	patience = 10 * time.Second
	lease    = 10 * time.Second
)

var (
	t0         = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	promotable = authority.Capabilities{Vote: true, Storage: true, Promotable: true}
)

// env is a controller on a memstore store behind an authhttp.Server served
// over mutual TLS. The controller's clock moves only when the test
// advances it and steps a Tick.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *clock.Fake
	store *memstore.Store
	sess  metastore.Session
	ca    *testpki.CA
	srv   *authhttp.Server
	d     *authority.Driver
	ts    *httptest.Server
	// ended receives the node parameter of every stream request that
	// returned: by then its Disconnect, if any, was stepped.
	ended chan string
	// reached counts the requests that reached the server's handler.
	reached atomic.Int64

	h2      bool
	mu      sync.Mutex
	clients map[string]*client
}

// client is an HTTP client presenting one certificate; kill breaks its
// connections as a crash or a partition would.
type client struct {
	hc    *http.Client
	tr    *http.Transport
	mu    sync.Mutex
	conns []net.Conn
}

func (c *client) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.conns {
		_ = nc.Close()
	}
	c.conns = nil
}

func newEnv(t *testing.T, opts authhttp.ServerOptions) *env {
	t.Helper()
	return newEnvProto(t, opts, false)
}

// newEnvProto is newEnv serving HTTP/2 when h2 is set, HTTP/1.1
// otherwise.
func newEnvProto(t *testing.T, opts authhttp.ServerOptions, h2 bool) *env {
	t.Helper()
	return newEnvWith(t, opts, h2, nil)
}

// newEnvAt is newEnv whose controller starts from the durable state at
// (its term aside), as if earlier controllers had brought it there.
func newEnvAt(t *testing.T, opts authhttp.ServerOptions, at authority.StateRecord) *env {
	t.Helper()
	return newEnvWith(t, opts, false, &at)
}

func newEnvWith(t *testing.T, opts authhttp.ServerOptions, h2 bool, at *authority.StateRecord) *env {
	t.Helper()
	e := &env{t: t, h2: h2, ctx: t.Context(), clock: clock.NewFake(t0), ca: testpki.New(t, "cutline test CA"),
		ended: make(chan string, 64), clients: map[string]*client{}}
	e.store = memstore.New(memstore.Options{Clock: e.clock})
	sess, err := e.store.NewSession(e.ctx, time.Minute)
	require.NoError(t, err)
	e.sess = sess
	el, err := authority.Campaign(e.ctx, e.store, "", domain, "ctl-1", sess)
	require.NoError(t, err)
	st, err := el.Load(e.ctx)
	require.NoError(t, err)
	if at != nil {
		next := *at
		next.Term = st.Term
		st, err = el.Save(e.ctx, st, next)
		require.NoError(t, err)
	}
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: domain, Lease: lease, Reconnect: 2 * time.Second}, st, e.clock.Now())
	require.NoError(t, err)
	if opts.Operators == nil {
		opts.Operators = []string{"ops"}
	}
	e.srv, err = authhttp.NewServer(opts)
	require.NoError(t, err)
	e.d, err = authority.NewDriver(el, ctl, e.srv.Send, authority.DriverOptions{Clock: e.clock})
	require.NoError(t, err)
	e.srv.SetDriver(e.d)
	e.start()
	t.Cleanup(func() {
		e.srv.Close()
		e.ts.Close()
		e.mu.Lock()
		for _, c := range e.clients {
			c.tr.CloseIdleConnections()
		}
		e.mu.Unlock()
		_ = sess.Close(context.Background())
	})
	return e
}

// start serves the server over TLS, counting the requests that reach it
// and reporting the streams that end.
func (e *env) start() {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.reached.Add(1)
		e.srv.ServeHTTP(w, r)
		if r.URL.Path == authhttp.RouteStream {
			select {
			case e.ended <- r.URL.Query().Get("node"):
			default:
			}
		}
	})
	e.ts = httptest.NewUnstartedServer(h)
	e.ts.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	e.ts.TLS = authhttp.ServerTLS(e.ca.Pool, e.ca.Server("controller"))
	e.ts.EnableHTTP2 = e.h2
	e.ts.StartTLS()
}

// client returns the HTTP client of identity cutline://node/<name>.
func (e *env) client(name string) *client {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.clients[name]; c != nil {
		return c
	}
	c := e.clientWith(authhttp.ClientTLS(e.ca.Pool, e.ca.Client(name, "cutline://node/"+name)))
	e.clients[name] = c
	return c
}

// clientWith returns a client with its own TLS configuration, closed
// with the test.
func (e *env) clientWith(cfg *tls.Config) *client {
	c := &client{}
	var d net.Dialer
	c.tr = &http.Transport{
		TLSClientConfig:   cfg,
		ForceAttemptHTTP2: e.h2,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, addr)
			if err == nil {
				c.mu.Lock()
				c.conns = append(c.conns, nc)
				c.mu.Unlock()
			}
			return nc, err
		},
	}
	c.hc = &http.Client{Transport: c.tr}
	e.t.Cleanup(c.tr.CloseIdleConnections)
	return c
}

// dial opens name's control channel, closed with the test.
func (e *env) dial(name string, caps authority.Capabilities, token authority.Token) authority.Conn {
	e.t.Helper()
	conn, err := authhttp.Dial(e.ctx, e.ts.URL, name, caps, token, e.client(name).hc)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// tick advances the controller's clock by d and steps a Tick.
func (e *env) tick(d time.Duration) {
	e.t.Helper()
	e.clock.Advance(d)
	require.NoError(e.t, e.d.Step(e.ctx, authority.Tick{Now: e.clock.Now()}))
}

// grant runs the vacant domain to a grant for the node behind conn,
// acting as its runtime: it offers after the Required message and gets
// the next token once the controller's fence has passed.
func (e *env) grant(conn authority.Conn, name string) authority.Grant {
	e.t.Helper()
	req := recvMsg(e.t, conn.Msgs(), func(m authority.Msg) bool { return m.Kind() == authority.MsgRequired }).(authority.RequiredMsg)
	require.NoError(e.t, conn.Send(e.ctx, authority.Offer{Node: name, Token: req.Token, Star: req.Required.Star, Frontier: req.Required.Pos, Usable: true}))
	require.Equal(e.t, authority.Recovering, e.d.State().Phase)
	e.tick(lease + time.Second)
	m := recvMsg(e.t, conn.Msgs(), func(m authority.Msg) bool { return m.Kind() == authority.MsgGrant }).(authority.GrantMsg)
	require.Equal(e.t, name, m.Grant.Holder)
	return m.Grant
}

// waitEnded waits for the stream request of node to return.
func (e *env) waitEnded(node string) {
	e.t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case n := <-e.ended:
			if n == node {
				return
			}
		case <-timeout:
			e.t.Fatalf("the stream of %s did not end", node)
		}
	}
}

// recvMsg waits for a message matching ok, skipping others.
func recvMsg(t *testing.T, ch <-chan authority.Msg, ok func(authority.Msg) bool) authority.Msg {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case m, open := <-ch:
			require.True(t, open, "the channel closed before the message came")
			if ok(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("no matching message")
		}
	}
}

// recvClosed waits for ch to close.
func recvClosed(t *testing.T, ch <-chan authority.Msg) {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		case <-timeout:
			t.Fatalf("the channel did not close")
		}
	}
}

// host is a node's host for an Agent: it has recovered everything it is
// asked about when usable, and releases at once at progress.
type host struct {
	usable   atomic.Bool
	progress chain.Position
}

func (h *host) Progress() chain.Position { return h.progress }

func (h *host) Recover(ctx context.Context, order authority.RecoverMsg) (chain.Position, error) {
	return order.Required.Pos, nil
}

func (h *host) Release(ctx context.Context) (chain.Position, error) { return h.progress, nil }

func (h *host) Frontier(star string) (chain.Position, bool) { return chain.Position{}, h.usable.Load() }

// barrier is a message no runtime takes: delivering it after a message
// proves the agent finished handling that one.
var barrier = authority.RevokeMsg{To: "barrier"}

// tap stands between an Agent and its Conn: it hands the agent each
// message followed by a barrier, then reports the message on seen, so a
// test that receives from seen knows the agent has handled it; and it
// reports every event the agent sent, with its answer, on sent.
type tap struct {
	authority.Conn
	out  chan authority.Msg
	seen chan authority.Msg
	sent chan sentEvent
	stop chan struct{}
	done chan struct{}
}

type sentEvent struct {
	ev  authority.Event
	err error
}

func newTap(conn authority.Conn) *tap {
	tp := &tap{Conn: conn, out: make(chan authority.Msg), seen: make(chan authority.Msg, 256),
		sent: make(chan sentEvent, 256), stop: make(chan struct{}), done: make(chan struct{})}
	go tp.run()
	return tp
}

func (tp *tap) run() {
	defer close(tp.done)
	defer close(tp.out)
	for m := range tp.Conn.Msgs() {
		for _, x := range []authority.Msg{m, barrier} {
			select {
			case tp.out <- x:
			case <-tp.stop:
				return
			}
		}
		select {
		case tp.seen <- m:
		case <-tp.stop:
			return
		}
	}
}

func (tp *tap) Msgs() <-chan authority.Msg { return tp.out }

func (tp *tap) Send(ctx context.Context, ev authority.Event) error {
	err := tp.Conn.Send(ctx, ev)
	select {
	case tp.sent <- sentEvent{ev, err}:
	default:
	}
	return err
}

// poke hands the agent a barrier: once poke returns the agent will tick
// its runtime at the clock's current time and do what it asks.
func (tp *tap) poke(t *testing.T) {
	t.Helper()
	select {
	case tp.out <- barrier:
	case <-time.After(patience):
		t.Fatalf("the agent takes no message")
	}
}

// agentNode is a node: a runtime, its Agent running over a tapped Conn.
type agentNode struct {
	name  string
	agent *authority.Agent
	tap   *tap
	host  *host
}

// startAgent dials name's control channel and runs its agent until the
// test ends.
func (e *env) startAgent(name string, caps authority.Capabilities, usable bool) *agentNode {
	e.t.Helper()
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: name, Domain: domain, Caps: caps, DecisionDelay: 500 * time.Millisecond}, e.clock.Now())
	require.NoError(e.t, err)
	conn, err := authhttp.Dial(e.ctx, e.ts.URL, name, caps, 0, e.client(name).hc)
	require.NoError(e.t, err)
	tp := newTap(conn)
	h := &host{progress: chain.Position{Epoch: 1, Slot: 12}}
	h.usable.Store(usable)
	a, err := authority.NewAgent(rt, tp, h, authority.AgentOptions{HeartbeatEvery: time.Second, Clock: e.clock})
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				e.t.Logf("%s: agent: %v", name, err)
			}
		case <-time.After(patience):
			e.t.Errorf("%s: the agent did not stop", name)
		}
		close(tp.stop)
		_ = conn.Close()
		select {
		case <-tp.done:
		case <-time.After(patience):
			e.t.Errorf("%s: the tap did not stop", name)
		}
	})
	return &agentNode{name: name, agent: a, tap: tp, host: h}
}

// waitSent waits for the agent's event matching ok and returns its
// answer.
func waitSent(t *testing.T, tp *tap, ok func(authority.Event) bool) error {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case s := <-tp.sent:
			if ok(s.ev) {
				return s.err
			}
		case <-timeout:
			t.Fatalf("the agent sent no matching event")
		}
	}
}
