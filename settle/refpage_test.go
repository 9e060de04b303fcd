package settle_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/settle"
)

// pageKeys lists the keys of stream's pages.
func pageKeys(t *testing.T, store metastore.Store, root, stream string) []string {
	t.Helper()
	kvs, _, err := store.List(context.Background(), root+"refpages/"+stream+"/")
	require.NoError(t, err)
	var out []string
	for _, kv := range kvs {
		out = append(out, strings.TrimPrefix(kv.Key, root+"refpages/"+stream+"/"))
	}
	return out
}

// A stream's refs fill pages of PageSpans spans; an epoch change starts a
// new page; every offset is found at the flight that holds it.
func TestRefIndexPages(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	const n = 150
	var flights []settle.Placed
	for i := range uint64(n) {
		ep := uint64(1)
		if i >= 140 {
			ep = 2 // a roll: the star's next epoch
		}
		flights = append(flights, settle.Placed{Position: chain.Position{Epoch: ep, Slot: i}, Spans: []settle.Span{{Stream: stream, Offset: 2 * i, Count: 2, Start: i, End: i + 1}}})
	}
	require.NoError(t, x.CoverFlights(ctx, starA, flights))
	require.Equal(t, []string{"00000000000000000000", "00000000000000000128", "00000000000000000256", "00000000000000000280"},
		pageKeys(t, store, "tenant/", stream), "pages of 64 spans; epoch 2 starts its own")
	next, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(2*n), next)
	for off := range uint64(2 * n) {
		r, err := x.Find(ctx, stream, off)
		require.NoError(t, err, "offset %d", off)
		require.Equal(t, off/2, r.Slot, "offset %d", off)
		require.Equal(t, off/2*2, r.Offset, "offset %d", off)
	}
	_, err = x.Lookup(ctx, stream, 3)
	require.ErrorIs(t, err, metastore.ErrNotFound, "3 lies inside the ref at 2")
	_, err = x.Find(ctx, stream, 2*n)
	require.ErrorIs(t, err, metastore.ErrNotFound, "past the coverage")
	require.Len(t, settletest.RefsOf(t, x, stream), n)
	// Covering it all again writes nothing.
	rev := store.Revision()
	require.NoError(t, x.CoverFlights(ctx, starA, flights))
	require.Equal(t, rev, store.Revision())
	// And so does a fresh index, which must read what is there.
	y, err := settle.NewRefIndex(store, "tenant/", locateRuns)
	require.NoError(t, err)
	require.NoError(t, y.CoverFlights(ctx, starA, flights))
	require.Equal(t, rev, store.Revision())
}

// The cost of a cover: writes per stream per call, packed 128 operations
// to a transaction, and no read for a stream whose head the index wrote.
func TestRefIndexCoverCost(t *testing.T) {
	ctx := context.Background()
	store := metacount.Wrap(memstore.New(memstore.Options{}))
	x, err := settle.NewRefIndex(store, "", locateRuns)
	require.NoError(t, err)
	const streams, flights = 1000, 64
	batch := func(round uint64) []settle.Placed {
		out := make([]settle.Placed, flights)
		for f := range flights {
			out[f].Position = chain.Position{Epoch: 1, Slot: round*flights + uint64(f)}
		}
		for s := range streams {
			f := s % flights
			out[f].Spans = append(out[f].Spans, settle.Span{Stream: fmt.Sprintf("s%05d", s), Offset: round, Count: 1})
		}
		return out
	}
	require.NoError(t, x.CoverFlights(ctx, starA, batch(0)))
	first := store.Stats()
	t.Logf("first cover of %d streams in %d flights: %+v", streams, flights, first)
	require.Equal(t, (streams+settle.MaxTxnOps-1)/settle.MaxTxnOps, first.Txns, "one operation per stream, 128 to a transaction")
	require.Equal(t, (streams+metastore.MaxReadMany-1)/metastore.MaxReadMany+1, first.Reads(),
		"heads never seen are read 128 to a request, and the index looks for the old format once")
	store.Reset()
	for round := uint64(1); round < 10; round++ {
		require.NoError(t, x.CoverFlights(ctx, starA, batch(round)))
	}
	later := store.Stats()
	t.Logf("nine more covers: %+v", later)
	require.Equal(t, 9*((streams+settle.MaxTxnOps-1)/settle.MaxTxnOps), later.Txns)
	require.Zero(t, later.Reads(), "the holder's own heads are not read again")
	for _, s := range []string{"s00000", "s00999"} {
		next, err := x.Next(ctx, s)
		require.NoError(t, err)
		require.Equal(t, uint64(10), next)
	}
}

