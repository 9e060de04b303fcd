package authority_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/clock"
)

var nodeA = authority.RuntimeConfig{Node: "node-a", Domain: "orders", Caps: authority.Capabilities{Promotable: true}}

// localDial dials over local, with the signature ConnectorConfig.Dial
// takes.
func localDial(local *authority.Local) func(context.Context, string, authority.Capabilities, authority.Token) (authority.Conn, error) {
	return func(_ context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
		return local.Dial(node, caps, token)
	}
}

// closeWatch is a channel that reports its Close.
type closeWatch struct {
	authority.Conn
	closed chan<- struct{}
}

func (c closeWatch) Close() error {
	err := c.Conn.Close()
	c.closed <- struct{}{}
	return err
}

// recv takes a value from ch, failing the test after 10 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s in 10 s", what)
		panic("unreachable")
	}
}

// runConnector runs c until the test stops it with the function
// returned, which waits for Run to return.
func runConnector(t *testing.T, c *authority.Connector) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	return func() {
		t.Helper()
		cancel()
		recv(t, done, "return from Run")
	}
}

// A connector dials until the controller is there, gets the grant
// through its agent, and, when the channel closes, dials again at once
// (its backoff starts anew after a channel that ran) declaring the grant
// it held: the controller renews
// the same token. When its context ends it says goodbye.
func TestConnectorResumesTheGrantAfterARedial(t *testing.T) {
	r := newLocalRig(t)
	dials, closed := make(chan authority.Token, 16), make(chan struct{}, 16)
	c, err := authority.NewConnector(authority.ConnectorConfig{
		Runtime: nodeA,
		Dial: func(_ context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
			dials <- token
			conn, err := r.local.Dial(node, caps, token)
			if err != nil {
				return nil, err
			}
			return closeWatch{Conn: conn, closed: closed}, nil
		},
		Host: idleHost{},
	}, authority.ConnectorOptions{Agent: authority.AgentOptions{HeartbeatEvery: time.Second}, Clock: r.clk})
	require.NoError(t, err)
	// The controller is not there yet: the first dials fail, and the
	// backoff grows.
	r.local.SetDriver(nil)
	stop := runConnector(t, c)
	for i := range 4 {
		require.Zero(t, recv(t, dials, "dial"), "a node without a grant declares none")
		blockUntil(t, r.clk, 1)
		if i == 3 {
			r.local.SetDriver(r.d)
		}
		at, _ := r.clk.Next()
		r.clk.Advance(at.Sub(r.clk.Now()))
	}
	require.Zero(t, recv(t, dials, "dial"))

	g := r.await(func(m authority.Msg) bool { return m.Kind() == authority.MsgGrant }).(authority.GrantMsg).Grant
	require.Equal(t, "node-a", g.Holder)
	renewed := func(after authority.Grant) func(authority.Msg) bool {
		return func(m authority.Msg) bool {
			gm, ok := m.(authority.GrantMsg)
			return ok && gm.Token == after.Token && gm.Grant.Deadline.After(after.Deadline)
		}
	}
	g = r.await(renewed(g)).(authority.GrantMsg).Grant
	require.NoError(t, c.Admit())
	require.Equal(t, g.Token, c.Grant().Token)
	first := c.Agent()

	// A new driver closes the channel; the node does not say goodbye.
	r.local.SetDriver(nil)
	r.local.SetDriver(r.d)
	recv(t, closed, "close of the dropped channel")
	blockUntil(t, r.clk, 1)
	at, _ := r.clk.Next()
	gap := at.Sub(r.clk.Now())
	require.True(t, gap >= 25*time.Millisecond && gap < 50*time.Millisecond, "the first redial waits %v", gap)
	r.clk.Advance(gap)
	require.Equal(t, g.Token, recv(t, dials, "redial"), "the redial declares the grant held")

	// The Connect renews the grant; then the new agent's heartbeat does.
	r.await(renewed(r.await(renewed(g)).(authority.GrantMsg).Grant))
	require.NotSame(t, first, c.Agent(), "a new channel, a new agent")
	require.NoError(t, c.Admit())
	require.Equal(t, g.Token, c.Grant().Token, "the same token")
	st := r.d.State()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, g.Token, st.Token)

	stop()
	recv(t, closed, "the goodbye")
	st = r.d.State()
	require.Equal(t, authority.Vacant, st.Phase, "the goodbye ends the grant at once: %s", st)
	require.Equal(t, "the holder left", st.Ended)
}

