package fence

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/internal/synth"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
)

// leadBucket watches a walk that reads one slot per round (Span 1): the
// walk's frontier is the top of the run of slots read whole, one after
// another, and every whole read above frontier+1 is a barrier's. It
// records the lead of each.
type leadBucket struct {
	objstore.Bucket
	keys wire.Keys
	ep   uint64
	l    *leads
}

type leads struct {
	mu    sync.Mutex
	read  map[uint64]bool
	first uint64 // the lowest slot read whole
	leads []uint64
}

func (b *leadBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if s, ok := b.keys.ParseSlot(star, b.ep, key); ok {
		b.l.see(s)
	}
	return b.Bucket.Get(ctx, key)
}

func (l *leads) see(s uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.read) == 0 || s < l.first {
		l.first = s
	}
	front := l.first
	for l.read[front+1] {
		front++
	}
	if len(l.read) > 0 && s > front+1 && !l.read[s] {
		l.leads = append(l.leads, s-front)
	}
	l.read[s] = true
}

// TestBarrierLead: the first barrier ahead of a writer the walk cannot
// catch goes 2·window+1 slots past the walk's frontier, and each later one
// further still (the lead doubles): a stopped writer's cut lies within
// 2·window+1 slots of the walk's start, so the barrier never lands where
// the walk alone would end. The writer is TestBarrierStopsARunawayWriter's.
func TestBarrierLead(t *testing.T) { barrierLead(t) }

func barrierLead(t testing.TB) {
	for _, window := range []uint64{1, 4, 16} {
		m, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
		require.NoError(t, err)
		c := &synth.Chain{Star: star, N: 100, Payload: []byte("x"), Grow: 2}
		zs := synth.NewZones(c, 3)
		ctx, cancel := context.WithTimeout(context.Background(), failfast.Bound)
		rec, err := m.Mint(ctx, star, epoch.Constants{Class: "standard", Buckets: []string{"a", "b", "c"}, W: 2, Window: int(window), Prefix: "chains"})
		require.NoError(t, err)
		l := &leads{read: map[uint64]bool{}}
		zones := chain.Zones{}
		for i, z := range zs {
			zones[fmt.Sprint(string(rune('a'+i)))] = &leadBucket{Bucket: z, keys: wire.Keys{Prefix: "chains"}, ep: rec.Epoch, l: l}
		}
		f, err := New(m, zones, Options{Identity: "successor", Span: 1})
		require.NoError(t, err)
		rep, err := f.FenceReport(ctx, star, rec.Epoch)
		cancel()
		require.NoError(t, err, "window %d: the fence of a writer it cannot catch", window)
		require.Equal(t, 1, rep.Barriers, "window %d", window)
		require.NotEmpty(t, l.leads, "window %d: barriers seen", window)
		require.GreaterOrEqual(t, l.leads[0], 2*window+1, "window %d: the first barrier's lead past the frontier (all %v)", window, l.leads)
		for i := 1; i < len(l.leads); i++ {
			require.Greater(t, l.leads[i], l.leads[i-1], "window %d: each barrier goes further ahead (all %v)", window, l.leads)
		}
	}
}