// A cover split over several transactions that crashes after some of them
// landed is finished by covering again, from another index: every span
// covered once, none twice.
func TestRefIndexSplitCoverCrash(t *testing.T) {
	ctx := context.Background()
	const streams = 300 // three transactions
	var flight []settle.Span
	for s := range streams {
		flight = append(flight, settle.Span{Stream: fmt.Sprintf("s%03d", s), Offset: 0, Count: 1, Start: uint64(s), End: uint64(s + 1)})
	}
	placed := []settle.Placed{{Position: chain.Position{Epoch: 1, Slot: 0}, Spans: flight}}
	for _, lost := range []bool{false, true} {
		for at := 1; at <= 3; at++ {
			t.Run(fmt.Sprintf("at=%d,lost=%v", at, lost), func(t *testing.T) {
				store := memstore.New(memstore.Options{})
				k := settletest.NewKillSwitch(at, lost)
				x, err := settle.NewRefIndex(k.Store(store), "", locateRuns)
				require.NoError(t, err)
				err = x.CoverFlights(ctx, starA, placed)
				require.ErrorIs(t, err, metastore.ErrUnavailable)
				y, err := settle.NewRefIndex(store, "", locateRuns)
				require.NoError(t, err)
				require.NoError(t, y.CoverFlights(ctx, starA, placed))
				for s := range streams {
					id := fmt.Sprintf("s%03d", s)
					refs := settletest.RefsOf(t, y, id)
					require.Len(t, refs, 1, id)
					require.Equal(t, uint64(s), refs[0].Start, id)
				}
			})
		}
	}
}

// Retention: reads below the point are refused with where the stream now
// starts; pages wholly below it go, the last page always stays; Needed
// says which slots of an epoch a retained ref still points into.
func TestRefIndexRetain(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	var flights []settle.Placed
	for i := range uint64(200) {
		flights = append(flights, settle.Placed{Position: chain.Position{Epoch: 1, Slot: i},
			Spans: []settle.Span{{Stream: stream, Offset: i, Count: 1}, {Stream: "other", Offset: i, Count: 1}}})
	}
	require.NoError(t, x.CoverFlights(ctx, starA, flights))
	require.Len(t, pageKeys(t, store, "tenant/", stream), 4)

	rep, err := x.Retain(ctx, stream, 130)
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 130, PagesDeleted: 2}, rep)
	require.Equal(t, []string{"00000000000000000128", "00000000000000000192"}, pageKeys(t, store, "tenant/", stream))
	_, err = x.Find(ctx, stream, 129)
	var te *settle.TrimmedError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, settle.ErrBelowRetention)
	require.Equal(t, uint64(130), te.Start)
	r, err := x.Find(ctx, stream, 130)
	require.NoError(t, err)
	require.Equal(t, uint64(130), r.Slot)
	refs := settletest.RefsOf(t, x, stream)
	require.Equal(t, uint64(130), refs[0].Offset, "Refs start at the retention point")
	start, err := x.Start(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(130), start)

	// The point only moves up; past the coverage is refused.
	rep, err = x.Retain(ctx, stream, 10)
	require.NoError(t, err)
	require.Equal(t, uint64(130), rep.Start)
	_, err = x.Retain(ctx, stream, 201)
	require.Error(t, err)

	// "other" still needs slot 0.
	slot, ok, err := x.Needed(ctx, starA, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, slot)
	_, err = x.Retain(ctx, "other", 150)
	require.NoError(t, err)
	slot, ok, err = x.Needed(ctx, starA, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(130), slot)
	// Everything retained away: the last page stays, and says where the
	// stream goes on.
	_, err = x.Retain(ctx, stream, 200)
	require.NoError(t, err)
	_, err = x.Retain(ctx, "other", 200)
	require.NoError(t, err)
	require.Len(t, pageKeys(t, store, "tenant/", stream), 1)
	_, ok, err = x.Needed(ctx, starA, 1)
	require.NoError(t, err)
	require.False(t, ok)
	next, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(200), next)
	require.NoError(t, x.CoverFlights(ctx, starA, []settle.Placed{{Position: chain.Position{Epoch: 1, Slot: 200}, Spans: []settle.Span{{Stream: stream, Offset: 200, Count: 1}}}}))
}