// A connector whose dials fail waits between them on its clock: the
// redial backoff, doubling from 50 ms up to 2 s. A dial
// refused because the process's controller is not elected yet
// (ErrNoDriver) is no news: it is logged once every 30.
func TestConnectorBacksOffBetweenDials(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		dials      int
		warn, info int
	}{
		{"unreachable", errors.New("connection refused"), 12, 12, 0},
		{"no driver", authority.ErrNoDriver, 61, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			dials := make(chan struct{}, 1)
			var logs bytes.Buffer
			c, err := authority.NewConnector(authority.ConnectorConfig{
				Runtime: nodeA,
				Dial: func(context.Context, string, authority.Capabilities, authority.Token) (authority.Conn, error) {
					dials <- struct{}{}
					return nil, tc.err
				},
				Host: idleHost{},
			}, authority.ConnectorOptions{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			require.NoError(t, err)
			stop := runConnector(t, c)
			recv(t, dials, "dial")
			for i, d := 1, 50*time.Millisecond; i < tc.dials; i, d = i+1, min(2*d, 2*time.Second) {
				blockUntil(t, clk, 1)
				at, _ := clk.Next()
				gap := at.Sub(clk.Now())
				require.True(t, gap >= d/2 && gap < d, "before dial %d: %v, not in [%v, %v)", i, gap, d/2, d)
				clk.Advance(gap)
				recv(t, dials, "dial")
			}
			blockUntil(t, clk, 1) // the last dial's failure was logged
			require.ErrorIs(t, c.Admit(), authority.ErrNotAdmitted)
			stop()
			require.Equal(t, tc.warn, strings.Count(logs.String(), "level=WARN msg=\"authority: dial failed"), logs.String())
			require.Equal(t, tc.info, strings.Count(logs.String(), "not elected yet"), logs.String())
		})
	}
}

// Before its first channel a connector admits nothing and holds nothing.
func TestConnectorBeforeTheFirstChannel(t *testing.T) {
	c, err := authority.NewConnector(authority.ConnectorConfig{Runtime: nodeA, Dial: localDial(authority.NewLocal()), Host: idleHost{}}, authority.ConnectorOptions{})
	require.NoError(t, err)
	require.Nil(t, c.Agent())
	var na *authority.NotAdmittedError
	require.ErrorAs(t, c.Admit(), &na)
	require.Equal(t, "node-a", na.Node)
	require.Zero(t, c.Grant())
	peers, token := c.HealthPeers()
	require.Empty(t, peers)
	require.Zero(t, token)
}

// A connector's configuration is checked when it is built, each refusal
// naming its field.
func TestConnectorConfig(t *testing.T) {
	dial := localDial(authority.NewLocal())
	for _, tc := range []struct {
		field string
		cfg   authority.ConnectorConfig
		opts  authority.ConnectorOptions
	}{
		{"Dial", authority.ConnectorConfig{Runtime: nodeA, Host: idleHost{}}, authority.ConnectorOptions{}},
		{"Host", authority.ConnectorConfig{Runtime: nodeA, Dial: dial}, authority.ConnectorOptions{}},
		{"node", authority.ConnectorConfig{Runtime: authority.RuntimeConfig{Domain: "orders"}, Dial: dial, Host: idleHost{}}, authority.ConnectorOptions{}},
		{"DecisionDelay", authority.ConnectorConfig{Runtime: authority.RuntimeConfig{Node: "node-a", Domain: "orders", DecisionDelay: time.Hour}, Dial: dial, Host: idleHost{}},
			authority.ConnectorOptions{}},
		{"Agent.HeartbeatEvery", authority.ConnectorConfig{Runtime: nodeA, Dial: dial, Host: idleHost{}},
			authority.ConnectorOptions{Agent: authority.AgentOptions{HeartbeatEvery: time.Hour}}},
		{"Agent.Clock", authority.ConnectorConfig{Runtime: nodeA, Dial: dial, Host: idleHost{}},
			authority.ConnectorOptions{Agent: authority.AgentOptions{Clock: clock.Real()}}},
		{"Redial.Max", authority.ConnectorConfig{Runtime: nodeA, Dial: dial, Host: idleHost{}},
			authority.ConnectorOptions{Redial: clock.Backoff{Min: time.Second, Max: time.Millisecond}}},
	} {
		_, err := authority.NewConnector(tc.cfg, tc.opts)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, tc.field)
		require.Equal(t, tc.field, ce.Field)
	}
}
