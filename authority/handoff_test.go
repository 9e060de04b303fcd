package authority_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// world wires a controller and two nodes in process, over one store and
// three zones: each node writes through a Guarded store that follows its
// grant, and its lease.Star admits only while its runtime does.
type world struct {
	t     testing.TB
	ctx   context.Context
	store metastore.Store
	env   *cutlinetest.Env
	clk   *clock.Fake
	d     *authority.Driver
	nodes map[string]*hostNode
	hist  *cutlinetest.History
}

type hostNode struct {
	name  string
	rt    *authority.Runtime
	guard *authority.Guarded
	sess  metastore.Session
	star  *lease.Star
	refs  *settle.RefIndex
	queue []authority.Msg
	// parts over the guarded store, for recovery
	minter  *epoch.Minter
	settler *settle.Settler
	dead    bool // crashed and cut off: it receives and sends nothing
}

// parts builds the node's minter and settler over its guarded store
// without starting a star (a candidate in recovery).
func (w *world) parts(n *hostNode) {
	minter, err := epoch.NewMinter(n.guard, epoch.Options{Identity: n.name})
	require.NoError(w.t, err)
	p := w.env.Party(n.name)
	fencer, err := fence.New(minter, p.Zones, fence.Options{Identity: n.name})
	require.NoError(w.t, err)
	n.refs, err = settle.NewRefIndex(n.guard, "", cutlinetest.Locate)
	require.NoError(w.t, err)
	n.settler, err = settle.New(minter, p.Zones, n.refs, settle.Options{Fencer: fencer})
	require.NoError(w.t, err)
	n.minter = minter
}

func newWorld(t testing.TB) *world { return newWorldLatency(t, 0) }

// newWorldLatency is newWorld with every zone request delayed by latency,
// in real time.
func newWorldLatency(t testing.TB, objectLatency time.Duration) *world {
	store := memstore.New(memstore.Options{})
	w := &world{t: t, ctx: t.Context(), store: store, clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		nodes: map[string]*hostNode{}, hist: &cutlinetest.History{}}
	var opts cutlinetest.Options
	if objectLatency > 0 {
		opts.Wrap = func(i int, zone objstore.Bucket) objstore.Bucket {
			return latency.Wrap(zone, latency.Options{Seed: uint64(i), Default: latency.Fixed(objectLatency)})
		}
	}
	w.env = cutlinetest.New(t, store, []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}, opts)
	sess, err := store.NewSession(w.ctx, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	el, err := authority.Campaign(w.ctx, store, "", "orders", "ctl", sess)
	require.NoError(t, err)
	st, err := el.Load(w.ctx)
	require.NoError(t, err)
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, st, w.clk.Now())
	require.NoError(t, err)
	w.d, err = authority.NewDriver(el, ctl, func(m authority.Msg) {
		if n := w.nodes[m.Recipient()]; n != nil {
			n.queue = append(n.queue, m)
		}
	}, authority.DriverOptions{Clock: w.clk})
	require.NoError(t, err)
	return w
}

func (w *world) join(name string) *hostNode {
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: name, Domain: "orders", Caps: authority.Capabilities{Vote: true, Promotable: true}}, w.clk.Now())
	require.NoError(w.t, err)
	g, err := authority.NewGuarded(w.store, "", "orders")
	require.NoError(w.t, err)
	n := &hostNode{name: name, rt: rt, guard: g}
	w.nodes[name] = n
	require.NoError(w.t, w.d.Step(w.ctx, authority.Connect{Node: name, Caps: authority.Capabilities{Vote: true, Promotable: true}}))
	w.deliver()
	return n
}

// deliver hands every queued message to its runtime, keeps each node's
// guard on its grant, and steps the controller with what the runtimes
// answer, until nothing moves.
func (w *world) deliver() {
	for range 100 {
		moved := false
		for _, n := range w.nodes {
			if n.dead {
				n.queue = nil
				continue
			}
			q := n.queue
			n.queue = nil
			for _, m := range q {
				moved = true
				_ = n.rt.Step(m)
			}
			n.guard.Set(n.rt.Grant().Revision)
			n.rt.Step(authority.Tick{Now: w.clk.Now()})
			rd := n.rt.Ready()
			n.rt.Advance(rd)
			for _, ev := range rd.Events {
				moved = true
				_ = w.d.Step(w.ctx, ev)
			}
		}
		if !moved {
			return
		}
	}
	w.t.Fatal("the world did not settle")
}

