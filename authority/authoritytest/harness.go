package authoritytest

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/metastore"
)

const domain = "orders"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cluster is a controller, its election on a store, and runtimes, wired
// in process: the test delivers every message and event, and the clock
// moves only when the test advances it.
type cluster struct {
	t     *testing.T
	ctx   context.Context
	b     Backend
	store metastore.Store
	now   time.Time
	cfg   authority.ControllerConfig
	sess  metastore.Session
	el    *authority.Election
	ctl   *authority.Controller
	nodes map[string]*node
	// Recovery orders and release requests the runtimes' hosts received.
	recover map[string]*authority.RecoverMsg
	release map[string]bool
	// trace, when set, is told everything that moves (see script.go).
	trace *tracer
}

type node struct {
	rt        *authority.Runtime
	caps      authority.Capabilities
	connected bool
	// partitioned: the node's channel looks open to the controller, but
	// nothing gets through either way. mute: what the node sends is lost,
	// what it is sent arrives.
	partitioned, mute bool
	// hold: the controller's messages to the node are kept in inbox for
	// the test to deliver, in any order, or not at all.
	hold  bool
	inbox []authority.Msg
	// shown: the admission state last traced.
	shown string
}

func newCluster(t *testing.T, b Backend) *cluster {
	t.Helper()
	c := &cluster{t: t, ctx: t.Context(), b: b, store: b.NewStore(t), now: t0,
		cfg:   authority.ControllerConfig{Domain: domain, Lease: 10 * time.Second, Reconnect: 2 * time.Second},
		nodes: map[string]*node{}, recover: map[string]*authority.RecoverMsg{}, release: map[string]bool{}}
	c.elect("ctl-1")
	return c
}

// expire ends the controller's session, as its TTL running out would.
func (c *cluster) expire() { c.b.Expire(c.t, c.store, c.sess) }

// elect makes name the controller: a session, the election, the durable
// state loaded with the next term, a fresh state machine.
func (c *cluster) elect(name string) {
	c.t.Helper()
	sess, err := c.store.NewSession(c.ctx, time.Minute)
	require.NoError(c.t, err)
	c.t.Cleanup(func() { _ = sess.Close(context.Background()) })
	el, err := authority.Campaign(c.ctx, c.store, "", domain, name, sess)
	require.NoError(c.t, err)
	st, err := el.Load(c.ctx)
	require.NoError(c.t, err)
	ctl, err := authority.NewController(c.cfg, st, c.now)
	require.NoError(c.t, err)
	c.sess, c.el, c.ctl = sess, el, ctl
	for n, nd := range c.nodes {
		if nd.connected {
			c.event(authority.Connect{Node: n, Caps: nd.caps, Token: nd.rt.Grant().Token})
		}
	}
}

// join starts a runtime and connects it.
func (c *cluster) join(name string, caps authority.Capabilities) *authority.Runtime {
	c.t.Helper()
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: name, Domain: domain, Caps: caps, DecisionDelay: 500 * time.Millisecond}, c.now)
	require.NoError(c.t, err)
	c.nodes[name] = &node{rt: rt, caps: caps}
	c.connect(name)
	return rt
}

func (c *cluster) connect(name string) {
	nd := c.nodes[name]
	nd.connected = true
	c.event(authority.Connect{Node: name, Caps: nd.caps, Token: nd.rt.Grant().Token})
}

func (c *cluster) disconnect(name string, unexpected bool) {
	c.nodes[name].connected = false
	c.event(authority.Disconnect{Node: name, Unexpected: unexpected})
}

// event steps the controller and runs the system until it is quiet; it
// returns the controller's answer to ev.
func (c *cluster) event(ev authority.Event) error {
	err := c.ctl.Step(ev)
	c.trace.event(ev, fate(err))
	c.run()
	return err
}

// advance moves the clock and ticks everyone.
func (c *cluster) advance(d time.Duration) {
	c.now = c.now.Add(d)
	for _, nd := range c.nodes {
		require.NoError(c.t, nd.rt.Step(authority.Tick{Now: c.now}))
	}
	c.event(authority.Tick{Now: c.now})
}