// writeV1 writes a stream's refs in format 1 (one key per span and a
// head), as an index of the previous release left them.
func writeV1(t *testing.T, store metastore.Store, root, stream string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		v := fmt.Sprintf(`{"kind":"ref","format":1,"stream":%q,"offset":%d,"count":1,"star":"star-a","epoch":%d,"slot":%d,"start":0,"end":1}`, stream, i, 1+i/100, i)
		_, err := metastore.Put(ctx, store, fmt.Sprintf("%srefs/%s/%020d", root, stream, i), []byte(v), 0)
		require.NoError(t, err)
	}
	_, err := metastore.Put(ctx, store, root+"refheads/"+stream, []byte(fmt.Sprintf(`{"kind":"refhead","format":1,"stream":%q,"next":%d}`, stream, n)), 0)
	require.NoError(t, err)
}

// An index in format 1 is refused with a typed error that names the
// migration; Migrate converts it, idempotently, also after a crash.
func TestRefIndexMigrate(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	writeV1(t, store, "tenant/", stream, 150)
	_, err := x.Next(ctx, stream)
	var fe *settle.FormatError
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, err, settle.ErrIndexFormat)
	require.Contains(t, err.Error(), "cutline index-migrate")
	_, err = x.Find(ctx, stream, 3)
	require.ErrorIs(t, err, settle.ErrIndexFormat)
	require.ErrorIs(t, x.CoverFlights(ctx, starA, []settle.Placed{{Position: chain.Position{Epoch: 2, Slot: 150}, Spans: []settle.Span{{Stream: stream, Offset: 150, Count: 1}}}}), settle.ErrIndexFormat)

	// A migration that crashed after its first page.
	k := settletest.NewKillSwitch(2, false)
	crashing, err := settle.NewRefIndex(k.Store(store), "tenant/", locateRuns)
	require.NoError(t, err)
	_, err = crashing.Migrate(ctx, stream)
	require.ErrorIs(t, err, metastore.ErrUnavailable)

	var reps []settle.MigrateReport
	for rep, err := range x.MigrateAll(ctx) {
		require.NoError(t, err)
		reps = append(reps, rep)
	}
	require.Equal(t, []settle.MigrateReport{{Stream: stream, Refs: 150, Pages: 3}}, reps, "epochs 1 and 2: pages of 64, 36 and 50")
	kvs, _, err := store.List(ctx, "tenant/refs/")
	require.NoError(t, err)
	require.Empty(t, kvs, "format-1 keys are deleted")
	next, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(150), next)
	for off := range uint64(150) {
		r, err := x.Find(ctx, stream, off)
		require.NoError(t, err)
		require.Equal(t, off, r.Slot)
		require.Equal(t, 1+off/100, r.Epoch)
	}
	rep, err := x.Migrate(ctx, stream)
	require.NoError(t, err)
	require.Zero(t, rep.Pages, "nothing left to migrate")
	require.NoError(t, x.CoverFlights(ctx, starA, []settle.Placed{{Position: chain.Position{Epoch: 2, Slot: 150}, Spans: []settle.Span{{Stream: stream, Offset: 150, Count: 1}}}}))
}

