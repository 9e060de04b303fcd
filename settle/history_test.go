package settle_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// A takeover's cost must not grow with the star's history (its past
// epochs) nor with the stream's length (its records). These tests count
// metastore keys and object requests, which do not depend on the machine,
// at two sizes and require them equal; the benchmarks report them, with
// the time, at several sizes:
//
//	go test -run '^$' -bench 'History|StreamLength' ./settle/

// histEnv is a star with its metastore behind a counter and its zones
// behind request counters (no latency), K=3, W=2.
type histEnv struct {
	store   *metacount.Store
	m       *epoch.Minter
	raw     []objstore.Bucket
	counted []*fault.Bucket
	refs    *settle.RefIndex
	s       *settle.Settler
	c       epoch.Constants
	next    uint64        // the stream's next offset
	open    *epoch.Record // the epoch the last cycle minted, for lay
}

func newHistEnv(tb testing.TB, window int) *histEnv {
	tb.Helper()
	store := metacount.Wrap(memstore.New(memstore.Options{}))
	m, err := epoch.NewMinter(store, epoch.Options{})
	require.NoError(tb, err)
	var raw, views []objstore.Bucket
	var counted []*fault.Bucket
	for i := range 3 {
		b := memblob.New(string(rune('a' + i)))
		f := fault.Wrap(b, fault.Options{})
		raw, counted, views = append(raw, b), append(counted, f), append(views, f)
	}
	zones := chain.MustZones(views...)
	f, err := fence.New(m, zones, fence.Options{Identity: starB})
	require.NoError(tb, err)
	refs, err := settle.NewRefIndex(store, "", locate)
	require.NoError(tb, err)
	s, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	require.NoError(tb, err)
	c := epoch.Constants{Class: "standard", Buckets: chain.Names(raw...), W: 2, Window: window, Prefix: "chains"}
	return &histEnv{store: store, m: m, raw: raw, counted: counted, refs: refs, s: s, c: c}
}

// past gives the star n more epochs that were fenced empty and settled,
// through the Minter alone: the history a long-lived star accumulates.
func (h *histEnv) past(tb testing.TB, n int) {
	tb.Helper()
	ctx := context.Background()
	for range n {
		rec, err := h.m.Mint(ctx, starA, h.c)
		require.NoError(tb, err)
		_, err = h.m.Publish(ctx, starA, rec.Epoch, 0)
		require.NoError(tb, err)
		_, err = h.m.MarkSettled(ctx, starA, rec.Epoch)
		require.NoError(tb, err)
	}
}

// unsettled gives the star n more epochs, never fenced or settled, each
// holding one acknowledged flight its host did not cover: writers that
// died one after another.
func (h *histEnv) unsettled(tb testing.TB, n int) {
	tb.Helper()
	for range n {
		h.lay(tb, 1, 1)
	}
}

// lay lays n committed flights of the stream in the epoch the last cycle
// minted, or in a new one (two copies each, straight into the zones), as
// a writer that died after acknowledging them would leave it; the host
// covered and checkpointed all but the last lag.
func (h *histEnv) lay(tb testing.TB, n, lag int) *epoch.Record {
	tb.Helper()
	ctx := context.Background()
	rec := h.open
	h.open = nil
	if rec == nil {
		var err error
		rec, err = h.m.Mint(ctx, starA, h.c)
		require.NoError(tb, err)
	}
	keys := wire.KeysOf(rec)
	for s := range uint64(n) {
		p := record(stream, h.next+s, "x")
		data := wire.EncodeFlight(starA, rec.Epoch, s, p)
		for _, z := range []int{int(s % 3), int(s+1) % 3} {
			require.NoError(tb, h.raw[z].Create(ctx, keys.Slot(starA, rec.Epoch, s), data))
		}
		if s < uint64(n-lag) {
			require.NoError(tb, h.refs.CoverSpan(ctx, starA, chain.Position{Epoch: rec.Epoch, Slot: s},
				settle.Span{Stream: stream, Offset: h.next + s, Count: 1, End: uint64(len(p))}))
		}
	}
	h.next += uint64(n)
	cl, err := rec.Claim()
	require.NoError(tb, err)
	_, err = cl.Advance(ctx, uint64(n-lag))
	require.NoError(tb, err)
	return rec
}

