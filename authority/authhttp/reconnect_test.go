package authhttp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/clock"
)

// fedConn is a real control channel whose messages the test hands to the
// agent itself: in the order it chooses, or not at all.
type fedConn struct {
	authority.Conn
	msgs chan authority.Msg
}

func (c *fedConn) Msgs() <-chan authority.Msg { return c.msgs }

// feed hands the agent m, then a barrier: once feed returns, the agent
// has handled m.
func (c *fedConn) feed(t *testing.T, m authority.Msg) {
	t.Helper()
	for _, x := range []authority.Msg{m, barrier} {
		select {
		case c.msgs <- x:
		case <-time.After(patience):
			t.Fatalf("the agent takes no message")
		}
	}
}

// A former holder, replaced by the next token, reconnects over a real
// connection claiming the token it held, its clock still before its
// deadline. The controller's answers, read off the wire, reach its agent
// in every order and with each one lost: the first one closes admission,
// which a delayed grant under the old token does not reopen.
func TestFormerHolderReconnectsOverTheWire(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	a := e.dial("node-a", promotable, 0)
	b := e.dial("node-b", promotable, 0)
	g1 := e.grant(a, "node-a")
	recvMsg(t, b.Msgs(), kind(authority.MsgRequired, 0))

	// node-a's connection breaks and its reservation runs out; node-b
	// offers and, past node-a's deadline on the controller's clock, gets
	// token 2.
	e.client("node-a").kill()
	e.waitEnded("node-a")
	e.tick(3 * time.Second)
	req := recvMsg(t, b.Msgs(), kind(authority.MsgRequired, g1.Token)).(authority.RequiredMsg)
	require.NoError(t, b.Send(e.ctx, authority.Offer{Node: "node-b", Token: req.Token, Star: req.Required.Star,
		Frontier: req.Required.Pos, Recoverable: req.Required.Pos, Usable: true}))
	e.tick(lease)
	recvMsg(t, b.Msgs(), kind(authority.MsgGrant, g1.Token+1))

	// The answers to a reconnect with token 1, as the wire carries them.
	reconnect := func() (authority.Conn, []authority.Msg) {
		t.Helper()
		conn := e.dial("node-a", promotable, g1.Token)
		msgs := []authority.Msg{
			recvMsg(t, conn.Msgs(), func(authority.Msg) bool { return true }),
			recvMsg(t, conn.Msgs(), func(authority.Msg) bool { return true }),
		}
		return conn, msgs
	}
	conn, first := reconnect()
	require.NoError(t, conn.Close())
	require.Equal(t, []authority.MsgKind{authority.MsgTopology, authority.MsgRevoke}, []authority.MsgKind{first[0].Kind(), first[1].Kind()})
	require.Equal(t, g1.Token+1, first[0].(authority.TopologyMsg).Token, "the topology names the newer token")
	require.Equal(t, "node-b", first[0].(authority.TopologyMsg).Holder)

	for _, seq := range [][]int{{0, 1}, {1, 0}, {0}, {1}} {
		var names []authority.MsgKind
		for _, i := range seq {
			names = append(names, first[i].Kind())
		}
		t.Run(fmt.Sprint(names), func(t *testing.T) {
			conn, msgs := reconnect()
			defer conn.Close()
			// Its clock says its grant still runs.
			clk := clock.NewFake(g1.Deadline.Add(-time.Second))
			rt, err := authority.Resume(authority.RuntimeConfig{Node: "node-a", Domain: domain, Caps: promotable}, g1, clk.Now())
			require.NoError(t, err)
			fed := &fedConn{Conn: conn, msgs: make(chan authority.Msg)}
			ag, err := authority.NewAgent(rt, fed, &host{}, authority.AgentOptions{Clock: clk, HeartbeatEvery: time.Minute})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(e.ctx)
			done := make(chan error, 1)
			go func() { done <- ag.Run(ctx) }()
			defer func() {
				cancel()
				select {
				case err := <-done:
					require.NoError(t, err)
				case <-time.After(patience):
					t.Fatal("the agent did not stop")
				}
			}()
			require.NoError(t, ag.Admit(), "before the answers it admits: only they can close it")
			for _, i := range seq {
				fed.feed(t, msgs[i])
				require.ErrorIs(t, ag.Admit(), authority.ErrNotAdmitted, "after %s", msgs[i].Kind)
				require.Zero(t, ag.Grant().Token, "after %s", msgs[i].Kind)
			}
			late := g1
			late.Deadline = late.Deadline.Add(time.Minute)
			fed.feed(t, authority.GrantMsg{To: "node-a", Token: g1.Token, Topology: msgs[0].(authority.TopologyMsg).Topology, Grant: late})
			require.ErrorIs(t, ag.Admit(), authority.ErrNotAdmitted, "a delayed grant under the old token reopened admission")
		})
	}
}
