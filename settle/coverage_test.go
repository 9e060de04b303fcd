package settle_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/settle"
)

func flight(ep, slot uint64, payload []byte) chain.Flight {
	return chain.Flight{Position: chain.Position{Epoch: ep, Slot: slot}, Payload: payload}
}

func newRefIndex(t *testing.T, locate settle.Locator) (*settle.RefIndex, *memstore.Store) {
	store := memstore.New(memstore.Options{})
	x, err := settle.NewRefIndex(store, "tenant/", locate)
	require.NoError(t, err)
	return x, store
}

// runs is a test bundle format: one line "<stream> <offset> <count>" per
// span, the line's bytes (newline included) being the span's bytes.
func runs(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// locateRuns is the Locator of runs payloads.
func locateRuns(p []byte) ([]settle.Span, error) {
	var spans []settle.Span
	var at uint64
	for line := range strings.Lines(string(p)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("not a run: %q", line)
		}
		off, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return nil, err
		}
		spans = append(spans, settle.Span{Stream: f[0], Offset: off, Count: n, Start: at, End: at + uint64(len(line))})
		at += uint64(len(line))
	}
	return spans, nil
}

func TestRefIndexCoverIsIdempotent(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locate)
	f := flight(3, 7, record(stream, 0, "r"))
	require.NoError(t, x.Cover(ctx, starA, f))
	rev := store.Revision()
	require.NoError(t, x.Cover(ctx, starA, f), "covering the same flight again changes nothing")
	require.Equal(t, rev, store.Revision())

	r, err := x.Lookup(ctx, stream, 0)
	require.NoError(t, err)
	require.Equal(t, settle.Ref{RecordHeader: r.RecordHeader, Stream: stream, Offset: 0, Count: 1, Star: starA, Epoch: 3, Slot: 7,
		Start: 0, End: uint64(len(f.Payload))}, r)
	require.Equal(t, chain.Position{Epoch: 3, Slot: 7}, r.Position())
	kv, err := store.Get(ctx, "tenant/refpages/s/00000000000000000000")
	require.NoError(t, err, "pages live at <root>refpages/<stream>/<first offset, 20 digits>")
	require.Contains(t, string(kv.Value), `"kind":"refpage"`)
	require.Contains(t, string(kv.Value), `"star":"star-a"`)
	require.Contains(t, string(kv.Value), `"next":1`)
	require.Contains(t, string(kv.Value), `"spans":[[1,7,0,5]]`, "a span is [count, slot, start, end]")

	_, err = x.Lookup(ctx, stream, 1)
	require.ErrorIs(t, err, metastore.ErrNotFound)
	n, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
}

// A Cover whose write landed but whose answer was lost is simply repeated.
func TestRefIndexCoverAfterLostAnswer(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	k := settletest.NewKillSwitch(1, true)
	x, err := settle.NewRefIndex(k.Store(store), "", locate)
	require.NoError(t, err)
	f := flight(1, 0, record(stream, 0, "r"))
	require.ErrorIs(t, x.Cover(ctx, starA, f), metastore.ErrUnavailable)
	y, err := settle.NewRefIndex(store, "", locate)
	require.NoError(t, err)
	require.NoError(t, y.Cover(ctx, starA, f))
	require.Len(t, settletest.RefsOf(t, y, stream), 1)
	n, err := y.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
}

