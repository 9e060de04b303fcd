package authority_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
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
func (nopHost) Recover(context.Context, authority.RecoverMsg) (chain.Position, error) {
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
	logs := &lockedBuffer{}
	a, err := authority.NewAgent(rt, conn, nopHost{}, authority.AgentOptions{Clock: clk, Pinger: pinger, HeartbeatEvery: time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	peers, token := a.HealthPeers()
	require.Empty(t, peers, "no topology yet")
	require.Zero(t, token)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	give(t, conn.msgs, authority.TopologyMsg{To: "voter", Topology: 4, Voters: []string{"holder", "voter"}, Holder: "holder", Token: 7})
	step := func() {
		blockUntil(t, clk, 2) // the heartbeat timer and the ping timer
		clk.Advance(authority.PingEvery)
		give(t, conn.msgs, authority.RevokeMsg{To: "nobody"}) // a barrier: the agent is back in its loop
	}
	// The pings run beside the agent's loop, a round after each tick:
	// step until one has reached the holder, a bounded number of times.
	pingedAny := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(pinged) > 0
	}
	for i := 0; i < 3 || !pingedAny() && i < 20; i++ {
		step()
	}
	peers, token = a.HealthPeers()
	require.Equal(t, []string{"holder"}, peers, "a voter's link is to the holder")
	require.Equal(t, authority.Token(7), token)
	mu.Lock()
	require.NotEmpty(t, pinged, "no ping in 20 rounds")
	require.Equal(t, "holder", pinged[0])
	up = false
	mu.Unlock()
	require.Equal(t, 1, a.HealthyPeers(), "the link to the holder is up")
	var concern *authority.Concern
	findConcern := func() {
		for _, ev := range conn.events() {
			if c, ok := ev.(authority.Concern); ok {
				concern = &c
			}
		}
	}
	// The health window is 7 rounds; a round that ran late is made up
	// by the next ones.
	for i := 0; i < 7 || concern == nil && i < 30; i++ {
		step()
		findConcern()
	}
	require.NotNil(t, concern, "no concern after 30 rounds of failed pings: %v", conn.events())
	require.Equal(t, authority.Concern{Node: "voter", Token: 7, Topology: 4, RoundTrip: true}, *concern)
	require.Zero(t, a.HealthyPeers(), "the link to the holder is down")
	stopAgent(t, cancel, done)
	// Each change of the link is logged once, not each ping.
	require.Equal(t, 1, strings.Count(logs.String(), "health link up"), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "health link down"), logs.String())
}

// shortHost recovers, but never as far as required.
type shortHost struct {
	nopHost
	calls atomic.Int32
}

func (h *shortHost) Recover(context.Context, authority.RecoverMsg) (chain.Position, error) {
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
	give(t, conn.msgs, authority.RecoverMsg{To: "cand", Token: 1, Required: req,
		Grant: authority.Grant{Domain: "orders", Holder: "cand", Token: 1, Revision: 3}})
	give(t, conn.msgs, authority.RevokeMsg{To: "nobody"}) // the agent is back in its loop
	stopAgent(t, cancel, done)
	// One attempt per pass of the loop (the recovery order's, the
	// barrier's), never a loop of its own.
	require.LessOrEqual(t, h.calls.Load(), int32(2))
	require.GreaterOrEqual(t, h.calls.Load(), int32(1))
}

// stampConn records when (on the fake clock) each event was sent.
type stampConn struct {
	fakeConn
	clk *clock.Fake
	at  []time.Time
}

func (c *stampConn) Send(ctx context.Context, ev authority.Event) error {
	c.mu.Lock()
	c.at = append(c.at, c.clk.Now())
	c.mu.Unlock()
	return c.fakeConn.Send(ctx, ev)
}

// first returns the send time of the first event of type E.
func first[E authority.Event](c *stampConn) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ev := range c.sent {
		if _, ok := ev.(E); ok {
			return c.at[i], true
		}
	}
	return time.Time{}, false
}

// runUntil advances the fake clock by step, each time the agent waits on
// it, until cond holds or limit of fake time has passed.
func runUntil(t *testing.T, clk *clock.Fake, waiters int, step, limit time.Duration, cond func() bool) {
	t.Helper()
	for end := clk.Now().Add(limit); !cond(); {
		require.True(t, clk.Now().Before(end), "not within %v of fake time", limit)
		blockUntil(t, clk, waiters)
		clk.Advance(step)
	}
}