// run persists what the controller proposes, delivers its messages to
// connected runtimes, and feeds their events back, until nothing moves.
// Nodes are visited in name order: a run is the same every time.
func (c *cluster) run() {
	c.t.Helper()
	for range 1000 {
		moved := false
		rd := c.ctl.Ready()
		if rd.Persist != nil {
			st, err := c.el.Save(c.ctx, c.ctl.State(), *rd.Persist)
			require.NoError(c.t, err, "persist %s", rd.Persist)
			c.ctl.Persisted(st)
			c.trace.persist(st)
			moved = true
		}
		var sent []delivery
		for _, m := range rd.Msgs {
			moved = true
			d := delivery{m: m}
			switch nd := c.nodes[m.Recipient()]; {
			case nd == nil || !nd.connected || nd.partitioned:
				d.fate = "lost"
			case nd.hold:
				nd.inbox = append(nd.inbox, m)
				d.fate = "held"
			default:
				d.err = nd.rt.Step(m)
			}
			sent = append(sent, d)
		}
		c.trace.msgs(sent)
		for _, name := range c.names() {
			nd := c.nodes[name]
			if !nd.connected {
				continue
			}
			rr := nd.rt.Ready()
			nd.rt.Advance(rr)
			c.trace.ready(name, nd, rr)
			if nd.partitioned || nd.mute {
				for _, ev := range rr.Events {
					c.trace.event(ev, "lost")
				}
				continue // lost on the way
			}
			if rr.Recover != nil {
				c.recover[name] = rr.Recover
			}
			if rr.Release {
				c.release[name] = true
			}
			for _, ev := range rr.Events {
				moved = true
				c.trace.event(ev, fate(c.ctl.Step(ev)))
			}
		}
		if !moved {
			return
		}
	}
	c.t.Fatalf("the cluster did not settle")
}

// names lists the nodes in name order.
func (c *cluster) names() []string {
	return slices.Sorted(maps.Keys(c.nodes))
}

// heartbeat sends the holder's heartbeat.
func (c *cluster) heartbeat(name string, progress chain.Position) error {
	rt := c.nodes[name].rt
	require.NoError(c.t, rt.Step(authority.HeartbeatDue{Progress: progress}))
	rd := rt.Ready()
	if rd.Heartbeat == nil {
		return authority.ErrNotAdmitted
	}
	rt.Advance(authority.RuntimeReady{Heartbeat: rd.Heartbeat})
	err := c.ctl.Step(*rd.Heartbeat)
	c.trace.event(*rd.Heartbeat, fate(err))
	c.run()
	return err
}

func (c *cluster) state() authority.StateRecord {
	st, err := authority.Read(c.ctx, c.store, "", domain)
	require.NoError(c.t, err)
	return st
}

// elected runs a vacant domain to a grant for name: it reports a covering
// frontier, offers after the decision delay, and gets the next token.
func (c *cluster) grantTo(name string) authority.Grant {
	c.t.Helper()
	st := c.state()
	require.Equal(c.t, authority.Vacant, st.Phase, "grantTo needs a vacant domain: %s", st)
	c.nodes[name].rt.Step(authority.FrontierReport{Star: st.Required.Star, Pos: st.Required.Pos, Usable: true})
	// The node offers after its decision delay; the controller issues the
	// token once every earlier holder's deadline has passed.
	for range 2 * int(c.cfg.Lease/time.Second) {
		c.advance(time.Second)
		if g := c.nodes[name].rt.Grant(); g.Holder == name {
			return g
		}
	}
	c.t.Fatalf("%s got no grant: %s", name, c.state())
	return authority.Grant{}
}

// healthyHolder starts the cluster most fast-fence scenarios start from:
// a promotable holder, a promotable voter-0 and a voter-1, the holder
// granted and then seen healthy for three ping rounds, each with a
// heartbeat at 1/4. It returns the holder's and voter-0's runtimes and
// the grant.
func healthyHolder(t *testing.T, b Backend) (c *cluster, h, nb *authority.Runtime, g authority.Grant) {
	t.Helper()
	c = newCluster(t, b)
	h = c.join("holder", promotable)
	nb = c.join("voter-0", promotable)
	c.join("voter-1", voter)
	g = c.grantTo("holder")
	for range 3 {
		c.pingRound("holder", g.Token, nil)
		require.NoError(t, c.heartbeat("holder", chain.Position{Epoch: 1, Slot: 4}))
		c.advance(authority.PingEvery)
	}
	return c, h, nb, g
}