// One flight bundling three streams covers all three, each with the bytes
// that hold its run; covering it again changes nothing.
func TestRefIndexCoverBundle(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	// The streams' earlier runs, in two flights of their own.
	require.NoError(t, x.Cover(ctx, starA, flight(1, 0, runs("b 0 4"))))
	require.NoError(t, x.Cover(ctx, starA, flight(1, 1, runs("c 0 1", "a 0 2"))))
	p := runs("a 2 3", "b 4 1", "c 1 7")
	f := flight(1, 2, p)
	require.NoError(t, x.Cover(ctx, starA, f))
	rev := store.Revision()
	require.NoError(t, x.Cover(ctx, starA, f), "covering the same bundle again changes nothing")
	require.Equal(t, rev, store.Revision())

	want := map[string][]settle.Ref{
		"a": {{Stream: "a", Offset: 0, Count: 2, Star: starA, Epoch: 1, Slot: 1, Start: 6, End: 12},
			{Stream: "a", Offset: 2, Count: 3, Star: starA, Epoch: 1, Slot: 2, Start: 0, End: 6}},
		"b": {{Stream: "b", Offset: 0, Count: 4, Star: starA, Epoch: 1, Slot: 0, Start: 0, End: 6},
			{Stream: "b", Offset: 4, Count: 1, Star: starA, Epoch: 1, Slot: 2, Start: 6, End: 12}},
		"c": {{Stream: "c", Offset: 0, Count: 1, Star: starA, Epoch: 1, Slot: 1, Start: 0, End: 6},
			{Stream: "c", Offset: 1, Count: 7, Star: starA, Epoch: 1, Slot: 2, Start: 12, End: 18}},
	}
	for s, refs := range want {
		require.Equal(t, refs, settletest.RefsOf(t, x, s), "stream %s", s)
		last := refs[len(refs)-1]
		n, err := x.Next(ctx, s)
		require.NoError(t, err)
		require.Equal(t, last.Offset+last.Count, n, "stream %s", s)
		// The ref's byte range is the stream's run inside the flight.
		require.Equal(t, fmt.Sprintf("%s %d %d\n", s, last.Offset, last.Count), string(p[last.Start:last.End]))
	}
}

// A bundle whose second span is refused writes nothing (its spans are
// judged before anything is written), and covering it again once the gap
// is filled finishes the job.
func TestRefIndexCoverBundlePartly(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	f := flight(1, 1, runs("a 0 1", "b 1 1"))
	rev := store.Revision()
	require.ErrorIs(t, x.Cover(ctx, starA, f), settle.ErrGap)
	require.Equal(t, rev, store.Revision(), "a refused cover writes nothing")
	require.Empty(t, settletest.RefsOf(t, x, "a"))
	require.Empty(t, settletest.RefsOf(t, x, "b"))
	require.NoError(t, x.Cover(ctx, starA, flight(1, 0, runs("b 0 1"))))
	require.NoError(t, x.Cover(ctx, starA, f))
	require.Len(t, settletest.RefsOf(t, x, "b"), 2)
}

func TestRefIndexDoubleCover(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locate)
	require.NoError(t, x.Cover(ctx, starA, flight(1, 5, record(stream, 0, "r"))))
	for name, tc := range map[string]struct {
		star string
		f    chain.Flight
	}{
		"other slot":  {starA, flight(1, 6, record(stream, 0, "r"))},
		"other epoch": {starA, flight(2, 5, record(stream, 0, "r"))},
		"other star":  {starB, flight(1, 5, record(stream, 0, "r"))},
		"other bytes": {starA, flight(1, 5, record(stream, 0, "longer"))},
	} {
		t.Run(name, func(t *testing.T) {
			rev := store.Revision()
			err := x.Cover(ctx, tc.star, tc.f)
			require.ErrorIs(t, err, settle.ErrDoubleCover)
			var de *settle.DoubleCoverError
			require.ErrorAs(t, err, &de)
			require.Equal(t, stream, de.Stream)
			require.Equal(t, uint64(0), de.Offset)
			require.Equal(t, chain.Position{Epoch: 1, Slot: 5}, de.Existing.Position())
			require.Equal(t, starA, de.Existing.Star)
			require.Equal(t, tc.f.Position, de.Offered.Position())
			require.Equal(t, tc.star, de.Offered.Star)
			require.Contains(t, err.Error(), "star-a/1/5")
			require.Equal(t, rev, store.Revision(), "nothing is written")
		})
	}
	// The same position claiming a different run length is refused too.
	x2, err := settle.NewRefIndex(store, "tenant/", func(p []byte) ([]settle.Span, error) {
		return []settle.Span{{Stream: stream, Offset: 0, Count: 2, End: uint64(len(p))}}, nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, x2.Cover(ctx, starA, flight(1, 5, record(stream, 0, "r"))), settle.ErrDoubleCover)
	r, err := x.Lookup(ctx, stream, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(5), r.Slot, "the existing ref is never overwritten")
	require.Equal(t, uint64(1), r.Count)
}