// A voter reports its concern when the health window runs out, not at the
// agent's next heartbeat or message.
func TestAgentConcernWhenTheWindowRunsOut(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "voter", Domain: "orders", Caps: authority.Capabilities{Vote: true}}, clk.Now())
	require.NoError(t, err)
	conn := &stampConn{fakeConn: fakeConn{msgs: make(chan authority.Msg)}, clk: clk}
	var mu sync.Mutex
	var lastOK time.Time
	up := true
	pinger := func(ctx context.Context, peer string, token authority.Token) error {
		mu.Lock()
		defer mu.Unlock()
		if !up {
			return errors.New("no answer")
		}
		lastOK = clk.Now()
		return nil
	}
	a, err := authority.NewAgent(rt, conn, nopHost{}, authority.AgentOptions{Clock: clk, Pinger: pinger, HeartbeatEvery: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	give(t, conn.msgs, authority.TopologyMsg{To: "voter", Topology: 1, Voters: []string{"holder", "voter"}, Holder: "holder", Token: 3})
	const step = 100 * time.Millisecond
	runUntil(t, clk, 2, step, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !lastOK.IsZero()
	})
	mu.Lock()
	up = false
	ok := lastOK
	mu.Unlock()
	runUntil(t, clk, 2, step, 10*time.Second, func() bool { _, sent := first[authority.Concern](conn); return sent })
	at, _ := first[authority.Concern](conn)
	// The runtime stamps a round trip when its answer is in, which the
	// test's clock may pass by a step or two while the ping runs: the
	// concern goes at the end of the window to within a ping period, not
	// at the next heartbeat (a minute).
	late := at.Sub(ok.Add(authority.HealthWindow))
	require.True(t, late >= 0 && late < authority.PingEvery, "the concern went %v after the health window ran out (last round trip %v, concern %v)", late, ok, at)
	stopAgent(t, cancel, done)
}

// usableHost's storage can serve: its node offers when a grant ends.
type usableHost struct{ nopHost }

func (usableHost) Frontier(string) (chain.Position, bool) { return chain.Position{}, true }

// A promotable node offers when its decision delay has passed, not at its
// next heartbeat or message.
func TestAgentOffersAfterTheDecisionDelay(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "cand", Domain: "orders", Caps: authority.Capabilities{Promotable: true}}, clk.Now())
	require.NoError(t, err)
	conn := &stampConn{fakeConn: fakeConn{msgs: make(chan authority.Msg)}, clk: clk}
	a, err := authority.NewAgent(rt, conn, usableHost{}, authority.AgentOptions{Clock: clk, HeartbeatEvery: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	required := clk.Now()
	give(t, conn.msgs, authority.RequiredMsg{To: "cand", Token: 1, Required: authority.Required{Star: "old"}})
	give(t, conn.msgs, authority.RevokeMsg{To: "nobody"}) // the required message was taken at the time sent
	const step = 10 * time.Millisecond
	runUntil(t, clk, 1, step, time.Second, func() bool { _, sent := first[authority.Offer](conn); return sent })
	at, _ := first[authority.Offer](conn)
	late := at.Sub(required.Add(authority.DefaultDecisionDelay))
	require.True(t, late >= 0 && late <= 2*step, "the offer went %v after the decision delay (%v)", late, authority.DefaultDecisionDelay)
	stopAgent(t, cancel, done)
}

// forgetfulHost recovers as far as required, but its Frontier never says
// so.
type forgetfulHost struct {
	nopHost
	calls atomic.Int32
}

func (h *forgetfulHost) Recover(_ context.Context, order authority.RecoverMsg) (chain.Position, error) {
	h.calls.Add(1)
	return order.Required.Pos, nil
}

func (*forgetfulHost) Frontier(string) (chain.Position, bool) { return chain.Position{}, true }

// A host whose Frontier disagrees with what its Recover returned cannot
// trap the agent: each pass of the loop recovers a bounded number of
// times, and the agent keeps serving its channel.
func TestAgentHostFrontierDisagrees(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "cand", Domain: "orders", Caps: authority.Capabilities{Promotable: true}}, clk.Now())
	require.NoError(t, err)
	conn := &fakeConn{msgs: make(chan authority.Msg)}
	h := &forgetfulHost{}
	a, err := authority.NewAgent(rt, conn, h, authority.AgentOptions{Clock: clk, HeartbeatEvery: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	req := authority.Required{Star: "old", Pos: chain.Position{Epoch: 1, Slot: 9}}
	give(t, conn.msgs, authority.RequiredMsg{To: "cand", Token: 1, Required: req})
	give(t, conn.msgs, authority.RecoverMsg{To: "cand", Token: 1, Required: req,
		Grant: authority.Grant{Domain: "orders", Holder: "cand", Token: 1, Revision: 3}})
	give(t, conn.msgs, authority.RevokeMsg{To: "nobody"}) // the agent is back in its loop
	stopAgent(t, cancel, done)
	require.LessOrEqual(t, h.calls.Load(), int32(16), "recoveries in three passes of the loop")
	require.GreaterOrEqual(t, h.calls.Load(), int32(1))
}

// judgingHost says how far it can recover (authority.RecoverableHost),
// and has materialized nothing.
type judgingHost struct {
	nopHost
	mu    sync.Mutex
	can   chain.Position
	err   error
	calls int
}

func (h *judgingHost) Frontier(string) (chain.Position, bool) { return chain.Position{}, true }

func (h *judgingHost) Recoverable(_ context.Context, star string) (chain.Position, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	return h.can, h.err
}

func (h *judgingHost) set(can chain.Position, err error) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.can, h.err = can, err
	return h.calls
}

