package node

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/lease"
)

// A successor with a wider producer window than the holder that saved
// the snapshot (a rolling change of -producer-window) judges retries by
// what the snapshot can tell: a sequence the old window let go of is
// refused as too old, never appended twice.
func TestHandoffToAWiderWindow(t *testing.T) {
	c := newClusterWith(t, "-snapshot-every", "0", "-snapshot-interval", "0", "-producer-window", "8")
	a := c.join("node-a")
	waitHolding(t, a.Node)
	c.cfg.producers.Window = 128
	b := c.join("node-b")

	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 20, sent, acks)
	require.NoError(t, c.ctl.Driver().Step(t.Context(), authority.HandoffRequest{Target: "node-b"}))
	waitHolding(t, b.Node)

	requireRetried(t, b, 15, acks[15])
	rb, ok := b.LastRebuild("orders")
	require.True(t, ok)
	require.Equal(t, batch.RebuildInfo{Stream: "orders", HadSnapshot: true, Snapshot: 20, Replayed: 0, Next: 20}, rb)
	requireTooOld(t, b, 5)
	requireTooOld(t, b, 11)
	produceN(t, b, 20, 3, sent, acks)
	checkStream(t, b.api.consume("orders"), sent)
}

// The same after a crash: the successor (window 128) loads the snapshot
// the holder (window 4) saved at offset 20, replays the 5 records past
// it, and refuses a retry of a sequence the snapshot let go of.
func TestCrashToAWiderWindow(t *testing.T) {
	c := newClusterWith(t, "-snapshot-every", "10", "-snapshot-interval", "0", "-producer-window", "4")
	a := c.join("node-a")
	waitHolding(t, a.Node)
	c.cfg.producers.Window = 128
	b := c.join("node-b")

	sent, acks := map[string]bool{}, map[uint64]Ack{}
	for _, at := range []uint64{10, 20} {
		// One save at a time: the next is due only once this one is done.
		produceN(t, a, at-10, 10, sent, acks)
		require.Eventually(t, func() bool {
			sn, err := lease.ReadSnapshot(t.Context(), c.be.Store, "", "orders")
			return err == nil && sn.Offset == at
		}, 10*time.Second, 10*time.Millisecond, "node-a saves its snapshot at offset %d", at)
	}
	produceN(t, a, 20, 5, sent, acks)
	require.Eventually(t, func() bool {
		p := a.beat.Load()
		return p != nil && *p == chain.Position{Epoch: acks[24].Epoch, Slot: acks[24].Slot + 1}
	}, 10*time.Second, 10*time.Millisecond, "the controller learns node-a's progress")
	c.crash(a)

	waitHolding(t, b.Node)
	require.Eventually(t, func() bool {
		code, _, _ := b.api.produce("orders", []byte(producedData(24)), "producer-1", 24)
		return code == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "node-b opens the stream once node-a's lease is gone")
	rb, ok := b.LastRebuild("orders")
	require.True(t, ok)
	require.Equal(t, batch.RebuildInfo{Stream: "orders", HadSnapshot: true, Snapshot: 20, Replayed: 5, Next: 25}, rb)

	requireRetried(t, b, 24, acks[24])
	requireRetried(t, b, 17, acks[17])
	requireTooOld(t, b, 2)
	requireTooOld(t, b, 15)
	produceN(t, b, 25, 3, sent, acks)
	checkStream(t, b.api.consume("orders"), sent)
}

// requireTooOld requires a retry of seq to be refused as too old.
func requireTooOld(t *testing.T, n *testNode, seq uint64) {
	t.Helper()
	code, a, e := n.api.produce("orders", []byte("retried, too old"), "producer-1", seq)
	require.Equal(t, http.StatusConflict, code, "sequence %d: appended at offset %d (duplicate %v)", seq, a.Offset, a.Duplicate)
	require.Contains(t, e.Error, "too old")
}
