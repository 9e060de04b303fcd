package chain_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
)

// What a read costs must not grow with the epoch's length nor with the
// star's past epochs. These tests count object requests and metastore
// keys, which do not depend on the machine; the benchmark reports them
// with the time:
//
//	go test -run '^$' -bench ReadOpen ./chain/

// histStar is a star over a counted metastore and K=3 counted memblob zones.
type histStar struct {
	store  *metacount.Store
	m      *epoch.Minter
	raw    []objstore.Bucket
	zones  []*fault.Bucket
	reader *chain.Reader
	c      epoch.Constants
}

func newHistStar(tb testing.TB, window int) *histStar {
	tb.Helper()
	h := &histStar{store: metacount.Wrap(memstore.New(memstore.Options{}))}
	var err error
	h.m, err = epoch.NewMinter(h.store, epoch.Options{})
	require.NoError(tb, err)
	var views []objstore.Bucket
	for i := range 3 {
		b := memblob.New(fmt.Sprintf("zone-%c", 'a'+i))
		f := fault.Wrap(b, fault.Options{})
		h.raw, h.zones, views = append(h.raw, b), append(h.zones, f), append(views, f)
	}
	h.reader, err = chain.NewReader(h.m, chain.MustZones(views...), chain.ReaderOptions{})
	require.NoError(tb, err)
	h.c = epoch.Constants{Class: "standard", Buckets: chain.Names(h.raw...), W: 2, Window: window, Prefix: "chains"}
	return h
}

// past gives the star n epochs fenced empty and settled.
func (h *histStar) past(tb testing.TB, n int) {
	tb.Helper()
	ctx := bounded(tb)
	for range n {
		rec, err := h.m.Mint(ctx, star, h.c)
		require.NoError(tb, err)
		_, err = h.m.Publish(ctx, star, rec.Epoch, 0)
		require.NoError(tb, err)
		_, err = h.m.MarkSettled(ctx, star, rec.Epoch)
		require.NoError(tb, err)
	}
}

// lay mints an epoch and lays n committed flights in it, two copies each,
// as its writer would have; the epoch stays open with its checkpoint at 0.
func (h *histStar) lay(tb testing.TB, n int) *epoch.Record {
	tb.Helper()
	ctx := bounded(tb)
	rec, err := h.m.Mint(ctx, star, h.c)
	require.NoError(tb, err)
	keys := wire.KeysOf(rec)
	for s := range uint64(n) {
		data := wire.EncodeFlight(star, rec.Epoch, s, payload(int(s)))
		for _, z := range []int{int(s % 3), int(s+1) % 3} {
			require.NoError(tb, h.raw[z].Create(ctx, keys.Slot(star, rec.Epoch, s), data))
		}
	}
	return rec
}

// reads counts the object reads since the last call.
func (h *histStar) reads() int {
	n := 0
	for _, z := range h.zones {
		st := z.Stats()
		n += st.Calls[fault.OpGet] + st.Calls[fault.OpGetRange]
		z.ResetStats()
	}
	return n
}

// TestReadOpenEpochFlatInLength: reading the last flight of an open epoch
// (checkpoint 0) checks a window of slots, not every slot from the
// checkpoint: the same requests after 100 flights as after 10,000.
func TestReadOpenEpochFlatInLength(t *testing.T) {
	const window = 8
	ctx := bounded(t)
	measure := func(n int) int {
		h := newHistStar(t, window)
		rec := h.lay(t, n)
		h.reads()
		p, err := h.reader.Read(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: uint64(n - 1)})
		require.NoError(t, err)
		require.Equal(t, payload(n-1), p)
		return h.reads()
	}
	small, large := measure(100), measure(10_000)
	t.Logf("Read of the last flight of an open epoch: %d object reads after 100 flights, %d after 10,000", small, large)
	require.Equal(t, small, large)
	require.LessOrEqual(t, large, 3*window, "at most a window of slots, K reads each")
}

// TestReadOpenEpochWindow: the slots Read still checks are the last
// window below pos, from the checkpoint; a hole there is still seen, and
// a position below the checkpoint reads.
func TestReadOpenEpochWindow(t *testing.T) {
	const window = 8
	ctx := bounded(t)
	h := newHistStar(t, window)
	rec := h.lay(t, 40)
	keys := wire.KeysOf(rec)
	// Slot 45 is committed after a hole at slot 40..44: not in the chain.
	for s := uint64(45); s < 47; s++ {
		data := wire.EncodeFlight(star, rec.Epoch, s, payload(int(s)))
		for _, z := range []int{0, 1} {
			require.NoError(t, h.raw[z].Create(ctx, keys.Slot(star, rec.Epoch, s), data))
		}
	}
	_, err := h.reader.Read(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: 46})
	require.ErrorIs(t, err, chain.ErrNotCommitted, "a committed slot a window after a hole")
	_, err = h.reader.Read(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: 40})
	require.ErrorIs(t, err, chain.ErrNotCommitted, "the hole")

	cl, err := rec.Claim()
	require.NoError(t, err)
	_, err = cl.Advance(ctx, 30)
	require.NoError(t, err)
	h.reads()
	for _, s := range []uint64{0, 29, 30, 39} {
		p, err := h.reader.Read(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: s})
		require.NoError(t, err, "slot %d", s)
		require.Equal(t, payload(int(s)), p)
	}
	// Slots 0 and 29 lie below the checkpoint: one slot each; 30 is the
	// checkpoint; 39 checks [32, 39).
	require.LessOrEqual(t, h.reads(), 3*(1+1+1+window))

	// Flights from inside the epoch checks the same window below its
	// start, and yields to the end of the committed prefix.
	var got []uint64
	for f, err := range h.reader.Flights(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: 35}) {
		require.NoError(t, err)
		got = append(got, f.Slot)
	}
	require.Equal(t, []uint64{35, 36, 37, 38, 39}, got)
}

// TestReaderFlatInHistory: reading an epoch, from its start or one
// position, reads as many metastore keys after 10 past epochs as after
// 1,000.
func TestReaderFlatInHistory(t *testing.T) {
	ctx := bounded(t)
	measure := func(past int) metacount.Stats {
		h := newHistStar(t, 8)
		h.past(t, past)
		rec := h.lay(t, 5)
		_, err := h.m.Publish(ctx, star, rec.Epoch, 5)
		require.NoError(t, err)
		h.lay(t, 3) // an open epoch after it
		h.store.Reset()
		var got []chain.Position
		for f, err := range h.reader.Flights(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: 2}) {
			require.NoError(t, err)
			got = append(got, f.Position)
		}
		require.Len(t, got, 3+3)
		_, err = h.reader.Read(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: 4})
		require.NoError(t, err)
		return h.store.Stats()
	}
	small, large := measure(10), measure(1000)
	t.Logf("reads after 10 past epochs: %+v; after 1,000: %+v", small, large)
	require.Equal(t, small, large)
	require.Zero(t, large.Lists)
}

// BenchmarkReadOpen: Read of the last flight of an open epoch of n flights
// whose checkpoint is 0 (window 64), on in-memory zones; reads/op are
// object reads.
func BenchmarkReadOpen(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			h := newHistStar(b, 64)
			rec := h.lay(b, n)
			pos := chain.Position{Epoch: rec.Epoch, Slot: uint64(n - 1)}
			h.reads()
			b.ResetTimer()
			for range b.N {
				if _, err := h.reader.Read(ctx, star, pos); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(h.reads())/float64(b.N), "reads/op")
		})
	}
}
