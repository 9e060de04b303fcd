package settle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// bundleStreams are the streams the compaction tests interleave: each
// flight carries one record of each.
var bundleStreams = []string{"s0", "s1", "s2"}

// bundle is the payload of slot s: record s of every stream.
func bundle(s uint64) []byte {
	var rs []cutlinetest.BundleRecord
	for _, st := range bundleStreams {
		rs = append(rs, cutlinetest.BundleRecord{Stream: st, Offset: s, ID: fmt.Sprintf("%s-%d", st, s)})
	}
	return cutlinetest.Bundle(rs...)
}

// layBundles mints an epoch of starA whose slots [0, n) hold bundles in
// every zone and, when settled, fences and settles it (which covers every
// flight and moves the checkpoint to n).
func layBundles(t testing.TB, e *settletest.Env, p *settletest.Party, n uint64, settled bool) *epoch.Record {
	t.Helper()
	ctx := context.Background()
	rec, err := p.Minter.Mint(ctx, starA, e.Constants(2, 8))
	require.NoError(t, err)
	for s := range n {
		for z := range e.Raw {
			e.PutFlight(z, starA, rec.Epoch, s, bundle(s))
		}
	}
	if settled {
		_, err := p.Settler.Settle(ctx, starA, rec.Epoch)
		require.NoError(t, err)
	}
	return rec
}

// wantChunk is the bytes a stream's record s reads as: its line of
// bundle(s).
func wantChunk(t testing.TB, stream string, s uint64) []byte {
	t.Helper()
	p := bundle(s)
	spans, err := locate(p)
	require.NoError(t, err)
	for _, sp := range spans {
		if sp.Stream == stream {
			return p[sp.Start:sp.End]
		}
	}
	t.Fatalf("no span of %s in slot %d", stream, s)
	return nil
}

// readAll reads every stream from 0 and checks each chunk's bytes; it
// returns how many chunks came from segments.
func readAll(t testing.TB, r *settle.StreamReader, n uint64) (fromSegments int) {
	t.Helper()
	for _, st := range bundleStreams {
		next := uint64(0)
		for c, err := range r.Read(context.Background(), st, 0) {
			require.NoError(t, err, "%s at %d", st, next)
			require.Equal(t, next, c.Offset, st)
			require.Equal(t, wantChunk(t, st, c.Slot), c.Data, "%s/%d", st, c.Offset)
			next = c.Offset + c.Count
			if c.InSegment() {
				fromSegments++
			}
		}
		require.Equal(t, n, next, "stream %s reads to its end", st)
	}
	return fromSegments
}

func newCompactor(t testing.TB, p *settletest.Party, id string, opts settle.CompactorOptions) *settle.Compactor {
	t.Helper()
	c, err := settle.NewCompactor(p.Minter, p.Zones, p.Refs, id, opts)
	require.NoError(t, err)
	return c
}

func newStreamReader(t testing.TB, p *settletest.Party) *settle.StreamReader {
	t.Helper()
	r, err := settle.NewStreamReader(p.Minter, p.Zones, p.Refs, settle.StreamReaderOptions{})
	require.NoError(t, err)
	return r
}

// pageSegments returns the segment every page of the index names ("" for
// a page of flights), by page key.
func pageSegments(t testing.TB, e *settletest.Env) map[string]string {
	t.Helper()
	kvs, _, err := e.Store.List(context.Background(), "refpages/")
	require.NoError(t, err)
	out := map[string]string{}
	for _, kv := range kvs {
		var pg struct {
			Format  int    `json:"format"`
			Segment string `json:"segment"`
		}
		require.NoError(t, json.Unmarshal(kv.Value, &pg))
		out[kv.Key] = pg.Segment
		if pg.Segment == "" {
			require.Equal(t, 1, pg.Format, "a page of flights stays in format 1: %s", kv.Key)
		} else {
			require.Equal(t, 2, pg.Format, "a page of segments is format 2: %s", kv.Key)
		}
	}
	return out
}

