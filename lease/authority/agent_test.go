package authority_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/lease/authority"
)

// fakeConn hands the agent messages from the test and records its events.
type fakeConn struct {
	msgs chan authority.Msg
	mu   sync.Mutex
	sent []authority.Event
}

func (c *fakeConn) Send(_ context.Context, ev authority.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, ev)
	return nil
}
func (c *fakeConn) Msgs() <-chan authority.Msg { return c.msgs }
func (c *fakeConn) Close() error               { return nil }

func (c *fakeConn) events() []authority.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]authority.Event(nil), c.sent...)
}

type nopHost struct{}

func (nopHost) Progress() chain.Position { return chain.Position{} }
func (nopHost) Recover(context.Context, authority.Msg) (chain.Position, error) {
	return chain.Position{}, nil
}
func (nopHost) Release(context.Context) (chain.Position, error) { return chain.Position{}, nil }
func (nopHost) Frontier(string) (chain.Position, bool)          { return chain.Position{}, false }

// The agent pings its health peers every PingEvery on its clock, and a
// voter whose pings to the holder stop completing for the health window
// reports a concern bound to the token and topology it saw.
func TestAgentPingsAndConcerns(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "voter", Domain: "orders", Caps: authority.Capabilities{Vote: true}}, clk.Now())
	require.NoError(t, err)
	conn := &fakeConn{msgs: make(chan authority.Msg)}
	var mu sync.Mutex
	var pinged []string
	up := true
	pinger := func(ctx context.Context, peer string, token authority.Token) error {
		mu.Lock()
		defer mu.Unlock()
		pinged = append(pinged, peer)
		if !up || token != 7 {
			return errors.New("no answer")
		}
		return nil
	}
	a, err := authority.NewAgent(rt, conn, nopHost{}, authority.AgentOptions{Clock: clk, Pinger: pinger, HeartbeatEvery: time.Minute})
	require.NoError(t, err)
	peers, token := a.HealthPeers()
	require.Empty(t, peers, "no topology yet")
	require.Zero(t, token)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	conn.msgs <- authority.Msg{To: "voter", Kind: authority.MsgTopology, Topology: 4, Voters: []string{"holder", "voter"}, Holder: "holder", Token: 7}
	step := func() {
		clk.BlockUntil(2) // the heartbeat timer and the ping timer
		clk.Advance(authority.PingEvery)
		conn.msgs <- authority.Msg{To: "nobody"} // a barrier: the agent is back in its loop
	}
	for range 3 {
		step()
	}
	peers, token = a.HealthPeers()
	require.Equal(t, []string{"holder"}, peers, "a voter's link is to the holder")
	require.Equal(t, authority.Token(7), token)
	mu.Lock()
	require.NotEmpty(t, pinged)
	require.Equal(t, "holder", pinged[0])
	up = false
	mu.Unlock()
	for range 7 {
		step()
	}
	var concern *authority.Concern
	for _, ev := range conn.events() {
		if c, ok := ev.(authority.Concern); ok {
			concern = &c
		}
	}
	require.NotNil(t, concern, "no concern after the health window: %v", conn.events())
	require.Equal(t, authority.Concern{Node: "voter", Token: 7, Topology: 4, RoundTrip: true}, *concern)
	cancel()
	require.NoError(t, <-done)
}

// shortHost recovers, but never as far as required.
type shortHost struct {
	nopHost
	calls atomic.Int32
}

func (h *shortHost) Recover(context.Context, authority.Msg) (chain.Position, error) {
	h.calls.Add(1)
	return chain.Position{Epoch: 1, Slot: 1}, nil
}

// A host whose recovery stops short of the requirement is asked again at
// the next period: the agent keeps serving its channel, it never loops.
func TestAgentRecoveryShortOfRequirement(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "cand", Domain: "orders", Caps: authority.Capabilities{Promotable: true}}, clk.Now())
	require.NoError(t, err)
	conn := &fakeConn{msgs: make(chan authority.Msg)}
	h := &shortHost{}
	a, err := authority.NewAgent(rt, conn, h, authority.AgentOptions{Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	req := authority.Required{Star: "old", Pos: chain.Position{Epoch: 1, Slot: 9}}
	conn.msgs <- authority.Msg{To: "cand", Kind: authority.MsgRecover, Token: 1, Required: req,
		Grant: authority.Grant{Domain: "orders", Holder: "cand", Token: 1, Revision: 3}}
	conn.msgs <- authority.Msg{To: "nobody"} // the agent is back in its loop
	cancel()
	require.NoError(t, <-done)
	// One attempt per pass of the loop (the recovery order's, the
	// barrier's), never a loop of its own.
	require.LessOrEqual(t, h.calls.Load(), int32(2))
	require.GreaterOrEqual(t, h.calls.Load(), int32(1))
}
