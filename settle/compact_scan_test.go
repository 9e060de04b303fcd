package settle_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// scanPassSlots is the PassSlots of the slow-stream tests: their first
// 160 flights are four passes.
const scanPassSlots = 40

// fastStreams have a record in every flight; slowStream in a few.
var fastStreams = func() []string {
	var out []string
	for i := range 10 {
		out = append(out, fmt.Sprintf("f%d", i))
	}
	return out
}()

const slowStream = "slow"

// slowWorld is an open epoch of starA whose flights bundle records of the
// fast streams and, now and then, of slowStream, covered and checkpointed
// as its holder goes on.
type slowWorld struct {
	t     *testing.T
	e     *settletest.Env
	p     *settletest.Party
	rec   *epoch.Record
	claim *epoch.Claim
	// at[slot] is the offset of each stream's record in that flight;
	// next the offset each stream goes on at.
	at   []map[string]uint64
	next map[string]uint64
}

func newSlowWorld(t *testing.T) *slowWorld {
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := p.Mint(context.Background(), starA, e.Constants(2, 8))
	cl, err := rec.Claim()
	require.NoError(t, err)
	return &slowWorld{t: t, e: e, p: p, rec: rec, claim: cl, next: map[string]uint64{}}
}

// payload is the bundle of slot s.
func (w *slowWorld) payload(s uint64) []byte {
	var rs []cutlinetest.BundleRecord
	for _, st := range slices.Sorted(maps.Keys(w.at[s])) {
		rs = append(rs, cutlinetest.BundleRecord{Stream: st, Offset: w.at[s][st], ID: fmt.Sprintf("%s-%d", st, s)})
	}
	return cutlinetest.Bundle(rs...)
}

// lay appends flights up to slot to (exclusive), each with a record of
// the fast streams when fast, and of slowStream when slow says so, and
// covers them.
func (w *slowWorld) lay(to uint64, fast bool, slow func(s uint64) bool) {
	w.t.Helper()
	var fs []settle.Placed
	for s := uint64(len(w.at)); s < to; s++ {
		recs := map[string]uint64{}
		if fast {
			for _, st := range fastStreams {
				recs[st] = w.next[st]
				w.next[st]++
			}
		}
		if slow(s) {
			recs[slowStream] = w.next[slowStream]
			w.next[slowStream]++
		}
		w.at = append(w.at, recs)
		p := w.payload(s)
		for z := range w.e.Raw {
			w.e.PutFlight(z, starA, w.rec.Epoch, s, p)
		}
		spans, err := w.p.Refs.Locate(p)
		require.NoError(w.t, err)
		fs = append(fs, settle.Placed{Position: chain.Position{Epoch: w.rec.Epoch, Slot: s}, Spans: spans})
	}
	require.NoError(w.t, w.p.Refs.CoverFlights(context.Background(), starA, fs))
}

func (w *slowWorld) checkpoint(ck uint64) {
	w.t.Helper()
	_, err := w.claim.Advance(context.Background(), ck)
	require.NoError(w.t, err)
}

// readAll reads every stream from its retention point through a new
// StreamReader: each offset once, in order, with its record's bytes.
func (w *slowWorld) readAll() {
	w.t.Helper()
	ctx := context.Background()
	r := newStreamReader(w.t, w.e.NewParty("reader", settletest.PartyOptions{}))
	for _, st := range append(slices.Clone(fastStreams), slowStream) {
		start, err := w.p.Refs.Start(ctx, st)
		require.NoError(w.t, err)
		next := start
		if start < w.next[st] {
			for c, err := range r.Read(ctx, st, start) {
				require.NoError(w.t, err, "%s at %d", st, next)
				require.Equal(w.t, next, c.Offset, st)
				require.Equal(w.t, uint64(1), c.Count)
				require.Equal(w.t, next, w.at[c.Slot][st], "%s/%d names slot %d", st, next, c.Slot)
				spans, err := locate(w.payload(c.Slot))
				require.NoError(w.t, err)
				i := slices.IndexFunc(spans, func(sp settle.Span) bool { return sp.Stream == st })
				require.Equal(w.t, w.payload(c.Slot)[spans[i].Start:spans[i].End], c.Data, "%s/%d", st, next)
				next += c.Count
			}
		}
		require.Equal(w.t, w.next[st], next, "stream %s reads to its end", st)
	}
}

