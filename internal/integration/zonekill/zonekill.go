// Package zonekill runs one takeover on any three zones, with one zone's
// server killed while the writer appends: the scenario every backend's
// integration tests share (gofakes3, Azurite), beside the versitygw
// takeovers of package takeover.
//
//  1. The zones pass the start-up check (objstore.VerifyZones).
//  2. Star A appends through a pipelined writer (K=3, W=2, window 32); its
//     host covers acknowledged flights and advances the checkpoint, one
//     batch behind. The metastore is an embedded etcd member.
//  3. zone-c's server is killed; A keeps acknowledging with zone-a and
//     zone-b.
//  4. A dies mid-flight.
//  5. Star B fences and settles A's epoch with zone-c still down, and the
//     epoch is checked as it lies in the zones (guarantees 2–4): every
//     acknowledged slot below the cut, [0, cut) committed, the cut dead.
//     zone-c may hold a slot's second copy: a zone whose writes fell far
//     behind gets no copy of slots the others already made durable
//     (chain.Writer drops them), so a slot can be committed at zone-c
//     and one other zone only. The check counts an unreachable zone as a
//     possible copy, never a proven one.
//  6. zone-c comes back, when the backend can restart it, and B appends
//     the records A did not acknowledge in its own epoch; every record the
//     producer sent is served exactly once, and the six guarantees hold
//     over the whole run (cutlinetest.Check).
package zonekill

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/integration/stacktest"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
)

const (
	starA  = "star-a"
	starB  = "star-b"
	stream = "orders"
	// maxRecords bounds what the producer sends; it is stopped long before.
	maxRecords = 5000
)

// Zone is one zone of the run: its bucket, named zone-a, zone-b or
// zone-c, and its server's controls.
type Zone struct {
	Bucket objstore.Bucket
	// Stop kills the zone's server.
	Stop func()
	// Restart brings it back after Stop, with what it kept. Nil: the zone
	// stays down, and B appends nothing of its own.
	Restart func()
	// Lossy: a restart may lose the newest objects, as a zone that lost
	// its disk. The final check counts the zone's empty answers as
	// unknown (cutlinetest.Run.Lossy).
	Lossy bool
}

