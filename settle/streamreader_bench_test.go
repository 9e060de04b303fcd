package settle_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// countingBucket counts the object reads (Get and GetRange) made through it.
type countingBucket struct {
	objstore.Bucket
	gets atomic.Int64
}

func (b *countingBucket) Get(ctx context.Context, key string) ([]byte, error) {
	b.gets.Add(1)
	return b.Bucket.Get(ctx, key)
}

func (b *countingBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b.gets.Add(1)
	return b.Bucket.GetRange(ctx, key, off, n)
}

// interleaved is a settled epoch of one zone whose every flight bundles
// one record of each of its streams: the layout of a star leading many
// streams, where a consumer of one stream reads one flight per record.
type interleaved struct {
	store   metastore.Store
	zone    *countingBucket
	minter  *epoch.Minter
	zones   chain.Zones
	refs    *settle.RefIndex
	rec     *epoch.Record
	streams int
	slots   uint64
	bytes   int // of one stream's records
}

// layInterleaved writes slots flights of streams records each, recordLen
// bytes a record, and settles the epoch (which covers every flight).
func layInterleaved(tb testing.TB, streams int, slots uint64, recordLen int) *interleaved {
	tb.Helper()
	ctx := context.Background()
	l := &interleaved{store: memstore.New(memstore.Options{}), zone: &countingBucket{Bucket: memblob.New("a")}, streams: streams, slots: slots}
	l.zones = chain.MustZones(l.zone)
	var err error
	l.minter, err = epoch.NewMinter(l.store, epoch.Options{Identity: "bench"})
	require.NoError(tb, err)
	l.refs, err = settle.NewRefIndex(l.store, "", locate)
	require.NoError(tb, err)
	l.rec, err = l.minter.Mint(ctx, starA, epoch.Constants{Class: "standard", Buckets: []string{"a"}, W: 1, Window: 8, Prefix: "chains"})
	require.NoError(tb, err)
	pad := strings.Repeat("x", max(recordLen-len("s0000|000|\"\"\n")-8, 1))
	for s := range slots {
		rs := make([]cutlinetest.BundleRecord, streams)
		for i := range rs {
			rs[i] = cutlinetest.BundleRecord{Stream: fmt.Sprintf("s%04d", i), Offset: s, ID: fmt.Sprintf("%08d%s", s, pad)}
		}
		payload := cutlinetest.Bundle(rs...)
		require.NoError(tb, l.zone.Bucket.Create(ctx, wire.KeysOf(l.rec).Slot(starA, l.rec.Epoch, s), wire.EncodeFlight(starA, l.rec.Epoch, s, payload)))
		spans, err := locate(payload)
		require.NoError(tb, err)
		l.bytes += int(spans[0].End - spans[0].Start)
	}
	f, err := fence.New(l.minter, l.zones, fence.Options{Identity: "bench"})
	require.NoError(tb, err)
	st, err := settle.New(l.minter, l.zones, l.refs, settle.Options{Fencer: f})
	require.NoError(tb, err)
	_, err = st.Settle(ctx, starA, l.rec.Epoch)
	require.NoError(tb, err)
	return l
}

// readStream reads stream i whole and returns the GETs it made per
// record.
func (l *interleaved) readStream(tb testing.TB, r *settle.StreamReader, i int) float64 {
	tb.Helper()
	before := l.zone.gets.Load()
	n := uint64(0)
	for c, err := range r.Read(context.Background(), fmt.Sprintf("s%04d", i), 0) {
		require.NoError(tb, err)
		n += c.Count
	}
	require.Equal(tb, l.slots, n)
	return float64(l.zone.gets.Load()-before) / float64(n)
}

func (l *interleaved) compact(tb testing.TB) settle.CompactReport {
	tb.Helper()
	c, err := settle.NewCompactor(l.minter, l.zones, l.refs, "bench", settle.CompactorOptions{})
	require.NoError(tb, err)
	rep, err := c.Compact(context.Background(), starA, l.rec.Epoch)
	require.NoError(tb, err)
	require.Equal(tb, l.slots, rep.Rewritten)
	return rep
}

// TestStreamReadGets: a consumer of one stream among 200 interleaved ones
// pays one GET per record before compaction and at most 0.01 after.
func TestStreamReadGets(t *testing.T) {
	l := layInterleaved(t, 200, 256, 100)
	r, err := settle.NewStreamReader(l.minter, l.zones, l.refs, settle.StreamReaderOptions{})
	require.NoError(t, err)
	before := l.readStream(t, r, 7)
	require.InDelta(t, 1.0, before, 0.001, "one flight per record")
	l.compact(t)
	after := l.readStream(t, r, 7)
	require.LessOrEqual(t, after, 0.01)
	t.Logf("GETs per record: %.4f before compaction, %.4f after", before, after)
}

// BenchmarkStreamRead: a consumer catches up on one stream of 1,000
// interleaved ones (256 flights, a 100-byte record of every stream in
// each), reading from flights and then, after compaction, from segments.
// It reports object GETs per record and the bytes of the stream read per
// second; "compact" reports the bytes of flights compaction rewrites per
// second and the requests it spends.
//
//	go test -run '^$' -bench StreamRead -benchtime 20x ./settle
func BenchmarkStreamRead(b *testing.B) {
	l := layInterleaved(b, 1000, 256, 100)
	r, err := settle.NewStreamReader(l.minter, l.zones, l.refs, settle.StreamReaderOptions{})
	require.NoError(b, err)
	read := func(b *testing.B) {
		b.SetBytes(int64(l.bytes))
		gets, i := 0.0, 0
		for b.Loop() {
			gets += l.readStream(b, r, i%l.streams)
			i++
		}
		b.ReportMetric(gets/float64(i), "GETs/record")
	}
	b.Run("flights", read)
	b.Run("compact", func(b *testing.B) {
		var rep settle.CompactReport
		start := time.Now()
		for b.Loop() {
			if rep.Passes == 0 { // compaction runs once; later rounds are no-ops
				rep = l.compact(b)
			}
		}
		b.ReportMetric(float64(l.bytes)*float64(l.streams)/time.Since(start).Seconds()/1e6, "MB/s")
		b.ReportMetric(float64(rep.Segments), "segments")
		b.ReportMetric(float64(rep.Reads+rep.Creates), "requests")
	})
	b.Run("segments", read)
}
