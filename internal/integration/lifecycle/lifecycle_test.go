package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// TestLifecycle runs both scenarios on each backend, with one embedded
// etcd member for all of them.
func TestLifecycle(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			open := b.start(t)
			t.Run("retention", func(t *testing.T) { testRetention(t, newWorld(cluster, open)) })
			t.Run("compactor-race", func(t *testing.T) { testCompactorRace(t, newWorld(cluster, open)) })
		})
	}
}

// retainTo is where each stream's retention point goes, of perStream
// records: not at all, inside a segment, past the first epoch's
// segments, and to the stream's end.
func retainTo(perStream int) map[string]uint64 {
	return map[string]uint64{"s0": 0, "s1": 37, "s2": uint64(perStream*3/4 + 1), "s3": uint64(perStream)}
}

// testRetention: star A appends 160 records to each of four streams over
// two epochs (a roll half-way); a maintenance process settles, compacts
// (segments of at most 1 KiB, so that a stream has several), trims the
// rewritten flights, retains each stream to its point and collects the
// segments below it. Every acknowledged record at or past a stream's
// retention point reads back once, in order, from segments; a read below
// it is a *settle.TrimmedError naming the point; fewer objects and
// metastore keys are stored than before maintenance, and no segment is
// left that the index does not need.
func testRetention(t *testing.T, w *world) {
	const perStream = 160
	ctx := within(t, 4*time.Minute)
	acked := w.appendStreams(t, ctx, perStream, true)
	m := w.party(t, "maintenance", nil)
	_, err := m.settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	before := m.footprint(t, ctx, w.prefix)

	c := m.compactor(t, "compactor-1", settle.CompactorOptions{SegmentBytes: 1 << 10})
	var epochs []uint64
	for rec, err := range m.minter.Epochs(ctx, starA) {
		require.NoError(t, err)
		require.Equal(t, epoch.StateSettled, rec.State, "epoch %d", rec.Epoch)
		epochs = append(epochs, rec.Epoch)
		rep, err := c.Compact(ctx, starA, rec.Epoch)
		require.NoError(t, err, "compact epoch %d", rec.Epoch)
		require.Equal(t, rep.Checkpoint, rep.Rewritten, "epoch %d: a settled epoch compacts up to its checkpoint", rec.Epoch)
		tr, err := m.settler.TrimRewritten(ctx, starA, rec.Epoch)
		require.NoError(t, err)
		require.Equal(t, rep.Rewritten, tr.Trimmed)
		require.Zero(t, tr.Left)
		t.Logf("epoch %d: %d flights compacted into %d segments (%d pages), %d flight copies trimmed", rec.Epoch, rep.Checkpoint, rep.Segments, rep.Pages, tr.Deleted)
	}
	require.Len(t, epochs, 2, "the roll made a second epoch")
	compacted := m.footprint(t, ctx, w.prefix)

	points := retainTo(perStream)
	for _, s := range streams {
		rep, err := m.refs.Retain(ctx, s, points[s])
		require.NoError(t, err, "retain %s", s)
		require.Equal(t, points[s], rep.Start)
	}
	// A limit moves a point only up: s1 keeps its last 100 records at
	// most, which its point already does.
	pol, err := m.refs.RetainPolicy(ctx, "s1", settle.Policy{MaxRecords: perStream - 30})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: "s1", Start: points["s1"]}, pol, "a limit that keeps more moves nothing")
	collected := 0
	for _, ep := range epochs {
		col, err := c.Collect(ctx, starA, ep)
		require.NoError(t, err)
		require.Zero(t, col.Left)
		collected += col.Garbage
	}
	require.Positive(t, collected, "retention dropped whole segments")
	after := m.footprint(t, ctx, w.prefix)
	t.Logf("stored: %+v before maintenance, %+v compacted, %+v retained and collected (%d segments)", before, compacted, after, collected)
	require.Less(t, compacted.objects, before.objects, "compaction and trim leave fewer objects")
	require.Less(t, after.objects, compacted.objects, "collection deletes segments below the retention points")
	require.Less(t, after.pages, before.pages, "retention deletes ref pages")
	require.Less(t, after.keys, before.keys, "fewer keys, the retention points included")

	// A fresh consumer reads what is retained, once, from segments.
	r := w.party(t, "consumer", nil)
	for _, s := range streams {
		start := points[s]
		got, err := r.refs.Start(ctx, s)
		require.NoError(t, err)
		require.Equal(t, start, got, s)
		if start == uint64(perStream) {
			require.ErrorIs(t, r.firstErr(ctx, s, start), metastore.ErrNotFound, "%s is retained to its end", s)
		} else {
			recs, segs := r.readFrom(t, ctx, s, start)
			require.Equal(t, acked[s][start:], recs, "%s from %d: every acknowledged record once", s, start)
			require.Equal(t, len(recs), segs, "%s: every record from a segment", s)
		}
		if start == 0 {
			continue
		}
		for _, below := range []uint64{0, start / 2, start - 1} {
			err := r.firstErr(ctx, s, below)
			var te *settle.TrimmedError
			require.ErrorAs(t, err, &te, "%s at %d, below %d", s, below, start)
			require.ErrorIs(t, err, settle.ErrBelowRetention)
			require.Equal(t, settle.TrimmedError{Stream: s, Offset: below, Start: start}, *te)
		}
	}
	m.requireNoGarbage(t, ctx, w.prefix)
}

