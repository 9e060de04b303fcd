package node

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
)

// The holder saves its producer snapshot every 10 records and dies
// without a release: the successor loads the snapshot and reads back only
// the records past it, and still recognizes retries of records on either
// side of the snapshot as duplicates.
func TestTakeoverReplaysOnlyTheTail(t *testing.T) {
	c := newClusterWith(t, "-snapshot-every", "10", "-snapshot-interval", "0")
	a := c.join("node-a")
	waitHolding(t, a.Node)
	b := c.join("node-b")

	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 25, sent, acks)
	require.Eventually(t, func() bool {
		p := a.beat.Load()
		return p != nil && *p == chain.Position{Epoch: acks[24].Epoch, Slot: acks[24].Slot + 1}
	}, 10*time.Second, 10*time.Millisecond)
	c.crash(a)
	sn, err := lease.ReadSnapshot(t.Context(), c.be.Store, "", "orders")
	require.NoError(t, err)
	require.GreaterOrEqual(t, sn.Offset, uint64(10), "node-a saved a snapshot after 10 records")
	require.Equal(t, "node-a", sn.Star)

	waitHolding(t, b.Node)
	require.Eventually(t, func() bool {
		code, _, _ := b.api.produce("orders", []byte(producedData(24)), "producer-1", 24)
		return code == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "node-b opens the stream once node-a's lease is gone")
	rb, ok := b.LastRebuild("orders")
	require.True(t, ok)
	require.True(t, rb.HadSnapshot)
	require.Equal(t, sn.Offset, rb.Snapshot)
	require.Equal(t, uint64(25), rb.Next)
	require.Equal(t, 25-sn.Offset, rb.Replayed)
	require.Less(t, rb.Replayed, uint64(25), "only the tail")
	require.Equal(t, float64(rb.Replayed), b.api.metric("cutline_broker_replayed_records_total"))

	// Retries across the takeover: one the snapshot holds, one the
	// replay of the tail found.
	requireRetried(t, b, 3, acks[3])
	requireRetried(t, b, 24, acks[24])
	produceN(t, b, 25, 5, sent, acks)
	checkStream(t, b.api.consume("orders"), sent)
}

// A planned handoff saves the snapshot in the release flush, before the
// clean-release mark: the successor replays nothing. A retry within the
// producer window is a duplicate; one below it is refused, never
// appended twice.
func TestHandoffReplaysNothing(t *testing.T) {
	c := newClusterWith(t, "-snapshot-every", "0", "-snapshot-interval", "0", "-producer-window", "8")
	a := c.join("node-a")
	waitHolding(t, a.Node)
	b := c.join("node-b")

	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 20, sent, acks)
	require.NoError(t, c.ctl.Driver().Step(t.Context(), authority.HandoffRequest{Target: "node-b"}))
	waitHolding(t, b.Node)

	requireRetried(t, b, 15, acks[15])
	rb, ok := b.LastRebuild("orders")
	require.True(t, ok)
	require.Equal(t, batch.RebuildInfo{Stream: "orders", HadSnapshot: true, Snapshot: 20, Replayed: 0, Next: 20}, rb)
	require.Zero(t, b.api.metric("cutline_broker_replayed_records_total"), "records read back")
	require.Equal(t, float64(1), a.api.metric(`cutline_broker_snapshot_saves_total{result="saved"}`))

	code, _, e := b.api.produce("orders", []byte("too old"), "producer-1", 3)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, e.Error, "too old")
	produceN(t, b, 20, 5, sent, acks)
	checkStream(t, b.api.consume("orders"), sent)
}

// With saves by count off, the holder saves its producer snapshot every
// -snapshot-interval on its clock, and only when records came since the
// last one.
func TestSnapshotByTime(t *testing.T) {
	c := newClusterWith(t, "-snapshot-every", "0", "-snapshot-interval", "1h")
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c.snapClock = fake
	a := c.join("node-a")
	waitHolding(t, a.Node)
	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 5, sent, acks)

	read := func() lease.Snapshot {
		sn, err := lease.ReadSnapshot(t.Context(), c.be.Store, "", "orders")
		require.NoError(t, err)
		return sn
	}
	require.Zero(t, read().Revision, "none before the interval")
	fake.BlockUntil(1)
	fake.Advance(time.Hour)
	require.Eventually(t, func() bool { return read().Offset == 5 }, 10*time.Second, 10*time.Millisecond, "saved after the interval")
	saves := `cutline_broker_snapshot_saves_total{result="saved"}`
	require.Equal(t, float64(1), a.api.metric(saves))

	// Nothing new: the next interval saves nothing.
	fake.BlockUntil(1)
	fake.Advance(time.Hour)
	fake.BlockUntil(1)
	require.Equal(t, float64(1), a.api.metric(saves))
	produceN(t, a, 5, 3, sent, acks)
	fake.Advance(time.Hour)
	require.Eventually(t, func() bool { return read().Offset == 8 }, 10*time.Second, 10*time.Millisecond)
}

// failingSnapshots is a metastore whose reads of producer snapshots fail
// while failing is set.
type failingSnapshots struct {
	metastore.Store
	failing atomic.Bool
}

func (s *failingSnapshots) Get(ctx context.Context, key string) (metastore.KV, error) {
	if s.failing.Load() && strings.HasSuffix(key, "/snapshot") {
		return metastore.KV{}, fmt.Errorf("snapshot read refused by the test: %w", metastore.ErrUnavailable)
	}
	return s.Store.Get(ctx, key)
}

// A holder whose open took the stream's tenure but could not rebuild its
// producers (the snapshot did not load) keeps the stream: the next
// produce adopts the tenure and rebuilds, instead of being refused for as
// long as the star holds the stream.
func TestRebuildRetriedAfterFailure(t *testing.T) {
	c := newClusterWith(t, "-snapshot-every", "0", "-snapshot-interval", "0")
	a := c.join("node-a")
	waitHolding(t, a.Node)
	store := &failingSnapshots{Store: c.be.Store}
	b := c.joinWithStore("node-b", c.be.Zones, store)

	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 5, sent, acks)
	require.NoError(t, c.ctl.Driver().Step(t.Context(), authority.HandoffRequest{Target: "node-b"}))
	waitHolding(t, b.Node)

	store.failing.Store(true)
	code, _, e := b.api.produce("orders", []byte("refused"), "producer-1", 5)
	require.NotEqual(t, http.StatusOK, code)
	require.Contains(t, e.Error, "rebuild the producers of orders")
	h, err := b.holder()
	require.NoError(t, err)
	var held []string
	for _, ten := range h.Star.Streams() {
		held = append(held, ten.Stream)
	}
	require.Equal(t, []string{"orders"}, held, "the star holds the stream it could not make ready")

	store.failing.Store(false)
	requireRetried(t, b, 3, acks[3])
	produceN(t, b, 5, 3, sent, acks)
	checkStream(t, b.api.consume("orders"), sent)
}