// A span starting inside an existing ref overlaps it: refused, whatever
// position offers it, and nothing is written.
func TestRefIndexOverlapRefused(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	require.NoError(t, x.Cover(ctx, starA, flight(1, 0, runs("s 0 3"))))
	rev := store.Revision()
	for _, f := range []chain.Flight{flight(1, 1, runs("s 1 2")), flight(1, 1, runs("s 2 5")), flight(1, 0, runs("s 1 1"))} {
		err := x.Cover(ctx, starA, f)
		require.ErrorIs(t, err, settle.ErrDoubleCover)
		var de *settle.DoubleCoverError
		require.ErrorAs(t, err, &de)
		require.Equal(t, stream, de.Stream)
		require.Zero(t, de.Existing, "no ref starts there")
		require.Equal(t, uint64(3), de.Next)
		require.Contains(t, err.Error(), "covered up to 3")
		require.NotErrorIs(t, err, settle.ErrGap)
	}
	require.Equal(t, rev, store.Revision(), "nothing is written")
	require.Len(t, settletest.RefsOf(t, x, stream), 1)
}

// A span past the stream's head would leave a hole: refused with the
// offsets it would leave, and nothing is written.
func TestRefIndexGapRefused(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	err := x.Cover(ctx, starA, flight(1, 0, runs("s 1 1")))
	require.ErrorIs(t, err, settle.ErrGap, "an empty stream starts at 0")
	require.NoError(t, x.Cover(ctx, starA, flight(1, 0, runs("s 0 4"))))
	rev := store.Revision()
	err = x.Cover(ctx, starA, flight(1, 1, runs("s 9 2")))
	require.ErrorIs(t, err, settle.ErrGap)
	require.NotErrorIs(t, err, settle.ErrDoubleCover)
	var ge *settle.GapError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, settle.GapError{Stream: stream, Offset: 9, Next: 4}, *ge)
	require.Contains(t, err.Error(), "[4, 9)")
	require.Equal(t, rev, store.Revision(), "nothing is written")
	require.NoError(t, x.Cover(ctx, starA, flight(1, 1, runs("s 4 5"))), "the span that tiles goes on")
	n, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(9), n)
}

// gateStore holds every Txn until two have arrived, so that two racing
// CoverSpan calls both read the head before either writes.
type gateStore struct {
	metastore.Store
	wg sync.WaitGroup
}

func (s *gateStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	s.wg.Done()
	s.wg.Wait()
	return s.Store.Txn(ctx, t)
}

// Two processes covering the same span at once both succeed: one writes,
// the other loses the compare, reads again and finds the same ref.
func TestRefIndexCoverSpanRace(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	gs := &gateStore{Store: store}
	gs.wg.Add(2)
	x, err := settle.NewRefIndex(gs, "", locateRuns)
	require.NoError(t, err)
	span := settle.Span{Stream: stream, Offset: 0, Count: 3, Start: 2, End: 9}
	pos := chain.Position{Epoch: 1, Slot: 4}
	rev := store.Revision()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = x.CoverSpan(ctx, starA, pos, span) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, rev+1, store.Revision(), "one transaction landed")
	refs := settletest.RefsOf(t, x, stream)
	require.Equal(t, []settle.Ref{{Stream: stream, Offset: 0, Count: 3, Star: starA, Epoch: 1, Slot: 4, Start: 2, End: 9}}, refs)
	n, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
}

// Racing covers of different positions for one offset: exactly one wins,
// the other is a double cover.
func TestRefIndexCoverSpanRaceDifferentPositions(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	gs := &gateStore{Store: store}
	gs.wg.Add(2)
	x, err := settle.NewRefIndex(gs, "", locateRuns)
	require.NoError(t, err)
	span := settle.Span{Stream: stream, Offset: 0, Count: 1, End: 1}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = x.CoverSpan(ctx, starA, chain.Position{Epoch: 1, Slot: uint64(i)}, span) })
	}
	wg.Wait()
	require.True(t, (errs[0] == nil) != (errs[1] == nil), "exactly one wins: %v", errs)
	lost := errs[0]
	if lost == nil {
		lost = errs[1]
	}
	require.ErrorIs(t, lost, settle.ErrDoubleCover)
	require.Len(t, settletest.RefsOf(t, x, stream), 1)
}

