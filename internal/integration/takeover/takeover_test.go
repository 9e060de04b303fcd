package takeover_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// TestTakeoverEtcdS3 runs a takeover on embedded etcd and three versitygw
// zones, with a zone's server process killed while star A appends:
//
//  1. A appends through a pipelined writer (K=3, W=2, window 32); its host
//     covers acknowledged flights and advances the checkpoint, one batch
//     behind.
//  2. zone-c's process is killed; A keeps acknowledging with zone-a and
//     zone-b.
//  3. A dies mid-flight (its writer is aborted, nothing more is absorbed).
//  4. B fences and settles A's epoch, then appends the producer's
//     unacknowledged records in its own epoch.
//
// Two orders of the zone's return are covered: zone-c restarted before B
// fences, and zone-b lost together with A, so that B's fence, with one
// zone of three reachable, reports the frontier slot undecided until
// zone-c is restarted.
func TestTakeoverEtcdS3(t *testing.T) {
	t.Run("ZoneRestartedBeforeFence", func(t *testing.T) { takeover(t, false) })
	t.Run("FenceUndecidedUntilZoneRestarts", func(t *testing.T) { takeover(t, true) })
}

func takeover(t *testing.T, undecided bool) {
	s := newStack(t)
	ctx := within(t, 90*time.Second)
	a := s.party(t, starA, partyOpts{})
	a.verify(t)
	recA, err := a.minter.Mint(ctx, starA, s.constants(2, 32))
	require.NoError(t, err)
	ep := recA.Epoch
	hist := &cutlinetest.History{}
	h := cutlinetest.StartHost(a.harness(t), a.writer(t, recA, chain.WriterOptions{}),
		cutlinetest.HostOptions{Name: starA, Stream: stream, History: hist, AbsorbEvery: 10, LagCheckpoint: true})
	produced := produce(ctx, h, "p", nil)

	require.NoError(t, h.WaitAcked(ctx, 60))
	s.zones[2].Stop() // zone-c's process is killed
	n0 := h.Acked()
	require.NoError(t, h.WaitAcked(ctx, n0+60))
	t.Logf("zone-c stopped after %d acknowledgements; %d acknowledged since with zone-a and zone-b", n0, h.Acked()-n0)
	if undecided {
		s.zones[1].Stop() // zone-b goes down together with A
	}
	h.Kill()
	<-produced

	require.NoError(t, h.Err(), "A's host")
	o := outcomeOf(hist, starA)
	acked, failed := o.acked, o.failed
	require.Len(t, o.submitted, len(acked)+len(failed))
	require.NotEmpty(t, failed, "A died with appends in flight")
	for _, f := range failed {
		// Aborted in flight, or decided before the host passed it on.
		require.ErrorIs(t, f.err, cutlinetest.ErrStopped, "%s", f.id)
		if !errors.Is(f.err, chain.ErrAborted) {
			require.Equal(t, cutlinetest.ErrStopped, f.err, "%s failed before A died", f.id)
		}
	}
	before, err := a.minter.Get(ctx, starA, ep)
	require.NoError(t, err)
	require.Equal(t, h.Checkpoint().Slot, before.Cursors.Checkpoint)
	t.Logf("A died: %d acknowledged (%d covered, checkpoint %d), %d in flight", len(acked), h.Covered(), h.Checkpoint().Slot, len(failed))

	// B takes over.
	b := s.party(t, starB, partyOpts{})
	var reps []settle.SettleReport
	if !undecided {
		s.zones[2].Restart()
		reps, err = b.settler.SettleAll(ctx, starA)
		require.NoError(t, err)
		select {
		case <-b.undecided:
			t.Fatal("the fence was undecided with every zone up")
		default:
		}
	} else {
		type result struct {
			reps []settle.SettleReport
			err  error
		}
		res := make(chan result, 1)
		go func() {
			r, err := b.settler.SettleAll(ctx, starA)
			res <- result{r, err}
		}()
		select {
		case <-b.undecided:
		case r := <-res:
			t.Fatalf("settled with two zones of three down: %+v, %v", r.reps, r.err)
		case <-ctx.Done():
			t.Fatalf("the fence reported no undecided slot: %v", ctx.Err())
		}
		u := b.fencer.Undecided()
		require.Len(t, u, 1)
		require.Equal(t, starA, u[0].Star)
		require.Equal(t, ep, u[0].Epoch)
		require.ElementsMatch(t, []string{"zone-b", "zone-c"}, u[0].Waiting)
		t.Logf("fence undecided at slot %d, waiting for %v: restarting zone-c", u[0].Slot, u[0].Waiting)
		s.zones[2].Restart()
		var r result
		select {
		case r = <-res:
		case <-ctx.Done():
			t.Fatalf("the fence did not finish after zone-c came back: %v", ctx.Err())
		}
		require.NoError(t, r.err)
		reps = r.reps
		require.Empty(t, b.fencer.Undecided(), "a decided fence leaves nothing undecided")
		s.zones[1].Restart() // zone-b comes back with what it held
	}
	require.Len(t, reps, 1)
	rep := reps[0]
	cut := rep.Cut
	require.NotNil(t, rep.Fence)
	require.Equal(t, int(cut-before.Cursors.Checkpoint), rep.Covered, "settlement covers [checkpoint, cut)")
	t.Logf("fenced %s/%d: cut %d (walk from %d, %d repaired, %d poisoned); garbage deleted %d, left %d; covered %d",
		starA, ep, cut, rep.Fence.WalkStart, rep.Fence.Repaired, rep.Fence.Poisoned, rep.GarbageDeleted, rep.GarbageLeft, rep.Covered)

	// Guarantees 1–4 on A's epoch, every zone read directly.
	var ackedSlots []uint64
	for id, pos := range acked {
		require.Equal(t, ep, pos.Epoch)
		require.Less(t, pos.Slot, cut, "guarantee 2: %s at slot %d, at or past the cut, was acknowledged", id, pos.Slot)
		ackedSlots = append(ackedSlots, pos.Slot)
	}
	rec := b.env(t).VerifyEpoch(starA, ep, ackedSlots)
	require.Equal(t, epoch.StateSettled, rec.State)
	require.Equal(t, cut, rec.Cursors.Checkpoint)
	streamAtCut := b.streamIDs(t)
	require.Len(t, streamAtCut, int(cut), "the stream is A's chain [0, cut)")

	// A zombie incarnation of A that still holds its open epoch record
	// cannot write on, and the PUTs it lands late past the cut stay
	// unread.
	zombie(t, s, recA, cut)
	require.Equal(t, streamAtCut, b.streamIDs(t), "the zombie changed nothing that is served")
	b.env(t).VerifyEpoch(starA, ep, ackedSlots)

	// The producer retries what A did not acknowledge. Records that the
	// fence completed below the cut are in the stream already (settlement
	// covered them): they count as acknowledged at their offsets. The rest
	// are appended in B's epoch at the offsets that follow.
	inStream := counts(streamAtCut)
	for id := range acked {
		require.Equal(t, 1, inStream[id], "acknowledged %s must be in the stream once", id)
	}
	next, err := b.refs.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, cut, next)
	var retry []string
	for _, f := range failed {
		if inStream[f.id] == 0 {
			retry = append(retry, f.id)
		}
	}
	t.Logf("of %d unacknowledged records, %d were completed by the fence and %d are appended by B", len(failed), len(failed)-len(retry), len(retry))
	recB, err := b.minter.Mint(ctx, starB, s.constants(2, 16))
	require.NoError(t, err)
	appendAll(t, ctx, b, b.writer(t, recB, chain.WriterOptions{}), next, retry, hist)

	// Guarantee 5: every record the producer sent, acknowledged by A or
	// retried, is served exactly once.
	ids := b.streamIDs(t)
	got := counts(ids)
	for _, id := range o.submitted {
		require.Equal(t, 1, got[id], "record %s", id)
	}
	require.Len(t, ids, len(o.submitted), "the stream holds the producer's records and nothing else")
	reps, err = b.settler.SettleAll(ctx, starB)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	require.Equal(t, uint64(len(retry)), reps[0].Cut)
	b.env(t).VerifyEpoch(starB, recB.Epoch, nil)
	// The six guarantees over the whole run, A's host and B's appends,
	// with every zone read directly and the store's history replayed.
	b.verifyRun(t, hist)
}