// needed is where the rewritten cursor belongs: the lowest slot a
// retained ref of a page of flights points into, or the checkpoint.
func (w *slowWorld) needed() uint64 {
	w.t.Helper()
	ctx := context.Background()
	rec, err := w.p.Minter.Get(ctx, starA, w.rec.Epoch)
	require.NoError(w.t, err)
	slot, ok, err := w.p.Refs.Needed(ctx, starA, w.rec.Epoch)
	require.NoError(w.t, err)
	if !ok {
		return rec.Cursors.Checkpoint
	}
	return min(slot, rec.Cursors.Checkpoint)
}

// compactor is a compactor of its own party, whose flight reads f counts.
func (w *slowWorld) compactor(name string) (*settle.Compactor, *flightReads) {
	f := &flightReads{w: w, n: map[uint64]int{}}
	q := w.e.NewParty(name, settletest.PartyOptions{Wrap: func(_ int, b objstore.Bucket) objstore.Bucket { return &flightCounter{Bucket: b, f: f} }})
	return newCompactor(w.t, q, name, settle.CompactorOptions{PassSlots: scanPassSlots}), f
}

// compact runs c and checks that the cursor lands where it belongs and
// every record reads back.
func (w *slowWorld) compact(c *settle.Compactor) settle.CompactReport {
	w.t.Helper()
	rep, err := c.Compact(context.Background(), starA, w.rec.Epoch)
	require.NoError(w.t, err)
	require.Equal(w.t, w.needed(), rep.Rewritten, "the cursor stops at the lowest slot a page of flights needs")
	require.Zero(w.t, rep.Lost)
	w.readAll()
	return rep
}

// pages returns the page keys of stream, by whether they name a segment.
func (w *slowWorld) pages(stream string) (segments, flights []string) {
	w.t.Helper()
	for k, seg := range pageSegments(w.t, w.e) {
		if !strings.HasPrefix(k, "refpages/"+stream+"/") {
			continue
		}
		if seg != "" {
			segments = append(segments, k)
		} else {
			flights = append(flights, k)
		}
	}
	slices.Sort(segments)
	slices.Sort(flights)
	return segments, flights
}

// flightReads counts the object reads of each slot of the epoch.
type flightReads struct {
	w  *slowWorld
	mu sync.Mutex
	n  map[uint64]int
}

// take returns the reads counted since the last take, by slot, and
// their sum.
func (f *flightReads) take() (map[uint64]int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, sum := f.n, 0
	for _, n := range out {
		sum += n
	}
	f.n = map[uint64]int{}
	return out, sum
}

type flightCounter struct {
	objstore.Bucket
	f *flightReads
}

func (b *flightCounter) count(key string) {
	if s, ok := b.f.w.e.Keys.ParseSlot(starA, b.f.w.rec.Epoch, key); ok {
		b.f.mu.Lock()
		b.f.n[s]++
		b.f.mu.Unlock()
	}
}

func (b *flightCounter) Get(ctx context.Context, key string) ([]byte, error) {
	b.count(key)
	return b.Bucket.Get(ctx, key)
}

func (b *flightCounter) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b.count(key)
	return b.Bucket.GetRange(ctx, key, off, n)
}