// segmentObjects lists the segment objects of starA in zone z.
func segmentObjects(t testing.TB, e *settletest.Env, z int) []string {
	t.Helper()
	var out []string
	for o, err := range objstore.All(context.Background(), e.Raw[z], e.Keys.Prefix+"/"+starA+"/segments/") {
		require.NoError(t, err)
		out = append(out, o.Key)
	}
	return out
}

// requireNoGarbage checks that every segment object in every zone is named
// by some page, and every named segment exists in at least W zones.
func requireNoGarbage(t testing.TB, e *settletest.Env, w int) {
	t.Helper()
	named := map[string]bool{}
	for _, seg := range pageSegments(t, e) {
		if seg != "" {
			named[seg] = true
		}
	}
	copies := map[string]int{}
	for z := range e.Raw {
		for _, k := range segmentObjects(t, e, z) {
			require.True(t, named[k], "segment %s in zone %d is garbage", k, z)
			copies[k]++
		}
	}
	for k := range named {
		require.GreaterOrEqual(t, copies[k], w, "named segment %s has %d copies", k, copies[k])
	}
}

// TestCompact: a settled epoch of 200 flights, each bundling a record of
// three streams, is compacted: every page moves onto segments, the
// rewritten cursor reaches the checkpoint, the flights are trimmed below
// it, and every stream reads the same bytes before, after, and after the
// trim, from segments.
func TestCompact(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 200, true)
	r := newStreamReader(t, p)
	require.Zero(t, readAll(t, r, 200), "before compaction every chunk comes from a flight")

	c := newCompactor(t, p, "compactor-1", settle.CompactorOptions{SegmentBytes: 1 << 10})
	rep, err := c.Compact(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(200), rep.Rewritten)
	require.Equal(t, 12, rep.Pages, "each stream's 200 spans fill four pages")
	require.Greater(t, rep.Segments, len(bundleStreams), "SegmentBytes splits a stream's pages over several segments")
	require.Zero(t, rep.Lost)
	for k, seg := range pageSegments(t, e) {
		require.NotEmpty(t, seg, "page %s moved", k)
	}
	require.Equal(t, 3*200, readAll(t, r, 200))
	requireNoGarbage(t, e, 2)

	again, err := c.Compact(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Zero(t, again.Pages+again.Segments+again.Creates, "a compacted epoch is a no-op")

	tr, err := p.Settler.TrimRewritten(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(200), tr.Trimmed)
	require.Equal(t, 3*200, tr.Deleted)
	require.Equal(t, 3*200, readAll(t, newStreamReader(t, e.NewParty("reader", settletest.PartyOptions{})), 200))

	slot, ok, err := p.Refs.Needed(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.False(t, ok, "no ref needs a flight of the epoch (lowest %d)", slot)

	col, err := c.Collect(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, rep.Segments, col.Segments)
	require.Zero(t, col.Garbage)

	// The old Refs still name the flights the runs were covered in.
	refs := settletest.RefsOf(t, p.Refs, "s1")
	require.Len(t, refs, 200)
	require.Equal(t, uint64(17), refs[17].Slot)
}

// TestCompactOpenEpoch: in an open epoch, the compactor leaves each
// stream's last page to the holder, who still appends to it, and the
// rewritten cursor stops below it; what the holder covers next goes on
// after the pages of segments.
func TestCompactOpenEpoch(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 150, false)
	cover := func(from, to uint64) {
		var fs []settle.Placed
		for s := from; s < to; s++ {
			spans, err := p.Refs.Locate(bundle(s))
			require.NoError(t, err)
			fs = append(fs, settle.Placed{Position: chain.Position{Epoch: rec.Epoch, Slot: s}, Spans: spans})
		}
		require.NoError(t, p.Refs.CoverFlights(ctx, starA, fs))
	}
	cover(0, 140)
	cl, err := rec.Claim()
	require.NoError(t, err)
	_, err = cl.Advance(ctx, 140)
	require.NoError(t, err)

	c := newCompactor(t, p, "compactor-1", settle.CompactorOptions{})
	rep, err := c.Compact(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(128), rep.Rewritten, "the head pages [128, 140) stay with the holder")
	require.Equal(t, 2*len(bundleStreams), rep.Pages)

	cover(140, 150) // the holder goes on, into its head pages
	_, err = cl.Advance(ctx, 150)
	require.NoError(t, err)
	r := newStreamReader(t, p)
	require.Equal(t, 3*128, readAll(t, r, 150), "offsets [0, 128) of each stream read from segments")
	tr, err := p.Settler.TrimRewritten(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(128), tr.Trimmed)
	require.Equal(t, 3*128, readAll(t, r, 150))
}

