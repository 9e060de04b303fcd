package authority_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/metastore/memstore"
)

// localRig is a controller behind a Local transport, on a fake clock that
// only the test moves. Every message the driver sends is also copied to
// sent, so that the test waits on what the controller decided instead of
// on the time.
type localRig struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Fake
	local *authority.Local
	d     *authority.Driver
	sent  chan authority.Msg
}

func newLocalRig(t *testing.T) *localRig {
	store := memstore.New(memstore.Options{})
	r := &localRig{t: t, ctx: t.Context(), clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		local: authority.NewLocal(), sent: make(chan authority.Msg, 1024)}
	sess, err := store.NewSession(r.ctx, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	el, err := authority.Campaign(r.ctx, store, "", "orders", "ctl", sess)
	require.NoError(t, err)
	st, err := el.Load(r.ctx)
	require.NoError(t, err)
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, st, r.clk.Now())
	require.NoError(t, err)
	r.d, err = authority.NewDriver(el, ctl, func(m authority.Msg) {
		r.local.Send(m)
		select {
		case r.sent <- m:
		default:
		}
	}, authority.DriverOptions{Clock: r.clk})
	require.NoError(t, err)
	r.local.SetDriver(r.d)
	return r
}

// idleHost is a node's host with nothing to recover or drain.
type idleHost struct{}

func (idleHost) Progress() chain.Position { return chain.Position{} }

func (idleHost) Recover(context.Context, authority.RecoverMsg) (chain.Position, error) {
	return chain.Position{}, nil
}

func (idleHost) Release(context.Context) (chain.Position, error) { return chain.Position{}, nil }

func (idleHost) Frontier(string) (chain.Position, bool) { return chain.Position{}, true }

// await lets the agent's heartbeat timer, the only timer on the clock,
// come due again and again, ticking the controller with the clock each
// time, until the driver sends a message that match accepts. The clock
// moves only while the agent waits on its timer, and only to that
// timer's deadline: a timer the agent set anew meanwhile is found again.
// Nothing sleeps.
func (r *localRig) await(match func(authority.Msg) bool) authority.Msg {
	r.t.Helper()
	for range 1000 {
		for len(r.sent) > 0 {
			if m := <-r.sent; match(m) {
				return m
			}
		}
		blockUntil(r.t, r.clk, 1)
		if at, ok := r.clk.Next(); ok {
			r.clk.Advance(at.Sub(r.clk.Now()))
			require.NoError(r.t, r.d.Step(r.ctx, authority.Tick{Now: r.clk.Now()}))
		}
	}
	r.t.Fatal("the awaited message did not come in 1000 heartbeats")
	return nil
}

// An Agent over the Local transport connects, offers once the decision
// delay has passed, gets the first grant once the new controller's
// fence wait is over, renews it with its heartbeats, and its goodbye
// ends it at once.
func TestLocalAgentGetsAGrant(t *testing.T) {
	r := newLocalRig(t)
	caps := authority.Capabilities{Promotable: true}
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "node-a", Domain: "orders", Caps: caps}, r.clk.Now())
	require.NoError(t, err)
	conn, err := r.local.Dial("node-a", caps, 0)
	require.NoError(t, err)
	agent, err := authority.NewAgent(rt, conn, idleHost{}, authority.AgentOptions{HeartbeatEvery: time.Second, Clock: r.clk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	require.ErrorIs(t, agent.Admit(), authority.ErrNotAdmitted)

	g := r.await(func(m authority.Msg) bool { return m.Kind() == authority.MsgGrant }).(authority.GrantMsg).Grant
	require.Equal(t, "node-a", g.Holder)
	require.Equal(t, authority.Token(1), g.Token)
	st := r.d.State()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, "node-a", st.Holder)

	// A renewal answers a heartbeat: the agent held the grant when it
	// beat, and admits.
	renewal := r.await(func(m authority.Msg) bool {
		gm, ok := m.(authority.GrantMsg)
		return ok && gm.Token == g.Token && gm.Grant.Deadline.After(g.Deadline)
	})
	require.Equal(t, "node-a", renewal.Recipient())
	require.NoError(t, agent.Admit())
	require.Equal(t, g.Token, agent.Grant().Token)

	stopAgent(t, cancel, done)
	require.NoError(t, conn.Close(), "the goodbye")
	st = r.d.State()
	require.Equal(t, authority.Vacant, st.Phase, "a goodbye ends the grant at once: %s", st)
	require.Equal(t, "the holder left", st.Ended)
	require.ErrorIs(t, conn.Send(r.ctx, authority.Heartbeat{Node: "node-a", Token: g.Token}), authority.ErrConnClosed)
	require.NoError(t, conn.Close(), "a second Close returns the first one's answer")
}