// slotsIn returns the slots of reads in [lo, hi), in order.
func slotsIn(reads map[uint64]int, lo, hi uint64) []uint64 {
	var out []uint64
	for s := range reads {
		if s >= lo && s < hi {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func slotRange(lo, hi uint64) []uint64 {
	var out []uint64
	for s := lo; s < hi; s++ {
		out = append(out, s)
	}
	return out
}

// slowEarly are the slots of slowStream's records among the first 160
// flights: its last page holds them all, from slot 5 on.
func slowEarly(s uint64) bool { return s == 5 || s == 50 || s == 100 || s == 150 }

// slowScenario is an open epoch where slowStream's last page stays open
// while the fast streams fill pages over four passes of flights; then
// slowStream's page fills and is sealed. compactor gives the compactor of
// each call. It returns the report and the flight reads of each call.
func slowScenario(t *testing.T, compactor func(w *slowWorld) (*settle.Compactor, *flightReads)) (reps []settle.CompactReport, reads []map[uint64]int) {
	w := newSlowWorld(t)
	run := func() {
		c, f := compactor(w)
		f.take()
		reps = append(reps, w.compact(c))
		r, _ := f.take()
		reads = append(reads, r)
	}
	// 1. 160 flights: each fast stream's pages [0, 64) and [64, 128) are
	// sealed, [128, 160) is its last; slowStream's last page holds slots
	// 5, 50, 100 and 150.
	w.lay(160, true, slowEarly)
	w.checkpoint(160)
	run()
	require.Equal(t, uint64(5), reps[0].Rewritten)
	for _, st := range fastStreams {
		segs, flights := w.pages(st)
		require.Len(t, segs, 2, "%s's sealed pages are compacted, past the pass that holds slot 5", st)
		require.Equal(t, []string{fmt.Sprintf("refpages/%s/%020d", st, 128)}, flights)
	}
	// 2. Nothing new.
	run()
	require.Equal(t, uint64(5), reps[1].Rewritten)
	// 3. slowStream fills its page (slots 160 to 219) and starts another
	// at slot 256, which seals it; the fast streams' pages [128, 192) and
	// [192, 256) are sealed by slot 256 too. The checkpoint stops below
	// slot 256, the only slot of a page still open.
	w.lay(257, true, func(s uint64) bool { return s < 220 || s == 256 })
	w.checkpoint(256)
	run()
	require.Equal(t, uint64(256), reps[2].Rewritten)
	segs, flights := w.pages(slowStream)
	require.Len(t, segs, 1)
	require.Equal(t, []string{fmt.Sprintf("refpages/%s/%020d", slowStream, 64)}, flights)
	// 4. Nothing new again.
	run()
	require.Equal(t, uint64(256), reps[3].Rewritten)

	tr, err := w.p.Settler.TrimRewritten(context.Background(), starA, w.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(256), tr.Trimmed)
	w.readAll()
	c, _ := compactor(w)
	col, err := c.Collect(context.Background(), starA, w.rec.Epoch)
	require.NoError(t, err)
	require.Zero(t, col.Garbage)
	requireNoGarbage(t, w.e, 2)
	return reps, reads
}

// TestCompactScansPastHeldPages: one Compactor, called again and again on
// an open epoch whose slow stream keeps its last page open, compacts every
// sealed page of the other streams past the passes that page holds back,
// reads no flight when nothing is new, and once the slow page is sealed
// reads only the flights of the pages it compacts.
func TestCompactScansPastHeldPages(t *testing.T) {
	var c *settle.Compactor
	var f *flightReads
	reps, reads := slowScenario(t, func(w *slowWorld) (*settle.Compactor, *flightReads) {
		if c == nil {
			c, f = w.compactor("compactor-1")
		}
		return c, f
	})
	for i, rep := range reps {
		n := 0
		for _, k := range reads[i] {
			n += k
		}
		t.Logf("call %d: rewritten %d scanned %d passes %d pages %d flight reads %d (%d slots)", i+1, rep.Rewritten, rep.Scanned, rep.Passes, rep.Pages, n, len(reads[i]))
	}

	require.Equal(t, slotRange(0, 160), slotsIn(reads[0], 0, noEnd), "the first call reads every flight")
	require.Equal(t, uint64(160), reps[0].Scanned)
	require.Equal(t, 2*len(fastStreams), reps[0].Pages)

	require.Empty(t, reads[1], "a call with nothing new reads no flight")
	require.Zero(t, reps[1].Reads+reps[1].Pages+reps[1].Creates)

	// Below the last scan, only the flights of the pages sealed since: the
	// slow page's, and the fast pages' [128, 192).
	want := append([]uint64{5, 50, 100}, slotRange(128, 160)...) // 150 among them
	require.Equal(t, want, slotsIn(reads[2], 0, 160))
	require.Equal(t, slotRange(160, 256), slotsIn(reads[2], 160, noEnd), "the new flights below the checkpoint")
	require.Equal(t, 1+2*len(fastStreams), reps[2].Pages)

	require.Empty(t, reads[3])
	require.Zero(t, reps[3].Reads+reps[3].Pages)
}

const noEnd = ^uint64(0)

// TestCompactScanFresh: a Compactor made anew for every call, which
// remembers nothing, moves the cursor where the one that remembers does
// at every step, and compacts the same pages.
func TestCompactScanFresh(t *testing.T) {
	i := 0
	fresh, freshReads := slowScenario(t, func(w *slowWorld) (*settle.Compactor, *flightReads) {
		i++
		return w.compactor(fmt.Sprintf("fresh-%d", i))
	})
	var c *settle.Compactor
	var f *flightReads
	kept, _ := slowScenario(t, func(w *slowWorld) (*settle.Compactor, *flightReads) {
		if c == nil {
			c, f = w.compactor("compactor-1")
		}
		return c, f
	})
	require.Len(t, fresh, len(kept))
	for i := range fresh {
		require.Equal(t, kept[i].Rewritten, fresh[i].Rewritten, "call %d", i+1)
		require.Equal(t, kept[i].Pages, fresh[i].Pages, "call %d", i+1)
	}
	// Remembering nothing, a call with nothing new reads again the
	// flights from the cursor on.
	require.Equal(t, slotRange(5, 160), slotsIn(freshReads[1], 0, noEnd))
}

// TestCompactStaleScan: what a Compactor remembers of an epoch goes stale
// when another compactor rewrites the pages it left, when retention
// passes them, and when another compactor moves the cursor past it. Each
// is found out, the cursor lands where it belongs, and every record
// reads back.
func TestCompactStaleScan(t *testing.T) {
	ctx := context.Background()
	w := newSlowWorld(t)
	w.lay(160, true, slowEarly)
	w.checkpoint(160)
	c1, f1 := w.compactor("compactor-1")
	c3, f3 := w.compactor("compactor-3")
	require.Equal(t, uint64(5), w.compact(c1).Rewritten)
	require.Equal(t, uint64(5), w.compact(c3).Rewritten)
	f1.take()
	f3.take()

	// Another compactor rewrites the fast pages c1 left held (sealed since
	// by the holder), while slowStream still holds the cursor.
	w.lay(257, true, func(uint64) bool { return false })
	w.checkpoint(256)
	c2, _ := w.compactor("compactor-2")
	rep := w.compact(c2)
	require.Equal(t, uint64(5), rep.Rewritten)
	require.Equal(t, 2*len(fastStreams), rep.Pages)
	rep = w.compact(c1)
	require.Equal(t, uint64(5), rep.Rewritten)
	require.Zero(t, rep.Pages)
	reads, _ := f1.take()
	require.Equal(t, slotRange(160, 256), slotsIn(reads, 0, noEnd), "c1 reads the new flights only: the pages it held are rewritten")

	// Retention passes every offset of slowStream: its page, the stream's
	// last, stays, and holds nothing back.
	_, err := w.p.Refs.Retain(ctx, slowStream, w.next[slowStream])
	require.NoError(t, err)
	rep = w.compact(c1)
	require.Equal(t, uint64(256), rep.Rewritten)
	require.Zero(t, rep.Pages)
	reads, _ = f1.take()
	require.Empty(t, reads, "the cursor moves on what c1 remembers and reads again in the metastore")

	// c3 remembers the cursor at 5, which c1 moved past: it scans from
	// the cursor, where nothing is left.
	rep = w.compact(c3)
	require.Equal(t, uint64(256), rep.Rewritten)
	require.Zero(t, rep.Pages)
	reads, _ = f3.take()
	require.Empty(t, reads)

	tr, err := w.p.Settler.TrimRewritten(ctx, starA, w.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(256), tr.Trimmed)
	w.readAll()
	_, err = c1.Collect(ctx, starA, w.rec.Epoch)
	require.NoError(t, err)
	requireNoGarbage(t, w.e, 2)
}