// counts are what one operation asked of the metastore and the zones.
type counts struct {
	meta    metacount.Stats
	objects requestCounts
}

func (h *histEnv) reset() {
	h.store.Reset()
	resetRequests(h.counted)
}

func (h *histEnv) counts() counts {
	return counts{meta: h.store.Stats(), objects: countRequests(h.counted)}
}

// cycle is a star's turnover after a crash, as roll.Open does it: it
// settles the earlier epochs (SettleAll: fence and settle) and mints a
// new one, which the next lay writes.
func (h *histEnv) cycle(tb testing.TB) []settle.SettleReport {
	tb.Helper()
	ctx := context.Background()
	reps, err := h.s.SettleAll(ctx, starA)
	require.NoError(tb, err)
	h.open, err = h.m.Mint(ctx, starA, h.c)
	require.NoError(tb, err)
	return reps
}

// TestSettlementFlatInHistory: one mint and settle cycle (the previous
// epoch holds 8 flights, 3 of them not covered) reads as many metastore
// keys and makes as many requests after 10 past epochs as after 1,000.
func TestSettlementFlatInHistory(t *testing.T) {
	measure := func(past int) counts {
		h := newHistEnv(t, 16)
		h.past(t, past)
		h.lay(t, 8, 3)
		h.reset()
		reps := h.cycle(t)
		require.Len(t, reps, 1)
		require.Equal(t, 3, reps[0].Covered)
		require.Equal(t, uint64(8), reps[0].Cut)
		return h.counts()
	}
	small, large := measure(10), measure(1000)
	t.Logf("after 10 past epochs: %+v; after 1000: %+v", small, large)
	require.Equal(t, small, large, "a cycle's requests grow with the star's history")
	require.Zero(t, large.meta.Lists, "a cycle lists nothing")
}

// TestSettleAllLinearInUnsettled: settling n unsettled epochs reads a
// bounded number of metastore keys per epoch, not a number that grows
// with n (it was quadratic: every settlement listed every record).
func TestSettleAllLinearInUnsettled(t *testing.T) {
	measure := func(n int) metacount.Stats {
		h := newHistEnv(t, 4)
		h.past(t, 100)
		h.unsettled(t, n)
		h.reset()
		reps, err := h.s.SettleAll(context.Background(), starA)
		require.NoError(t, err)
		require.Len(t, reps, n)
		return h.store.Stats()
	}
	small, large := measure(10), measure(200)
	t.Logf("SettleAll over 10 unsettled epochs: %+v; over 200: %+v", small, large)
	perSmall := float64(small.Keys) / 10
	perLarge := float64(large.Keys) / 200
	require.LessOrEqual(t, perLarge, perSmall+1, "keys read per settled epoch grow with the number of epochs")
}

// TestTakeoverFlatInStreamLength: a takeover of an epoch whose host
// checkpointed all but 3 of its flights makes as many object requests and
// reads as many metastore keys with 10 flights as with 10,000.
func TestTakeoverFlatInStreamLength(t *testing.T) {
	measure := func(n int) counts {
		h := newHistEnv(t, 8)
		h.lay(t, n, 3)
		h.reset()
		reps, err := h.s.SettleAll(context.Background(), starA)
		require.NoError(t, err)
		require.Len(t, reps, 1)
		require.Equal(t, 3, reps[0].Covered)
		require.Equal(t, uint64(n), reps[0].Cut)
		next, err := h.refs.Next(context.Background(), stream)
		require.NoError(t, err)
		require.Equal(t, uint64(n), next)
		return h.counts()
	}
	small, large := measure(10), measure(10_000)
	t.Logf("takeover after 10 records: %+v; after 10,000: %+v", small, large)
	require.Equal(t, small.meta, large.meta, "metastore reads grow with the stream")
	// The fence's estimate probes from the checkpoint at growing
	// distances; from the same lag it makes the same probes.
	require.Equal(t, small.objects, large.objects, "object requests grow with the stream")
}