// What a connection refuses, and how it ends: an overflow of its queue
// closes it after the messages queued, a newer Dial of the node replaces
// it, a change of driver closes every connection.
func TestLocalConnections(t *testing.T) {
	r := newLocalRig(t)
	_, err := authority.NewLocal().Dial("node-a", authority.Capabilities{}, 0)
	require.ErrorIs(t, err, authority.ErrNoDriver)
	_, err = r.local.Dial("not a name", authority.Capabilities{}, 0)
	require.ErrorIs(t, err, cutline.ErrInvalid)

	caps := authority.Capabilities{Promotable: true}
	conn, err := r.local.Dial("node-a", caps, 0)
	require.NoError(t, err)
	m := <-conn.Msgs()
	require.Equal(t, authority.MsgTopology, m.Kind(), "the Connect was stepped: the topology first")
	m = <-conn.Msgs()
	require.Equal(t, authority.MsgRequired, m.Kind(), "then the requirement of a vacant domain")

	require.NoError(t, conn.Send(r.ctx, authority.Connect{Node: "node-a", Caps: caps}), "the dialed Connect: nothing to do")
	require.Empty(t, conn.Msgs(), "and nothing was stepped")
	require.ErrorIs(t, conn.Send(r.ctx, authority.Connect{Node: "node-a", Caps: caps, Token: 3}), cutline.ErrInvalid)
	require.ErrorIs(t, conn.Send(r.ctx, authority.Disconnect{Node: "node-a"}), cutline.ErrInvalid)
	require.ErrorIs(t, conn.Send(r.ctx, authority.Tick{Now: r.clk.Now()}), cutline.ErrInvalid)
	require.ErrorIs(t, conn.Send(r.ctx, authority.Offer{Node: "node-b", Usable: true}), authority.ErrRefused, "an event for another node")
	require.ErrorIs(t, conn.Send(r.ctx, authority.HandoffRequest{Target: "node-a"}), authority.ErrRefused, "a node requests no handoff")
	require.ErrorIs(t, conn.Send(r.ctx, authority.Heartbeat{Node: "node-a", Token: 7}), authority.ErrRefused, "the controller's answer")
	require.Equal(t, authority.Vacant, r.d.State().Phase)

	// A message for a node without a connection is dropped.
	r.local.Send(authority.TopologyMsg{To: "node-z"})

	// The queue overflows: the connection closes after what it queued,
	// oldest first, and refuses to send.
	drain(conn.Msgs())
	for i := range authority.LocalBuffer + 1 {
		r.local.Send(authority.TopologyMsg{To: "node-a", Topology: uint64(100 + i)})
	}
	var got []uint64
	for m := range conn.Msgs() {
		got = append(got, m.(authority.TopologyMsg).Topology)
	}
	require.Len(t, got, authority.LocalBuffer)
	require.Equal(t, uint64(100), got[0])
	require.Equal(t, uint64(100+authority.LocalBuffer-1), got[len(got)-1])
	require.ErrorIs(t, conn.Send(r.ctx, authority.Offer{Node: "node-a", Usable: true}), authority.ErrConnClosed)
	require.NoError(t, conn.Close())

	// Dialing again replaces a connection without a Disconnect; Close of
	// the replaced one steps nothing.
	c1, err := r.local.Dial("node-a", caps, 0)
	require.NoError(t, err)
	c2, err := r.local.Dial("node-a", caps, 0)
	require.NoError(t, err)
	drain(c1.Msgs())
	_, open := <-c1.Msgs()
	require.False(t, open, "the replaced connection ended")
	require.NoError(t, c1.Close())
	require.NoError(t, c2.Send(r.ctx, authority.Offer{Node: "node-a", Usable: true}), "the new connection is the node's: its offer is taken")
	require.Equal(t, authority.Recovering, r.d.State().Phase)

	// A new driver closes every connection.
	r.local.SetDriver(nil)
	drain(c2.Msgs())
	_, open = <-c2.Msgs()
	require.False(t, open)
	require.ErrorIs(t, c2.Send(r.ctx, authority.Offer{Node: "node-a", Usable: true}), authority.ErrConnClosed)
	require.NoError(t, c2.Close())
	_, err = r.local.Dial("node-a", caps, 0)
	require.ErrorIs(t, err, authority.ErrNoDriver)
}

// drain takes every message queued on ch without waiting for more.
func drain(ch <-chan authority.Msg) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}