var _ authority.RecoverableHost = (*judgingHost)(nil)

// A node whose host can say how far it can recover offers only once that
// covers the requirement, not while it falls short or cannot say; the
// offer carries what it has materialized and what it can recover, and the
// host is no longer asked once the node offered.
func TestAgentOffersOnlyWhenItCanRecover(t *testing.T) {
	clk := clock.NewFake(t0)
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "cand", Domain: "orders", Caps: authority.Capabilities{Promotable: true}}, clk.Now())
	require.NoError(t, err)
	conn := &fakeConn{msgs: make(chan authority.Msg)}
	h := &judgingHost{}
	h.set(chain.Position{Epoch: 2, Slot: 6}, nil) // one short
	a, err := authority.NewAgent(rt, conn, h, authority.AgentOptions{Clock: clk, HeartbeatEvery: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("the agent did not stop")
		}
	}()
	barrier := authority.RevokeMsg{To: "nobody"}
	req := authority.Required{Star: "old", Pos: chain.Position{Epoch: 2, Slot: 7}}
	give(t, conn.msgs, authority.RequiredMsg{To: "cand", Token: 1, Required: req})
	give(t, conn.msgs, barrier)
	blockUntil(t, clk, 1)
	clk.Advance(time.Second) // past the decision delay
	offers := func() []authority.Offer {
		var out []authority.Offer
		for _, ev := range conn.events() {
			if o, ok := ev.(authority.Offer); ok {
				out = append(out, o)
			}
		}
		return out
	}
	give(t, conn.msgs, barrier)
	give(t, conn.msgs, barrier)
	require.Empty(t, offers(), "it cannot recover the requirement: no offer")
	h.set(chain.Position{}, errors.New("zone-b unreachable"))
	give(t, conn.msgs, barrier)
	give(t, conn.msgs, barrier)
	require.Empty(t, offers(), "it cannot say: no offer")
	h.set(chain.Position{Epoch: 2, Slot: 9}, nil)
	give(t, conn.msgs, barrier)
	give(t, conn.msgs, barrier)
	require.Equal(t, []authority.Offer{{Node: "cand", Token: 1, Star: "old", Frontier: chain.Position{}, Recoverable: chain.Position{Epoch: 2, Slot: 9}, Usable: true}}, offers())
	calls := h.set(chain.Position{Epoch: 2, Slot: 9}, nil)
	give(t, conn.msgs, barrier)
	give(t, conn.msgs, barrier)
	require.Equal(t, calls, h.set(chain.Position{Epoch: 2, Slot: 9}, nil), "asked again after it offered")
	require.Len(t, offers(), 1)
}

// give hands the agent m, failing the test if it takes nothing for 10 s.
func give(t *testing.T, ch chan<- authority.Msg, m authority.Msg) {
	t.Helper()
	select {
	case ch <- m:
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent takes no message (%s)", m.Kind())
	}
}

// blockUntil waits until n timers wait on clk, failing the test after
// 10 s.
func blockUntil(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() { clk.BlockUntil(n); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d timers never waited on the clock", n)
	}
}

// stopAgent cancels an agent's Run and waits for it, failing the test
// after 10 s.
func stopAgent(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop")
	}
}