// TestCompactRace: two compactors race on one epoch, with a third
// stream reader reading meanwhile. Each page is moved once, the cursor
// reaches the checkpoint, every read finds its bytes, and what the loser
// wrote is deleted at once or by Collect.
func TestCompactRace(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 300, true)
	var g errgroup.Group
	reps := make([]settle.CompactReport, 2)
	for i := range reps {
		q := e.NewParty(fmt.Sprintf("compactor-%d", i), settletest.PartyOptions{})
		c := newCompactor(t, q, fmt.Sprintf("compactor-%d", i), settle.CompactorOptions{PassSlots: 50})
		g.Go(func() (err error) {
			reps[i], err = c.Compact(ctx, starA, rec.Epoch)
			return err
		})
	}
	reader := newStreamReader(t, e.NewParty("reader", settletest.PartyOptions{}))
	var reads sync.WaitGroup
	reads.Go(func() { readAll(t, reader, 300) })
	require.NoError(t, g.Wait())
	reads.Wait()
	for i, rep := range reps {
		require.Equal(t, uint64(300), rep.Rewritten, "compactor %d", i)
	}
	require.Equal(t, 3*5, reps[0].Pages+reps[1].Pages, "each page moves once: 300 spans of a stream are five pages")
	col, err := newCompactor(t, p, "collector", settle.CompactorOptions{}).Collect(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	requireNoGarbage(t, e, 2)
	require.Equal(t, 3*300, readAll(t, reader, 300))
	t.Logf("pages %d+%d, lost %d+%d, dropped %d+%d, collected %d", reps[0].Pages, reps[1].Pages, reps[0].Lost, reps[1].Lost, reps[0].Dropped, reps[1].Dropped, col.Garbage)
}

// TestCompactUnverifiedSegment: a zone that keeps other bytes than it was
// given, and another that is down, leave a segment one verified copy
// short of W: no page names it, the cursor stays, and once the zones
// recover a later pass compacts and Collect deletes the bad segment.
func TestCompactUnverifiedSegment(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 64, true)
	var broken sync.Mutex
	bad := true
	q := e.NewParty("compactor", settletest.PartyOptions{Wrap: func(i int, b objstore.Bucket) objstore.Bucket {
		if i == 0 {
			return b
		}
		return &flakyBucket{Bucket: b, down: i == 2, mu: &broken, on: &bad}
	}})
	c := newCompactor(t, q, "compactor-1", settle.CompactorOptions{})
	_, err := c.Compact(ctx, starA, rec.Epoch)
	require.ErrorIs(t, err, settle.ErrSegment)
	var se *settle.SegmentError
	require.ErrorAs(t, err, &se)
	for k, seg := range pageSegments(t, e) {
		require.Empty(t, seg, "page %s names no unverified segment", k)
	}
	got, err := p.Minter.Get(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Zero(t, got.Cursors.Rewritten)

	broken.Lock()
	bad = false
	broken.Unlock()
	rep, err := c.Compact(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(64), rep.Rewritten)
	col, err := c.Collect(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, len(bundleStreams), col.Garbage, "the unverified segments are garbage")
	requireNoGarbage(t, e, 2)
	require.Equal(t, 3*64, readAll(t, newStreamReader(t, p), 64))
}