// appendAll appends the records ids at offsets from, pipelined through w,
// covers each acknowledged flight, advances the checkpoint past them and
// closes the writer. Every append must be acknowledged. With hist, what
// the producer saw is recorded there.
func appendAll(t *testing.T, ctx context.Context, p *party, w *chain.Writer, from uint64, ids []string, hist *cutlinetest.History) {
	t.Helper()
	if hist == nil {
		hist = &cutlinetest.History{}
	}
	var fs []*chain.Future
	var payloads [][]byte
	var ofs []int
	star, ep := w.Record().Star, w.Record().Epoch
	for i, id := range ids {
		payload := record(from+uint64(i), id)
		f, err := w.Submit(ctx, payload)
		require.NoError(t, err)
		fs = append(fs, f)
		payloads = append(payloads, payload)
		ofs = append(ofs, hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: p.name, Star: star, ID: id, Payload: payload}))
	}
	for i, f := range fs {
		pos, err := f.Wait(ctx)
		require.NoError(t, err)
		hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Host: p.name, Star: star, ID: ids[i], Of: ofs[i], Pos: pos})
		require.Equal(t, chain.Position{Epoch: ep, Slot: uint64(i)}, pos)
		require.NoError(t, p.refs.Cover(ctx, star, chain.Flight{Position: pos, Payload: payloads[i]}))
	}
	if len(fs) > 0 {
		_, err := w.Checkpoint(ctx, uint64(len(fs)))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close(ctx))
}

// zombie is an incarnation of A that missed its own death and still holds
// its open epoch record. It cannot build a writer on that record (only the
// mint that returned an epoch writes it); what it can still do is land the
// PUTs it had in flight, late. Those are flights at and past the cut in
// every zone: the cut slot holds B poisons, so they can never make
// anything there committed, and nothing reads past the cut.
func zombie(t *testing.T, s *stack, stale *epoch.Record, cut uint64) {
	t.Helper()
	ctx := within(t, 30*time.Second)
	require.Equal(t, epoch.StateOpen, stale.State, "the zombie believes its epoch is open")
	z := s.party(t, starA+"-zombie", partyOpts{})
	bs, err := z.zones.Resolve(stale.Constants.Buckets)
	require.NoError(t, err)
	back, err := z.minter.Get(ctx, starA, stale.Epoch)
	require.NoError(t, err)
	_, err = chain.NewWriter(back, chain.MustZones(bs...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrState, "the record read back is settled")
	_, err = chain.NewWriter(stale, chain.MustZones(bs...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrClaimed, "the minted record is A's writer's")
	landed := 0
	for i := range uint64(8) {
		slot := cut + i
		data := wire.EncodeFlight(starA, stale.Epoch, slot, record(slot, fmt.Sprintf("zombie%d", i)))
		for _, b := range bs {
			err := b.Create(ctx, s.keys.Slot(starA, stale.Epoch, slot), data)
			if err == nil {
				landed++
				continue
			}
			require.ErrorIs(t, err, objstore.ErrExists)
		}
	}
	require.Positive(t, landed, "the zombie's late PUTs landed past the cut")
}