func (w *world) advance(d time.Duration) {
	w.clk.Advance(d)
	require.NoError(w.t, w.d.Step(w.ctx, authority.Tick{Now: w.clk.Now()}))
	w.deliver()
}

// startStar starts the node's star over its guarded store, admitting only
// while its runtime does.
func (w *world) startStar(n *hostNode) {
	minter, err := epoch.NewMinter(n.guard, epoch.Options{Identity: n.name})
	require.NoError(w.t, err)
	p := w.env.Party(n.name)
	fencer, err := fence.New(minter, p.Zones, fence.Options{Identity: n.name})
	require.NoError(w.t, err)
	n.refs, err = settle.NewRefIndex(n.guard, "", cutlinetest.Locate)
	require.NoError(w.t, err)
	settler, err := settle.New(minter, p.Zones, n.refs, settle.Options{Fencer: fencer})
	require.NoError(w.t, err)
	n.minter, n.settler = minter, settler
	n.sess, err = w.store.NewSession(w.ctx, time.Minute)
	require.NoError(w.t, err)
	w.t.Cleanup(func() { _ = n.sess.Close(context.Background()) })
	n.star, err = lease.Start(w.ctx, lease.Config{Star: n.name, Store: n.guard, Session: n.sess, Minter: minter, Settler: settler, Index: n.refs,
		Constants: w.env.Constants(2, 16)}, lease.Options{Admit: func() error { return n.rt.Admit(w.clk.Now()) }})
	require.NoError(w.t, err)
	w.t.Cleanup(n.star.Abort)
}

func (w *world) appendN(n *hostNode, prefix string, count int) {
	for i := range count {
		next, err := n.star.Next("orders")
		require.NoError(w.t, err)
		p := cutlinetest.Record("orders", next, fmt.Sprintf("%s-%d", prefix, i))
		f, err := n.star.Submit(w.ctx, p)
		require.NoError(w.t, err)
		ev := w.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: n.name, Star: n.name, ID: fmt.Sprintf("%s-%d", prefix, i), Payload: p})
		pos, err := f.Wait(w.ctx)
		require.NoError(w.t, err)
		w.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Host: n.name, Star: n.name, Of: ev, Pos: pos})
	}
}

