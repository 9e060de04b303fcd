package authority_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// electorRig is a domain's store, the Local transport of the process
// and a fake clock that only the test moves.
type electorRig struct {
	t     *testing.T
	t0    time.Time
	clk   *clock.Fake
	store *memstore.Store
	local *authority.Local
}

func newElectorRig(t *testing.T) *electorRig {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &electorRig{t: t, t0: t0, clk: clock.NewFake(t0), store: memstore.New(memstore.Options{}), local: authority.NewLocal()}
}

// sessionStore hands the test every session made through it. Like
// etcd's, its sessions close only on a live context.
type sessionStore struct {
	metastore.Store
	made chan metastore.Session
}

func (s sessionStore) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	sess, err := s.Store.NewSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	sess = liveSession{sess}
	s.made <- sess
	return sess, nil
}

type liveSession struct{ metastore.Session }

func (s liveSession) Close(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Session.Close(ctx)
}

// lockedBuffer is a log shared by the elector and the test; lines
// yields each line as it is written.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	lines chan string
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.lines <- string(p):
	default:
	}
	return l.b.Write(p)
}

// await waits for a line that holds s, failing the test after 10 s.
func (l *lockedBuffer) await(t *testing.T, s string) {
	t.Helper()
	for {
		if strings.Contains(recv(t, l.lines, "log line with "+s), s) {
			return
		}
	}
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runningElector is an elector the rig runs, with what it tells.
type runningElector struct {
	*authority.Elector
	attached chan *authority.Driver // every Attach
	sessions chan metastore.Session // every session it made
	logs     *lockedBuffer
	stop     func() // ends Run and waits for it
}

// start runs an elector named node, attached to the rig's Local.
func (r *electorRig) start(node string, opts authority.ElectorOptions) *runningElector {
	e := &runningElector{attached: make(chan *authority.Driver, 16), sessions: make(chan metastore.Session, 16), logs: &lockedBuffer{lines: make(chan string, 256)}}
	opts.Attach = func(d *authority.Driver) {
		r.local.SetDriver(d)
		e.attached <- d
	}
	opts.Clock, opts.Logger = r.clk, slog.New(slog.NewTextHandler(e.logs, nil))
	var err error
	e.Elector, err = authority.NewElector(authority.ElectorConfig{
		Store: sessionStore{Store: r.store, made: e.sessions}, Node: node,
		Controller: authority.ControllerConfig{Domain: "orders"}, Send: r.local.Send,
	}, opts)
	require.NoError(r.t, err)
	ctx, cancel := context.WithCancel(r.t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	e.stop = func() {
		cancel()
		recv(r.t, done, "return from Run")
	}
	r.t.Cleanup(e.stop)
	return e
}

// pump lets the clock run in steps of 50 ms until cond holds: before each
// step, n timers wait on the clock (every goroutine that the test
// expects to be running is waiting for its time).
func (r *electorRig) pump(n int, cond func() bool) {
	r.t.Helper()
	for range 10000 {
		if cond() {
			return
		}
		blockUntil(r.t, r.clk, n)
		r.clk.Advance(50 * time.Millisecond)
	}
	r.t.Fatal("the condition did not hold within 10000 steps")
}

// An elected elector drives the controller: a node connected through the
// Local transport gets a grant, at once in a domain never granted. A
// second elector waits, and takes over when the first one's context
// ends; the node resumes its grant with the new controller, which waits
// out a whole lease before granting anything new, and says so. Attach
// sees each driver come and go.
func TestElectorTakesOverWhenTheFirstStops(t *testing.T) {
	r := newElectorRig(t)
	e1 := r.start("ctl-1", authority.ElectorOptions{})
	d1 := recv(t, e1.attached, "attach")
	require.NotNil(t, d1)
	require.Same(t, d1, e1.Driver())
	e2 := r.start("ctl-2", authority.ElectorOptions{})

	c, err := authority.NewConnector(authority.ConnectorConfig{Runtime: nodeA, Dial: localDial(r.local), Host: idleHost{}},
		authority.ConnectorOptions{Agent: authority.AgentOptions{HeartbeatEvery: time.Second}, Clock: r.clk})
	require.NoError(t, err)
	stopNode := runConnector(t, c)
	defer stopNode()
	// Two timers: the driver's tick, and the agent's (or the redial).
	r.pump(2, func() bool { return c.Admit() == nil })
	require.Less(t, r.clk.Now().Sub(r.t0), authority.DefaultLease, "a domain never granted is granted without waiting out a lease")
	g := c.Grant()
	require.Equal(t, "node-a", g.Holder)
	require.Equal(t, g.Token, d1.State().Token)
	require.Nil(t, e2.Driver(), "the second one waits")
	require.Empty(t, e2.attached)

	e1.stop()
	require.Nil(t, recv(t, e1.attached, "detach"))
	require.Nil(t, e1.Driver())
	d2 := recv(t, e2.attached, "attach of the second")
	require.NotNil(t, d2)
	require.Same(t, d2, e2.Driver())
	first := c.Agent()
	r.pump(2, func() bool { return c.Agent() != first && r.clk.Now().After(g.Deadline) && c.Admit() == nil })
	require.Equal(t, g.Token, c.Grant().Token, "the holder resumed its grant")
	st := d2.State()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, g.Token, st.Token)
	require.Equal(t, uint64(2), st.Term)
	require.Contains(t, e2.logs.String(), "waiting out the former grant")
	require.NotContains(t, e1.logs.String(), "waiting out the former grant")

	stopNode()
	e2.stop()
	require.Nil(t, recv(t, e2.attached, "detach of the second"))
}

// When the elected controller's session is lost, its driver stops and is
// detached, and the waiting elector takes over; the deposed one pauses,
// then campaigns again.
func TestElectorTakesOverWhenTheSessionIsLost(t *testing.T) {
	r := newElectorRig(t)
	e1 := r.start("ctl-1", authority.ElectorOptions{Retry: clock.Backoff{Min: time.Minute, Max: time.Minute}})
	sess := recv(t, e1.sessions, "session")
	require.NotNil(t, recv(t, e1.attached, "attach"))
	e2 := r.start("ctl-2", authority.ElectorOptions{})
	recv(t, e2.sessions, "session of the second")

	r.store.Expire(sess)
	require.Nil(t, recv(t, e1.attached, "detach"))
	d2 := recv(t, e2.attached, "attach of the second")
	require.NotNil(t, d2)
	require.Same(t, d2, e2.Driver())
	require.Nil(t, e1.Driver())
	// The deposed one waits out its pause, a minute, on the clock
	// (beside the second one's driver).
	e1.logs.await(t, "out of office")
	blockUntil(t, r.clk, 2)
	require.Empty(t, e1.sessions, "no campaign before the pause is over")
	r.clk.Advance(time.Minute)
	recv(t, e1.sessions, "a new campaign's session")
	require.Nil(t, e1.Driver(), "the second one leads")
}

// An elector that cannot reach the store tries again after a pause that
// grows on its clock, from 100 ms up to 5 s, and stops when its context
// ends.
func TestElectorRetriesOnItsClock(t *testing.T) {
	r := newElectorRig(t)
	r.store.Partition()
	e := r.start("ctl-1", authority.ElectorOptions{})
	for i, d := 0, 100*time.Millisecond; i < 8; i, d = i+1, min(2*d, 5*time.Second) {
		blockUntil(t, r.clk, 1)
		at, _ := r.clk.Next()
		gap := at.Sub(r.clk.Now())
		require.True(t, gap >= d/2 && gap < d, "pause %d: %v, not in [%v, %v)", i, gap, d/2, d)
		r.clk.Advance(gap)
	}
	e.stop()
	require.Nil(t, e.Driver())
	require.Empty(t, e.attached)
}

// An elector's configuration is checked when it is built, each refusal
// naming its field.
func TestElectorConfig(t *testing.T) {
	store := memstore.New(memstore.Options{})
	send := func(authority.Msg) {}
	ok := authority.ElectorConfig{Store: store, Node: "ctl-1", Controller: authority.ControllerConfig{Domain: "orders"}, Send: send}
	for _, tc := range []struct {
		field string
		edit  func(*authority.ElectorConfig, *authority.ElectorOptions)
	}{
		{"Store", func(c *authority.ElectorConfig, _ *authority.ElectorOptions) { c.Store = nil }},
		{"Send", func(c *authority.ElectorConfig, _ *authority.ElectorOptions) { c.Send = nil }},
		{"node", func(c *authority.ElectorConfig, _ *authority.ElectorOptions) { c.Node = "" }},
		{"domain", func(c *authority.ElectorConfig, _ *authority.ElectorOptions) { c.Controller.Domain = "a/b" }},
		{"Root", func(c *authority.ElectorConfig, _ *authority.ElectorOptions) { c.Root = "cluster" }},
		{"Lease", func(c *authority.ElectorConfig, _ *authority.ElectorOptions) { c.Controller.Lease = 2 * time.Hour }},
		{"SessionTTL", func(_ *authority.ElectorConfig, o *authority.ElectorOptions) { o.SessionTTL = time.Millisecond }},
		{"Cleanup", func(_ *authority.ElectorConfig, o *authority.ElectorOptions) { o.Cleanup = time.Hour }},
		{"Retry.Min", func(_ *authority.ElectorConfig, o *authority.ElectorOptions) { o.Retry.Min = -time.Second }},
	} {
		cfg, opts := ok, authority.ElectorOptions{}
		tc.edit(&cfg, &opts)
		_, err := authority.NewElector(cfg, opts)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, tc.field)
		require.Equal(t, tc.field, ce.Field)
	}
	_, err := authority.NewElector(ok, authority.ElectorOptions{})
	require.NoError(t, err)
}