// TestRefIndexNextReadsOneKey: Next reads the stream's last page, one
// key, whatever the number of refs; Find reads two.
func TestRefIndexNextReadsOneKey(t *testing.T) {
	for _, n := range []int{10, 1000} {
		h := newHistEnv(t, 16)
		ctx := context.Background()
		for i := range uint64(n) {
			require.NoError(t, h.refs.CoverSpan(ctx, starA, chain.Position{Epoch: 1, Slot: i}, settle.Span{Stream: stream, Offset: i, Count: 1}))
		}
		h.reset()
		next, err := h.refs.Next(ctx, stream)
		require.NoError(t, err)
		require.Equal(t, uint64(n), next)
		require.Equal(t, metacount.Stats{Floors: 1, Keys: 1}, h.store.Stats(), "Next at %d refs", n)
		h.reset()
		r, err := h.refs.Find(ctx, stream, uint64(n/2))
		require.NoError(t, err)
		require.Equal(t, uint64(n/2), r.Slot)
		require.Equal(t, 2, h.store.Stats().Reads(), "Find at %d refs", n)
	}
}

// BenchmarkHistory: one mint and settle cycle after n past epochs of the
// star, on the in-memory store; keys/op are the metastore keys it read.
func BenchmarkHistory(b *testing.B) {
	for _, past := range []int{10, 1000, 10_000} {
		b.Run(fmt.Sprintf("past=%d", past), func(b *testing.B) {
			h := newHistEnv(b, 16)
			h.past(b, past)
			var total counts
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				h.lay(b, 8, 3)
				h.reset()
				b.StartTimer()
				h.cycle(b)
				b.StopTimer()
				c := h.counts()
				total.meta.Keys += c.meta.Keys
				total.meta.Gets += c.meta.Gets
				total.meta.Lists += c.meta.Lists
				total.objects.reads += c.objects.reads
			}
			b.ReportMetric(float64(total.meta.Keys)/float64(b.N), "keys/op")
			b.ReportMetric(float64(total.meta.Lists)/float64(b.N), "lists/op")
			b.ReportMetric(float64(total.objects.reads)/float64(b.N), "reads/op")
		})
	}
}

// BenchmarkStreamLength: a takeover (fence and settle) of an epoch of n
// flights whose host had checkpointed all but the last 3, on in-memory
// zones; reads/op are object reads, keys/op metastore keys.
func BenchmarkStreamLength(b *testing.B) {
	for _, n := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			var total counts
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				h := newHistEnv(b, 64)
				h.lay(b, n, 3)
				h.reset()
				b.StartTimer()
				if _, err := h.s.SettleAll(context.Background(), starA); err != nil {
					b.Fatal(err)
				}
				if _, err := h.refs.Next(context.Background(), stream); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				c := h.counts()
				total.meta.Keys += c.meta.Keys
				total.objects.reads += c.objects.reads
			}
			b.ReportMetric(float64(total.meta.Keys)/float64(b.N), "keys/op")
			b.ReportMetric(float64(total.objects.reads)/float64(b.N), "reads/op")
		})
	}
}

// BenchmarkSettleAllUnsettled: SettleAll over n unsettled epochs (each
// holding one acknowledged flight its host did not cover), after 100
// settled ones, on the in-memory store; keys/op are the metastore keys
// read by the whole call, keys/epoch per epoch settled.
func BenchmarkSettleAllUnsettled(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("epochs=%d", n), func(b *testing.B) {
			var keys int
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				h := newHistEnv(b, 4)
				h.past(b, 100)
				h.unsettled(b, n)
				h.reset()
				b.StartTimer()
				reps, err := h.s.SettleAll(context.Background(), starA)
				b.StopTimer()
				if err != nil || len(reps) != n {
					b.Fatalf("%d reports, %v", len(reps), err)
				}
				keys += h.store.Stats().Keys
			}
			b.ReportMetric(float64(keys)/float64(b.N), "keys/op")
			b.ReportMetric(float64(keys)/float64(b.N)/float64(n), "keys/epoch")
		})
	}
}