func TestRefIndexRefsNextOrder(t *testing.T) {
	ctx := context.Background()
	x, _ := newRefIndex(t, locateRuns)
	n, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Zero(t, n, "an empty stream starts at 0")
	// Offsets whose decimal strings sort differently than their values.
	for i, run := range []struct{ off, n uint64 }{{0, 2}, {2, 8}, {10, 90}, {100, 5}} {
		require.NoError(t, x.Cover(ctx, starA, flight(1, uint64(i), runs(fmt.Sprintf("%s %d %d", stream, run.off, run.n)))))
	}
	require.NoError(t, x.Cover(ctx, starA, flight(1, 9, runs("s2 0 3"))))
	var offs []uint64
	for _, r := range settletest.RefsOf(t, x, stream) {
		offs = append(offs, r.Offset)
	}
	require.Equal(t, []uint64{0, 2, 10, 100}, offs, "refs come in offset order")
	n, err = x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(105), n)
	n, err = x.Next(ctx, "s2")
	require.NoError(t, err)
	require.Equal(t, uint64(3), n, "streams do not see each other's refs, even sharing a prefix")

	// Stopping early is fine.
	for r, err := range x.Refs(ctx, stream) {
		require.NoError(t, err)
		require.Equal(t, uint64(0), r.Offset)
		break
	}
}

// Next reads the stream's last page, not its refs; a page that disagrees
// with itself is refused, and no cover is decided from it.
func TestRefIndexNextReadsHead(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	require.NoError(t, x.Cover(ctx, starA, flight(1, 0, runs("s 0 5"))))
	n, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(5), n)
	kv, err := store.Get(ctx, "tenant/refpages/s/00000000000000000000")
	require.NoError(t, err)
	// A page whose next does not follow from its spans.
	_, err = metastore.Put(ctx, store, kv.Key, []byte(strings.Replace(string(kv.Value), `"next":5`, `"next":6`, 1)), kv.Revision)
	require.NoError(t, err)
	_, err = x.Next(ctx, stream)
	var re *metastore.RecordError
	require.ErrorAs(t, err, &re)
	require.Equal(t, kv.Key, re.Key)
	err = x.Cover(ctx, starA, flight(1, 1, runs("s 5 1")))
	require.ErrorAs(t, err, &re, "no cover is decided from a bad page")
}

func TestCheckSpans(t *testing.T) {
	p := make([]byte, 10)
	sp := func(stream string, off, n, start, end uint64) settle.Span {
		return settle.Span{Stream: stream, Offset: off, Count: n, Start: start, End: end}
	}
	for name, spans := range map[string][]settle.Span{
		"one over the payload": {sp("a", 0, 1, 0, 10)},
		"three, out of order":  {sp("c", 9, 1, 6, 10), sp("a", 0, 4, 0, 3), sp("b", 7, 2, 3, 6)},
		"gaps between bytes":   {sp("a", 0, 1, 1, 2), sp("b", 0, 1, 5, 6)},
		"empty byte ranges":    {sp("a", 0, 1, 4, 4), sp("b", 0, 1, 0, 10), sp("c", 0, 1, 10, 10)},
		"the last offset":      {sp("a", math.MaxUint64-1, 1, 0, 0)},
	} {
		require.NoError(t, settle.CheckSpans(p, spans), name)
	}
	for name, tc := range map[string]struct {
		spans []settle.Span
		want  string
	}{
		"no span":            {nil, "no span"},
		"bad stream":         {[]settle.Span{sp("a", 0, 1, 0, 1), sp("../b", 0, 1, 1, 2)}, "span 1"},
		"no offsets":         {[]settle.Span{sp("a", 0, 0, 0, 1)}, "covers no offsets"},
		"past offset space":  {[]settle.Span{sp("a", math.MaxUint64, 1, 0, 1)}, "runs past the offset space"},
		"end before start":   {[]settle.Span{sp("a", 0, 1, 5, 4)}, "ends before it starts"},
		"past the payload":   {[]settle.Span{sp("a", 0, 1, 5, 11)}, "runs past the payload"},
		"overlapping bytes":  {[]settle.Span{sp("a", 0, 1, 0, 5), sp("b", 0, 1, 8, 10), sp("c", 0, 1, 4, 6)}, "span 2"},
		"inside another":     {[]settle.Span{sp("a", 0, 1, 0, 10), sp("b", 0, 1, 3, 4)}, "overlap"},
		"same bytes":         {[]settle.Span{sp("a", 0, 1, 2, 3), sp("b", 0, 1, 2, 3)}, "overlap"},
		"one stream, twice":  {[]settle.Span{sp("a", 0, 1, 0, 1), sp("a", 1, 1, 1, 2)}, "span 0"},
		"one stream, thrice": {[]settle.Span{sp("b", 0, 1, 0, 1), sp("a", 0, 1, 1, 2), sp("b", 1, 1, 2, 3)}, "span 2"},
	} {
		t.Run(name, func(t *testing.T) {
			err := settle.CheckSpans(p, tc.spans)
			require.ErrorIs(t, err, settle.ErrLocate)
			require.ErrorContains(t, err, tc.want)
		})
	}
	err := settle.CheckSpans(p, []settle.Span{sp("a/b", 0, 1, 0, 1)})
	require.ErrorIs(t, err, cutline.ErrInvalid, "a bad stream name is a bad name too")
}