// A planned handoff of a domain with the whole stack: the holder drains
// every stream through Finish when the controller asks it to release;
// holder and token change in one durable transition; the target's open
// consumes the clean-release mark; the former holder can neither admit
// nor write progress; nothing acknowledged is lost.
func TestPlannedHandoffThroughFinish(t *testing.T) {
	w := newWorld(t)
	a := w.join("node-a")
	b := w.join("node-b")
	require.NoError(t, w.d.Step(w.ctx, authority.Offer{Node: "node-a", Usable: true}))
	w.advance(authority.DefaultLease)
	require.Equal(t, "node-a", a.rt.Grant().Holder)
	w.startStar(a)
	ten, err := a.star.Open(w.ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	require.Equal(t, lease.Fresh, ten.Decision)
	w.appendN(a, "a", 5)

	// The handoff: the controller asks node-a to release; node-a drains
	// through Finish and reports.
	require.NoError(t, w.d.Step(w.ctx, authority.HandoffRequest{Target: "node-b"}))
	w.deliver()
	require.ErrorIs(t, a.rt.Admit(w.clk.Now()), authority.ErrNotAdmitted, "draining: admission closed")
	_, err = a.star.Submit(w.ctx, cutlinetest.Record("orders", 5, "refused"))
	require.ErrorIs(t, err, authority.ErrNotAdmitted, "the star admits nothing while draining")
	require.NoError(t, a.star.Drain(w.ctx), "Finish every stream: the marks land under the old token")
	a.rt.Step(authority.ReleaseDone{Progress: chain.Position{Epoch: a.star.Epoch().Epoch, Slot: 5}})
	w.deliver()
	st := w.d.State()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, "node-b", st.Holder)
	require.Equal(t, authority.Token(2), st.Token)

	// node-b writes under token 2: its open consumes node-a's mark.
	w.startStar(b)
	ten, err = b.star.Open(w.ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	require.Equal(t, lease.MarkConsumed, ten.Decision)
	require.Equal(t, uint64(5), ten.Next)
	w.appendN(b, "b", 3)

	// node-a, fenced: its admission and its progress writes fail.
	_, err = a.star.Open(w.ctx, "other", lease.OpenOptions{})
	require.ErrorIs(t, err, authority.ErrNotAdmitted)
	_, err = a.star.Submit(w.ctx, cutlinetest.Record("orders", 8, "late"))
	require.ErrorIs(t, err, authority.ErrNotAdmitted)
	next, err := a.refs.Next(w.ctx, "orders")
	require.NoError(t, err)
	err = a.refs.CoverSpan(w.ctx, "node-a", chain.Position{Epoch: 1, Slot: 9}, settle.Span{Stream: "orders", Offset: next, Count: 1})
	require.True(t, errors.Is(err, authority.ErrStaleGrant), "a former holder's coverage write: %v", err)

	require.NoError(t, b.star.Close(w.ctx))
	w.env.Verify(w.hist)
	ids := w.env.Party("check").StreamIDs("orders")
	require.Len(t, ids, 8, "acknowledged 8, lost 0, duplicated 0: %v", ids)
}

// The failover timeline, measured: the holder dies with acknowledged,
// unabsorbed records; detection (the health window and the challenge)
// and the grant run on the fake clock, the recovery (fence and settle
// with this library) and the successor's first append in real time on
// in-memory zones. The test logs the split; it asserts the order of
// events, never wall-clock times.
func TestFailoverTimeline(t *testing.T) {
	tl := failoverTimeline(t, 0)
	t.Logf("failover: detection and challenge %v (fake clock, from the last successful round trip %v before the death), grant %v later (fake clock), fence+settle %v, first append %v (real time, in-memory zones)",
		tl.detection, authority.PingEvery, tl.grant, tl.recovery.Round(time.Millisecond), tl.firstAppend.Round(time.Microsecond))
	// Detection is the health window from the last round trip (one ping
	// period before the death), plus at most the challenge, to within a
	// tick of the test's clock.
	window := authority.HealthWindow - authority.PingEvery
	require.GreaterOrEqual(t, tl.detection, window, "detection and challenge")
	require.LessOrEqual(t, tl.detection, window+authority.ChallengeWait+100*time.Millisecond, "detection and challenge")
	require.LessOrEqual(t, tl.grant, authority.SelfFenceWait+authority.DefaultDecisionDelay+100*time.Millisecond, "the grant")
}

// BenchmarkFailover measures a holder's death to its successor's first
// acknowledged append, split as in the README's failover table:
// detection and the grant on the fake clock with the package's defaults
// (HealthWindow, PingEvery, ChallengeWait, SelfFenceWait,
// DefaultDecisionDelay), the fence and settle of the dead holder's epoch
// and the first append in real time, with each zone request delayed by the
// latency in the name.
//
//	go test -run '^$' -bench Failover -benchtime 5x ./authority/
func BenchmarkFailover(b *testing.B) {
	for _, lat := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%v", lat), func(b *testing.B) {
			var sum timeline
			for b.Loop() {
				tl := failoverTimeline(b, lat)
				sum.detection += tl.detection
				sum.grant += tl.grant
				sum.recovery += tl.recovery
				sum.firstAppend += tl.firstAppend
			}
			n := float64(b.N)
			b.ReportMetric(sum.detection.Seconds()/n, "detect-s")
			b.ReportMetric(sum.grant.Seconds()/n, "grant-s")
			b.ReportMetric(sum.recovery.Seconds()/n, "fence+settle-s")
			b.ReportMetric(sum.firstAppend.Seconds()/n, "first-append-s")
			b.ReportMetric((sum.detection+sum.grant+sum.recovery+sum.firstAppend).Seconds()/n, "total-s")
		})
	}
}