// flakyBucket, while on, stores segments with a flipped byte (or refuses
// them when down); slot objects pass through.
type flakyBucket struct {
	objstore.Bucket
	down bool
	mu   *sync.Mutex
	on   *bool
}

func (b *flakyBucket) Create(ctx context.Context, key string, data []byte) error {
	b.mu.Lock()
	on := *b.on
	b.mu.Unlock()
	if !on || !strings.Contains(key, "/segments/") {
		return b.Bucket.Create(ctx, key, data)
	}
	if b.down {
		return &objstore.OpError{Op: "create", Bucket: b.Name(), Key: key, Err: objstore.Unavailable(settletest.ErrCrashed)}
	}
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 0xff
	return b.Bucket.Create(ctx, key, bad)
}

// TestCompactorOptions: a bad identity or bad options are refused, naming
// the field.
func TestCompactorOptions(t *testing.T) {
	e := settletest.NewMem(t, 1)
	p := e.NewParty("host", settletest.PartyOptions{})
	for _, c := range []struct {
		identity string
		opts     settle.CompactorOptions
		field    string
	}{
		{"", settle.CompactorOptions{}, "identity"},
		{"a/b", settle.CompactorOptions{}, "identity"},
		{"c", settle.CompactorOptions{SegmentBytes: -1}, "SegmentBytes"},
		{"c", settle.CompactorOptions{PassSlots: settle.MaxPassSlots + 1}, "PassSlots"},
	} {
		_, err := settle.NewCompactor(p.Minter, p.Zones, p.Refs, c.identity, c.opts)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, "%q %+v", c.identity, c.opts)
		require.Equal(t, c.field, ce.Field, "%q %+v", c.identity, c.opts)
	}
	_, err := settle.NewStreamReader(p.Minter, p.Zones, p.Refs, settle.StreamReaderOptions{ReadAhead: -1})
	require.Error(t, err)
}

// TestCompactRacesHolder: the holder covers and checkpoints an open
// epoch ten flights at a time while a compactor compacts it over and over.
// Neither loses a write: the holder's covers land after the moved pages,
// and every offset reads back with its bytes.
func TestCompactRacesHolder(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 300, false)
	cl, err := rec.Claim()
	require.NoError(t, err)
	q := e.NewParty("compactor", settletest.PartyOptions{})
	c := newCompactor(t, q, "compactor-1", settle.CompactorOptions{PassSlots: 32})
	done := make(chan struct{})
	var g errgroup.Group
	g.Go(func() error {
		defer close(done)
		for from := uint64(0); from < 300; from += 10 {
			var fs []settle.Placed
			for s := from; s < from+10; s++ {
				spans, err := p.Refs.Locate(bundle(s))
				if err != nil {
					return err
				}
				fs = append(fs, settle.Placed{Position: chain.Position{Epoch: rec.Epoch, Slot: s}, Spans: spans})
			}
			if err := p.Refs.CoverFlights(ctx, starA, fs); err != nil {
				return err
			}
			if _, err := cl.Advance(ctx, from+10); err != nil {
				return err
			}
		}
		return nil
	})
	g.Go(func() error {
		for {
			if _, err := c.Compact(ctx, starA, rec.Epoch); err != nil {
				return err
			}
			select {
			case <-done:
				return nil
			default:
			}
		}
	})
	require.NoError(t, g.Wait())
	rep, err := c.Compact(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(256), rep.Rewritten, "each stream's head page [256, 300) stays with the holder")
	require.Equal(t, 3*256, readAll(t, newStreamReader(t, e.NewParty("reader", settletest.PartyOptions{})), 300))
	_, err = c.Collect(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	requireNoGarbage(t, e, 2)
}
