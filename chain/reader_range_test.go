package chain_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
)

// TestReaderRange: Range yields exactly [from, to) of a fenced epoch, in
// order, with ReadAhead reads in flight from the first, RangeHaving reads
// none of the slots the caller holds, and both refuse a range they cannot
// serve before reading anything.
func TestReaderRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3, func(i int, b objstore.Bucket) objstore.Bucket { return b })
		ctx := context.Background()
		rec := e.mint(2, 8)
		e.writeAll(rec, 0, 40)
		// The writer skips a bucket's copy of a slot already committed
		// when its turn comes, and a missing copy costs Range a read at
		// another bucket: give every bucket its copy, so that the count
		// below is exact.
		for s := range uint64(40) {
			data := wire.EncodeFlight(rec.Star, rec.Epoch, s, payload(int(s)))
			for _, b := range e.mems {
				if err := b.Create(ctx, e.key(rec, s), data); !errors.Is(err, objstore.ErrExists) {
					require.NoError(t, err)
				}
			}
		}
		rec = e.publish(rec, 40)
		const ahead = 8
		r, err := chain.NewReader(e.minter, chain.MustZones(e.buckets...), chain.ReaderOptions{ReadAhead: ahead})
		require.NoError(t, err)
		gets := func() (n int) {
			for _, fb := range e.faults {
				n += fb.Stats().Calls[fault.OpGet]
				fb.ResetStats()
			}
			return n
		}
		gets()

		var got []chain.Flight
		for f, err := range r.Range(ctx, rec, 5, 35) {
			require.NoError(t, err)
			got = append(got, f)
		}
		want := make([]chain.Flight, 0, 30)
		for s := 5; s < 35; s++ {
			want = append(want, flight(rec.Epoch, uint64(s), s))
		}
		requireFlights(t, got, want...)
		require.Equal(t, 30, gets(), "one whole read per flight, none past the range")

		// RangeHaving yields the slots the caller holds as they are,
		// without reading them, asking for each once.
		held := map[uint64][]byte{7: []byte("held 7"), 8: []byte("held 8"), 20: []byte("held 20")}
		asked := map[uint64]int{}
		var mu sync.Mutex
		got = got[:0]
		for f, err := range r.RangeHaving(ctx, rec, 5, 35, func(s uint64) ([]byte, bool) {
			mu.Lock()
			defer mu.Unlock()
			asked[s]++
			p, ok := held[s]
			return p, ok
		}) {
			require.NoError(t, err)
			got = append(got, f)
		}
		for _, s := range []uint64{7, 8, 20} {
			want[s-5] = chain.Flight{Position: chain.Position{Epoch: rec.Epoch, Slot: s}, Payload: held[s]}
			require.Equal(t, 1, asked[s], "slot %d", s)
		}
		require.Len(t, asked, 30, "every slot asked for once")
		requireFlights(t, got, want...)
		require.Equal(t, 27, gets(), "no read of a held slot")

		// An early stop reads at most ReadAhead past what it took.
		for range r.Range(ctx, rec, 0, 40) {
			break
		}
		require.LessOrEqual(t, gets(), ahead)

		for _, bad := range []struct {
			name     string
			rec      *epoch.Record
			from, to uint64
			want     error
		}{
			{"past the cut", rec, 0, 41, chain.ErrNotCommitted},
			{"an open epoch", e.mint(2, 8), 0, 1, chain.ErrNotCommitted},
			{"below the trimmed cursor", trimmedCopy(rec, 3), 2, 10, cutline.ErrTrimmed},
		} {
			n := 0
			for _, err := range r.Range(ctx, bad.rec, bad.from, bad.to) {
				require.ErrorIs(t, err, bad.want, bad.name)
				n++
			}
			require.Equal(t, 1, n, bad.name)
			require.Zero(t, gets(), "%s: nothing read", bad.name)
		}
	})
}

func trimmedCopy(rec *epoch.Record, trimmed uint64) *epoch.Record {
	c := *rec
	c.Cursors.Trimmed = trimmed
	return &c
}