// txnsFail is a store whose transactions never land, as for a process
// that lost its metastore connection (or crashed) after it wrote its
// segments and before it could name them.
type txnsFail struct{ metastore.Store }

func (s txnsFail) Txn(context.Context, metastore.Txn) (int64, error) {
	return 0, fmt.Errorf("connection lost: %w", metastore.ErrUnavailable)
}

// Floor keeps the store's one-read Floor.
func (s txnsFail) Floor(ctx context.Context, prefix, key string) (metastore.KV, error) {
	return metastore.Floor(ctx, s.Store, prefix, key)
}

// testCompactorRace: after star A appended 200 records to each of four
// streams in one epoch, settled, a compactor writes its segments and
// fails to name them (its transactions never land): garbage. Then two
// compactors, each a process of its own, race on the epoch a few flights
// a pass while a consumer reads every stream. Each page moves once, every
// acknowledged record reads back once before, during and after, and a
// later Collect deletes the crashed compactor's segments, leaving none
// the index does not name.
func testCompactorRace(t *testing.T, w *world) {
	const perStream = 200
	ctx := within(t, 4*time.Minute)
	acked := w.appendStreams(t, ctx, perStream, false)
	m := w.party(t, "maintenance", nil)
	reps, err := m.settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	ep := reps[0].Epoch
	readAll := func(p *party) error {
		for _, s := range streams {
			recs, _, err := p.readRecords(ctx, s, 0)
			if err != nil {
				return err
			}
			if len(recs) != perStream {
				return fmt.Errorf("%s: %d records, %d acknowledged", s, len(recs), perStream)
			}
			for i := range recs {
				if string(recs[i]) != string(acked[s][i]) {
					return fmt.Errorf("%s at %d: %q, acknowledged %q", s, i, recs[i], acked[s][i])
				}
			}
		}
		return nil
	}
	require.NoError(t, readAll(m))

	crashed := w.party(t, "compactor-0", func(s metastore.Store) metastore.Store { return txnsFail{s} })
	_, err = crashed.compactor(t, "compactor-0", settle.CompactorOptions{}).Compact(ctx, starA, ep)
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	garbage := m.segments(t, ctx, w.prefix)
	require.NotEmpty(t, garbage, "the crashed compactor's segments stay: it does not know whether a page names them")
	require.Empty(t, m.named(t, ctx), "no page names them")

	var g errgroup.Group
	race := make([]settle.CompactReport, 2)
	for i := range race {
		id := fmt.Sprintf("compactor-%d", i+1)
		c := w.party(t, id, nil).compactor(t, id, settle.CompactorOptions{PassSlots: 8})
		g.Go(func() (err error) {
			race[i], err = c.Compact(ctx, starA, ep)
			return err
		})
	}
	consumer := w.party(t, "consumer", nil)
	var reads sync.WaitGroup
	var readErr error
	reads.Go(func() { readErr = readAll(consumer) })
	require.NoError(t, g.Wait())
	reads.Wait()
	require.NoError(t, readErr, "a read during the race")

	pages, _, err := m.store.List(ctx, "refpages/")
	require.NoError(t, err)
	for i, rep := range race {
		require.Equal(t, rep.Checkpoint, rep.Rewritten, "compactor %d", i+1)
		t.Logf("compactor %d: %d passes, %d pages, %d segments, %d lost, %d dropped", i+1, rep.Passes, rep.Pages, rep.Segments, rep.Lost, rep.Dropped)
	}
	require.Equal(t, len(pages), race[0].Pages+race[1].Pages, "each page moves once")

	col, err := m.compactor(t, "collector", settle.CompactorOptions{}).Collect(ctx, starA, ep)
	require.NoError(t, err)
	require.Zero(t, col.Left)
	require.GreaterOrEqual(t, col.Garbage, len(garbage), "the crashed compactor's segments are collected")
	for k := range garbage {
		require.NotContains(t, m.segments(t, ctx, w.prefix), k)
	}
	m.requireNoGarbage(t, ctx, w.prefix)

	tr, err := m.settler.TrimRewritten(ctx, starA, ep)
	require.NoError(t, err)
	require.Positive(t, tr.Deleted)
	require.NoError(t, readAll(w.party(t, "late-consumer", nil)), "after the trim, from segments")
	for _, s := range streams {
		_, segs := consumer.readFrom(t, ctx, s, 0)
		require.Equal(t, perStream, segs, "%s: every record from a segment", s)
	}
	if err := consumer.firstErr(ctx, "s0", perStream); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("a read at the end of s0: %v, want not found", err)
	}
}