// The index checks the Locator's spans before it writes anything.
func TestRefIndexLocateChecksSpans(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locateRuns)
	spans, err := x.Locate(runs("a 0 1", "b 0 2"))
	require.NoError(t, err)
	require.Equal(t, []settle.Span{{Stream: "a", Offset: 0, Count: 1, Start: 0, End: 6}, {Stream: "b", Offset: 0, Count: 2, Start: 6, End: 12}}, spans)
	rev := store.Revision()
	for _, p := range [][]byte{runs("a 0 1", "a 1 1"), runs("a 0 1", "b 0 0"), []byte("garbled")} {
		_, err := x.Locate(p)
		require.ErrorIs(t, err, settle.ErrLocate)
		require.ErrorIs(t, x.Cover(ctx, starA, flight(1, 0, p)), settle.ErrLocate)
	}
	require.Equal(t, rev, store.Revision(), "nothing is written for a flight that does not locate")
	// CoverSpan checks what a span says on its own.
	for _, s := range []settle.Span{{Stream: "a", Count: 0}, {Stream: "a", Count: 1, Start: 2, End: 1}, {Stream: "a", Offset: math.MaxUint64, Count: 2}} {
		require.ErrorIs(t, x.CoverSpan(ctx, starA, chain.Position{Epoch: 1}, s), settle.ErrLocate)
	}
	ok := settle.Span{Stream: "a", Count: 1}
	require.ErrorIs(t, x.CoverSpan(ctx, "../star", chain.Position{Epoch: 1}, ok), cutline.ErrInvalid)
	require.ErrorIs(t, x.CoverSpan(ctx, starA, chain.Position{Epoch: 0}, ok), cutline.ErrInvalid, "epoch numbers start at 1")
	require.Equal(t, rev, store.Revision())
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, x.CoverSpan(cctx, starA, chain.Position{Epoch: 1}, ok), context.Canceled)
}