// Under steady load with a retention point that follows the stream, the
// index's keys stay bounded, and the lowest slot a retained ref needs
// follows the load (so the epoch's flights below it can be trimmed).
func TestRefIndexRetentionBounded(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	const streams, flights, keep = 10, 64, 100
	var maxKeys int
	var lastNeeded uint64
	for round := range uint64(50) {
		batch := make([]settle.Placed, flights)
		for f := range uint64(flights) {
			batch[f].Position = chain.Position{Epoch: 1, Slot: round*flights + f}
			for s := range streams {
				batch[f].Spans = append(batch[f].Spans, settle.Span{Stream: fmt.Sprintf("s%d", s), Offset: round*flights + f, Count: 1, Start: uint64(s), End: uint64(s + 1)})
			}
		}
		require.NoError(t, x.CoverFlights(ctx, starA, batch))
		next := (round + 1) * flights
		for s := range streams {
			_, err := x.Retain(ctx, fmt.Sprintf("s%d", s), max(next, keep)-keep)
			require.NoError(t, err)
		}
		kvs, _, err := store.List(ctx, "tenant/refpages/")
		require.NoError(t, err)
		maxKeys = max(maxKeys, len(kvs))
		needed, ok, err := x.Needed(ctx, starA, 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.GreaterOrEqual(t, needed, lastNeeded, "round %d", round)
		require.GreaterOrEqual(t, needed+keep+flights, next, "round %d: the needed slot follows the load", round)
		lastNeeded = needed
	}
	// keep + a page of spans per stream, rounded up to pages, plus the
	// head page: 10 × 4.
	require.LessOrEqual(t, maxKeys, streams*4, "page keys stay bounded under retention")
	t.Logf("at most %d page keys over 3,200 flights of 10 streams, retaining 100 offsets", maxKeys)
}

// Settling flights again after retention deleted their pages (a holder
// that died before its checkpoint passed them) finds the spans below the
// retention point let go, not covered twice.
func TestRefIndexCoverBelowRetention(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	var flights []settle.Placed
	for i := range uint64(100) {
		flights = append(flights, settle.Placed{Position: chain.Position{Epoch: 1, Slot: i}, Spans: []settle.Span{{Stream: stream, Offset: i, Count: 1}}})
	}
	require.NoError(t, x.CoverFlights(ctx, starA, flights))
	rep, err := x.Retain(ctx, stream, 90)
	require.NoError(t, err)
	require.Equal(t, 1, rep.PagesDeleted)
	y, err := settle.NewRefIndex(store, "tenant/", locateRuns)
	require.NoError(t, err)
	require.NoError(t, y.CoverFlights(ctx, starA, flights), "the successor's settlement covers the same flights again")
	// A different position below the point is still refused where a page
	// remains to compare with.
	err = y.CoverFlights(ctx, starA, []settle.Placed{{Position: chain.Position{Epoch: 1, Slot: 500}, Spans: []settle.Span{{Stream: stream, Offset: 95, Count: 1}}}})
	require.ErrorIs(t, err, settle.ErrDoubleCover)
}

// Extents reads a long stream's pages several to a request, and yields
// every extent once and in order, whatever the pages' widths: pages of
// 64 spans of 1 record, then of 64 spans of 5 records each, so that the
// guessed offsets of the pages ahead miss where the widths change.
func TestRefIndexExtentsReadsPagesAhead(t *testing.T) {
	ctx := context.Background()
	store := metacount.Wrap(memstore.New(memstore.Options{}))
	x, err := settle.NewRefIndex(store, "", locateRuns)
	require.NoError(t, err)
	const narrow, wide = 64 * 20, 64 * 20 // spans of 1, then of 5 records
	var flights []settle.Placed
	var off uint64
	for i := range uint64(narrow + wide) {
		count := uint64(1)
		if i >= narrow {
			count = 5
		}
		flights = append(flights, settle.Placed{Position: chain.Position{Epoch: 1, Slot: i},
			Spans: []settle.Span{{Stream: stream, Offset: off, Count: count, Start: 0, End: count}}})
		off += count
		if len(flights) == 256 {
			require.NoError(t, x.CoverFlights(ctx, starA, flights))
			flights = flights[:0]
		}
	}
	require.NoError(t, x.CoverFlights(ctx, starA, flights))
	pages := (narrow + wide) / settle.PageSpans

	for _, from := range []uint64{0, 700, narrow - 1, off - 1} {
		store.Reset()
		next, n := from, 0
		for e, err := range x.Extents(ctx, stream, from) {
			require.NoError(t, err)
			if n == 0 {
				require.LessOrEqual(t, e.Offset, from)
				next = e.Offset
			}
			require.Equal(t, next, e.Offset, "from %d: extents in order, none skipped or repeated", from)
			next = e.Offset + e.Count
			n++
		}
		require.Equal(t, off, next, "from %d: to the end of the coverage", from)
		st := store.Stats()
		t.Logf("from %d: %d extents, %+v", from, n, st)
		// One page at a time would be up to 2+39 reads.
		require.LessOrEqual(t, st.Reads(), 2+(pages+7)/8+2, "from %d: pages read eight to a request, a few more where the widths change", from)
	}
}

// retainBeforeFloor is a store whose next Floor first lets a retention of
// stream land: the race between a reader's check of the retention point
// and its read of the page.
type retainBeforeFloor struct {
	*memstore.Store
	once   sync.Once
	retain func()
}

func (s *retainBeforeFloor) Floor(ctx context.Context, prefix, key string) (metastore.KV, error) {
	s.once.Do(s.retain)
	return s.Store.Floor(ctx, prefix, key)
}

// retainBeforeMany lets the retention land before the next ReadMany:
// before a read ahead.
type retainBeforeMany struct {
	*memstore.Store
	once   sync.Once
	retain func()
}

func (s *retainBeforeMany) ReadMany(ctx context.Context, reads []metastore.Read) ([]metastore.ReadResult, error) {
	s.once.Do(s.retain)
	return s.Store.ReadMany(ctx, reads)
}

// A read whose page a retention deleted after the reader checked the
// point is told where the stream starts now, not that the stream ends
// there; so is a read ahead whose next page went.
func TestRefIndexReadRacingRetain(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(memstore.Options{})
	x0, err := settle.NewRefIndex(mem, "", locateRuns)
	require.NoError(t, err)
	var flights []settle.Placed
	for i := range uint64(200) {
		flights = append(flights, settle.Placed{Position: chain.Position{Epoch: 1, Slot: i},
			Spans: []settle.Span{{Stream: stream, Offset: i, Count: 1, Start: 0, End: 1}}})
	}
	require.NoError(t, x0.CoverFlights(ctx, starA, flights))

	racing := &retainBeforeFloor{Store: mem, retain: func() {
		_, err := x0.Retain(ctx, stream, 130)
		require.NoError(t, err)
	}}
	x, err := settle.NewRefIndex(racing, "", locateRuns)
	require.NoError(t, err)
	_, err = x.FindExtent(ctx, stream, 27)
	var te *settle.TrimmedError
	require.ErrorAs(t, err, &te, "not the end of the coverage: %v", err)
	require.Equal(t, uint64(130), te.Start)
	require.NotErrorIs(t, err, metastore.ErrNotFound)

	// The page after [0, 64) goes while a reader holds [0, 64).
	mem = memstore.New(memstore.Options{})
	x0, err = settle.NewRefIndex(mem, "", locateRuns)
	require.NoError(t, err)
	require.NoError(t, x0.CoverFlights(ctx, starA, flights))
	ahead := &retainBeforeMany{Store: mem, retain: func() {
		_, err := x0.Retain(ctx, stream, 140)
		require.NoError(t, err)
	}}
	x, err = settle.NewRefIndex(ahead, "", locateRuns)
	require.NoError(t, err)
	var last error
	n := 0
	for _, err := range x.Extents(ctx, stream, 0) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	require.Equal(t, 64, n, "the page read before the retention; then %v", last)
	require.ErrorAs(t, last, &te, "not a broken index: %v", last)
	require.Equal(t, uint64(140), te.Start)
}
