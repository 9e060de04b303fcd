package node

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
)

// gate holds the creates of the buckets it wraps while it is shut: a
// node whose slot writes are in flight when it freezes.
type gate struct {
	shut atomic.Bool
	open chan struct{}
	held atomic.Int32
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) wrap(zones []objstore.Bucket) []objstore.Bucket {
	out := make([]objstore.Bucket, len(zones))
	for i, z := range zones {
		out[i] = gatedBucket{z, g}
	}
	return out
}

type gatedBucket struct {
	objstore.Bucket
	g *gate
}

func (b gatedBucket) Create(ctx context.Context, key string, data []byte) error {
	if b.g.shut.Load() {
		b.g.held.Add(1)
		select {
		case <-b.g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.Bucket.Create(ctx, key, data)
}

// A holder frozen with a record's slot writes in flight, past every check
// its grant, its session and its stream's tenure make, is replaced; when
// it continues, its writes reach the zones after its successor fenced
// its epoch, and the epoch fence alone stops it: the slot holds poison in
// B zones, so it can never hold W copies, and the record is never
// acknowledged nor served.
func TestZombieStoppedByTheEpochFence(t *testing.T) {
	c := newCluster(t)
	g := newGate()
	a := c.joinWith("node-a", g.wrap(c.be.Zones))
	waitHolding(t, a.Node)
	b := c.join("node-b")

	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 5, sent, acks)
	require.Eventually(t, func() bool {
		p := a.beat.Load()
		return p != nil && *p == chain.Position{Epoch: acks[4].Epoch, Slot: acks[4].Slot + 1}
	}, 10*time.Second, 10*time.Millisecond, "the controller learns node-a's progress")

	// node-a takes a record; its slot writes are held in every zone.
	g.shut.Store(true)
	answer := make(chan int, 1)
	var body ErrorBody
	go func() {
		code, _, e := a.api.produce("orders", []byte("the zombie's record"), "producer-1", 5)
		body = e
		answer <- code
	}()
	require.Eventually(t, func() bool { return g.held.Load() == 3 }, 10*time.Second, time.Millisecond, "node-a's slot writes are in flight")

	// node-a freezes: it stops talking to the controller and stops
	// looking at its grant, but its star, its session and its stream's
	// lease live on, so nothing but the epoch fence can stop its writer.
	a.crashed.Store(true)
	a.pollStop()
	<-a.pollDone
	a.agentStop()
	<-a.agentDone

	// node-b is granted once node-a's grant has run out, after its
	// recovery fenced and settled node-a's epoch.
	require.Eventually(t, func() bool {
		return c.ctl.Driver().State().Holder == "node-b" && b.api.metric(`cutline_broker_fence_seconds_count`) == 1
	}, 20*time.Second, 10*time.Millisecond, "node-b is granted after fencing node-a's epoch")

	// node-a continues: its slot writes meet the fence's poison in B = 2
	// zones, so the slot can never hold W copies.
	close(g.open)
	exists := func() float64 {
		sum := 0.0
		for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
			sum += a.api.metric(`cutline_broker_object_requests_total{op="create",result="exists",zone="` + z + `"}`)
		}
		return sum
	}
	require.Eventually(t, func() bool { return exists() >= 2 }, 20*time.Second, 10*time.Millisecond,
		"the fence's poison refuses the zombie's slot writes in B = 2 zones")
	select {
	case code := <-answer:
		require.NotEqual(t, http.StatusOK, code, "the zombie acknowledged")
		answer <- code
	default:
	}

	// node-a's star goes as a crash would; its append, never
	// acknowledged, is answered with an unknown outcome.
	a.mu.Lock()
	h := a.hold
	a.hold = nil
	a.mu.Unlock()
	require.NotNil(t, h)
	h.app.Close()
	h.Star.Abort()
	c.be.Store.(*memstore.Store).Suspend(h.sess)
	select {
	case code := <-answer:
		require.NotEqual(t, http.StatusOK, code, "the zombie acknowledged")
		require.Contains(t, body.Error, "not acknowledged", "the zombie's append: %s", body.Error)
	case <-time.After(20 * time.Second):
		t.Fatal("the zombie's append was never answered")
	}

	// Everything acknowledged is in the stream once, the zombie's record
	// is not.
	require.Eventually(t, func() bool {
		code, _, _ := b.api.produce("orders", []byte("after"), "producer-2", 0)
		return code == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "node-b opens the stream once node-a's lease is gone")
	got := b.api.consume("orders")
	for _, r := range got {
		require.False(t, strings.Contains(string(r.Data), "zombie"), "the zombie's record is served at %d", r.Offset)
	}
	require.Len(t, got, 6)
	delete(sent, "after")
	checkStream(t, got[:5], sent)
}
