package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
)

// cluster is a controller and broker nodes in one process, on the
// embedded backends, the nodes connected through authority.Local.
type cluster struct {
	t   testing.TB
	cfg *Settings
	// snapClock, when set, times the nodes' appenders (their snapshot intervals).
	snapClock clock.Clock
	// lcClock, when set, times the nodes' lifecycle passes and stamps
	// their index pages; lcLoops counts the nodes whose passes it times.
	lcClock *clock.Fake
	lcLoops int
	// serverOpts are the options of the nodes' APIs (their Logger is
	// the cluster's).
	serverOpts ServerOptions
	log        *slog.Logger
	be         *Backends
	ctl        *Controller
}

func newCluster(t testing.TB) *cluster { return newClusterWith(t) }

// newClusterWith is newCluster with the nodes' flags args.
func newClusterWith(t testing.TB, args ...string) *cluster {
	c := &cluster{t: t, cfg: testSettings(t, append([]string{"-insecure"}, args...)...), log: slog.New(slog.DiscardHandler)}
	var err error
	c.be, err = OpenBackends(t.Context(), c.cfg, c.log)
	require.NoError(t, err)
	t.Cleanup(c.be.Close)
	c.ctl, err = StartController(ControllerConfig{Name: "ctl", Domain: c.cfg.domain, Store: c.be.Store, Lease: c.cfg.lease, SessionTTL: c.cfg.sessionTTL, Logger: c.log})
	require.NoError(t, err)
	t.Cleanup(c.ctl.Stop)
	return c
}

// testNode is a started node, its API, a switch that turns its goodbye
// off (a crash), and the progress of its last heartbeat.
type testNode struct {
	*Node
	srv     *server
	api     *apiClient
	crashed *atomic.Bool
	beat    *atomic.Pointer[chain.Position]
}

// join starts a node; it is shut down when the test ends.
func (c *cluster) join(name string) *testNode { return c.joinWith(name, c.be.Zones) }

// joinWith starts a node that reaches the zones through buckets.
func (c *cluster) joinWith(name string, buckets []objstore.Bucket) *testNode {
	return c.joinWithStore(name, buckets, c.be.Store)
}

// joinWithStore starts a node that reaches the zones through buckets and
// the metastore through store.
func (c *cluster) joinWithStore(name string, buckets []objstore.Bucket, store metastore.Store) *testNode {
	crashed, beat := &atomic.Bool{}, &atomic.Pointer[chain.Position]{}
	n, err := NewNode(NodeConfig{
		Name: name, Domain: c.cfg.domain, Store: store, Buckets: buckets,
		Constants: epoch.Constants{Class: "standard", W: c.cfg.W, Window: c.cfg.Window, Prefix: "streams"},
		Dial: func(_ context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
			conn, err := c.ctl.Local.Dial(node, caps, token)
			if err != nil {
				return nil, err
			}
			return crashableConn{conn, crashed, beat}, nil
		},
		SessionTTL: c.cfg.sessionTTL, HeartbeatEvery: c.cfg.heartbeat, DecisionDelay: c.cfg.decisionDelay,
		Poll: c.cfg.poll, Producers: c.cfg.producers, Streams: c.streamOptions(),
		Lifecycle: c.lifecycle(), Logger: c.log.With("test_node", name),
	})
	require.NoError(c.t, err)
	if c.lcClock != nil && c.lifecycle().Interval > 0 {
		c.lcLoops++
	}
	n.Start()
	c.t.Cleanup(func() { require.NoError(c.t, n.Shutdown(shutdownCtx(c.t))) })
	opts := c.serverOpts
	opts.Logger = c.log
	api := NewServer(n, opts)
	srv := httptest.NewServer(api)
	c.t.Cleanup(srv.Close)
	require.Eventually(c.t, func() bool { return n.link.Agent() != nil }, 10*time.Second, 10*time.Millisecond, "%s never connected", name)
	return &testNode{Node: n, srv: api, api: &apiClient{t: c.t, base: srv.URL, hc: srv.Client()}, crashed: crashed, beat: beat}
}

func (c *cluster) lifecycle() LifecycleConfig {
	lc := c.cfg.lifecycleConfig()
	if c.lcClock != nil {
		lc.Clock = c.lcClock
	}
	return lc
}

func (c *cluster) streamOptions() batch.DedupAppenderOptions {
	o := c.cfg.streamOptions()
	o.Clock = c.snapClock
	return o
}

// crashableConn says no goodbye once crashed, and keeps the progress of
// the last heartbeat the controller took.
type crashableConn struct {
	authority.Conn
	crashed *atomic.Bool
	beat    *atomic.Pointer[chain.Position]
}

func (c crashableConn) Send(ctx context.Context, ev authority.Event) error {
	err := c.Conn.Send(ctx, ev)
	if hb, ok := ev.(authority.Heartbeat); ok && err == nil {
		c.beat.Store(&hb.Progress)
	}
	return err
}

func (c crashableConn) Close() error {
	if c.crashed.Load() {
		return nil
	}
	return c.Conn.Close()
}

