package settle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/readlog"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// bigRecord is a record of n payload bytes, "<stream>|<offset>|" and
// filler, which locateHead reads without copying the filler.
func bigRecord(stream string, offset uint64, n int) []byte {
	p := make([]byte, n)
	head := fmt.Appendf(nil, "%s|%d|", stream, offset)
	copy(p, head)
	for i := len(head); i < n; i++ {
		p[i] = 'x'
	}
	return p
}

// locateHead is a Locator for record and bigRecord payloads that reads
// only their head: one span over the whole payload.
func locateHead(p []byte) ([]settle.Span, error) {
	i := bytes.IndexByte(p, '|')
	if i < 0 {
		return nil, errors.New("no stream")
	}
	j := bytes.IndexByte(p[i+1:], '|')
	if j < 0 {
		return nil, errors.New("no offset")
	}
	off, err := strconv.ParseUint(string(p[i+1:i+1+j]), 10, 64)
	if err != nil {
		return nil, err
	}
	return []settle.Span{{Stream: string(p[:i]), Offset: off, Count: 1, Start: 0, End: uint64(len(p))}}, nil
}

// bigEpoch is a dead writer's epoch laid out for a successor: slots
// [0, small) hold small flights in every zone, slot small a flight of
// big's payload in the zones copies names, and nothing past it. The host
// covered none of them.
type bigEpoch struct {
	settler *settle.Settler
	refs    *settle.RefIndex
	zones   []objstore.Bucket
	rec     *epoch.Record
	small   uint64
	size    int // the big flight's object size
}

func layBigEpoch(tb testing.TB, zones []objstore.Bucket, small uint64, big []byte, copies ...int) *bigEpoch {
	tb.Helper()
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := m.Mint(ctx, starA, epoch.Constants{Class: "standard", Buckets: chain.Names(zones...), W: 2, Window: 8, Prefix: "chains"})
	if err != nil {
		tb.Fatal(err)
	}
	keys := wire.KeysOf(rec)
	put := func(slot uint64, payload []byte, zs ...int) int {
		data := wire.EncodeFlight(starA, rec.Epoch, slot, payload)
		for _, z := range zs {
			if err := zones[z].Create(ctx, keys.Slot(starA, rec.Epoch, slot), data); err != nil {
				tb.Fatal(err)
			}
		}
		return len(data)
	}
	for s := range small {
		put(s, record(stream, s, "x"), 0, 1, 2)
	}
	size := put(small, big, copies...)
	refs, err := settle.NewRefIndex(store, "", locateHead)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := fence.New(m, chain.MustZones(zones...), fence.Options{Identity: starB})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := settle.New(m, chain.MustZones(zones...), refs, settle.Options{Fencer: f})
	if err != nil {
		tb.Fatal(err)
	}
	return &bigEpoch{settler: s, refs: refs, zones: zones, rec: rec, small: small, size: size}
}

// check checks a settlement's outcome: the cut past the big flight, and
// every flight covered.
func (e *bigEpoch) check(tb testing.TB, rep settle.SettleReport, err error) {
	tb.Helper()
	ctx := context.Background()
	if err != nil {
		tb.Fatal(err)
	}
	if rep.Cut != e.small+1 || rep.Covered != int(e.small)+1 {
		tb.Fatalf("cut %d, covered %d: want %d, %d", rep.Cut, rep.Covered, e.small+1, e.small+1)
	}
	next, err := e.refs.Next(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	if next != e.small+1 {
		tb.Fatalf("stream covered up to %d, want %d", next, e.small+1)
	}
}

// TestSettleReadsALargeFlightWholeWTimes: settling a dead writer's epoch
// (K=3, W=2) whose last committed flight is large reads that flight whole
// W times in all, in two zones, once each: the fence verifies two copies,
// reads at most a bounded part of the third, and coverage takes the copy
// the fence read instead of reading the flight again. The same holds
// wherever the writer's copies landed.
func TestSettleReadsALargeFlightWholeWTimes(t *testing.T) {
	big := bigRecord(stream, 7, 1<<20)
	for _, copies := range [][]int{{0, 1, 2}, {0, 1}, {1, 2}, {0, 2}} {
		t.Run(fmt.Sprint(copies), func(t *testing.T) {
			var counters []*readlog.Bucket
			var zones []objstore.Bucket
			for _, name := range []string{"a", "b", "c"} {
				c := readlog.Wrap(memblob.New(name))
				counters = append(counters, c)
				zones = append(zones, c)
			}
			e := layBigEpoch(t, zones, 7, big, copies...)
			rep, err := e.settler.Settle(context.Background(), starA, e.rec.Epoch)
			e.check(t, rep, err)
			key := wire.KeysOf(e.rec).Slot(starA, e.rec.Epoch, 7)
			whole, read := 0, 0
			for z, c := range counters {
				require.LessOrEqual(t, c.Whole(key), 1, "zone %d reads the large flight whole once at most", z)
				whole += c.Whole(key)
				read += c.Bytes(key)
			}
			require.Equal(t, 2, whole, "the large flight read whole W times")
			require.LessOrEqual(t, read, 2*e.size+e.size/2, "bytes read of the large flight")
			require.Equal(t, rep.Covered, rep.Kept, "coverage took every flight from the fence")
		})
	}
}

// BenchmarkSettle64MiB: a successor fences and settles a dead writer's
// epoch (K=3, W=2, in-memory zones and metastore) whose last committed
// flight is 64 MiB (wire.MaxPayload), after seven small ones; the host
// covered none of them. copies is how many zones hold the big flight.
// alloc-x-flight is the bytes allocated per settlement over the big
// flight's size: the fence verifies W copies, read whole, and coverage
// takes one of them instead of reading the flight again.
//
//	go test -run '^$' -bench Settle64MiB -benchmem ./settle/
func BenchmarkSettle64MiB(b *testing.B) {
	big := bigRecord(stream, 7, wire.MaxPayload)
	for _, copies := range [][]int{{0, 1, 2}, {0, 1}} {
		b.Run(fmt.Sprintf("copies=%d", len(copies)), func(b *testing.B) {
			b.ReportAllocs()
			var ms runtime.MemStats
			var allocated uint64
			size := 0
			for range b.N {
				b.StopTimer()
				e := layBigEpoch(b, []objstore.Bucket{memblob.New("a"), memblob.New("b"), memblob.New("c")}, 7, big, copies...)
				size = e.size
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.TotalAlloc
				b.StartTimer()
				rep, err := e.settler.Settle(context.Background(), starA, e.rec.Epoch)
				b.StopTimer()
				runtime.ReadMemStats(&ms)
				allocated += ms.TotalAlloc - before
				e.check(b, rep, err)
				b.StartTimer()
			}
			b.ReportMetric(float64(allocated)/float64(b.N)/float64(size), "alloc-x-flight")
		})
	}
}
