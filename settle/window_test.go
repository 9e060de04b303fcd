package settle_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// cancelAfter cancels a context once n header probes were sent, and
// counts those sent after that.
type cancelAfter struct {
	objstore.Bucket
	n, sent, late *atomic.Int64
	cancel        context.CancelFunc
}

func (b *cancelAfter) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if b.sent.Add(1) > b.n.Load() {
		b.cancel()
		if ctx.Err() != nil {
			b.late.Add(1)
		}
	}
	return b.Bucket.GetRange(ctx, key, off, n)
}

// TestGarbageAtMaxWindowHonoursContext: settlement lists [cut, cut+window]
// in every bucket and probes what it finds. At the largest window, with
// thousands of garbage copies, it must stop soon after its context ends
// (not after probing the whole span), and its memory must not grow with
// the garbage: it holds a page of keys per bucket and makes MaxParallel
// probes at a time.
func TestGarbageAtMaxWindowHonoursContext(t *testing.T) {
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{})
	rec := p.Mint(context.Background(), starA, e.Constants(2, epoch.MaxWindow))
	_, err := p.Minter.Publish(context.Background(), starA, rec.Epoch, 0)
	require.NoError(t, err)
	const garbage = 3000 // slots, each holding a copy in every bucket
	for s := range uint64(garbage) {
		for z := range 3 {
			e.PutFlight(z, starA, rec.Epoch, 7*s, record(stream, 0, "garbage"))
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n, sent, late atomic.Int64
	n.Store(1000)
	var wrapped []objstore.Bucket
	for _, z := range e.Zones {
		wrapped = append(wrapped, &cancelAfter{Bucket: z, n: &n, sent: &sent, late: &late, cancel: cancel})
	}
	const parallel = 16
	s, err := settle.New(p.Minter, chain.MustZones(wrapped...), p.Refs, settle.Options{MaxParallel: parallel})
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = s.Settle(ctx, starA, rec.Epoch)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, context.Canceled)
	require.LessOrEqual(t, sent.Load(), int64(1000+parallel), "no new probe after the context ended")
	require.LessOrEqual(t, late.Load(), int64(parallel))
	// Listing all 9,000 keys at once and then probing would hold them
	// all; a page of at most 1,000 keys per bucket is about 0.5 MiB.
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "allocation bounded by a page, not the garbage")
	got, err := p.Minter.Get(context.Background(), starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, epoch.StateFenced, got.State, "not settled")

	// Given its time, a settlement lists the span of every bucket, probes
	// only what is there, and deletes the garbage up to cut+window, found
	// on the last page.
	const window = 4096
	rec2 := p.Mint(context.Background(), starA, e.Constants(2, window))
	_, err = p.Minter.Publish(context.Background(), starA, rec2.Epoch, 0)
	require.NoError(t, err)
	for s := range uint64(3) {
		e.PutFlight(int(s), starA, rec2.Epoch, window-s, record(stream, 0, "garbage"))
	}
	e.PutFlight(0, starA, rec2.Epoch, window+1, record(stream, 0, "past the span: never a writer's"))
	n.Store(1 << 62)
	first := sent.Load()
	rep, err := s.Settle(context.Background(), starA, rec2.Epoch)
	require.NoError(t, err)
	require.Equal(t, int64(3), sent.Load()-first, "a probe per object in the span")
	require.Equal(t, 3, rep.Reads-rep.Covered)
	require.Equal(t, 3, rep.GarbageDeleted, "garbage up to cut+window")
	require.LessOrEqual(t, rep.Lists, 6, "a page and an empty page per bucket, at most")
	_, err = e.Raw[0].Get(context.Background(), e.Key(starA, rec2.Epoch, window+1))
	require.NoError(t, err, "nothing past cut+window is touched")
}