// Run runs the takeover over zones, which must be three, and fails t on
// any broken guarantee. The buckets must reach their servers with the
// client's own retries off or few, so that a killed zone answers at once.
func Run(t *testing.T, zones []Zone) {
	t.Helper()
	require.Len(t, zones, 3, "zone-a, zone-b, zone-c")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	buckets := make([]objstore.Bucket, len(zones))
	for i, z := range zones {
		require.Equal(t, stacktest.ZoneName(i), z.Bucket.Name())
		buckets[i] = z.Bucket
	}
	require.NoError(t, objstore.VerifyZones(ctx, buckets, objstore.VerifyOptions{}), "the start-up check")

	id := stacktest.RandomID()
	root := "/cutline-it/" + id + "/"
	cli := etcdtest.Start(t)
	store, err := etcd.New(cli, etcd.Options{Root: root, RequestTimeout: 5 * time.Second})
	require.NoError(t, err)
	env := cutlinetest.New(t, store, buckets, cutlinetest.Options{Prefix: "it-" + id})
	wopts := chain.WriterOptions{Backoff: clock.Backoff{Min: 5 * time.Millisecond, Max: 100 * time.Millisecond}}

	// A appends; zone-c dies under it; A dies.
	a := env.Party(starA)
	recA := a.Mint(starA, env.Constants(2, 32))
	ep := recA.Epoch
	hist := &cutlinetest.History{}
	h := cutlinetest.StartHost(a, a.Writer(recA, wopts),
		cutlinetest.HostOptions{Name: starA, Stream: stream, History: hist, AbsorbEvery: 10, LagCheckpoint: true})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := range maxRecords {
			if h.Submit(ctx, fmt.Sprint("p", i)) != nil {
				return
			}
		}
	}()
	require.NoError(t, h.WaitAcked(ctx, 60))
	zones[2].Stop()
	n0 := h.Acked()
	require.NoError(t, h.WaitAcked(ctx, n0+60), "A acknowledges with zone-c down")
	t.Logf("zone-c killed after %d acknowledgements; %d acknowledged since with zone-a and zone-b", n0, h.Acked()-n0)
	h.Kill()
	<-produced
	require.NoError(t, h.Err(), "A's host")

	submitted, acked, failed := outcome(hist, starA)
	require.Len(t, submitted, len(acked)+len(failed))
	require.NotEmpty(t, failed, "A died with appends in flight")
	for _, f := range failed {
		require.ErrorIs(t, f.err, cutlinetest.ErrStopped, "%s", f.id)
	}

	// B takes over with zone-c still down: two zones decide every slot.
	b := env.Party(starB)
	reps, err := b.Settler.SettleAll(ctx, starA)
	require.NoError(t, err, "settle with zone-c down")
	require.Len(t, reps, 1)
	cut := reps[0].Cut
	t.Logf("fenced %s/%d with zone-c down: cut %d; %d acknowledged, %d in flight", starA, ep, cut, len(acked), len(failed))
	var ackedSlots []uint64
	for id, pos := range acked {
		require.Equal(t, ep, pos.Epoch)
		require.Less(t, pos.Slot, cut, "guarantee 2: %s at slot %d was acknowledged", id, pos.Slot)
		ackedSlots = append(ackedSlots, pos.Slot)
	}
	env.VerifyEpoch(starA, ep, ackedSlots)
	inStream := counts(b.StreamIDs(stream))
	for id := range acked {
		require.Equal(t, 1, inStream[id], "acknowledged %s must be in the stream once", id)
	}
	if zones[2].Restart == nil {
		return
	}

	// zone-c is back; B appends what A did not acknowledge.
	zones[2].Restart()
	var retry []string
	for _, f := range failed {
		if inStream[f.id] == 0 {
			retry = append(retry, f.id)
		}
	}
	recB := b.Mint(starB, env.Constants(2, 16))
	hb := cutlinetest.StartHost(b, b.Writer(recB, wopts), cutlinetest.HostOptions{Name: starB, Stream: stream, History: hist})
	for _, id := range retry {
		require.NoError(t, hb.Submit(ctx, id))
	}
	require.NoError(t, hb.Close(ctx), "B's host")
	got := counts(b.StreamIDs(stream))
	for _, id := range submitted {
		require.Equal(t, 1, got[id], "record %s is served once", id)
	}
	reps, err = b.Settler.SettleAll(ctx, starB)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	require.Equal(t, uint64(len(retry)), reps[0].Cut)
	env.VerifyEpoch(starB, recB.Epoch, nil)
	var lossy []string
	for _, z := range zones {
		if z.Lossy {
			lossy = append(lossy, z.Bucket.Name())
		}
	}
	cutlinetest.Require(t, cutlinetest.Check(ctx, cutlinetest.Run{History: hist, Store: store, Zones: buckets, Lossy: lossy}))
}

type failure struct {
	id  string
	err error
}

// outcome is what the host's producer saw: the records submitted in slot
// order, where each acknowledged one lies, and the failures.
func outcome(hist *cutlinetest.History, host string) (submitted []string, acked map[string]chain.Position, failed []failure) {
	acked = map[string]chain.Position{}
	for _, ev := range hist.Events() {
		if ev.Host != host {
			continue
		}
		switch ev.Op {
		case cutlinetest.Submitted:
			submitted = append(submitted, ev.ID)
		case cutlinetest.Acked:
			acked[ev.ID] = ev.Pos
		case cutlinetest.Failed:
			failed = append(failed, failure{ev.ID, ev.Err})
		}
	}
	return submitted, acked, failed
}

func counts(ids []string) map[string]int {
	m := make(map[string]int, len(ids))
	for _, id := range ids {
		m[id]++
	}
	return m
}