// crash stops the node as a process death would: its star aborted
// (nothing released, nothing marked), its session abandoned (it expires
// one TTL later), its agent gone without a goodbye (its grant runs out
// at its deadline).
func (c *cluster) crash(n *testNode) {
	n.crashed.Store(true)
	n.pollStop()
	<-n.pollDone
	n.mu.Lock()
	h := n.hold
	n.hold = nil
	n.mu.Unlock()
	if h != nil {
		h.app.Close()
		h.Star.Abort()
		c.be.Store.(*memstore.Store).Suspend(h.sess)
	}
	n.agentStop()
	<-n.agentDone
}

// produceN produces count records of producer-1 to orders, from seq on,
// and returns what it sent and the acknowledgements.
func produceN(t testing.TB, n *testNode, from, count uint64, sent map[string]bool, acks map[uint64]Ack) {
	t.Helper()
	for seq := from; seq < from+count; seq++ {
		data := producedData(seq)
		code, k, e := n.api.produce("orders", []byte(data), "producer-1", seq)
		require.Equal(t, http.StatusOK, code, e.Error)
		require.Equal(t, seq, k.Offset)
		sent[data], acks[seq] = true, k
	}
}

// producedData is what produceN sends as producer-1's record seq: a retry
// sends the same bytes, or it is a conflict.
func producedData(seq uint64) string { return fmt.Sprintf("record %d of producer-1", seq) }

// requireRetried requires a retry of seq to get its first answer.
func requireRetried(t testing.TB, n *testNode, seq uint64, first Ack) {
	t.Helper()
	code, again, e := n.api.produce("orders", []byte(producedData(seq)), "producer-1", seq)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.True(t, again.Duplicate)
	again.Duplicate = false
	require.Equal(t, first, again)
}

// A planned handoff between two broker nodes of one process: the holder
// drains every stream through Finish, holder and token change in one
// durable transition, the new holder's open consumes the clean-release
// mark and loads the producer snapshot its release flush saved, and every record
// stays readable, through either node.
func TestPlannedHandoff(t *testing.T) {
	c := newCluster(t)
	a := c.join("node-a")
	waitHolding(t, a.Node)
	b := c.join("node-b")

	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 20, sent, acks)
	code, _, e := b.api.produce("orders", []byte("refused"), "producer-1", 99)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "node-a", e.Holder, "a non-holder names the holder")

	// The handoff, as an operator asks for it.
	d := c.ctl.Driver()
	require.NotNil(t, d)
	require.NoError(t, d.Step(t.Context(), authority.HandoffRequest{Target: "node-b"}))
	waitHolding(t, b.Node)
	st := d.State()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, "node-b", st.Holder)
	require.Equal(t, authority.Token(2), st.Token)
	require.Eventually(t, func() bool { return a.Current() == nil }, 10*time.Second, 10*time.Millisecond, "node-a drops its star")
	code, _, e = a.api.produce("orders", []byte("refused"), "producer-1", 99)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "node-b", e.Holder)

	// node-b continues the stream: a retry of a record node-a
	// acknowledged gets node-a's answer, new records follow.
	requireRetried(t, b, 7, acks[7])
	produceN(t, b, 20, 10, sent, acks)
	require.Equal(t, float64(1), b.api.metric(`cutline_broker_gate_decisions_total{decision="mark_consumed"}`))
	require.Equal(t, float64(1), a.api.metric(`cutline_broker_grant_changes_total{change="lost"}`))

	checkStream(t, b.api.consume("orders"), sent)
	checkStream(t, a.api.consume("orders"), sent)
	ss, err := lease.Inspect(t.Context(), c.be.Store, "", "orders")
	require.NoError(t, err)
	require.Equal(t, "node-b", ss.Writer.Star)
	require.Equal(t, uint64(2), ss.Writer.Tenure)
}

// The holder dies with acknowledged records not yet covered in the index:
// its grant runs out at its deadline, the other node recovers the dead
// holder's chain (fence and settle, which covers them) before the next
// token, and continues the stream without losing or duplicating a
// record.
func TestCrashFailover(t *testing.T) {
	c := newCluster(t)
	a := c.join("node-a")
	waitHolding(t, a.Node)
	b := c.join("node-b")

	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 20, sent, acks)
	// The controller learns the holder's progress from its heartbeats:
	// what the next holder must recover. (Had node-a died before
	// telling, node-b would recover less, and its open gate would
	// settle the rest.)
	require.Eventually(t, func() bool {
		p := a.beat.Load()
		return p != nil && *p == chain.Position{Epoch: acks[19].Epoch, Slot: acks[19].Slot + 1}
	}, 10*time.Second, 10*time.Millisecond)
	c.crash(a)

	waitHolding(t, b.Node)
	require.Equal(t, authority.Token(2), c.ctl.Driver().State().Token)
	require.Eventually(t, func() bool {
		code, _, _ := b.api.produce("orders", []byte(producedData(7)), "producer-1", 7)
		return code == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "node-b opens the stream once node-a's lease is gone")
	requireRetried(t, b, 7, acks[7])
	produceN(t, b, 20, 5, sent, acks)
	checkStream(t, b.api.consume("orders"), sent)

	require.Equal(t, float64(1), b.api.metric(`cutline_broker_gate_decisions_total{decision="already_settled"}`))
	require.Equal(t, float64(1), b.api.metric(`cutline_broker_settles_total{result="settled",source="recovery"}`))
	require.Equal(t, float64(1), b.api.metric(`cutline_broker_fence_seconds_count`))
}