// timeline is one failover, from the holder's death: detection and
// challenge until the grant ends, the grant (fake clock); the recovery
// and the first append (real time).
type timeline struct {
	detection, grant, recovery, firstAppend time.Duration
}

// failoverTimeline kills node-a, holding the grant with 10 acknowledged
// records it never absorbed, one ping period after its last successful
// round trip, and lets node-b take over with the library: it returns the
// timeline, after checking that every acknowledged record was recovered.
func failoverTimeline(t testing.TB, objectLatency time.Duration) timeline {
	w := newWorldLatency(t, objectLatency)
	a := w.join("node-a")
	b := w.join("node-b")
	c := w.join("node-c")
	require.NoError(t, w.d.Step(w.ctx, authority.Offer{Node: "node-a", Usable: true}))
	w.advance(authority.DefaultLease)
	w.startStar(a)
	_, err := a.star.Open(w.ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	w.appendN(a, "a", 10) // acknowledged, not absorbed (AbsorbEvery 64)
	ping := func(up bool) {
		tok := a.rt.Grant().Token
		for _, n := range []*hostNode{b, c} {
			n.rt.Step(authority.PingResult{Peer: "node-a", Token: tok, OK: up, Now: w.clk.Now()})
			a.rt.Step(authority.PingResult{Peer: n.name, Token: tok, OK: up, Now: w.clk.Now()})
		}
	}
	for range 3 {
		ping(true)
		require.NoError(t, a.rt.Step(authority.HeartbeatDue{Progress: chain.Position{Epoch: a.star.Epoch().Epoch, Slot: 10}}))
		rd := a.rt.Ready()
		a.rt.Advance(rd)
		require.NotNil(t, rd.Heartbeat, "the holder heartbeats")
		require.NoError(t, w.d.Step(w.ctx, *rd.Heartbeat))
		w.advance(authority.PingEvery)
	}
	// node-a dies.
	died := w.clk.Now()
	a.star.Abort()
	a.dead = true
	var ended time.Time
	for i := 0; ended.IsZero() && i < 400; i++ {
		if i%20 == 0 {
			ping(false)
		}
		w.advance(50 * time.Millisecond)
		if w.d.State().Phase != authority.Granted {
			ended = w.clk.Now()
		}
	}
	require.False(t, ended.IsZero(), "the grant never ended")
	// node-b offers, is placed in recovery, recovers with the library.
	w.parts(b)
	// It reaches every zone: it can recover whatever node-a acknowledged.
	b.rt.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{}, Usable: true})
	b.rt.Step(authority.RecoverableReport{Star: "node-a", Pos: w.d.State().Required.Pos})
	for i := 0; w.d.State().Phase != authority.Recovering && i < 40; i++ {
		w.advance(50 * time.Millisecond)
	}
	require.Equal(t, authority.Recovering, w.d.State().Phase)
	b.guard.Set(w.d.State().TokenRevision)
	recStart := time.Now()
	frontier, _, err := authority.RecoverChain(w.ctx, b.minter, b.settler, "node-a")
	require.NoError(t, err)
	recovery := time.Since(recStart)
	b.rt.Step(authority.FrontierReport{Star: "node-a", Pos: frontier, Usable: true})
	for i := 0; b.rt.Grant().Token == 0 && i < 40; i++ {
		w.advance(50 * time.Millisecond)
	}
	granted := w.clk.Now()
	require.Equal(t, authority.Token(2), b.rt.Grant().Token)
	appendStart := time.Now()
	w.startStar(b)
	// node-a's session (and its lease) may outlive it: node-b holds the
	// newer grant and breaks the advisory lease; the gate still judges
	// node-a's epoch, which the recovery settled.
	ten, err := b.star.Open(w.ctx, "orders", lease.OpenOptions{BreakLease: true})
	require.NoError(t, err)
	require.Equal(t, lease.AlreadySettled, ten.Decision)
	require.Equal(t, uint64(10), ten.Next, "every acknowledged record was recovered")
	w.appendN(b, "b", 1)
	first := time.Since(appendStart)
	require.NoError(t, b.star.Close(w.ctx))
	w.env.Verify(w.hist)
	return timeline{detection: ended.Sub(died), grant: granted.Sub(ended), recovery: recovery, firstAppend: first}
}