func TestRefIndexBadInput(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("garbled")
	x, _ := newRefIndex(t, func(p []byte) ([]settle.Span, error) {
		switch string(p) {
		case "bad":
			return nil, boom
		case "empty":
			return []settle.Span{{Stream: stream, Offset: 3, Count: 0}}, nil
		case "none":
			return nil, nil
		}
		return []settle.Span{{Stream: string(p), Offset: 0, Count: 1}}, nil
	})
	err := x.Cover(ctx, starA, flight(1, 0, []byte("bad")))
	require.ErrorIs(t, err, settle.ErrLocate)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, x.Cover(ctx, starA, flight(1, 0, []byte("empty"))), settle.ErrLocate, "an empty run covers nothing")
	require.ErrorIs(t, x.Cover(ctx, starA, flight(1, 0, []byte("none"))), settle.ErrLocate, "a flight carries something")
	for _, name := range []string{"", "a/b", "..", ".hidden", "-x", "sp ace", "new\nline", string(make([]byte, 65))} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			err := x.Cover(ctx, starA, flight(1, 0, []byte(name)))
			require.ErrorIs(t, err, cutline.ErrInvalid)
			require.ErrorIs(t, err, settle.ErrLocate)
			_, err = x.Lookup(ctx, name, 0)
			require.ErrorIs(t, err, cutline.ErrInvalid)
			_, err = x.Next(ctx, name)
			require.ErrorIs(t, err, cutline.ErrInvalid)
		})
	}
	for _, err := range x.Refs(ctx, "ok-stream") {
		require.NoError(t, err)
	}

	_, err = settle.NewRefIndex(nil, "", locate)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = settle.NewRefIndex(memstore.New(memstore.Options{}), "", nil)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = settle.NewRefIndex(memstore.New(memstore.Options{}), "no-slash", locate)
	require.ErrorIs(t, err, cutline.ErrInvalid)
}

// A page whose key and body disagree (hand-edited or corrupt) is
// reported, not trusted, by every read.
func TestRefIndexCorruptRef(t *testing.T) {
	ctx := context.Background()
	good := `{"kind":"refpage","format":1,"stream":"s","first":5,"star":"star-a","epoch":1,"next":6,"spans":[[1,3,0,1]]}`
	for name, bad := range map[string]string{
		"not json":         "{not json",
		"other stream":     strings.Replace(good, `"stream":"s"`, `"stream":"t"`, 1),
		"other first":      strings.Replace(good, `"first":5`, `"first":4`, 1),
		"no star":          strings.Replace(good, `"star":"star-a"`, `"star":"../x"`, 1),
		"epoch 0":          strings.Replace(good, `"epoch":1`, `"epoch":0`, 1),
		"no spans":         strings.Replace(good, `"next":6,"spans":[[1,3,0,1]]`, `"next":5,"spans":[]`, 1),
		"empty span":       strings.Replace(good, `[[1,3,0,1]]`, `[[0,3,0,1]]`, 1),
		"bytes backwards":  strings.Replace(good, `[[1,3,0,1]]`, `[[1,3,2,1]]`, 1),
		"slots backwards":  strings.Replace(good, `"next":6,"spans":[[1,3,0,1]]`, `"next":7,"spans":[[1,3,0,1],[1,3,1,2]]`, 1),
		"next disagrees":   strings.Replace(good, `"next":6`, `"next":9`, 1),
		"sealed last page": strings.Replace(good, `"next":6,`, `"next":6,"sealed":true,`, 1),
		"another kind":     strings.Replace(good, `"refpage"`, `"ref"`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			x, store := newRefIndex(t, locate)
			key := "tenant/refpages/s/00000000000000000005"
			_, err := metastore.Put(ctx, store, key, []byte(bad), 0)
			require.NoError(t, err)
			var re *metastore.RecordError
			_, err = x.Next(ctx, stream)
			require.ErrorAs(t, err, &re)
			require.Equal(t, key, re.Key)
			if name != "sealed last page" { // an older page is sealed: Find reads it
				_, err = x.Find(ctx, stream, 5)
				require.ErrorAs(t, err, &re)
			}
			var errs []error
			for _, err := range x.Refs(ctx, stream) {
				errs = append(errs, err)
			}
			require.Len(t, errs, 1)
			require.ErrorAs(t, errs[0], &re)
			require.ErrorAs(t, x.Cover(ctx, starA, flight(1, 9, record(stream, 6, "q"))), &re)
		})
	}
	// The good page reads.
	x, store := newRefIndex(t, locate)
	_, err := metastore.Put(ctx, store, "tenant/refpages/s/00000000000000000005", []byte(good), 0)
	require.NoError(t, err)
	r, err := x.Find(ctx, stream, 5)
	require.NoError(t, err)
	require.Equal(t, chain.Position{Epoch: 1, Slot: 3}, r.Position())
}
